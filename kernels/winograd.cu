// Winograd minimal filtering F(m x m, 3 x 3) (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", CVPR 2016): the N x N output of every image is cut into T x T tiles of m x m
// (T = ceil(N / m)); each tile reads an alpha x alpha patch of the input (alpha = m + 2, patches
// overlapping by 2). With U = G g G^T (filter), V = B^T d B (patch) and Y = A^T M A, the sum over
// channels of U (.) V becomes, for each of the alpha^2 points xi, one matrix product
// M[xi] (F x P) = U[xi]^T (F x C) V[xi] (C x P), P = B * T * T tiles: alpha^2 independent GEMMs,
// batched in one launch (grid z). Per output, m = 2 does 4 products, m = 4 2.25, m = 5 1.96 and
// m = 6 1.78, instead of 9; tiles past the edge of the output are computed and dropped, so that m
// dividing N matters (13 = 3 x 5 - 2 wastes less than 4 x 4 - 3), and the rounding error grows
// with m (m = 6 fails the FP32 tolerance at large C: the tuner then records WRONG_RESULT).
//
// Four timed kernels: wino_filter (U), wino_input (V), wino_gemm (M), wino_output (Y into y).
// Scratch, all FP32 and zero-padded so that the GEMM has no bounds checks:
//   u: [CP][A2][FP]  (channels padded to whole BK steps, filters to whole BM tiles)
//   v: [CP][A2][PP]  (tiles padded to whole BN tiles)
//   m: [FP][A2][PP]
// The alpha^2 rows of one channel (of one filter, for m) lie together, so that the transforms'
// alpha^2 reads or writes of one thread fall in one stretch of memory rather than in alpha^2
// planes far apart.
// Both GEMM operands are rows of the reduction dimension (channels), contiguous along the GEMM's M
// (filters) and N (tiles), as in maxdnn; the transforms write them in that layout directly.
//
// Interpolation points (and infinity): m = 2: 0, 1, -1 (the paper's); m = 4: 0, 1, -1, 2, -1/2
// rather than the paper's 0, +-1, +-2, the same multiplication count with about two thirds of the
// FP32 error at C = 256 and 1024 (measured in NumPy); m = 5: 0, +-1, +-2, 1/2; m = 6: 0, +-1, +-2,
// +-1/2. The filter transform runs in double.
//
// Problem defines: B, C, N, K, F, STRIDE (K = 3, STRIDE = 1). Tunables: OUT_TILE (m), BM, BN, BK,
// TM, TN, DOUBLE_BUFFER, VEC, MIN_BLOCKS (the GEMM, as maxdnn's), IN_BLOCK and OUT_BLOCK (threads
// per block of the input and output transforms), OUT_STAGE (output rows through shared memory).

#include "register_tile.cuh"
#include "cp_async.cuh"
#include "vector.cuh"

#define MT OUT_TILE                         // output tile side m
#define AL (MT + 2)                         // alpha: transformed tile side
#define A2 (AL * AL)
#define S (N + 2)                           // input side (pre-padded)
#define T ((N + MT - 1) / MT)               // tiles per side
#define P (B * T * T)                       // tiles of the batch: the GEMM's N
#define CP ((C + BK - 1) / BK * BK)
#define FP ((F + BM - 1) / BM * BM)
#define PP ((P + BN - 1) / BN * BN)
#define FILTER_BLOCK 256

#define THREADS_X (BN / TN)
#define THREADS_Y (BM / TM)
#define THREADS (THREADS_X * THREADS_Y)
#define WARP_X (THREADS_X < 8 ? THREADS_X : 8)
#define WARP_Y (32 / WARP_X)
#define WARPS_PER_ROW (THREADS_X / WARP_X)
#define STAGES (DOUBLE_BUFFER ? 2 : 1)
#define ASYNC_COPY (DOUBLE_BUFFER == 2)
#define A_VECS (BK * BM / VEC)
#define B_VECS (BK * BN / VEC)
#define LOADS_A (A_VECS / THREADS)
#define LOADS_B (B_VECS / THREADS)
#define KTILES (CP / BK)
#define A_ROW (A2 * FP)  // from one channel's row of u[.][xi] to the next
#define B_ROW (A2 * PP)

