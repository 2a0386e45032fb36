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
// Three ways through a stage, one per shape of the kernels' loops; each family's cubins are what
// they were when the loop was written out in every kernel. Where the thread's offset joins the
// address changes how NVVM folds the address arithmetic, and with it the SASS, so each way keeps
// the place its kernels had:
//   stage()           reads each row's fragments, then multiplies; the thread's offset is added
//                     to the stage's base once (implicit_gemm, im2col_gemm).
//   rows()            the same from a base the caller gives; the offset is added to each
//                     fragment's address (sgemm, and maxdnn / winograd without double buffering).
//   stage_pipelined() keeps two sets of fragments and reads row k + 1's while it multiplies
//                     row k (maxdnn, winograd).
//
// The names here are CamelCase or lower case: the kernels' tunables and problem sizes arrive as
// UPPER_CASE macros, which would rewrite a template parameter of the same name.
//
// Included by the kernels with #include "register_tile.cuh": the compiler hands NVRTC this file
// by name and keys its cubin cache on its text; `autotune export` copies it beside the kernels.

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
    static __device__ __forceinline__ void rows(const float* a, int a_thread, const float* b,
                                                int b_thread, float (&acc)[TileM][TileN]) {
#pragma unroll
        for (int k = 0; k < Depth; ++k) {
            float fa[TileM], fb[TileN];
            load(a + k * PitchA, a_thread, b + k * PitchB, b_thread, fa, fb);
            multiply(fa, fb, acc);
        }
    }

    // Rows 0 .. Depth-1 of stage s, reading row k + 1's fragments while row k is
    // multiplied.
    template <int Depth, int PitchA, int PitchB, int StageA, int StageB>
    static __device__ __forceinline__ void stage_pipelined(const float* a, const float* b, int s,
                                                           int a_thread, int b_thread,
                                                           float (&acc)[TileM][TileN]) {
        const float* as = a + s * StageA;
        const float* bs = b + s * StageB;
        float fa[2][TileM], fb[2][TileN];
        load(as, a_thread, bs, b_thread, fa[0], fb[0]);
#pragma unroll
        for (int k = 0; k < Depth; ++k) {
            if (k + 1 < Depth) {
                load(as + (k + 1) * PitchA, a_thread, bs + (k + 1) * PitchB, b_thread,
                     fa[(k + 1) & 1], fb[(k + 1) & 1]);
            }
            multiply(fa[k & 1], fb[k & 1], acc);
        }
    }
};

}  // namespace register_tile
