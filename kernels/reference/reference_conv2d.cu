// Float64 reference for 2D convolution (valid cross-correlation over a pre-padded input).
// One thread per output element; accumulates in double so the check measures the tuned
// kernel's error, not the reference's. Defines: B, C, N, K, F, STRIDE; STORAGE (how x and w are
// stored: 0 float32, 1 float16, 2 bfloat16 bits) and NHWC (0: NCHW input, FCKK filters, NFHW
// output; 1: NHWC, FKKC, NHWF). The output y is double, in the output's layout.
#define S ((N - 1) * STRIDE + K)
#ifndef STORAGE
#define STORAGE 0
#endif
#ifndef NHWC
#define NHWC 0
#endif

#if STORAGE == 0
typedef float stored_t;
__device__ __forceinline__ double load(stored_t v) { return (double)v; }
#else
typedef unsigned short stored_t;
__device__ __forceinline__ double load(stored_t v) {
#if STORAGE == 1
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
    return (double)f;
#else
    return (double)__uint_as_float(((unsigned int)v) << 16);  // bf16: the top half of an FP32
#endif
}
#endif

extern "C" __global__ void reference_conv2d(const stored_t* __restrict__ x,
                                            const stored_t* __restrict__ w,
                                            double* __restrict__ y) {
    const long long total = (long long)B * F * N * N;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
#if NHWC
    const int f = (int)(i % F);
    const int ox = (int)((i / F) % N);
    const int oy = (int)((i / ((long long)F * N)) % N);
    const int b = (int)(i / ((long long)F * N * N));
#else
    const int ox = (int)(i % N);
    const int oy = (int)((i / N) % N);
    const int f = (int)((i / ((long long)N * N)) % F);
    const int b = (int)(i / ((long long)N * N * F));
#endif
    double acc = 0.0;
    for (int ky = 0; ky < K; ++ky)
        for (int kx = 0; kx < K; ++kx) {
            const long long row = (long long)oy * STRIDE + ky, col = (long long)ox * STRIDE + kx;
            for (int c = 0; c < C; ++c) {
#if NHWC
                const stored_t xv = x[(((long long)b * S + row) * S + col) * C + c];
                const stored_t wv = w[(((long long)f * K + ky) * K + kx) * C + c];
#else
                const stored_t xv = x[(((long long)b * C + c) * S + row) * S + col];
                const stored_t wv = w[(((long long)f * C + c) * K + ky) * K + kx];
#endif
                acc += load(xv) * load(wv);
            }
        }
    y[i] = acc;
}
