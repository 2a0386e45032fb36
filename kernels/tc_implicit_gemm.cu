// Implicit-GEMM convolution on the tensor cores (warp-level mma.sync), NHWC.
//
// The GEMM: Y (M x F) = X_unrolled (M x GK) * W^T, M = B*N*N output pixels (row m = (b, oy, ox)),
// F filters, GK = K*K*C weights a filter ordered (ky, kx, c). Both operands are contiguous along
// the reduction in NHWC: a row of X_unrolled is K runs of K*C input elements, a row of W (FKKC)
// is one filter. Each block computes a BM x BN tile of Y; each warp a WM x WN part of it as
// (WM / 16) x (WN / 8) mma tiles, accumulating in FP32.
//
// One mma k-step is 32 bytes of the reduction in every precision: m16n8k16 for fp16/bf16
// (16 two-byte elements), m16n8k8 for tf32 (8 floats). Shared tiles are therefore laid out in
// 16-byte chunks, BK * ES / 16 chunks a row (row = one pixel or one filter), and the fragments
// are read with ldmatrix.x4 in both cases: a 16-bit 8 x 8 matrix of ldmatrix is 8 rows of 4
// floats, which hands thread (g = lane / 4, t = lane % 4) exactly the element (g, t) of the tf32
// A and B fragments (then rounded to TF32, see to_tf32). With SWIZZLE the chunk index is XORed
// with bits of the row, so that the 8 rows an ldmatrix phase reads fall into 8 different
// 16-byte bank groups; without it, rows are padded by one chunk (the same effect, more space).
//
// Tiles travel global -> shared through a STAGES-deep cp.async pipeline. With GATHER = 0 every
// chunk is one 16-byte cp.async (zero-filled past the edges), which needs C to be a multiple of
// the chunk's elements (a chunk never straddles two filter taps and stays 16-byte aligned); with
// GATHER = 1 each element is fetched on its own (4-byte cp.async for FP32, a load and a shared
// store for 16-bit), for any C (AlexNet conv1 has C = 3).
// With SPLIT_K > 1, blockIdx.z takes 1 / SPLIT_K of the reduction and writes FP32 partial sums,
// which tc_reduce adds up and rounds into y. FRAG_DB 1 reads the next k-step's fragments while
// the current one multiplies (more registers, more independent work between a warp's
// ldmatrix and its mma). RASTER 0 runs pixel tiles along gridDim.x and filter tiles along
// gridDim.y; RASTER 1 numbers the blocks with the filter tiles fastest, so that the blocks
// resident at one time share their input tiles in L2 (and all filter tiles stay there).
//
// Problem defines: B, C, N, K, F, STRIDE, STORAGE (0: FP32 storage, TF32 products; 1: fp16;
// 2: bf16). Tunables: BM, BN, BK, WM, WN, STAGES, SWIZZLE, SPLIT_K, GATHER, MIN_BLOCKS,
// FRAG_DB, RASTER, TF32_ROUND.
// Input (B, S, S, C), filters (F, K, K, C), output (B, N, N, F); 32-bit element offsets.

#include "cp_async.cuh"

#define S ((N - 1) * STRIDE + K)
#define GM (B * N * N)
#define GK (K * K * C)

#if STORAGE == 0
typedef float elem_t;
#define ES 4
#else
typedef unsigned short elem_t;
#define ES 2
#endif

#define VE (16 / ES)               // elements a 16-byte chunk
#define CPR (BK * ES / 16)         // chunks a tile row
#define KSTEPS (BK * ES / 32)      // mma k-steps a tile
#define ROW_BYTES (BK * ES + (SWIZZLE ? 0 : 16))
#define A_BYTES (BM * ROW_BYTES)
#define STAGE_BYTES ((BM + BN) * ROW_BYTES)
#define WARPS_M (BM / WM)
#define WARPS_N (BN / WN)
#define THREADS (WARPS_M * WARPS_N * 32)
#define MI (WM / 16)
#define NI (WN / 8)
#define KTILES ((GK + BK - 1) / BK)
#define SPLIT_TILES ((KTILES + SPLIT_K - 1) / SPLIT_K)
// Loaders: thread t copies chunk column t % CPR of rows t / CPR + i * ROWS_STEP.
#define ROWS_STEP (THREADS / CPR)
#define A_LOADS ((BM + ROWS_STEP - 1) / ROWS_STEP)
#define B_LOADS ((BN + ROWS_STEP - 1) / ROWS_STEP)
#define NT ((F + BN - 1) / BN)     // filter tiles
#define REDUCE_BLOCK 256

