// ECE408 "matrix multiplication with built-in unrolling" and "joint register-shared memory
// tiling": convolution as one GEMM, Y (F x B*N*N) = W (F x C*K*K) * X_unrolled (C*K*K x B*N*N),
// where X_unrolled is never stored. Each block computes a BM x BN tile of Y; every BK-deep slice
// of the reduction, its threads gather the slice of the conceptual unrolled matrix straight from
// the NCHW input into shared memory (row k = (c, ky, kx), column n = (b, oy, ox)), stage the
// filter slice beside it, and each thread accumulates a TM x TN register tile.
//
// Gather cost is kept out of the FMA loop: a thread's column bases (image, output pixel) are
// computed once, and the (c, ky, kx) decomposition happens once per loaded row per slice, or,
// with OFFSET_TABLE, not at all: the row offsets come from a __constant__ table that the
// compiler fills (the problem is compile-time), as maxdnn reads its gather offsets. With
// GATHER_ROWS = 1 all threads of a warp gather the same row (BN >= 32 consecutive threads take
// consecutive columns), so each table read is one constant-cache broadcast instead of about ten
// integer instructions a row (GATHER_ROWS rows of a warp: that many constant reads).
//
// GATHER_ROWS = G > 1 is for strided convolutions: consecutive columns of one row are STRIDE
// floats apart in the input, so a warp of 32 columns spans 32 * STRIDE floats (512 bytes at
// stride 4) to use 128. Instead the lanes of a warp take G consecutive rows (fastest) x 32 / G
// consecutive columns; rows k..k+G-1 within one filter row are neighbouring kx, so the warp reads
// (ox * STRIDE + kx) for 32 / G output pixels and G taps: at G = STRIDE one contiguous 128-byte
// span (maxdnn gets this from its CHWN layout; the input stays NCHW here). The gathered tile's
// rows are then padded by 32 / G floats, so that the warp's stores (G rows x 32 / G columns) fall
// into 32 different banks while every row stays float4-aligned for compute_slice.
// Filters are read as VEC-wide vectors along the reduction and stored transposed, so that
// fragments along m and n are read as float4 from shared memory. Threads own TM / 4 groups of
// 4 rows spaced BM / (TM / 4) apart (likewise for columns), which makes consecutive threads read
// consecutive float4s: no bank conflicts. With DOUBLE_BUFFER the next slice is loaded from global
// memory into registers while the current one is computed, into the other of two shared buffers.
// With SPLIT_K > 1 (for grids too small to fill the GPU) blockIdx.z takes 1 / SPLIT_K of the
// reduction and writes partial sums, which implicit_gemm_reduce adds up into y.
//
// Problem defines: B, C, N, K, F, STRIDE. Tunables: BM, BN, BK, TM, TN, VEC, DOUBLE_BUFFER,
// SPLIT_K, OFFSET_TABLE, GATHER_ROWS. Output NFHW, input NCHW, filters FCKK: no layout
// conversion.

#include "register_tile.cuh"
#include "vector.cuh"

#define S ((N - 1) * STRIDE + K)   // input side
#define SS (S * S)
#define NN (N * N)
#define KK (K * K)
#define GN (B * NN)                // GEMM columns: output pixels of all images
#define GK (C * KK)                // GEMM reduction: one filter's weights

#define TX (BN / TN)               // threads along n
#define TY (BM / TM)               // threads along m
#define THREADS (TX * TY)
#define FM (TM < 4 ? TM : 4)       // fragment vector widths (float4 when the tile allows)
#define FN (TN < 4 ? TN : 4)
#define STAGES (DOUBLE_BUFFER ? 2 : 1)
#define REDUCE_BLOCK 256           // threads of the split-K reduction

// The filter tile's loader (AS_LD, AS_SIZE, A_VPR, A_RSTEP, A_LOADS).
#include "filter_tile.cuh"
// The gathered tile: a warp stores G rows x 32 / G columns; a pitch of BN + 32 / G (BN is a
// multiple of 32) puts lane (row r, column c) in bank (r * 32 / G + c) % 32, all different.
// Unpadded with one row a warp (consecutive columns of one row are consecutive banks).
#define B_PAD (GATHER_ROWS > 1 ? 32 / GATHER_ROWS : 0)
#define BS_LD (BN + B_PAD)
#define BS_SIZE (BK * BS_LD)

