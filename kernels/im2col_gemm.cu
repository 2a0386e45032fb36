// ECE408 "matrix-multiplication baseline": unroll the input, then multiply.
//
// im2col_unroll writes, for every image b, the C*K*K x N*N matrix X_unroll[b] whose column
// p = oy * N + ox holds the receptive field of output pixel (oy, ox) and whose row
// h = c * K*K + ky * K + kx is input channel c shifted by (ky, kx): the lecture's unroll function,
// one thread per (row, column) element, threads along the column so that writes coalesce. The
// matrix is K*K / stride^2 times the input (the replication factor), kept in a scratch buffer.
//
// im2col_gemm then computes Y[b] (F x N*N, NFHW) = W (F x C*K*K) * X_unroll[b] as a tiled
// SGEMM: a BM x BN tile per block, BK-deep slices of both operands in shared memory (double
// buffered: the next slice is loaded into registers while the current one is computed), a
// TM x TN register tile per thread read as float4 fragments with the conflict-free split layout
// (threads own groups of 4 rows / columns spaced BM / (TM / 4) apart). Both operands are read
// as VEC-wide vectors along their contiguous dimension.
//
// Problem defines: B, C, N, K, F, STRIDE. Tunables: BM, BN, BK, TM, TN, VEC, UNROLL_BLOCK.

#include "register_tile.cuh"
#include "vector.cuh"

#define S ((N - 1) * STRIDE + K)   // input side
#define SS (S * S)
#define NN (N * N)
#define KK (K * K)
#define GK (C * KK)                // rows of X_unroll, columns of W

#define TX (BN / TN)
#define TY (BM / TM)
#define THREADS (TX * TY)
#define FM (TM < 4 ? TM : 4)
#define FN (TN < 4 ? TN : 4)

// The filter tile's loader (AS_LD, AS_SIZE, A_VPR, A_RSTEP, A_LOADS).
#include "filter_tile.cuh"
#define BS_SIZE (BK * BN)

#define B_VPR (BN / VEC)           // vectors per X_unroll-tile row
#define B_RSTEP (THREADS >= B_VPR ? THREADS / B_VPR : 1)
#define B_COLS (THREADS >= B_VPR ? 1 : B_VPR / THREADS)
#define B_ROWS ((BK + B_RSTEP - 1) / B_RSTEP)

// As many resident blocks as the register file holds at an estimated REG_ESTIMATE registers a
// thread (accumulators, fragments, prefetch registers, an address per unrolled-matrix load,
// about REG_BASE for indexing), counted as ptxas does: whole warps per 16K-register scheduler
// partition. See implicit_gemm.cu.
#define REG_BASE 36
#define REG_ESTIMATE \
    (TM * TN + TM + TN + A_LOADS * VEC + B_ROWS * B_COLS * (VEC + 1) + B_COLS + REG_BASE)
#define WARPS_PER_PARTITION (512 / ((REG_ESTIMATE + 7) / 8 * 8))  // registers go in 8s
#define BLOCKS_BY_REGS (4 * WARPS_PER_PARTITION / (THREADS / 32))
#define MIN_BLOCKS_RAW (BLOCKS_BY_REGS < 32 ? BLOCKS_BY_REGS : 32)
#define MIN_BLOCKS (MIN_BLOCKS_RAW > 0 ? MIN_BLOCKS_RAW : 1)

#if (BM % TM) || (BN % TN) || (TM % FM) || (TN % FN) || (BK % VEC) || (BN % VEC)
#error "tile sizes must divide: BM % TM, BN % TN, BK % VEC, BN % VEC"
#endif
#if (GK % VEC) || (NN % VEC)
#error "C*K*K and N*N must be multiples of VEC for aligned vectors"
#endif
#if (THREADS % A_VPR)
#error "THREADS must be a multiple of BK / VEC"
#endif

// The register-tiled inner loop (register_tile.cuh): a thread's TM x TN tile from FM- and
// FN-wide fragments, TY * FM and TX * FN floats apart.
using RegisterTile = register_tile::Loop<TM, TN, FM, FN, TY * FM, TX * FN>;

