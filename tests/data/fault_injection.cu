// The fault-injection family's kernel: FAULT picks how it misbehaves (codes in
// tests/fault_family.py); FAULT 0 and 1 are correct, 1 doing its work REPEAT times over.
// Problem defines as reference_conv2d: B, C, N, K, F, STRIDE; tunable BLOCK.
#define S ((N - 1) * STRIDE + K)

#if FAULT == 7
#error "injected compile error"
#endif

__device__ __forceinline__ float output_at(const float* x, const float* w, long long i) {
    const int ox = (int)(i % N), oy = (int)((i / N) % N);
    const int f = (int)((i / ((long long)N * N)) % F), b = (int)(i / ((long long)N * N * F));
    float acc = 0.0f;
    for (int c = 0; c < C; ++c)
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx)
                acc += x[((long long)(b * C + c) * S + oy * STRIDE + ky) * S + ox * STRIDE + kx] *
                       w[((f * C + c) * K + ky) * K + kx];
    return acc;
}

extern "C" __global__ void __launch_bounds__(BLOCK) fault_injection(const float* x, const float* w,
                                                                    float* y) {
    const long long total = (long long)B * F * N * N;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
#if FAULT == 4  // illegal address: poisons the context
    if (i == 0) y[(long long)1 << 40] = 1.0f;
#elif FAULT == 5  // never finishes; the clock is never negative, the compiler cannot know
    while (clock64() >= 0) {
    }
#endif
    if (i >= total) return;
#if FAULT == 3  // leaves the last output unwritten: the NaN poison must show it
    if (i == total - 1) return;
#endif
    float value = output_at(x, w, i);
#if FAULT == 1  // correct but slow: the same sum REPEAT times (the clobber forbids reusing it)
    for (int r = 1; r < REPEAT; ++r) {
        asm volatile("" ::: "memory");
        value = 0.5f * (value + output_at(x, w, i));  // exact: the mean of two equal floats
    }
#elif FAULT == 2  // a wrong result that is close: off by one part in a thousand
    value *= 1.001f;
#endif
    y[i] = value;
}
