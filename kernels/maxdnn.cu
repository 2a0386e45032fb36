// maxDNN (Lavin 2015), section 3.2: convolution as an implicit GEMM in the cuda-convnet2 layout.
//
// Images are stored CHWN (batch innermost) and filters as a (C*K*K) x F matrix (filters
// innermost), so the Nb x No outputs of one output coordinate are a matrix product between the
// unrolled input patch and the filter matrix, and both operands are read as rows that are
// contiguous along the GEMM's M (filters) and N (images) dimensions. One thread block computes a
// BM (filters) x BN (images) tile of one output coordinate: blockIdx.x is the output pixel,
// blockIdx.y the filter tile and blockIdx.z the image tile. Each iteration stages BK patch rows of
// both operands in shared memory; each thread accumulates a TM x TN register block from TM/4 and
// TN/4 float4 fragments per patch row.
//
// The patch is walked through a table of precomputed offsets in constant memory (c_offsets: one
// entry per (channel, row, column) of the patch, already scaled to CHWN element units), so the
// three loops over channels, rows and columns become one loop over the table, and the pixel's own
// offset is added once. The images are zero-padded up to whole BN tiles, the filters up to whole
// BM tiles and the patch rows up to whole BK iterations (zero weights, offset 0), so the main loop
// has no bounds checks.
//
// DOUBLE_BUFFER = 1 (the paper's, after Maxas): two shared-memory stages; the next tile's global
// loads are issued into registers before the current tile is multiplied and stored to the other
// stage after it (one barrier per iteration), and the fragments of patch row k + 1 are read from
// shared memory while row k is multiplied. DOUBLE_BUFFER = 2: the same two stages and fragment
// double buffering, but the next tile travels global -> shared by cp.async (sm_80 and later), so
// it holds no registers while in flight. DOUBLE_BUFFER = 0: load, barrier, multiply, barrier.
//
// SPLIT_K > 1 (for grids that fill the GPU's last wave poorly): blockIdx.z also picks one of
// SPLIT_K contiguous ranges of the KTILES iterations, and the blocks of one output tile add their
// partial sums into y_fhwn with atomics; zero_fill clears y_fhwn first, inside the timed run.
// FMA_ORDER = 1 walks each row of the register block in alternating directions (serpentine), so
// consecutive FFMAs share an operand register (operand reuse instead of register bank reads).
//
// Untimed helpers, declared by the family: transpose_pad (NCHW -> CHWN with zero images, the
// filter transpose with zero filters and rows, and FHWN -> NFHW after the run) and build_offsets.
//
// Problem defines: B, C, N, K, F, STRIDE. Tunables: BM, BN, BK, TM, TN, DOUBLE_BUFFER, VEC,
// MIN_BLOCKS, SPLIT_K, FMA_ORDER, BYTE_OFFSETS (defaults 1, 0, 0: the behaviour before they
// existed). REG_USAGE_LEVEL is no define: the family passes it to ptxas
// (--register-usage-level; at 10 ptxas reads the next patch row's fragments a whole row ahead on
// the 128 x 128 / 8 x 8 tiles instead of just before their use).

#include "register_tile.cuh"
#include "cp_async.cuh"
#include "vector.cuh"

#ifndef SPLIT_K
#define SPLIT_K 1
#endif
#ifndef FMA_ORDER
#define FMA_ORDER 0
#endif
#ifndef BYTE_OFFSETS
#define BYTE_OFFSETS 0
#endif

#define S ((N - 1) * STRIDE + K)  // input side (pre-padded)
#define SS (S * S)
#define NN (N * N)
#define KK (K * K)
#define CKK (C * KK)              // patch length: the GEMM's reduction dimension
#define BP (((B + BN - 1) / BN) * BN)    // images, zero-padded to whole tiles
#define FP (((F + BM - 1) / BM) * BM)    // filters, zero-padded to whole tiles
#define RP (((CKK + BK - 1) / BK) * BK)  // patch rows, zero-padded to whole iterations
#define KTILES (RP / BK)
#define KT_PER_SPLIT ((KTILES + SPLIT_K - 1) / SPLIT_K)

