// Float64 reference for 2D convolution (valid cross-correlation over a pre-padded input).
// One thread per output element; accumulates in double so the check measures the tuned
// kernel's error, not the reference's. Defines: B, C, N, K, F, STRIDE.
#define S ((N - 1) * STRIDE + K)

extern "C" __global__ void reference_conv2d(const float* __restrict__ x,
                                            const float* __restrict__ w,
                                            double* __restrict__ y) {
    const long long total = (long long)B * F * N * N;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int ox = (int)(i % N);
    const int oy = (int)((i / N) % N);
    const int f = (int)((i / ((long long)N * N)) % F);
    const int b = (int)(i / ((long long)N * N * F));
    double acc = 0.0;
    for (int c = 0; c < C; ++c) {
        const float* xc = x + ((long long)b * C + c) * S * S;
        const float* wc = w + ((long long)f * C + c) * K * K;
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx)
                acc += (double)xc[(long long)(oy * STRIDE + ky) * S + ox * STRIDE + kx] *
                       (double)wc[ky * K + kx];
    }
    y[i] = acc;
}
