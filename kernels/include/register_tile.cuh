// The register-tiled inner loop of the GEMM-style kernels (maxdnn, implicit_gemm, im2col_gemm,
// sgemm and winograd's batched GEMM), written once.
//
// A block has staged Depth rows of both GEMM operands in shared memory: row k of operand A (the
// GEMM's M side) at a + k * PitchA, row k of B (the N side) at b + k * PitchB; with two stages,
// stage s starts StageA (StageB) floats after stage 0. Every thread owns a TileM x TileN tile of
// accumulators. From each row it reads its TileM values of A as TileM / FragM fragments of FragM
// consecutive floats (one vector load each), StepM floats apart, the first at
// a_thread * FragM (TileN values of B likewise: FragN, StepN, b_thread), and adds their outer
// product into the tile. Every loop is unrolled at compile time, so the fragments live in
// registers and the offsets are immediates.
//
// Order 0 does the FMAs row by row; Order 1 walks the rows in alternating directions
// (serpentine), so that consecutive FMAs share an operand register (operand reuse instead of
// register-bank reads).
//
// The ways through a stage follow the shapes the kernels' loops had, so that every family's
// cubins stayed byte for byte what they were when each kernel wrote the loop out (checked with
// tests/nvrtc/compare_cubins.py): NVVM folds the address arithmetic, and ptxas schedules, by
// where the thread's offset joins the address and where the fragments are declared, so these
// are kept as they were:
//   stage()            each row's fragments, then its FMAs; the thread's offset is added to the
//                      stage's base once (implicit_gemm, im2col_gemm).
//   rows()             the same from a base the caller gives, the offset added to each
//                      fragment's address, in fragments of its own (sgemm) or in set 0 of the
//                      caller's (maxdnn and winograd without double buffering).
//   stage_pipelined()  two sets of fragments, the caller's: row k + 1's are read while row k's
//                      are multiplied (maxdnn, winograd).
//
// The names here are CamelCase or lower case: the kernels' tunables and problem sizes arrive as
// UPPER_CASE macros, which would rewrite a template parameter of the same name.
//
// Included by the kernels with #include "register_tile.cuh": the compiler hands NVRTC this file
// by name and keys its cubin cache on its text; `autotune export` copies it into the tree's
// include/.

#pragma once

namespace register_tile {

// Width consecutive floats of shared memory into registers as one access.
template <int Width> struct Fragment;
template <> struct Fragment<1> {
    static __device__ __forceinline__ void load(const float* p, float* o) { o[0] = *p; }
};
template <> struct Fragment<2> {
    static __device__ __forceinline__ void load(const float* p, float* o) {
        const float2 v = *reinterpret_cast<const float2*>(p);
        o[0] = v.x, o[1] = v.y;
    }
};
template <> struct Fragment<4> {
    static __device__ __forceinline__ void load(const float* p, float* o) {
        const float4 v = *reinterpret_cast<const float4*>(p);
        o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w;
    }
};

template <int TileM, int TileN, int FragM, int FragN, int StepM, int StepN, int Order = 0>
struct Loop {
    static_assert(TileM % FragM == 0 && TileN % FragN == 0, "whole fragments per thread");
    static_assert(Order == 0 || Order == 1, "Order: 0 row by row, 1 serpentine");

    // A thread's Count values of one row: Count / Width fragments, Step apart, from thread * Width.
    template <int Count, int Width, int Step>
    static __device__ __forceinline__ void load_row(const float* row, int thread, float* f) {
#pragma unroll
        for (int g = 0; g < Count / Width; ++g) {
            Fragment<Width>::load(row + g * Step + thread * Width, f + g * Width);
        }
    }

    static __device__ __forceinline__ void load(const float* a_row, int a_thread,
                                                const float* b_row, int b_thread,
                                                float (&fa)[TileM], float (&fb)[TileN]) {
        load_row<TileM, FragM, StepM>(a_row, a_thread, fa);
        load_row<TileN, FragN, StepN>(b_row, b_thread, fb);
    }