#define THREADS_X (BN / TN)  // threads along the images
#define THREADS_Y (BM / TM)  // threads along the filters
#define THREADS (THREADS_X * THREADS_Y)
// A warp covers WARP_X x WARP_Y threads, so that its float4 fragment reads touch few distinct
// 16-byte words of each operand row (the rest are broadcasts): no bank conflicts.
#define WARP_X (THREADS_X < 8 ? THREADS_X : 8)
#define WARP_Y (32 / WARP_X)
#define WARPS_PER_ROW (THREADS_X / WARP_X)

#define STAGES (DOUBLE_BUFFER ? 2 : 1)
#define ASYNC_COPY (DOUBLE_BUFFER == 2)
#define A_VECS (BK * BM / VEC)  // VEC-wide words of one filter tile
#define B_VECS (BK * BN / VEC)  // ... and of one patch tile
#define LOADS_A (A_VECS / THREADS)
#define LOADS_B (B_VECS / THREADS)

#if (THREADS % 32) || (A_VECS % THREADS) || (B_VECS % THREADS) || (TM % 4) || (TN % 4)
#error "maxdnn: tile parameters outside the search space's constraints"
#endif

// The register-tiled inner loop (register_tile.cuh), float4 fragments 4 * THREADS_Y (filters) and
// 4 * THREADS_X (images) floats apart, FFMAs in FMA_ORDER.
using RegisterTile = register_tile::Loop<TM, TN, 4, 4, 4 * THREADS_Y, 4 * THREADS_X, FMA_ORDER>;

__constant__ int c_offsets[RP];

// The address of patch row `offset` (a c_offsets entry) from the thread's patch origin `base`.
// BYTE_OFFSETS = 1: the table holds unsigned byte offsets, so the address is one 64-bit add
// (two instructions) instead of a sign extension, a scaling and the add (four).
__device__ __forceinline__ const float* patch_row(const float* base, int offset) {
#if BYTE_OFFSETS
    return reinterpret_cast<const float*>(reinterpret_cast<const char*>(base) +
                                          static_cast<unsigned>(offset));
#else
    return base + offset;
#endif
}

using vec_t = Vec<VEC>::type;


// dst[g][col][r] = src[g * src_g + r * src_r + col] for r < rows and col < cols, and zero in the
// rest of the padded rows_pad x cols_pad destination: one 32 x 32 tile per block, through shared
// memory so that both the reads (along col) and the writes (along r) are coalesced.
extern "C" __global__ void __launch_bounds__(256)
transpose_pad(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols,
              int rows_pad, int cols_pad, int src_g, int src_r, int dst_g, int dst_c) {
    __shared__ float tile[32][33];  // one column of padding: the transposed read is conflict-free
    const int tiles_c = (cols_pad + 31) / 32;
    const int r0 = (blockIdx.x / tiles_c) * 32;
    const int c0 = (blockIdx.x % tiles_c) * 32;
    const long long g = blockIdx.z;
    for (int i = threadIdx.y; i < 32; i += 8) {
        const int r = r0 + i, c = c0 + threadIdx.x;
        tile[i][threadIdx.x] =
            (r < rows && c < cols) ? src[g * src_g + (long long)r * src_r + c] : 0.0f;
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {
        const int c = c0 + i, r = r0 + threadIdx.x;
        if (c < cols_pad && r < rows_pad) {
            dst[g * dst_g + (long long)c * dst_c + r] = tile[threadIdx.x][i];
        }
    }
}

#include "tile_words.cuh"

// y_fhwn = 0 before the split-K blocks add into it (float4 words: FP * NN * BP is a multiple of 4).
extern "C" __global__ void zero_fill(float* __restrict__ y, int words) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < words) reinterpret_cast<float4*>(y)[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// The patch offsets table, written as ints into a float scratch buffer that the evaluator then
// copies into c_offsets. Patch row r = (c, i, j) sits at ((c * S + i) * S + j) * BP elements from
// the patch origin in CHWN; padding rows point at the origin itself, which is inside the input and
// meets a zero weight.
extern "C" __global__ void build_offsets(float* __restrict__ table) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= RP) return;
    int offset = 0;
    if (r < CKK) {
        const int c = r / KK, i = (r / K) % K, j = r % K;
        offset = ((c * S + i) * S + j) * BP;
    }
    reinterpret_cast<int*>(table)[r] = BYTE_OFFSETS ? offset * 4 : offset;  // bytes: < 2^31
}