#if (K != 3) || (STRIDE != 1) || (MT < 2) || (MT > 6) || (MT == 3)
#error "winograd: F(m x m, 3 x 3) for m = 2, 4, 5, 6 at stride 1 only"
#endif
#if (THREADS % 32) || (A_VECS % THREADS) || (B_VECS % THREADS) || (TM % 4) || (TN % 4)
#error "winograd: tile parameters outside the search space's constraints"
#endif

// The transform matrices, indexed by (row, column); compile-time constants once the loops that
// use them are unrolled, so that zero entries cost nothing.
__device__ __forceinline__ float bt(int i, int j) {
#if MT == 2
    constexpr float t[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
#elif MT == 4
    constexpr float t[6][6] = {
        {1.0f, 1.5f, -2.0f, -1.5f, 1.0f, 0.0f},  {0.0f, -1.0f, -2.5f, -0.5f, 1.0f, 0.0f},
        {0.0f, 1.0f, 0.5f, -2.5f, 1.0f, 0.0f},   {0.0f, -0.5f, -1.0f, 0.5f, 1.0f, 0.0f},
        {0.0f, 2.0f, -1.0f, -2.0f, 1.0f, 0.0f},  {0.0f, 1.0f, 1.5f, -2.0f, -1.5f, 1.0f}};
#elif MT == 5
    constexpr float t[7][7] = {{-2.0f, 4.0f, 2.5f, -5.0f, -0.5f, 1.0f, 0.0f},
                               {0.0f, 2.0f, -2.0f, -4.5f, 0.5f, 1.0f, 0.0f},
                               {0.0f, -2.0f, 6.0f, -3.5f, -1.5f, 1.0f, 0.0f},
                               {0.0f, 1.0f, -1.5f, -2.0f, 1.5f, 1.0f, 0.0f},
                               {0.0f, -1.0f, 2.5f, 0.0f, -2.5f, 1.0f, 0.0f},
                               {0.0f, 4.0f, 0.0f, -5.0f, 0.0f, 1.0f, 0.0f},
                               {0.0f, -2.0f, 4.0f, 2.5f, -5.0f, -0.5f, 1.0f}};
#else
    constexpr float t[8][8] = {{-1.0f, 0.0f, 5.25f, 0.0f, -5.25f, 0.0f, 1.0f, 0.0f},
                               {0.0f, 1.0f, 1.0f, -4.25f, -4.25f, 1.0f, 1.0f, 0.0f},
                               {0.0f, -1.0f, 1.0f, 4.25f, -4.25f, -1.0f, 1.0f, 0.0f},
                               {0.0f, 0.5f, 0.25f, -2.5f, -1.25f, 2.0f, 1.0f, 0.0f},
                               {0.0f, -0.5f, 0.25f, 2.5f, -1.25f, -2.0f, 1.0f, 0.0f},
                               {0.0f, 2.0f, 4.0f, -2.5f, -5.0f, 0.5f, 1.0f, 0.0f},
                               {0.0f, -2.0f, 4.0f, 2.5f, -5.0f, -0.5f, 1.0f, 0.0f},
                               {0.0f, -1.0f, 0.0f, 5.25f, 0.0f, -5.25f, 0.0f, 1.0f}};
#endif
    return t[i][j];
}
__device__ __forceinline__ double g_mat(int i, int j) {
#if MT == 2
    constexpr double t[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
#elif MT == 4
    constexpr double t[6][3] = {{1.0, 0.0, 0.0},
                                {-1.0 / 3, -1.0 / 3, -1.0 / 3},
                                {1.0 / 3, -1.0 / 3, 1.0 / 3},
                                {1.0 / 15, 2.0 / 15, 4.0 / 15},
                                {-16.0 / 15, 8.0 / 15, -4.0 / 15},
                                {0.0, 0.0, 1.0}};
#elif MT == 5
    constexpr double t[7][3] = {{-1.0 / 2, 0.0, 0.0},
                                {-1.0 / 3, -1.0 / 3, -1.0 / 3},
                                {1.0 / 9, -1.0 / 9, 1.0 / 9},
                                {1.0 / 36, 1.0 / 18, 1.0 / 9},
                                {-1.0 / 60, 1.0 / 30, -1.0 / 15},
                                {32.0 / 45, 16.0 / 45, 8.0 / 45},
                                {0.0, 0.0, 1.0}};
#else
    constexpr double t[8][3] = {{-1.0, 0.0, 0.0},
                                {-2.0 / 9, -2.0 / 9, -2.0 / 9},
                                {-2.0 / 9, 2.0 / 9, -2.0 / 9},
                                {1.0 / 90, 1.0 / 45, 2.0 / 45},
                                {1.0 / 90, -1.0 / 45, 2.0 / 45},
                                {32.0 / 45, 16.0 / 45, 8.0 / 45},
                                {32.0 / 45, -16.0 / 45, 8.0 / 45},
                                {0.0, 0.0, 1.0}};
#endif
    return t[i][j];
}
__device__ __forceinline__ float at(int i, int j) {
#if MT == 2
    constexpr float t[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
#elif MT == 4
    constexpr float t[4][6] = {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f},
                               {0.0f, 1.0f, -1.0f, 2.0f, -0.5f, 0.0f},
                               {0.0f, 1.0f, 1.0f, 4.0f, 0.25f, 0.0f},
                               {0.0f, 1.0f, -1.0f, 8.0f, -0.125f, 1.0f}};
#elif MT == 5
    constexpr float t[5][7] = {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f},
                               {0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, 0.0f},
                               {0.0f, 1.0f, 1.0f, 4.0f, 4.0f, 0.25f, 0.0f},
                               {0.0f, 1.0f, -1.0f, 8.0f, -8.0f, 0.125f, 0.0f},
                               {0.0f, 1.0f, 1.0f, 16.0f, 16.0f, 0.0625f, 1.0f}};
#else
    constexpr float t[6][8] = {{1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f},
                               {0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f, 0.0f},
                               {0.0f, 1.0f, 1.0f, 4.0f, 4.0f, 0.25f, 0.25f, 0.0f},
                               {0.0f, 1.0f, -1.0f, 8.0f, -8.0f, 0.125f, -0.125f, 0.0f},
                               {0.0f, 1.0f, 1.0f, 16.0f, 16.0f, 0.0625f, 0.0625f, 0.0f},
                               {0.0f, 1.0f, -1.0f, 32.0f, -32.0f, 0.03125f, -0.03125f, 1.0f}};
#endif
    return t[i][j];
}

// acc + c * x, with c a compile-time constant: nothing for 0, an add or subtract for +-1.
__device__ __forceinline__ float mac(float acc, float c, float x) {
    if (c == 0.0f) return acc;
    if (c == 1.0f) return acc + x;
    if (c == -1.0f) return acc - x;
    return fmaf(c, x, acc);
}

// u[xi][c][f] = (G g G^T)[xi] for the 3 x 3 filter g = w[f][c]; zeros in the padding. One thread
// per (c, f), f fastest: the stores are coalesced.
extern "C" __global__ void __launch_bounds__(FILTER_BLOCK)
wino_filter(const float* __restrict__ w, float* __restrict__ u) {
    const long long idx = (long long)blockIdx.x * FILTER_BLOCK + threadIdx.x;
    if (idx >= (long long)CP * FP) return;
    const int c = (int)(idx / FP), f = (int)(idx % FP);
    const bool real = c < C && f < F;
    double g[3][3];
#pragma unroll
    for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j)
            g[i][j] = real ? (double)w[((long long)f * C + c) * 9 + i * 3 + j] : 0.0;
    double tmp[AL][3];  // G g
#pragma unroll
    for (int i = 0; i < AL; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j) {
            double s = 0.0;
#pragma unroll
            for (int k = 0; k < 3; ++k) s += g_mat(i, k) * g[k][j];
            tmp[i][j] = s;
        }
#pragma unroll
    for (int i = 0; i < AL; ++i)
#pragma unroll
        for (int j = 0; j < AL; ++j) {
            double s = 0.0;
#pragma unroll
            for (int k = 0; k < 3; ++k) s += tmp[i][k] * g_mat(j, k);
            u[((long long)c * A2 + i * AL + j) * FP + f] = (float)s;
        }
}