    // acc += the outer product of fa and fb.
    static __device__ __forceinline__ void multiply(const float (&fa)[TileM],
                                                    const float (&fb)[TileN],
                                                    float (&acc)[TileM][TileN]) {
#pragma unroll
        for (int i = 0; i < TileM; ++i) {
#pragma unroll
            for (int j = 0; j < TileN; ++j) {
                const int jj = (Order == 1 && (i & 1)) ? TileN - 1 - j : j;
                acc[i][jj] = fmaf(fa[i], fb[jj], acc[i][jj]);
            }
        }
    }

    // Rows 0 .. Depth-1 of stage s: each row's fragments, then its FMAs.
    template <int Depth, int PitchA, int PitchB, int StageA, int StageB>
    static __device__ __forceinline__ void stage(const float* a, const float* b, int s,
                                                 int a_thread, int b_thread,
                                                 float (&acc)[TileM][TileN]) {
        const float* as = a + s * StageA + a_thread * FragM;
        const float* bs = b + s * StageB + b_thread * FragN;
#pragma unroll
        for (int k = 0; k < Depth; ++k) {
            float fa[TileM], fb[TileN];
#pragma unroll
            for (int g = 0; g < TileM / FragM; ++g) {
                Fragment<FragM>::load(as + k * PitchA + g * StepM, fa + g * FragM);
            }
#pragma unroll
            for (int g = 0; g < TileN / FragN; ++g) {
                Fragment<FragN>::load(bs + k * PitchB + g * StepN, fb + g * FragN);
            }
            multiply(fa, fb, acc);
        }
    }

    // Rows 0 .. Depth-1 from a and b: each row's fragments, then its FMAs.
    template <int Depth, int PitchA, int PitchB>
    static __device__ __forceinline__ void rows(const float* a, const float* b, int a_thread,
                                                int b_thread, float (&acc)[TileM][TileN]) {
#pragma unroll
        for (int k = 0; k < Depth; ++k) {
            float fa[TileM], fb[TileN];
            load(a + k * PitchA, a_thread, b + k * PitchB, b_thread, fa, fb);
            multiply(fa, fb, acc);
        }
    }

    // Fragment set `set` of fa and fb from rows a_row and b_row.
    static __device__ __forceinline__ void load_set(float (&fa)[2][TileM], float (&fb)[2][TileN],
                                                    int set, const float* a_row,
                                                    const float* b_row, int a_thread,
                                                    int b_thread) {
#pragma unroll
        for (int g = 0; g < TileM / FragM; ++g) {
            Fragment<FragM>::load(a_row + g * StepM + FragM * a_thread, &fa[set][FragM * g]);
        }
#pragma unroll
        for (int h = 0; h < TileN / FragN; ++h) {
            Fragment<FragN>::load(b_row + h * StepN + FragN * b_thread, &fb[set][FragN * h]);
        }
    }

    // The same in set 0 of the caller's fragments.
    template <int Depth, int PitchA, int PitchB>
    static __device__ __forceinline__ void rows(const float* a, const float* b, int a_thread,
                                                int b_thread, float (&fa)[2][TileM],
                                                float (&fb)[2][TileN],
                                                float (&acc)[TileM][TileN]) {
#pragma unroll
        for (int k = 0; k < Depth; ++k) {
            load_set(fa, fb, 0, a + k * PitchA, b + k * PitchB, a_thread, b_thread);
            multiply(fa[0], fb[0], acc);
        }
    }

    // Rows 0 .. Depth-1 of stage s, reading row k + 1's fragments into one set of fa and fb
    // while row k's, in the other, are multiplied.
    template <int Depth, int PitchA, int PitchB, int StageA, int StageB>
    static __device__ __forceinline__ void stage_pipelined(const float* a, const float* b, int s,
                                                           int a_thread, int b_thread,
                                                           float (&fa)[2][TileM],
                                                           float (&fb)[2][TileN],
                                                           float (&acc)[TileM][TileN]) {
        const float* as = a + s * StageA;
        const float* bs = b + s * StageB;
        load_set(fa, fb, 0, as, bs, a_thread, b_thread);
#pragma unroll
        for (int k = 0; k < Depth; ++k) {
            if (k + 1 < Depth) {
                load_set(fa, fb, (k + 1) & 1, as + (k + 1) * PitchA, bs + (k + 1) * PitchB,
                         a_thread, b_thread);
            }
            multiply(fa[k & 1], fb[k & 1], acc);
        }
    }
};

}  // namespace register_tile
