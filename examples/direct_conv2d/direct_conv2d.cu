// A direct NCHW convolution brought from outside the package: one thread per output element,
// a BLOCK_X x BLOCK_Y block of outputs per thread block, the K x K window unrolled UNROLL-fold.
// Problem defines (from the conv2d kind): B, C, N, K, F, STRIDE. Tunables: BLOCK_X, BLOCK_Y,
// UNROLL. The input is pre-padded: its side is (N - 1) * STRIDE + K.
#define SIDE ((N - 1) * STRIDE + K)

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
direct_conv2d(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
    const int ox = blockIdx.x * BLOCK_X + threadIdx.x;
    const int oy = blockIdx.y * BLOCK_Y + threadIdx.y;
    const int f = blockIdx.z % F;
    const int b = blockIdx.z / F;
    if (ox >= N || oy >= N) return;
    const float* wf = w + (long long)f * C * K * K;
    const float* xb = x + (long long)b * C * SIDE * SIDE + (long long)(oy * STRIDE) * SIDE
                      + ox * STRIDE;
    float acc = 0.0f;
    for (int c = 0; c < C; ++c) {
        const float* xc = xb + (long long)c * SIDE * SIDE;
        const float* wc = wf + c * K * K;
#pragma unroll UNROLL
        for (int t = 0; t < K * K; ++t) {
            acc = fmaf(xc[(t / K) * SIDE + t % K], wc[t], acc);
        }
    }
    y[(((long long)b * F + f) * N + oy) * N + ox] = acc;
}