// x_chwn: (C, S, S, BP); w_t: (RP, FP); y_fhwn: (FP, N, N, BP). Offsets fit in int: the space's
// constraints keep every buffer under 2^31 elements.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
maxdnn(const float* __restrict__ x_chwn, const float* __restrict__ w_t,
       float* __restrict__ y_fhwn) {
    extern __shared__ float4 smem4[];
    float* s_a = reinterpret_cast<float*>(smem4);  // [STAGES][BK][BM] filter rows
    float* s_b = s_a + STAGES * BK * BM;            // [STAGES][BK][BN] patch rows

    const int pix = blockIdx.x;
    const int oy = pix / N, ox = pix - oy * N;
    const int f0 = blockIdx.y * BM;
    // This block's range [kt_begin, kt_end) of the reduction's iterations.
#if SPLIT_K > 1
    const int b0 = (blockIdx.z / SPLIT_K) * BN;
    const int kt_begin = min((int)(blockIdx.z % SPLIT_K) * KT_PER_SPLIT, KTILES);
    const int kt_end = min(kt_begin + KT_PER_SPLIT, KTILES);
#else
    const int b0 = blockIdx.z * BN;
    constexpr int kt_begin = 0, kt_end = KTILES;
#endif
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int tx = (warp % WARPS_PER_ROW) * WARP_X + lane % WARP_X;
    const int ty = (warp / WARPS_PER_ROW) * WARP_Y + lane / WARP_X;

    // Cooperative loads: VEC-wide word v = tid + i * THREADS of a tile, row-major, so that
    // consecutive threads read consecutive words of a row (coalesced) and, with BN / VEC >= 32,
    // a warp reads one patch row and hence one c_offsets entry (a constant-cache broadcast).
    // Word i of a thread sits at a thread-dependent base plus a compile-time offset (Tile::row,
    // Tile::col), so the loads need no index registers of their own.
    using TileA = Tile<BM>;
    using TileB = Tile<BN>;
    const int a_row0 = TileA::row0(tid), a_col0 = TileA::col0(tid);
    const int b_row0 = TileB::row0(tid), b_col0 = TileB::col0(tid);
    const float* a_src = w_t + f0 + a_row0 * FP + a_col0;
    // The patch origin of this output pixel; c_offsets[r] is added per patch row.
    const float* b_src = x_chwn + (oy * STRIDE * S + ox * STRIDE) * BP + b0 + b_col0;

    vec_t ra[LOADS_A], rb[LOADS_B];
    auto load_tile = [&](int kt) {
        const float* a = a_src + kt * (BK * FP);
#pragma unroll
        for (int i = 0; i < LOADS_A; ++i) {
            ra[i] = *reinterpret_cast<const vec_t*>(a + TileA::row(i) * FP + TileA::col(i));
        }
        const int* offsets = c_offsets + kt * BK + b_row0;
#pragma unroll
        for (int i = 0; i < LOADS_B; ++i) {
            rb[i] = *reinterpret_cast<const vec_t*>(patch_row(b_src, offsets[TileB::row(i)]) +
                                                    TileB::col(i));
        }
    };
    float* s_a_thread = s_a + a_row0 * BM + a_col0;
    float* s_b_thread = s_b + b_row0 * BN + b_col0;
    auto store_tile = [&](int stage) {
        float* a = s_a_thread + stage * (BK * BM);
        float* b = s_b_thread + stage * (BK * BN);
#pragma unroll
        for (int i = 0; i < LOADS_A; ++i) {
            *reinterpret_cast<vec_t*>(a + TileA::row(i) * BM + TileA::col(i)) = ra[i];
        }
#pragma unroll
        for (int i = 0; i < LOADS_B; ++i) {
            *reinterpret_cast<vec_t*>(b + TileB::row(i) * BN + TileB::col(i)) = rb[i];
        }
    };

    auto copy_tile = [&](int kt, int stage) {
        const float* a = a_src + kt * (BK * FP);
        float* sa = s_a_thread + stage * (BK * BM);
        // 16-byte copies skip L1 (cp_async.cuh): every word is read once per block, and reuse
        // between blocks happens in L2.
#pragma unroll
        for (int i = 0; i < LOADS_A; ++i) {
            cp_async::copy<VEC * 4>(sa + TileA::row(i) * BM + TileA::col(i),
                       a + TileA::row(i) * FP + TileA::col(i));
        }
        const int* offsets = c_offsets + kt * BK + b_row0;
        float* sb = s_b_thread + stage * (BK * BN);
#pragma unroll
        for (int i = 0; i < LOADS_B; ++i) {
            cp_async::copy<VEC * 4>(sb + TileB::row(i) * BN + TileB::col(i),
                       patch_row(b_src, offsets[TileB::row(i)]) + TileB::col(i));
        }
        cp_async::commit();
    };

    // Thread (tx, ty) owns filters g * 4 * THREADS_Y + 4 * ty + (0..3) for g < TM / 4 and images
    // h * 4 * THREADS_X + 4 * tx + (0..3) for h < TN / 4: float4 fragments, and a warp's reads of
    // one row are WARP_Y (resp. WARP_X) consecutive float4 words.
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    }
    float fa[2][TM], fb[2][TN];  // the second set only with fragment double buffering