// Grid: (column blocks, rows, images). Rows past gridDim.y (65535) are taken in strides.
extern "C" __global__ void __launch_bounds__(UNROLL_BLOCK)
im2col_unroll(const float* __restrict__ x, float* __restrict__ x_unroll) {
    const int p = blockIdx.x * UNROLL_BLOCK + threadIdx.x;
    if (p >= NN) return;
    const int oy = p / N;
    const int ox = p - oy * N;
    const long long b = blockIdx.z;
    const float* src = x + b * (C * SS) + oy * (STRIDE * S) + ox * STRIDE;
    float* dst = x_unroll + b * ((long long)GK * NN) + p;
    for (int h = blockIdx.y; h < GK; h += gridDim.y) {
        const int c = h / KK;
        const int r = h - c * KK;
        const int ky = r / K;
        dst[(long long)h * NN] = src[c * SS + ky * S + (r - ky * K)];
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
im2col_gemm(const float* __restrict__ w, const float* __restrict__ x_unroll,
            float* __restrict__ y) {
    extern __shared__ __align__(16) float smem[];
    float* const a_s = smem;              // [2][BK][AS_LD], filters transposed
    float* const b_s = smem + 2 * AS_SIZE; // [2][BK][BN]

    const int tid = threadIdx.x;
    const int tx = tid % TX;
    const int ty = tid / TX;
    const int m0 = blockIdx.y * BM;
    const int n0 = blockIdx.x * BN;
    const float* xu = x_unroll + blockIdx.z * ((long long)GK * NN);
    float* yb = y + blockIdx.z * ((long long)F * NN);

    // Filter loader: one base pointer, rows A_RSTEP apart at constant offsets; rows past F
    // read as zero (their outputs are never stored).
    const int a_k = (tid % A_VPR) * VEC;
    const int a_r = tid / A_VPR;
    const float* const a_ptr = w + (long long)(m0 + a_r) * GK + a_k;
    const int a_rows = F - m0 - a_r;  // rows i * A_RSTEP < a_rows exist

    // Columns past N*N read the last vector (never stored); N*N % VEC == 0 keeps it aligned.
    const int b_r = tid / B_VPR;
    int b_col[B_COLS];
#pragma unroll
    for (int j = 0; j < B_COLS; ++j) {
        b_col[j] = min(n0 + ((tid % B_VPR) + j * THREADS) * VEC, NN - VEC);
    }

    float a_reg[A_LOADS][VEC];
    float b_reg[B_ROWS][B_COLS][VEC];

    // Past the end of the reduction both operands read as zero.
    auto load_slice = [&](int k0) {
        filter_tile::load(a_reg, a_ptr, a_r, a_k, a_rows, k0);
#pragma unroll
        for (int i = 0; i < B_ROWS; ++i) {
            const int k = k0 + b_r + i * B_RSTEP;
            const bool in =
                (BK % B_RSTEP == 0 || b_r + i * B_RSTEP < BK) && (GK % BK == 0 || k < GK);
#pragma unroll
            for (int j = 0; j < B_COLS; ++j) {
                if (in) {
                    Vec<VEC>::load(xu + k * NN + b_col[j], b_reg[i][j]);
                } else {
#pragma unroll
                    for (int v = 0; v < VEC; ++v) b_reg[i][j][v] = 0.0f;
                }
            }
        }
    };

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
                    Vec<VEC>::store(bs + r * BN + ((tid % B_VPR) + j * THREADS) * VEC, b_reg[i][j]);
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
        RegisterTile::stage<BK, AS_LD, BN, AS_SIZE, BS_SIZE>(a_s, b_s, stage, ty, tx, acc);
    };

    constexpr int SLICES = (GK + BK - 1) / BK;
    load_slice(0);
    store_slice(0);
    __syncthreads();
#pragma unroll 1
    for (int t = 0; t < SLICES; ++t) {
        // Next slice's loads in flight during this one's FMAs; unconditional (the last iteration
        // reloads the last slice into the stage nobody reads), so ptxas does not sink them.
        load_slice(min(t + 1, SLICES - 1) * BK);
        compute_slice(t & 1);
        store_slice((t + 1) & 1);  // the other stage: read before the previous barrier
        __syncthreads();
    }

#pragma unroll
    for (int gj = 0; gj < TN / FN; ++gj) {
        const int n = n0 + gj * TX * FN + tx * FN;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = m0 + (i / FM) * TY * FM + ty * FM + i % FM;
            if (m >= F) continue;
            if constexpr (NN % FN == 0) {
                if (n < NN) Vec<FN>::store_global(yb + m * NN + n, &acc[i][gj * FN]);
            } else {
#pragma unroll
                for (int v = 0; v < FN; ++v) {
                    if (n + v < NN) yb[m * NN + n + v] = acc[i][gj * FN + v];
                }
            }
        }
    }
}
