// How a block's threads split a tile of rows into VEC-wide words for their cooperative loads
// (maxdnn's and winograd's GEMM operands), written once.
//
// Tile<WIDTH>: THREADS threads split a BK x WIDTH tile into VEC-wide words, row-major: word
// tid + i * THREADS lies at row row0(tid) + row(i), column col0(tid) + col(i). Both counts are
// powers of two, so either a pass covers whole rows or a row takes whole passes; row(i) and
// col(i) are compile-time constants, so a thread's loads need no index registers of their own.
//
// THREADS and VEC are the including kernel's macros, and the names are those the kernels had:
// the cubins keep the symbols of Tile's constants (.nv.global.init), so they stay byte for byte
// what they were when each kernel wrote the struct out (checked with
// tests/nvrtc/compare_cubins.py). Include it after THREADS and VEC are defined.

#pragma once

#if !defined(THREADS) || !defined(VEC)
#error "tile_words.cuh: define THREADS and VEC before including it"
#endif

template <int WIDTH> struct Tile {
    static constexpr int WORDS = WIDTH / VEC;  // words per row
    static constexpr bool WHOLE_ROWS = THREADS >= WORDS;
    static __device__ __forceinline__ int row0(int tid) { return WHOLE_ROWS ? tid / WORDS : 0; }
    static __device__ __forceinline__ int col0(int tid) {
        return (WHOLE_ROWS ? tid % WORDS : tid) * VEC;
    }
    static constexpr __device__ int row(int i) {
        return WHOLE_ROWS ? i * (THREADS / WORDS) : i / (WORDS / THREADS);
    }
    static constexpr __device__ int col(int i) {
        return WHOLE_ROWS ? 0 : (i % (WORDS / THREADS)) * THREADS * VEC;
    }
};