// Byte offset of chunk `chunk` of row `row` in an operand tile.
__device__ __forceinline__ unsigned tile_offset(int row, int chunk) {
#if SWIZZLE
#if CPR >= 8
    return row * (CPR * 16) + ((chunk ^ (row & 7)) << 4);
#else
    return row * (CPR * 16) + ((chunk ^ ((row / (8 / CPR)) % CPR)) << 4);
#endif
#else
    return row * ROW_BYTES + (chunk << 4);
#endif
}

// Chunks past the edges are zero-filled copies (cp_async.cuh): a source size of 0 reads nothing.
__device__ __forceinline__ void copy16(unsigned dst, const void* src, bool valid) {
    cp_async::copy_zfill<16, false>(dst, src, valid ? 16 : 0);
}
__device__ __forceinline__ void copy4(unsigned dst, const void* src, bool valid) {
    cp_async::copy_zfill<4, true>(dst, src, valid ? 4 : 0);
}

__device__ __forceinline__ void ldmatrix4(unsigned (&r)[4], unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(address));
}

// FP32 -> TF32, round to nearest with ties away from zero. TF32_ROUND 0: cvt.rna.tf32.f32 (about
// four instructions on sm_90, with its checks for NaN and infinity); 1: add half a TF32 ulp to
// the magnitude's bits and leave the low 13 bits, which the tensor core does not read: the same
// TF32 value for every finite input, in one integer add.
__device__ __forceinline__ unsigned to_tf32(unsigned bits) {
#if TF32_ROUND == 0
    unsigned out;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(__uint_as_float(bits)));
    return out;
#else
    return bits + 0x1000u;
#endif
}

__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                    unsigned b1) {
#if STORAGE == 0
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
#elif STORAGE == 1
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#endif
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Storage conversions of the output (round to nearest even).
#if STORAGE != 0
__device__ __forceinline__ unsigned short round1(float v) {
    unsigned short out;
#if STORAGE == 1
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(out) : "f"(v));
#else
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(out) : "f"(v));
#endif
    return out;
}
__device__ __forceinline__ unsigned round2(float lo, float hi) {
    unsigned out;
#if STORAGE == 1
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(out) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(out) : "f"(hi), "f"(lo));
#endif
    return out;
}
#endif

// Element offset in x of the reduction index r = (ky, kx, c) from a pixel's window origin.
__device__ __forceinline__ int window_offset(int r) {
    const int tap = r / C, c = r - tap * C;
    const int ky = tap / K, kx = tap - ky * K;
    return (ky * S + kx) * C + c;
}

// Issue the copies of reduction tile `kt` into stage buffer `stage`.
__device__ __forceinline__ void load_tile(const elem_t* __restrict__ x,
                                          const elem_t* __restrict__ w, unsigned stage, int kt,
                                          const int (&a_base)[A_LOADS],
                                          const int (&b_base)[B_LOADS], int row0, int chunk) {
    const int r = kt * BK + chunk * VE;
#if GATHER == 0
    const bool in_k = r < GK;
    const int roff = in_k ? window_offset(r) : 0;
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
        const int row = row0 + i * ROWS_STEP;
        if (BM % ROWS_STEP == 0 || row < BM) {
            const bool valid = in_k && a_base[i] >= 0;
            copy16(stage + tile_offset(row, chunk), x + (valid ? a_base[i] + roff : 0), valid);
        }
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
        const int row = row0 + i * ROWS_STEP;
        if (BN % ROWS_STEP == 0 || row < BN) {
            const bool valid = in_k && b_base[i] >= 0;
            copy16(stage + A_BYTES + tile_offset(row, chunk), w + (valid ? b_base[i] + r : 0),
                   valid);
        }
    }
