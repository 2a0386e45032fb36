// Float64 reference for 2D convolution plus a per-filter bias (the smem_channels family's problem):
// valid cross-correlation over a pre-padded input, then y[b][f] += bias[f]. One thread per output,
// accumulating in double. Defines: B, C, N, K, F, STRIDE.
#define S ((N - 1) * STRIDE + K)

extern "C" __global__ void reference_conv2d_bias(const float* __restrict__ x,
                                                 const float* __restrict__ w,
                                                 const float* __restrict__ bias,
                                                 double* __restrict__ y) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)B * F * N * N) return;
    const int ox = (int)(i % N);
    const int oy = (int)((i / N) % N);
    const int f = (int)((i / ((long long)N * N)) % F);
    const int b = (int)(i / ((long long)N * N * F));
    double sum = (double)bias[f];
    for (int c = 0; c < C; ++c) {
        const float* plane = x + ((long long)b * C + c) * S * S + (long long)oy * STRIDE * S;
        const float* taps = w + ((long long)f * C + c) * K * K;
        for (int ky = 0; ky < K; ++ky) {
            for (int kx = 0; kx < K; ++kx) {
                sum += (double)plane[(long long)ky * S + ox * STRIDE + kx] * (double)taps[ky * K + kx];
            }
        }
    }
    y[i] = sum;
}
