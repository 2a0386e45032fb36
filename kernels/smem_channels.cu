// The course report's shared-memory convolution, parallel across input channels: a block computes
// a TILE_W x TILE_H output tile of one image for FILTERS_PER_BLOCK filters, summed over one group
// of CH_PER_BLOCK input channels only. Every group's block adds its partial sums into y with
// atomicAdd, so y is zeroed first (smem_channels_zero) and the bias, kept in constant memory, is
// added afterwards by a kernel of its own (smem_channels_bias), as in the report. The three
// launches together are the timed run.
//
// The block is TILE_W x THREADS_Y threads: it loads the input tile of a channel into shared memory
// in strips of THREADS_Y rows (the report's threadsPerSubblock), CH_STAGE channels per barrier,
// and a thread computes the TILE_H / THREADS_Y outputs of its column that are THREADS_Y rows apart.
// The input tile is shared by all FILTERS_PER_BLOCK filters (the reuse the report puts the input in
// shared memory for); filters are read from global memory or, with FILTER_IN_SMEM, staged with the
// input.
// Problem defines: B, C, N, K, F, STRIDE. Tunables: TILE_W, TILE_H, THREADS_Y, CH_PER_BLOCK,
// CH_STAGE, FILTERS_PER_BLOCK, FILTER_IN_SMEM.

#define S ((N - 1) * STRIDE + K)  // input side
#define THREADS (TILE_W * THREADS_Y)
#define ROWS (TILE_H / THREADS_Y)             // outputs per thread and filter
#define IN_W ((TILE_W - 1) * STRIDE + K)      // input tile behind TILE_W output columns
#define IN_H ((TILE_H - 1) * STRIDE + K)
#define TILES_X ((N + TILE_W - 1) / TILE_W)
#define TILES_Y ((N + TILE_H - 1) / TILE_H)
#define FPB FILTERS_PER_BLOCK

#if TILE_H % THREADS_Y != 0
#error "TILE_H must be a multiple of THREADS_Y"
#endif
#if CH_PER_BLOCK % CH_STAGE != 0
#error "CH_PER_BLOCK must be a multiple of CH_STAGE"
#endif

// Registers a thread may use: the register file over 512 threads (__launch_bounds__ below asks
// for that many per multiprocessor), or over the block when it is larger.
#define REG_BUDGET (65536 / ((THREADS > 512) ? THREADS : 512))
// ptxas hoists every load of an unrolled tap loop ahead of its FMAs: a tap holds ROWS input and FPB
// filter values live. The filter rows are unrolled as well only when all K * K taps' values fit
// the budget beside the accumulators; otherwise one row of K taps at a time (the space admits
// only configurations where that fits).
#define KY_UNROLL ((K * K * (ROWS + FPB) + FPB * ROWS + 32 <= REG_BUDGET) ? K : 1)

__constant__ float c_bias[F];

extern "C" __global__ void __launch_bounds__(256) smem_channels_zero(float* __restrict__ y) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long long)B * F * N * N) y[i] = 0.0f;
}

extern "C" __global__ void __launch_bounds__(256) smem_channels_bias(float* __restrict__ y) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long long)B * F * N * N) y[i] += c_bias[(int)((i / (N * N)) % F)];
}

// 512 threads' worth of blocks per multiprocessor (REG_BUDGET). With the thread count alone ptxas
// aims at a full SM of small blocks and squeezes a 64-thread block into 32 registers, spilling;
// with one block it takes up to 255 and leaves one block of a few warps per multiprocessor.
#define MIN_BLOCKS ((THREADS >= 512) ? 1 : 512 / THREADS)

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
smem_channels(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
    __shared__ float s_in[CH_STAGE][IN_H][IN_W];
#if FILTER_IN_SMEM
    __shared__ float s_w[CH_STAGE][FPB][K * K];
#endif
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    // blockIdx.x enumerates (tile, channel group) with the group slowest, so that the blocks that
    // run at the same time add into different outputs and their atomics rarely collide.
    const int tile = blockIdx.x % (TILES_X * TILES_Y);
    const int group = blockIdx.x / (TILES_X * TILES_Y);
    const int tile_x = (tile % TILES_X) * TILE_W;
    const int tile_y = (tile / TILES_X) * TILE_H;
    const int f0 = blockIdx.y * FPB;
    const int b = blockIdx.z;
    const int c_begin = group * CH_PER_BLOCK;
    const int c_end = min(C, c_begin + CH_PER_BLOCK);

    const float* img = x + (long long)b * C * S * S;
    const int ix0 = tile_x * STRIDE;
    const int iy0 = tile_y * STRIDE;

    float acc[FPB][ROWS];
#pragma unroll
    for (int f = 0; f < FPB; ++f) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) acc[f][r] = 0.0f;
    }