#else
    int roff[VE];
#pragma unroll
    for (int e = 0; e < VE; ++e) roff[e] = r + e < GK ? window_offset(r + e) : -1;
#pragma unroll
    for (int i = 0; i < A_LOADS + B_LOADS; ++i) {
        const bool is_a = i < A_LOADS;
        const int row = row0 + (is_a ? i : i - A_LOADS) * ROWS_STEP;
        if (row >= (is_a ? BM : BN)) continue;
        const int base = is_a ? a_base[i] : b_base[i - A_LOADS];
        const elem_t* src = is_a ? x : w;
        const unsigned dst = stage + (is_a ? 0 : A_BYTES) + tile_offset(row, chunk);
#if STORAGE == 0
#pragma unroll
        for (int e = 0; e < VE; ++e) {
            const bool valid = base >= 0 && roff[e] >= 0;
            const int offset = is_a ? roff[e] : r + e;
            copy4(dst + 4 * e, src + (valid ? base + offset : 0), valid);
        }
#else
        unsigned word[VE / 2];
#pragma unroll
        for (int e = 0; e < VE; e += 2) {
            unsigned lo = 0, hi = 0;
            if (base >= 0 && roff[e] >= 0) lo = __ldg(src + base + (is_a ? roff[e] : r + e));
            if (base >= 0 && roff[e + 1] >= 0)
                hi = __ldg(src + base + (is_a ? roff[e + 1] : r + e + 1));
            word[e / 2] = lo | (hi << 16);
        }
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n"
                     ::"r"(dst), "r"(word[0]), "r"(word[1]), "r"(word[2]), "r"(word[3]));
#endif
    }
#endif
}