// Gather loader: GATHER_ROWS consecutive threads take consecutive rows of one column, and the
// B_QT groups of them consecutive columns (coalesced along output pixels). With B_QT >= BN the
// block covers B_RSTEP = THREADS / BN rows of the tile a step, each thread one column; with fewer
// it covers GATHER_ROWS rows a step, each thread B_COLS columns B_QT apart.
#define B_QT (THREADS / GATHER_ROWS)
#define B_RSTEP (THREADS / BN > GATHER_ROWS ? THREADS / BN : GATHER_ROWS)
#define B_COLS (B_QT >= BN ? 1 : BN / B_QT)
#define B_ROWS ((BK + B_RSTEP - 1) / B_RSTEP)

// Ask ptxas for as many resident blocks as the register file holds at an estimated
// REG_ESTIMATE registers a thread: accumulators, fragments, the next slice's prefetch registers
// with their addresses, and about REG_BASE for indexing (4 more to split the reduction).
// Without the promise ptxas spends registers freely and halves the occupancy of the 8 x 8
// tiles; with a tighter one it spills. ptxas counts whole warps in each of the four
// 16K-register scheduler partitions, so the promise is made in warps per partition
// (512 / registers, allocated in 8s), at most 32 blocks.
#define REG_BASE 36
#define REG_ESTIMATE \
    (TM * TN + TM + TN + A_LOADS * VEC + (3 * B_ROWS / 2 + 1) * B_COLS + REG_BASE + \
     (SPLIT_K > 1 ? 4 : 0))
#define WARPS_PER_PARTITION (512 / ((REG_ESTIMATE + 7) / 8 * 8))
#define BLOCKS_BY_REGS (4 * WARPS_PER_PARTITION / (THREADS / 32))
#define MIN_BLOCKS_RAW (BLOCKS_BY_REGS < 32 ? BLOCKS_BY_REGS : 32)
#define MIN_BLOCKS (MIN_BLOCKS_RAW > 0 ? MIN_BLOCKS_RAW : 1)

#if (BM % TM) || (BN % TN) || (TM % FM) || (TN % FN) || (BK % VEC)
#error "tile sizes must divide: BM % TM, BN % TN, BK % VEC"
#endif
#if (GK % VEC)
#error "C*K*K must be a multiple of VEC for aligned filter vectors"
#endif
#if (THREADS % A_VPR)
#error "THREADS must be a multiple of BK / VEC"
#endif
#if GATHER_ROWS > 1 && ((32 % GATHER_ROWS) || (BN % (32 / GATHER_ROWS)) || (THREADS % 32))
#error "GATHER_ROWS must divide the warp, and a warp's 32 / GATHER_ROWS columns must fit BN"
#endif

// The register-tiled inner loop (register_tile.cuh): a thread's TM x TN tile from FM- and
// FN-wide fragments, TY * FM and TX * FN floats apart.
using RegisterTile = register_tile::Loop<TM, TN, FM, FN, TY * FM, TX * FN>;

// Offset of reduction row k = (c, ky, kx) from a column's top-left input pixel: the one place
// the formula lives, evaluated per row in the kernel (K is a compile-time constant, so the
// divisions are multiplications) or by the compiler into the table below.
__host__ __device__ __forceinline__ constexpr int row_offset(int k) {
    const int c = k / KK;
    const int r = k - c * KK;
    const int ky = r / K;
    return c * SS + ky * S + (r - ky * K);
}

// The gather loader's first tile row and its column of thread tid: GATHER_ROWS consecutive
// threads share a column. With fewer groups of them than columns (B_QT < BN) every thread starts
// at row tid % GATHER_ROWS and takes B_COLS columns.
__host__ __device__ __forceinline__ constexpr int gather_row(int tid) {
    return (B_QT >= BN ? tid / GATHER_ROWS / BN : 0) * GATHER_ROWS + tid % GATHER_ROWS;
}
__host__ __device__ __forceinline__ constexpr int gather_col(int tid) {
    return tid / GATHER_ROWS % BN;
}