// v[xi][c][p] = (B^T d B)[xi] for the alpha x alpha patch d of tile p in channel c (reads past the
// input are zeros: the last tiles of a side overhang it when m does not divide N). One thread per
// (c, p), p fastest (coalesced stores; neighbouring threads read overlapping patches, through L1).
// Grid: (PP / IN_BLOCK rounded up, CP).
extern "C" __global__ void __launch_bounds__(IN_BLOCK)
wino_input(const float* __restrict__ x, float* __restrict__ v) {
    const int p = blockIdx.x * IN_BLOCK + threadIdx.x;
    const int c = blockIdx.y;
    if (p >= PP) return;
    float d[AL][AL];
    if (p < P && c < C) {
        const int b = p / (T * T), t = p % (T * T);
        const int y0 = (t / T) * MT, x0 = (t % T) * MT;
        const float* src = x + ((long long)b * C + c) * S * S;
#pragma unroll
        for (int i = 0; i < AL; ++i)
#pragma unroll
            for (int j = 0; j < AL; ++j) {
                const int yy = y0 + i, xx = x0 + j;
                d[i][j] = (N % MT == 0 || (yy < S && xx < S)) ? __ldg(src + yy * S + xx) : 0.0f;
            }
    } else {
#pragma unroll
        for (int i = 0; i < AL; ++i)
#pragma unroll
            for (int j = 0; j < AL; ++j) d[i][j] = 0.0f;
    }
    float tmp[AL][AL];  // B^T d
#pragma unroll
    for (int i = 0; i < AL; ++i)
#pragma unroll
        for (int j = 0; j < AL; ++j) {
            float s = 0.0f;
#pragma unroll
            for (int k = 0; k < AL; ++k) s = mac(s, bt(i, k), d[k][j]);
            tmp[i][j] = s;
        }
    float* dst = v + (long long)c * A2 * PP + p;
#pragma unroll
    for (int i = 0; i < AL; ++i)
#pragma unroll
        for (int j = 0; j < AL; ++j) {
            float s = 0.0f;
#pragma unroll
            for (int k = 0; k < AL; ++k) s = mac(s, bt(j, k), tmp[i][k]);
            dst[(i * AL + j) * PP] = s;
        }
}

