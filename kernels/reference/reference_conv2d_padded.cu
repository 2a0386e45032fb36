// Float64 reference of a 2D convolution whose input has PAD zeros around it (ConvProblem.padding
// > 0) or TAIL rows and columns of the padded input past the last window (ConvProblem.tail > 0):
// reference_conv2d.cu's computation with the zeros read as zeros, the input (B, C, SP, SP) or
// (B, SP, SP, C) with SP = S - 2 * PAD + TAIL. A file of its own, not a define of
// reference_conv2d.cu: every family's stored results carry the digest of that file's text.
// Defines: those of reference_conv2d.cu, PAD and TAIL (each 0 when not given); with
// EPILOGUE_REF, those of reference_conv2d_epilogue.cu, whose reference_epilogue then runs after
// this kernel.
#if EPILOGUE_REF
#include "reference_conv2d_epilogue.cu"
#else
#include "reference_conv2d.cu"
#endif
#ifndef PAD
#define PAD 0
#endif
#ifndef TAIL
#define TAIL 0
#endif
#define SP (S - 2 * PAD + TAIL)

extern "C" __global__ void reference_conv2d_padded(const stored_t* __restrict__ x,
                                                   const stored_t* __restrict__ w,
                                                   double* __restrict__ y) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)B * F * N * N) return;
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
            const long long row = (long long)oy * STRIDE + ky - PAD;
            const long long col = (long long)ox * STRIDE + kx - PAD;
            if (row < 0 || row >= SP || col < 0 || col >= SP) continue;  // a zero of the padding
            for (int c = 0; c < C; ++c) {
#if NHWC
                const stored_t xv = x[(((long long)b * SP + row) * SP + col) * C + c];
                const stored_t wv = w[(((long long)f * K + ky) * K + kx) * C + c];
#else
                const stored_t xv = x[(((long long)b * C + c) * SP + row) * SP + col];
                const stored_t wv = w[(((long long)f * C + c) * K + ky) * K + kx];
#endif
                acc += load(xv) * load(wv);
            }
        }
    y[i] = acc;
}
