// SGEMM for fully connected layers (course report 001: tiled shared-memory matrix multiplication),
// C[M][N] = A[M][K] @ B[K][N], FP32 row-major, FP32 FMA accumulation.
//
// A block computes a BM x BN tile of C (of one K slice when SPLIT_K > 1). It walks K in steps of
// BK: the threads copy a BM x BK tile of A and a BK x BN tile of B into shared memory with VEC-wide
// global loads (A transposed on the way, so that both operands are read along M and N), then every
// thread accumulates a TM x TN sub-tile of C in registers (register blocking): per k, TM values of
// A and TN of B come from shared memory as float4/float2 fragments and feed TM * TN FMAs.
// A thread's rows are TM / WM groups of WM adjacent rows, the groups TY * WM rows apart (columns
// likewise), so that a warp's fragment reads are adjacent vectors: no bank conflicts, few
// wavefronts. With DOUBLE_BUFFER the next tiles are loaded from global memory into registers while
// the current ones are computed, and stored into the second shared buffer: one barrier per step.
// With SPLIT_K > 1 the K range is cut into SPLIT_K slices (grid z); each writes its partial tile
// to a scratch array and sgemm_reduce sums the slices into C (small M: more blocks than tiles).
//
// Problem defines: M, N, K. Tunables: BM, BN, BK, TM, TN, VEC, DOUBLE_BUFFER, SPLIT_K, WARP_TX,
// MIN_BLOCKS. The search space guarantees: BM % TM == 0, BN % TN == 0, threads a multiple of 32,
// BK % VEC == 0, BN % VEC == 0, K % VEC == 0, N % VEC == 0, TX % WARP_TX == 0 and
// TY % (32 / WARP_TX) == 0.

#include "register_tile.cuh"
#include "vector.cuh"

#define TX (BN / TN)  // threads along N
#define TY (BM / TM)  // threads along M
#define THREADS (TX * TY)
#define WM ((TM % 4 == 0) ? 4 : (TM % 2 == 0) ? 2 : 1)  // fragment vector width along M
#define WN ((TN % 4 == 0) ? 4 : (TN % 2 == 0) ? 2 : 1)  // and along N
// Four floats of padding per row of the transposed A tile: the scalar stores of one warp, which
// walk 16 rows at two K offsets, then fall in distinct banks. Keeps float4 alignment.
#define A_STRIDE (BM + 4)
#define B_STRIDE BN
#define A_VECS (BM * BK / VEC)  // VEC-wide global loads per A tile
#define B_VECS (BK * BN / VEC)
#define A_LOADS ((A_VECS + THREADS - 1) / THREADS)  // per thread
#define B_LOADS ((B_VECS + THREADS - 1) / THREADS)
#define BUFFERS (DOUBLE_BUFFER ? 2 : 1)
// K range of one slice, whole BK steps.
#define K_SLICE ((((K + SPLIT_K - 1) / SPLIT_K) + BK - 1) / BK * BK)

// Global tiles -> registers. Out-of-range vectors (edges of M, N and of the K slice) read as
// zeros; since K, N and the slice bounds are multiples of VEC, a vector is wholly in or out.
__device__ __forceinline__ void load_tiles(const float* __restrict__ a, const float* __restrict__ b,
                                           int bm, int bn, int k0, int k_end, int tid,
                                           float (&ra)[A_LOADS][VEC], float (&rb)[B_LOADS][VEC]) {
    using vt = typename Vec<VEC>::type;
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
        const int v = tid + i * THREADS;
        const int row = v / (BK / VEC);
        const int kk = (v % (BK / VEC)) * VEC;
        const int gm = bm + row, gk = k0 + kk;
        if ((A_VECS % THREADS == 0 || v < A_VECS) && (M % BM == 0 || gm < M) && gk < k_end) {
            Vec<VEC>::unpack(*reinterpret_cast<const vt*>(a + (long long)gm * K + gk), ra[i]);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; ++e) ra[i][e] = 0.0f;
        }
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
        const int v = tid + i * THREADS;
        const int kk = v / (BN / VEC);
        const int col = (v % (BN / VEC)) * VEC;
        const int gk = k0 + kk, gn = bn + col;
        if ((B_VECS % THREADS == 0 || v < B_VECS) && gk < k_end && (N % BN == 0 || gn < N)) {
            Vec<VEC>::unpack(*reinterpret_cast<const vt*>(b + (long long)gk * N + gn), rb[i]);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; ++e) rb[i][e] = 0.0f;
        }
    }
}