#pragma unroll 1
    for (int c0 = c_begin; c0 < c_end; c0 += CH_STAGE) {
        __syncthreads();  // every thread is done with the previous stage
        // Strips of THREADS_Y rows, TILE_W columns at a time: coalesced along a row. Past the
        // input's edge (partial tiles) and past the last channel the tile holds zeros, which only
        // feed outputs that are never stored or add nothing.
#pragma unroll
        for (int cs = 0; cs < CH_STAGE; ++cs) {
            const int c = c0 + cs;
            const float* plane = img + (long long)min(c, C - 1) * S * S;
            for (int r = ty; r < IN_H; r += THREADS_Y) {
                const int iy = iy0 + r;
                for (int col = tx; col < IN_W; col += TILE_W) {
                    const int ix = ix0 + col;
                    s_in[cs][r][col] =
                        (c < c_end && iy < S && ix < S) ? plane[(long long)iy * S + ix] : 0.0f;
                }
            }
        }
#if FILTER_IN_SMEM
        for (int e = ty * TILE_W + tx; e < CH_STAGE * FPB * K * K; e += THREADS) {
            const int tap = e % (K * K);
            const int f = (e / (K * K)) % FPB;
            const int cs = e / (FPB * K * K);
            const int c = c0 + cs;  // past the group: any taps do, the tile holds zeros there
            // Filters past F are clamped to the last one: their sums are computed but not stored.
            const int fg = min(f0 + f, F - 1);
            s_w[cs][f][tap] = w[((long long)fg * C + min(c, C - 1)) * K * K + tap];
        }
#endif
        __syncthreads();

        // Channels one after another: unrolling them too only lets ptxas hoist more filter loads.
#pragma unroll 1
        for (int cs = 0; cs < CH_STAGE; ++cs) {
#if !FILTER_IN_SMEM
            // A channel past the group reads the last channel's taps: its tile holds zeros.
            const int c = min(c0 + cs, C - 1);
#endif
#pragma unroll KY_UNROLL
            for (int ky = 0; ky < K; ++ky) {
#pragma unroll
                for (int kx = 0; kx < K; ++kx) {
                    float v[ROWS];
#pragma unroll
                    for (int r = 0; r < ROWS; ++r)
                        v[r] = s_in[cs][(ty + r * THREADS_Y) * STRIDE + ky][tx * STRIDE + kx];
#pragma unroll
                    for (int f = 0; f < FPB; ++f) {
#if FILTER_IN_SMEM
                        const float wv = s_w[cs][f][ky * K + kx];
#else
                        const int fg = min(f0 + f, F - 1);
                        const float wv = __ldg(&w[((long long)fg * C + c) * K * K + ky * K + kx]);
#endif
#pragma unroll
                        for (int r = 0; r < ROWS; ++r) acc[f][r] = fmaf(v[r], wv, acc[f][r]);
                    }
                }
            }
        }
    }

    const int ox = tile_x + tx;
    if (ox >= N) return;
#pragma unroll
    for (int f = 0; f < FPB; ++f) {
        if (f0 + f >= F) break;
        float* out = y + ((long long)b * F + f0 + f) * N * N;
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            const int oy = tile_y + ty + r * THREADS_Y;
            if (oy < N) atomicAdd(out + (long long)oy * N + ox, acc[f][r]);
        }
    }
}
