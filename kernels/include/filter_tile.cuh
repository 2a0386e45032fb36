// The filter operand of the GEMM-style convolutions (im2col_gemm, implicit_gemm), written once:
// the F x GK filter matrix, row-major, BM rows x BK columns a slice, read by THREADS threads as
// VEC-wide words into registers and stored into shared memory transposed ([BK][AS_LD], the
// GEMM's M side contiguous).
//
// Thread tid reads columns a_k = (tid % A_VPR) * VEC .. + VEC of rows a_r + i * A_RSTEP
// (a_r = tid / A_VPR, i < A_LOADS), from one base pointer at constant offsets. Rows past F and
// columns past GK read as zero (their outputs are never stored; zeros add nothing).
//
// Uses the kernel's macros (BM, BK, VEC, THREADS, GK) and defines the loader's: include it after
// they are defined, and after vector.cuh. The functions are inline, so each kernel's cubin is
// what it was when the kernel wrote them out (checked with tests/nvrtc/compare_cubins.py).

#pragma once

// The transposed tile is padded by 4 floats: rows stay float4-aligned, and the transposed stores
// of threads VEC rows apart fall into different banks.
#define AS_LD (BM + 4)
#define AS_SIZE (BK * AS_LD)
#define A_VPR (BK / VEC)  // words per tile row
#define A_RSTEP (THREADS / A_VPR)
#define A_LOADS ((BM + A_RSTEP - 1) / A_RSTEP)

namespace filter_tile {

// The slice at reduction column k0 into reg; a_ptr is the thread's first word of the block's
// tile (row a_r, column a_k), a_rows how many of its rows exist (F - m0 - a_r).
__device__ __forceinline__ void load(float (&reg)[A_LOADS][VEC], const float* a_ptr, int a_r,
                                     int a_k, int a_rows, int k0) {
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
        const bool row_in =
            (BM % A_RSTEP == 0 || a_r + i * A_RSTEP < BM) && i * A_RSTEP < a_rows;
        if (row_in && (GK % BK == 0 || k0 + a_k < GK)) {
            Vec<VEC>::load(a_ptr + (long long)(i * A_RSTEP) * GK + k0, reg[i]);
        } else {
#pragma unroll
            for (int v = 0; v < VEC; ++v) reg[i][v] = 0.0f;
        }
    }
}

// reg into the shared stage as (transposed).
__device__ __forceinline__ void store(float* as, const float (&reg)[A_LOADS][VEC], int a_r,
                                      int a_k) {
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
        const int r = a_r + i * A_RSTEP;
        if (BM % A_RSTEP == 0 || r < BM) {
#pragma unroll
            for (int v = 0; v < VEC; ++v) as[(a_k + v) * AS_LD + r] = reg[i][v];
        }
    }
}

}  // namespace filter_tile
