// Kernels that fail on purpose, for the evaluator's fault tests. Defines as reference_conv2d.
#define S ((N - 1) * STRIDE + K)

// Writes nothing but zeros: a wrong result.
extern "C" __global__ void zeros(const float* x, const float* w, float* y) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long long)B * F * N * N) y[i] = 0.0f;
}

// Leaves the last output unwritten: the NaN poison must catch it.
extern "C" __global__ void skip_last(const float* x, const float* w, float* y) {
    long long total = (long long)B * F * N * N;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total - 1) return;
    const int ox = (int)(i % N), oy = (int)((i / N) % N);
    const int f = (int)((i / ((long long)N * N)) % F), b = (int)(i / ((long long)N * N * F));
    float acc = 0.0f;
    for (int c = 0; c < C; ++c)
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx)
                acc += x[((long long)(b * C + c) * S + oy * STRIDE + ky) * S + ox * STRIDE + kx] *
                       w[((f * C + c) * K + ky) * K + kx];
    y[i] = acc;
}

// Writes far out of bounds: an illegal address, which poisons the CUDA context.
extern "C" __global__ void out_of_bounds(const float* x, const float* w, float* y) {
    y[(long long)1 << 40] = 1.0f;
}

// Never finishes: the clock is never negative, but the compiler cannot know that.
extern "C" __global__ void spin(const float* x, const float* w, float* y) {
    while (clock64() >= 0) {
    }
}