// y[b][f][...] = A^T M A for the alpha^2 products of tile p and filter f, cut at the edge of the
// output. One thread per (f, p), p fastest (coalesced loads). Grid: (P / OUT_BLOCK rounded up, F).
// OUT_STAGE = 0: each thread stores its m x m outputs, m short rows far apart (one float2 /
// float4 per row where m divides N), so a warp's store touches a sector per thread (ncu at AlexNet
// conv3, m = 4, N = 13: L2 80% busy, DRAM 50%). OUT_STAGE = 1: the block's tiles go through
// shared memory, laid out as the output rows of the tile rows (b, ty) they cover, and are written
// row by row, consecutive threads at consecutive columns.
#define TILE_ROWS ((OUT_BLOCK - 1) / T + 2)  // tile rows a block's OUT_BLOCK tiles can touch
#define ROW_W (T * MT)                       // an output row as the tiles cover it (>= N)
extern "C" __global__ void __launch_bounds__(OUT_BLOCK)
wino_output(const float* __restrict__ m, float* __restrict__ y) {
    const int p_begin = blockIdx.x * OUT_BLOCK;
    const int p_end = min(P, p_begin + OUT_BLOCK);
    const int f = blockIdx.y;
    const int p = p_begin + threadIdx.x;
    float out[MT][MT];
    if (p < p_end) {
        const float* src = m + (long long)f * A2 * PP + p;
        float mm[AL][AL];
#pragma unroll
        for (int i = 0; i < AL; ++i)
#pragma unroll
            for (int j = 0; j < AL; ++j) mm[i][j] = __ldg(src + (i * AL + j) * PP);
        float tmp[MT][AL];  // A^T M
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < AL; ++j) {
                float s = 0.0f;
#pragma unroll
                for (int k = 0; k < AL; ++k) s = mac(s, at(i, k), mm[k][j]);
                tmp[i][j] = s;
            }
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < MT; ++j) {
                float s = 0.0f;
#pragma unroll
                for (int k = 0; k < AL; ++k) s = mac(s, at(j, k), tmp[i][k]);
                out[i][j] = s;
            }
    }