#if ASYNC_COPY
    // The space's constraints give every split at least one iteration (kt_begin < kt_end).
    copy_tile(kt_begin, 0);
#pragma unroll 1
    for (int t = 0; t < kt_end - kt_begin; ++t) {
        const int kt = kt_begin + t, stage = t & 1;
        // Tile kt has landed for every thread, and every thread is done with tile kt - 1, whose
        // stage the next copy overwrites.
        cp_async::wait<0>();
        __syncthreads();
        if (kt + 1 < kt_end) copy_tile(kt + 1, stage ^ 1);  // in flight during the multiply
        RegisterTile::stage_pipelined<BK, BM, BN, BK * BM, BK * BN>(
            s_a, s_b, stage, ty, tx, fa, fb, acc);
    }
#elif DOUBLE_BUFFER
    load_tile(kt_begin);
    store_tile(0);
    __syncthreads();
#pragma unroll 1
    for (int t = 0; t < kt_end - kt_begin; ++t) {
        const int kt = kt_begin + t, stage = t & 1;
        const bool more = kt + 1 < kt_end;
        if (more) load_tile(kt + 1);  // in flight while this tile is multiplied
        RegisterTile::stage_pipelined<BK, BM, BN, BK * BM, BK * BN>(
            s_a, s_b, stage, ty, tx, fa, fb, acc);
        // The other stage was last read before the previous barrier: safe to overwrite.
        if (more) store_tile(stage ^ 1);
        __syncthreads();
    }
#else
#pragma unroll 1
    for (int kt = kt_begin; kt < kt_end; ++kt) {
        load_tile(kt);
        store_tile(0);
        __syncthreads();
        RegisterTile::rows<BK, BM, BN>(s_a, s_b, ty, tx, fa, fb, acc);
        __syncthreads();
    }
#endif

    // Each float4 store writes 4 consecutive images of one filter row: a warp writes WARP_X
    // consecutive float4 words per filter row, whole 32-byte sectors.
#pragma unroll
    for (int g = 0; g < TM / 4; ++g) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int f = f0 + g * 4 * THREADS_Y + 4 * ty + i;
            float* out = y_fhwn + (f * NN + pix) * BP + b0 + 4 * tx;
#pragma unroll
            for (int h = 0; h < TN / 4; ++h) {
                const float* v = acc[4 * g + i] + 4 * h;
#if SPLIT_K > 1
                float* o = out + h * 4 * THREADS_X;
                atomicAdd(o, v[0]), atomicAdd(o + 1, v[1]), atomicAdd(o + 2, v[2]);
                atomicAdd(o + 3, v[3]);
#else
                *reinterpret_cast<float4*>(out + h * 4 * THREADS_X) =
                    make_float4(v[0], v[1], v[2], v[3]);
#endif
            }
        }
    }
}
