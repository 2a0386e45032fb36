// Naive direct convolution (the course report's baseline): one thread per output element,
// looping over C, K, K and reading input and filters straight from global memory.
// Problem defines: B, C, N, K, F, STRIDE. Tunables: BLOCK_X, BLOCK_Y, FILTER_IN_CONST.
#define S ((N - 1) * STRIDE + K)

#if FILTER_IN_CONST
__constant__ float c_filter[F * C * K * K];
#endif

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
direct_naive(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
    const int ox = blockIdx.x * BLOCK_X + threadIdx.x;
    const int oy = blockIdx.y * BLOCK_Y + threadIdx.y;
    const int f = blockIdx.z % F;
    const int b = blockIdx.z / F;
    if (ox >= N || oy >= N) return;
#if FILTER_IN_CONST
    const float* wf = c_filter + (long long)f * C * K * K;
#else
    const float* wf = w + (long long)f * C * K * K;
#endif
    const float* xb = x + (long long)b * C * S * S + (long long)(oy * STRIDE) * S + ox * STRIDE;
    float acc = 0.0f;
    for (int c = 0; c < C; ++c) {
        for (int ky = 0; ky < K; ++ky) {
            for (int kx = 0; kx < K; ++kx) {
                acc = fmaf(xb[(long long)c * S * S + ky * S + kx], wf[(c * K + ky) * K + kx], acc);
            }
        }
    }
    y[(((long long)b * F + f) * N + oy) * N + ox] = acc;
}