#if OFFSET_TABLE
// Every slice, split-K's included, starts at a multiple of BK below GK_PAD. The table holds
// GK_PAD ints; the space keeps it within half of the 64 KB constant bank (the compiler has
// constants of its own there). Rows past GK are 0: their loads are masked anyway.
#define GK_PAD ((GK + BK - 1) / BK * BK)
struct RowTable {
    int v[GK_PAD];
    // Constant initialisation (no code runs): NVRTC evaluates the loop and the cubin carries
    // the values.
    __host__ __device__ constexpr RowTable() : v() {
        for (int k = 0; k < GK; ++k) v[k] = row_offset(k);
    }
};
__constant__ RowTable row_table = RowTable();
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
implicit_gemm(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
    extern __shared__ __align__(16) float smem[];
    float* const a_s = smem;                    // [STAGES][BK][AS_LD], filters transposed
    float* const b_s = smem + STAGES * AS_SIZE; // [STAGES][BK][BS_LD], unrolled input

    const int tid = threadIdx.x;
    const int tx = tid % TX;
    const int ty = tid / TX;
    const int m0 = blockIdx.y * BM;
    const int n0 = blockIdx.x * BN;

    // Filter loader: one base pointer, rows A_RSTEP apart at constant offsets; rows past F
    // read as zero (their outputs are never stored).
    const int a_k = (tid % A_VPR) * VEC;
    const int a_r = tid / A_VPR;
    const float* const a_ptr = w + (long long)(m0 + a_r) * GK + a_k;
    const int a_rows = F - m0 - a_r;  // rows i * A_RSTEP < a_rows exist

    // Gather loader: this thread's first row and column of the tile, and the top-left input
    // pixel of each column it loads. Columns past the last output pixel read the last one (never
    // stored).
    const int b_r = gather_row(tid);
    const int b_c = gather_col(tid);
    int b_base[B_COLS];
#pragma unroll
    for (int j = 0; j < B_COLS; ++j) {
        const int n = min(n0 + b_c + j * B_QT, GN - 1);
        const int b = n / NN;
        const int p = n - b * NN;
        const int oy = p / N;
        b_base[j] = b * (C * SS) + oy * (STRIDE * S) + (p - oy * N) * STRIDE;
    }

    float a_reg[A_LOADS][VEC];
    float b_reg[B_ROWS][B_COLS];

    // Global -> registers for the slice starting at reduction index k0. Past the end of the
    // reduction both operands read as zero (GK % BK == 0 removes the tests at compile time).
    auto load_slice = [&](int k0) {
        filter_tile::load(a_reg, a_ptr, a_r, a_k, a_rows, k0);
#pragma unroll
        for (int i = 0; i < B_ROWS; ++i) {
            const int k = k0 + b_r + i * B_RSTEP;
#if OFFSET_TABLE
            // Rows of the last step past BK (masked below) read the slice's last row instead of
            // past the table.
            const int row = BK % B_RSTEP == 0 ? k : k0 + min(b_r + i * B_RSTEP, BK - 1);
            const int off = row_table.v[row];
#else
            const int off = row_offset(k);
#endif
            const bool in =
                (BK % B_RSTEP == 0 || b_r + i * B_RSTEP < BK) && (GK % BK == 0 || k < GK);
#pragma unroll
            for (int j = 0; j < B_COLS; ++j) b_reg[i][j] = in ? x[b_base[j] + off] : 0.0f;
        }
    };

    // Registers -> one shared stage; the filter tile is transposed on the way.
    auto store_slice = [&](int stage) {
        float* as = a_s + stage * AS_SIZE;
        float* bs = b_s + stage * BS_SIZE;
        filter_tile::store(as, a_reg, a_r, a_k);
#pragma unroll
        for (int i = 0; i < B_ROWS; ++i) {
            const int r = b_r + i * B_RSTEP;
            if (BK % B_RSTEP == 0 || r < BK) {
#pragma unroll
                for (int j = 0; j < B_COLS; ++j) {
                    bs[r * BS_LD + b_c + j * B_QT] = b_reg[i][j];
                }
            }
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    }

    // BK rank-1 updates of the register tile from one shared stage (register_tile.cuh).
    auto compute_slice = [&](int stage) {
        RegisterTile::stage<BK, AS_LD, BS_LD, AS_SIZE, BS_SIZE>(a_s, b_s, stage, ty, tx, acc);
    };

    // Block z of SPLIT_K reduces slices [t0, t1) of the reduction.
    constexpr int SLICES = (GK + BK - 1) / BK;
    constexpr int SLICES_PER_SPLIT = (SLICES + SPLIT_K - 1) / SPLIT_K;
    const int t0 = SPLIT_K == 1 ? 0 : min((int)blockIdx.z * SLICES_PER_SPLIT, SLICES);
    const int t1 = SPLIT_K == 1 ? SLICES : min(t0 + SLICES_PER_SPLIT, SLICES);
#if DOUBLE_BUFFER
    if (t0 < t1) {
        load_slice(t0 * BK);
        store_slice(0);
    }
    __syncthreads();
#pragma unroll 1
    for (int t = t0; t < t1; ++t) {
        // The next slice's global loads are in flight while this one is computed. No branch
        // around them (ptxas would sink the loads to their use): the last iteration reloads the
        // last slice into the stage that nobody reads any more.
        load_slice(min(t + 1, t1 - 1) * BK);
        compute_slice((t - t0) & 1);
        // The other stage was last read before the previous barrier: one barrier suffices.
        store_slice((t - t0 + 1) & 1);
        __syncthreads();
    }
#else
#pragma unroll 1
    for (int t = t0; t < t1; ++t) {
        load_slice(t * BK);
        store_slice(0);
        __syncthreads();
        compute_slice(0);
        __syncthreads();
    }
#endif

#if SPLIT_K > 1
    // Partial sums of this split, [SPLIT_K][F][B*N*N]; implicit_gemm_reduce adds them into y.
    float* const part = y + (long long)blockIdx.z * F * GN;
#pragma unroll
    for (int gj = 0; gj < TN / FN; ++gj) {
        const int n = n0 + gj * TX * FN + tx * FN;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = m0 + (i / FM) * TY * FM + ty * FM + i % FM;
            if (m >= F) continue;
            if constexpr (FN > 1 && GN % FN == 0) {
                if (n < GN) Vec<FN>::store_global(part + m * GN + n, &acc[i][gj * FN]);
            } else {
#pragma unroll
                for (int v = 0; v < FN; ++v) {
                    if (n + v < GN) part[m * GN + n + v] = acc[i][gj * FN + v];
                }
            }
        }
    }
#else
    // Column groups of FN pixels: with N*N % FN == 0 a group is one aligned vector of one image.
#pragma unroll
    for (int gj = 0; gj < TN / FN; ++gj) {
        const int n = n0 + gj * TX * FN + tx * FN;
        const int b = n / NN;
        const int p = n - b * NN;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = m0 + (i / FM) * TY * FM + ty * FM + i % FM;
            if (m >= F) continue;
            if constexpr (FN > 1 && NN % FN == 0) {
                if (n < GN) Vec<FN>::store_global(y + (b * F + m) * NN + p, &acc[i][gj * FN]);
            } else {
#pragma unroll
                for (int v = 0; v < FN; ++v) {
                    const int nv = n + v;
                    if (nv < GN) {
                        const int bv = nv / NN;
                        y[(bv * F + m) * NN + nv - bv * NN] = acc[i][gj * FN + v];
                    }
                }
            }
        }
    }
#endif
}

// Split-K: y[b][f][p] = sum over the SPLIT_K partial sums of column n = b * N*N + p, one thread
// per output, consecutive threads along p (coalesced reads and writes).
extern "C" __global__ void __launch_bounds__(REDUCE_BLOCK)
implicit_gemm_reduce(const float* __restrict__ part, float* __restrict__ y) {
    const long long i = (long long)blockIdx.x * REDUCE_BLOCK + threadIdx.x;
    if (i >= (long long)F * GN) return;
    const int p = (int)(i % NN);
    const int f = (int)((i / NN) % F);
    const int b = (int)(i / ((long long)F * NN));
    const float* src = part + (long long)f * GN + b * NN + p;
    float sum = 0.0f;
#pragma unroll
    for (int z = 0; z < SPLIT_K; ++z) sum += src[(long long)z * F * GN];
    y[i] = sum;
}