#if OUT_STAGE
    __shared__ float rows[TILE_ROWS * MT * ROW_W];
    const int g_begin = p_begin / T;  // first tile row (b * T + ty) of the block
    if (p < p_end) {
        float* dst = rows + (p / T - g_begin) * MT * ROW_W + (p % T) * MT;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < MT; ++j) dst[i * ROW_W + j] = out[i][j];
    }
    __syncthreads();
    const int g_count = (p_end - 1) / T - g_begin + 1;
    for (int e = threadIdx.x; e < g_count * MT * ROW_W; e += OUT_BLOCK) {
        const int x = e % ROW_W, r = e / ROW_W;
        const int g = g_begin + r / MT, yy = (g % T) * MT + r % MT;
        const int tile = g * T + x / MT;
        if (x < N && yy < N && tile >= p_begin && tile < p_end) {
            y[(((long long)(g / T) * F + f) * N + yy) * N + x] = rows[e];
        }
    }
#else
    if (p >= p_end) return;
    const int b = p / (T * T), t = p % (T * T);
    const int y0 = (t / T) * MT, x0 = (t % T) * MT;
    float* dst = y + ((long long)b * F + f) * N * N + y0 * N + x0;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        if constexpr (N % MT == 0 && MT == 4) {
            *reinterpret_cast<float4*>(dst + i * N) =
                make_float4(out[i][0], out[i][1], out[i][2], out[i][3]);
        } else if constexpr (N % MT == 0 && MT == 2) {
            *reinterpret_cast<float2*>(dst + i * N) = make_float2(out[i][0], out[i][1]);
        } else {
#pragma unroll
            for (int j = 0; j < MT; ++j)
                if (N % MT == 0 || (y0 + i < N && x0 + j < N)) dst[i * N + j] = out[i][j];
        }
    }
#endif
}

// ---- The batched GEMM: m[.][xi] (FP x PP) = u[.][xi]^T v[.][xi], one xi per grid z. ----

using vec_t = Vec<VEC>::type;


#include "tile_words.cuh"