// Registers -> one shared buffer: A transposed (as[k][m]), B as it is (bs[k][n]).
__device__ __forceinline__ void store_tiles(float* as, float* bs, int tid,
                                            const float (&ra)[A_LOADS][VEC],
                                            const float (&rb)[B_LOADS][VEC]) {
    using vt = typename Vec<VEC>::type;
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
        const int v = tid + i * THREADS;
        if (A_VECS % THREADS == 0 || v < A_VECS) {
            const int row = v / (BK / VEC);
            const int kk = (v % (BK / VEC)) * VEC;
#pragma unroll
            for (int e = 0; e < VEC; ++e) as[(kk + e) * A_STRIDE + row] = ra[i][e];
        }
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
        const int v = tid + i * THREADS;
        if (B_VECS % THREADS == 0 || v < B_VECS) {
            const int kk = v / (BN / VEC);
            const int col = (v % (BN / VEC)) * VEC;
            *reinterpret_cast<vt*>(bs + kk * B_STRIDE + col) = Vec<VEC>::pack(rb[i]);
        }
    }
}

// One BK step: TM x TN outer products from WM-/WN-wide shared fragments (register_tile.cuh).
using RegisterTile = register_tile::Loop<TM, TN, WM, WN, TY * WM, TX * WN>;
__device__ __forceinline__ void compute_tile(const float* as, const float* bs, int tx, int ty,
                                             float (&acc)[TM][TN]) {
    RegisterTile::rows<BK, A_STRIDE, B_STRIDE>(as, bs, ty, tx, acc);
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sgemm(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c) {
    __shared__ __align__(16) float as_all[BUFFERS][BK * A_STRIDE];
    __shared__ __align__(16) float bs_all[BUFFERS][BK * B_STRIDE];

    const int tid = threadIdx.x;
    // A warp covers WARP_TX threads along N and 32 / WARP_TX along M: the shape of the warp sets
    // how many distinct fragments (wavefronts) one shared read needs.
    const int warp = tid / 32, lane = tid % 32;
    const int tx = (warp % (TX / WARP_TX)) * WARP_TX + lane % WARP_TX;
    const int ty = (warp / (TX / WARP_TX)) * (32 / WARP_TX) + lane / WARP_TX;
    const int bn = blockIdx.x * BN;
    const int bm = blockIdx.y * BM;
    const int k_begin = blockIdx.z * K_SLICE;
    const int k_end = min(K, k_begin + K_SLICE);
    const int steps = k_end > k_begin ? (k_end - k_begin + BK - 1) / BK : 0;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    float ra[A_LOADS][VEC], rb[B_LOADS][VEC];
#if DOUBLE_BUFFER
    if (steps > 0) {
        load_tiles(a, b, bm, bn, k_begin, k_end, tid, ra, rb);
        store_tiles(as_all[0], bs_all[0], tid, ra, rb);
    }
    __syncthreads();
    for (int s = 0; s < steps; ++s) {
        const int cur = s & 1;
        // The next tiles' global loads are in flight while this step computes. Unconditional on
        // purpose: past the last step they read nothing and store zeros to the idle buffer; a
        // shared `if` around load and store lets the compiler sink the loads below the compute,
        // which exposes their latency again.
        load_tiles(a, b, bm, bn, k_begin + (s + 1) * BK, k_end, tid, ra, rb);
        compute_tile(as_all[cur], bs_all[cur], tx, ty, acc);
        // The other buffer was last read in step s - 1, before the barrier that ended it.
        store_tiles(as_all[cur ^ 1], bs_all[cur ^ 1], tid, ra, rb);
        __syncthreads();
    }
#else
    for (int s = 0; s < steps; ++s) {
        load_tiles(a, b, bm, bn, k_begin + s * BK, k_end, tid, ra, rb);
        __syncthreads();  // everyone is done reading the previous tiles
        store_tiles(as_all[0], bs_all[0], tid, ra, rb);
        __syncthreads();
        compute_tile(as_all[0], bs_all[0], tx, ty, acc);
    }
#endif

    // SPLIT_K > 1: slice z's partial C goes to its own M x N plane of the scratch array.
    float* out = c + (long long)blockIdx.z * M * N;
    using vn = typename Vec<WN>::type;
#pragma unroll
    for (int i = 0; i < TM / WM; ++i) {
#pragma unroll
        for (int r = 0; r < WM; ++r) {
            const int row = bm + i * TY * WM + ty * WM + r;
            if (M % BM != 0 && row >= M) continue;
#pragma unroll
            for (int j = 0; j < TN / WN; ++j) {
                const int col = bn + j * TX * WN + tx * WN;
                float* dst = out + (long long)row * N + col;
                if (N % WN == 0 && (N % BN == 0 || col + WN <= N)) {
                    *reinterpret_cast<vn*>(dst) = Vec<WN>::pack(&acc[i * WM + r][j * WN]);
                } else {
#pragma unroll
                    for (int e = 0; e < WN; ++e)
                        if (col + e < N) dst[e] = acc[i * WM + r][j * WN + e];
                }
            }
        }
    }
}

// C = sum over the SPLIT_K slices of the partial products; one thread per element of C.
extern "C" __global__ void sgemm_reduce(const float* __restrict__ partial, float* __restrict__ c) {
    const long long total = (long long)M * N;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    float sum = 0.0f;
#pragma unroll
    for (int z = 0; z < SPLIT_K; ++z) sum += partial[z * total + i];
    c[i] = sum;
}
