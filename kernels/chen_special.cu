// Chen et al. (DAC 2017), Algorithm 1: direct convolution for the special case of one input channel.
// A block of W / VEC threads computes a W-wide, H-tall tile of output pixels of one image for all F
// filters, moving down the tile one row at a time. Each thread owns VEC contiguous output columns
// (float, float2 or float4: the bank-width model W_SMB = n * W_CD with n = VEC) and keeps a
// K x (K + VEC - 1) window of input pixels in registers. Input rows pass through a ring of K rows in
// shared memory; the next row is prefetched from global memory into registers while the current one
// is computed. Filters live in constant memory, read by a whole warp at one address (broadcast).
// Problem defines: N, K, F, B, STRIDE (= 1). Tunables: W, H, VEC.

#if STRIDE != 1
#error "chen_special computes stride 1 only"
#endif

#define S (N + K - 1)                  // input side
#define THREADS (W / VEC)
#define SPAN (K + VEC - 1)             // input columns behind one thread's VEC outputs
#define VECS ((SPAN + VEC - 1) / VEC)  // aligned VEC-wide shared loads that cover SPAN
#define ROW (W + (VECS - 1) * VEC)     // shared row: the last thread's last vector ends here
#define PER_THREAD ((ROW + THREADS - 1) / THREADS)  // global loads per thread and input row

// A fully unrolled filter loop lets every FMA take its filter word straight from the constant
// bank; past about 8K FMAs the code outgrows the instruction cache, so large F unroll by 4 only.
#define F_UNROLL ((F * K * K * VEC <= 8192) ? F : 4)

__constant__ float c_filter[F * K * K];

// The VEC-wide unit a thread loads, computes and stores (the bank-width model's n elements).
#include "vector.cuh"
using vec_t = Vec<VEC>::type;

// Tile columns 0 .. ROW-1 of one input row, as coalesced scalar loads (a row starts at any
// column, so it is not VEC-aligned in global memory). Columns past the input read as zero: they
// only feed outputs right of N, which are never stored. Rows are always inside the input.
__device__ __forceinline__ void load_row(const float* __restrict__ row, int x0,
                                         float (&buf)[PER_THREAD]) {
#pragma unroll
    for (int p = 0; p < PER_THREAD; ++p) {
        const int e = threadIdx.x + p * THREADS;
        buf[p] = (e < ROW && x0 + e < S) ? row[x0 + e] : 0.0f;
    }
}

__device__ __forceinline__ void store_row(float* srow, const float (&buf)[PER_THREAD]) {
#pragma unroll
    for (int p = 0; p < PER_THREAD; ++p) {
        const int e = threadIdx.x + p * THREADS;
        if (e < ROW) srow[e] = buf[p];
    }
}

// One row of the register window from shared memory, as aligned VEC-wide loads: thread t's
// columns start at t * VEC, so consecutive threads read consecutive vectors (no bank conflicts).
__device__ __forceinline__ void read_window_row(const float* srow, float (&dst)[SPAN]) {
    const vec_t* src = reinterpret_cast<const vec_t*>(srow) + threadIdx.x;
#pragma unroll
    for (int q = 0; q < VECS; ++q) {
        float t[VEC];
        Vec<VEC>::unpack(src[q], t);
#pragma unroll
        for (int c = 0; c < VEC; ++c) {
            if (q * VEC + c < SPAN) dst[q * VEC + c] = t[c];
        }
    }
}

// One block per multiprocessor is enough to launch: without that promise ptxas trims registers
// towards a higher occupancy target and spills the window.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
chen_special(const float* __restrict__ x, float* __restrict__ y) {
    // A ring of K input rows; tile row i lives in slot i % K.
    __shared__ __align__(16) float s_rows[K][ROW];

    const int x0 = blockIdx.x * W;  // first output column of the tile, and first input column
    const int y0 = blockIdx.y * H;
    const int ox = x0 + threadIdx.x * VEC;
    const float* img = x + (long long)blockIdx.z * S * S;
    float* out = y + (long long)blockIdx.z * F * N * N;

    // Line 1: the first K input rows of the tile into shared memory.
    float pf[PER_THREAD];
#pragma unroll 1
    for (int i = 0; i < K; ++i) {
        load_row(img + (long long)(y0 + i) * S, x0, pf);
        store_row(s_rows[i], pf);
    }
    __syncthreads();

    // Line 3: the first K - 1 rows of each thread's window into registers.
    float win[K][SPAN];
#pragma unroll
    for (int i = 0; i < K - 1; ++i) read_window_row(s_rows[i], win[i]);

    // The bottom tile may be partial; `rows` is the same for the whole block, so the barriers
    // below are reached by every thread or by none.
    const int rows = min(H, N - y0);
#pragma unroll 1
    for (int r = 0; r < rows; ++r) {
        const int newest = r + K - 1;  // tile input row that completes the window of output row r
        const bool more = r + 1 < rows;
        // Line 5: prefetch the next input row; its latency hides behind the FMAs below.
        if (more) load_row(img + (long long)(y0 + newest + 1) * S, x0, pf);
        // Line 6: the newest window row from shared memory.
        read_window_row(s_rows[newest % K], win[K - 1]);

        // Lines 7-8: VEC outputs for every filter; all lanes read the same filter word.
        float* dst_row = out + (long long)(y0 + r) * N + ox;
#pragma unroll F_UNROLL
        for (int f = 0; f < F; ++f) {
            float acc[VEC];
#pragma unroll
            for (int v = 0; v < VEC; ++v) acc[v] = 0.0f;
#pragma unroll
            for (int i = 0; i < K; ++i) {
#pragma unroll
                for (int j = 0; j < K; ++j) {
                    const float wv = c_filter[(f * K + i) * K + j];
#pragma unroll
                    for (int v = 0; v < VEC; ++v) acc[v] = fmaf(win[i][j + v], wv, acc[v]);
                }
            }
            float* dst = dst_row + (long long)f * N * N;
            if constexpr (VEC > 1 && N % VEC == 0) {
                // ox and N are multiples of VEC: the vector is aligned and wholly in or out.
                if (ox < N) *reinterpret_cast<vec_t*>(dst) = Vec<VEC>::pack(acc);
            } else {
#pragma unroll
                for (int v = 0; v < VEC; ++v) {
                    if (ox + v < N) dst[v] = acc[v];
                }
            }
        }

        if (more) {
            // Line 9. With K = 1 the slot refilled next is the one just read; with K > 1 the
            // barrier is redundant but kept, as in the paper.
            __syncthreads();
            store_row(s_rows[(newest + 1) % K], pf);  // line 10
            __syncthreads();  // line 11
        }
        // Slide the window down one row.
#pragma unroll
        for (int i = 0; i + 1 < K; ++i) {
#pragma unroll
            for (int j = 0; j < SPAN; ++j) win[i][j] = win[i + 1][j];
        }
    }
}