// The register-tiled inner loop (register_tile.cuh), float4 fragments 4 * THREADS_Y (filters) and
// 4 * THREADS_X (tiles) floats apart.
using RegisterTile = register_tile::Loop<TM, TN, 4, 4, 4 * THREADS_Y, 4 * THREADS_X>;

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
wino_gemm(const float* __restrict__ u, const float* __restrict__ v, float* __restrict__ m) {
    extern __shared__ float4 smem4[];
    float* s_a = reinterpret_cast<float*>(smem4);  // [STAGES][BK][BM] filter rows
    float* s_b = s_a + STAGES * BK * BM;            // [STAGES][BK][BN] tile rows

    const int p0 = blockIdx.x * BN, f0 = blockIdx.y * BM;
    const long long xi = blockIdx.z;
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int tx = (warp % WARPS_PER_ROW) * WARP_X + lane % WARP_X;
    const int ty = (warp / WARPS_PER_ROW) * WARP_Y + lane / WARP_X;

    using TileA = Tile<BM>;
    using TileB = Tile<BN>;
    const int a_row0 = TileA::row0(tid), a_col0 = TileA::col0(tid);
    const int b_row0 = TileB::row0(tid), b_col0 = TileB::col0(tid);
    const float* a_src = u + xi * FP + (long long)a_row0 * A_ROW + f0 + a_col0;
    const float* b_src = v + xi * PP + (long long)b_row0 * B_ROW + p0 + b_col0;

    vec_t ra[LOADS_A], rb[LOADS_B];
    auto load_tile = [&](int kt) {
        const float* a = a_src + (long long)kt * BK * A_ROW;
        const float* b = b_src + (long long)kt * BK * B_ROW;
#pragma unroll
        for (int i = 0; i < LOADS_A; ++i)
            ra[i] = *reinterpret_cast<const vec_t*>(a + TileA::row(i) * A_ROW + TileA::col(i));
#pragma unroll
        for (int i = 0; i < LOADS_B; ++i)
            rb[i] = *reinterpret_cast<const vec_t*>(b + (long long)TileB::row(i) * B_ROW +
                                                    TileB::col(i));
    };
    float* s_a_thread = s_a + a_row0 * BM + a_col0;
    float* s_b_thread = s_b + b_row0 * BN + b_col0;
    auto store_tile = [&](int stage) {
        float* a = s_a_thread + stage * (BK * BM);
        float* b = s_b_thread + stage * (BK * BN);
#pragma unroll
        for (int i = 0; i < LOADS_A; ++i)
            *reinterpret_cast<vec_t*>(a + TileA::row(i) * BM + TileA::col(i)) = ra[i];
#pragma unroll
        for (int i = 0; i < LOADS_B; ++i)
            *reinterpret_cast<vec_t*>(b + TileB::row(i) * BN + TileB::col(i)) = rb[i];
    };
    auto copy_tile = [&](int kt, int stage) {
        const float* a = a_src + (long long)kt * BK * A_ROW;
        const float* b = b_src + (long long)kt * BK * B_ROW;
        float* sa = s_a_thread + stage * (BK * BM);
        float* sb = s_b_thread + stage * (BK * BN);
#pragma unroll
        for (int i = 0; i < LOADS_A; ++i)
            cp_async::copy<VEC * 4>(sa + TileA::row(i) * BM + TileA::col(i),
                       a + TileA::row(i) * A_ROW + TileA::col(i));
#pragma unroll
        for (int i = 0; i < LOADS_B; ++i)
            cp_async::copy<VEC * 4>(sb + TileB::row(i) * BN + TileB::col(i),
                       b + (long long)TileB::row(i) * B_ROW + TileB::col(i));
        cp_async::commit();
    };

    // Thread (tx, ty) owns filters g * 4 * THREADS_Y + 4 * ty + (0..3) and tiles
    // h * 4 * THREADS_X + 4 * tx + (0..3): float4 fragments, conflict-free warp reads.
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float fa[2][TM], fb[2][TN];

#if ASYNC_COPY
    copy_tile(0, 0);
#pragma unroll 1
    for (int kt = 0; kt < KTILES; ++kt) {
        const int stage = kt & 1;
        cp_async::wait<0>();
        __syncthreads();  // tile kt landed for all; everyone is done with the stage copied next
        if (kt + 1 < KTILES) copy_tile(kt + 1, stage ^ 1);
        RegisterTile::stage_pipelined<BK, BM, BN, BK * BM, BK * BN>(
            s_a, s_b, stage, ty, tx, fa, fb, acc);
    }
#elif DOUBLE_BUFFER
    load_tile(0);
    store_tile(0);
    __syncthreads();
#pragma unroll 1
    for (int kt = 0; kt < KTILES; ++kt) {
        const int stage = kt & 1;
        const bool more = kt + 1 < KTILES;
        if (more) load_tile(kt + 1);
        RegisterTile::stage_pipelined<BK, BM, BN, BK * BM, BK * BN>(
            s_a, s_b, stage, ty, tx, fa, fb, acc);
        if (more) store_tile(stage ^ 1);  // last read before the previous barrier
        __syncthreads();
    }
#else
#pragma unroll 1
    for (int kt = 0; kt < KTILES; ++kt) {
        load_tile(kt);
        store_tile(0);
        __syncthreads();
        RegisterTile::rows<BK, BM, BN>(s_a, s_b, ty, tx, fa, fb, acc);
        __syncthreads();
    }
#endif

    float* out = m + xi * PP + p0 + 4 * tx;
#pragma unroll
    for (int g = 0; g < TM / 4; ++g)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int f = f0 + g * 4 * THREADS_Y + 4 * ty + i;
#pragma unroll
            for (int h = 0; h < TN / 4; ++h) {
                const float* a = acc[4 * g + i] + 4 * h;
                *reinterpret_cast<float4*>(out + (long long)f * B_ROW + h * 4 * THREADS_X) =
                    make_float4(a[0], a[1], a[2], a[3]);
            }
        }
}