// The A and B fragments of mma k-step ks: A's four ldmatrix matrices are (rows 0-7 | 8-15) x
// (chunk 0 | 1) of a 16-row tile; B's are (chunk 0 | 1) x (rows 0-7 | 8-15) of two 8-row tiles.
__device__ __forceinline__ void load_fragments(unsigned (&a)[MI][4], unsigned (&b)[NI][2],
                                               unsigned sa, unsigned sb, int a_row, int a_chunk,
                                               int b_row, int b_chunk, int ks) {
#pragma unroll
    for (int i = 0; i < MI; ++i) ldmatrix4(a[i], sa + tile_offset(a_row + 16 * i, 2 * ks + a_chunk));
#pragma unroll
    for (int j = 0; j < NI / 2; ++j) {
        unsigned r[4];
        ldmatrix4(r, sb + tile_offset(b_row + 16 * j, 2 * ks + b_chunk));
        b[2 * j][0] = r[0];
        b[2 * j][1] = r[1];
        b[2 * j + 1][0] = r[2];
        b[2 * j + 1][1] = r[3];
    }
#if STORAGE == 0
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int v = 0; v < 4; ++v) a[i][v] = to_tf32(a[i][v]);
#pragma unroll
    for (int j = 0; j < NI; ++j) {
        b[j][0] = to_tf32(b[j][0]);
        b[j][1] = to_tf32(b[j][1]);
    }
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
tc_implicit_gemm(const elem_t* __restrict__ x, const elem_t* __restrict__ w,
#if SPLIT_K == 1
                 elem_t* __restrict__ y
#else
                 float* __restrict__ y
#endif
) {
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned smem0 = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
#if RASTER == 0
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
#else
    // Filter tiles fastest: the blocks resident together share their input tiles in L2, and
    // all filter tiles stay there.
    const int m0 = blockIdx.x / NT * BM, n0 = blockIdx.x % NT * BN;
#endif

    // Loader rows: each pixel row's window origin in x, each filter row's start in w (-1: none).
    const int chunk = tid % CPR, row0 = tid / CPR;
    int a_base[A_LOADS], b_base[B_LOADS];
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
        const int m = m0 + row0 + i * ROWS_STEP;
        const int b = m / (N * N), p = m - b * (N * N);
        const int oy = p / N, ox = p - oy * N;
        a_base[i] = m < GM ? ((b * S + oy * STRIDE) * S + ox * STRIDE) * C : -1;
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
        const int n = n0 + row0 + i * ROWS_STEP;
        b_base[i] = n < F ? n * GK : -1;
    }

    const int kt0 = blockIdx.z * SPLIT_TILES;
    const int tiles = min(KTILES, kt0 + SPLIT_TILES) - kt0;  // >= 1 (the space sees to it)

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) load_tile(x, w, smem0 + s * STAGE_BYTES, kt0 + s, a_base, b_base, row0, chunk);
        cp_async::commit();
    }

    // This lane's ldmatrix rows and chunks (see load_fragments).
    const int a_row = warp_m * WM + (lane & 15), a_chunk = lane >> 4;
    const int b_row = warp_n * WN + (lane & 7) + ((lane >> 4) << 3), b_chunk = (lane >> 3) & 1;

    for (int t = 0; t < tiles; ++t) {
        cp_async::wait<STAGES - 2>();
        __syncthreads();
        {
            const int next = t + STAGES - 1;
            if (next < tiles)
                load_tile(x, w, smem0 + (next % STAGES) * STAGE_BYTES, kt0 + next, a_base, b_base,
                          row0, chunk);
            cp_async::commit();
        }
        const unsigned sa = smem0 + (t % STAGES) * STAGE_BYTES, sb = sa + A_BYTES;
        // With FRAG_DB the fragments of k-step ks + 1 are read while ks multiplies.
        unsigned a[1 + FRAG_DB][MI][4], b[1 + FRAG_DB][NI][2];
        load_fragments(a[0], b[0], sa, sb, a_row, a_chunk, b_row, b_chunk, 0);
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ++ks) {
            const int cur = FRAG_DB ? ks & 1 : 0;
            if (FRAG_DB && ks + 1 < KSTEPS)
                load_fragments(a[cur ^ 1], b[cur ^ 1], sa, sb, a_row, a_chunk, b_row, b_chunk,
                               ks + 1);
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma(acc[i][j], a[cur][i], b[cur][j][0], b[cur][j][1]);
            if (!FRAG_DB && ks + 1 < KSTEPS)
                load_fragments(a[0], b[0], sa, sb, a_row, a_chunk, b_row, b_chunk, ks + 1);
        }
    }
    cp_async::wait<0>();

    // Accumulator (i, j, v) is row g + 8 * (v / 2), column 2 * t4 + v % 2 of mma tile (i, j).
    const int g = lane >> 2, t4 = lane & 3;
#if SPLIT_K > 1
    y += (size_t)blockIdx.z * GM * F;
#endif
#pragma unroll
    for (int i = 0; i < MI; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + warp_m * WM + 16 * i + g + 8 * h;
            if (m >= GM) continue;
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                const int n = n0 + warp_n * WN + 8 * j + 2 * t4;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                const int at = m * F + n;
#if SPLIT_K > 1 || STORAGE == 0
                if (F % 2 == 0 && n < F) {
                    *reinterpret_cast<float2*>(y + at) = make_float2(v0, v1);
                } else {
                    if (n < F) y[at] = v0;
                    if (n + 1 < F) y[at + 1] = v1;
                }
#else
                if (F % 2 == 0 && n < F) {
                    *reinterpret_cast<unsigned*>(y + at) = round2(v0, v1);
                } else {
                    if (n < F) y[at] = round1(v0);
                    if (n + 1 < F) y[at + 1] = round1(v1);
                }
#endif
            }
        }
    }
}

// Split-K: y = the sum of the SPLIT_K partial outputs, rounded to the storage type.
extern "C" __global__ void __launch_bounds__(REDUCE_BLOCK)
tc_reduce(const float* __restrict__ partial, elem_t* __restrict__ y) {
    const int i = blockIdx.x * REDUCE_BLOCK + threadIdx.x;
    if (i >= GM * F) return;
    float sum = 0.0f;
#pragma unroll
    for (int z = 0; z < SPLIT_K; ++z) sum += partial[(size_t)z * GM * F + i];
#if STORAGE == 0
    y[i] = sum;
#else
    y[i] = round1(sum);
#endif
}
