// tiled2d: the parameter space of Kernel Tuner's 2D convolution example (one channel, one filter),
// in our own code. A block of BLOCK_SIZE_X x BLOCK_SIZE_Y threads computes an output tile of
// (BLOCK_SIZE_X * TILE_SIZE_X) x (BLOCK_SIZE_Y * TILE_SIZE_Y) pixels; each thread owns
// TILE_SIZE_X x TILE_SIZE_Y outputs strided by the block size (so a warp's loads and stores stay
// contiguous). The input tile plus its K - 1 halo is staged in shared memory, optionally padded
// against bank conflicts (USE_PADDING) and loaded through the read-only cache (READ_ONLY); the
// K x K filter lives in constant memory (c_filter), read by all lanes at one address.
// Beyond the example, blockIdx.z walks B images x F filters and the tile loop sums C channels
// (x NCHW, filters FCKK, y NFHW), so the family also runs at the GPU tests' odd shapes; with
// B = C = F = 1, the benchmark's problem, that is one pass, as in the example.
//
// One spelling for two tuners: every tunable is an UPPER_SNAKE macro. autotune passes them as
// -D flags (with the problem's B, C, N, K, F, STRIDE); Kernel Tuner prepends "#define NAME value"
// for each tune_params entry (N and K given there as one-value parameters; B, C, F default to 1)
// and is told block_size_names=["BLOCK_SIZE_X", "BLOCK_SIZE_Y", "BLOCK_SIZE_Z"].

#ifndef N
#error "tiled2d needs N (output side) and K (filter side)"
#endif
#ifndef B
#define B 1
#endif
#ifndef C
#define C 1
#endif
#ifndef F
#define F 1
#endif

#define S (N + K - 1)  // input side (valid cross-correlation over a pre-padded input)
#define TILE_W (BLOCK_SIZE_X * TILE_SIZE_X)
#define TILE_H (BLOCK_SIZE_Y * TILE_SIZE_Y)
#define SH_W (TILE_W + K - 1)
#define SH_H (TILE_H + K - 1)
// Padding makes the shared row stride congruent to BLOCK_SIZE_X modulo the 32 banks: a warp that
// spans several rows of a narrow block then reads 32 consecutive banks for every (i, j) of the
// filter loop. Without padding the stride is the bare row.
#if USE_PADDING
#define SH_STRIDE (SH_W + ((BLOCK_SIZE_X - SH_W) % 32 + 32) % 32)
#else
#define SH_STRIDE SH_W
#endif

#if READ_ONLY
#define LOAD(p) __ldg(p)
#else
#define LOAD(p) (*(p))
#endif

__constant__ float c_filter[F * C * K * K];

// The bound lets ptxas budget registers for the real block size, so every configuration whose
// threads and shared memory fit also launches (it spills rather than fail for lack of registers).
extern "C" __global__ void __launch_bounds__(BLOCK_SIZE_X * BLOCK_SIZE_Y)
tiled2d(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float sh[SH_H * SH_STRIDE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = blockIdx.x * TILE_W, y0 = blockIdx.y * TILE_H;
    const int img = blockIdx.z / F, f = blockIdx.z % F;

    float acc[TILE_SIZE_Y][TILE_SIZE_X];
#pragma unroll
    for (int a = 0; a < TILE_SIZE_Y; ++a) {
#pragma unroll
        for (int b = 0; b < TILE_SIZE_X; ++b) acc[a][b] = 0.0f;
    }

#pragma unroll 1
    for (int c = 0; c < C; ++c) {
        const float* plane = x + ((long long)img * C + c) * S * S;
        // Stage the input tile and its halo; past the input edge (partial tiles) read zeros, which
        // only feed outputs that are never stored.
        for (int i = ty; i < SH_H; i += BLOCK_SIZE_Y) {
            const int gy = y0 + i;
            for (int j = tx; j < SH_W; j += BLOCK_SIZE_X) {
                const int gx = x0 + j;
                sh[i * SH_STRIDE + j] =
                    (gy < S && gx < S) ? LOAD(plane + (long long)gy * S + gx) : 0.0f;
            }
        }
        __syncthreads();

        const float* w_fc = c_filter + (f * C + c) * K * K;
#pragma unroll
        for (int i = 0; i < K; ++i) {
#pragma unroll
            for (int j = 0; j < K; ++j) {
                const float w = w_fc[i * K + j];
#pragma unroll
                for (int a = 0; a < TILE_SIZE_Y; ++a) {
#pragma unroll
                    for (int b = 0; b < TILE_SIZE_X; ++b) {
                        acc[a][b] = fmaf(
                            sh[(ty + a * BLOCK_SIZE_Y + i) * SH_STRIDE + tx + b * BLOCK_SIZE_X + j], w,
                            acc[a][b]);
                    }
                }
            }
        }
        if (C > 1) __syncthreads();  // the tile is overwritten by the next channel
    }

#pragma unroll
    for (int a = 0; a < TILE_SIZE_Y; ++a) {
        const int oy = y0 + ty + a * BLOCK_SIZE_Y;
#pragma unroll
        for (int b = 0; b < TILE_SIZE_X; ++b) {
            const int ox = x0 + tx + b * BLOCK_SIZE_X;
            if (oy < N && ox < N) y[((long long)blockIdx.z * N + oy) * N + ox] = acc[a][b];
        }
    }
}
