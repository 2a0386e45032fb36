// Float64 reference of a 2D convolution with a fused epilogue (autotune/model/epilogue.py): the
// convolution of reference_conv2d.cu writes y in double, then reference_epilogue applies, per
// output of filter f, y * scale[f] + bias[f] + residual, then the activation, all in double over
// the stored inputs (scale, bias and residual in the problem's storage type). The output keeps
// double precision: the check measures the kernel's epilogue and its rounding to storage.
// Defines: those of reference_conv2d.cu, and EPI_SCALE, EPI_BIAS, EPI_RESIDUAL (0 or 1) and
// EPI_ACT (0 none, 1 ReLU, 2 SiLU, 3 GELU, the exact one: x * Phi(x)).
#include "reference_conv2d.cu"

extern "C" __global__ void reference_epilogue(double* __restrict__ y
#if EPI_SCALE
                                              ,
                                              const stored_t* __restrict__ scale
#endif
#if EPI_BIAS
                                              ,
                                              const stored_t* __restrict__ bias
#endif
#if EPI_RESIDUAL
                                              ,
                                              const stored_t* __restrict__ residual
#endif
)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)B * F * N * N) return;
#if NHWC
    const int f = (int)(i % F);
#else
    const int f = (int)((i / ((long long)N * N)) % F);
#endif
    double v = y[i];
#if EPI_SCALE
    v *= load(scale[f]);
#endif
#if EPI_BIAS
    v += load(bias[f]);
#endif
#if EPI_RESIDUAL
    v += load(residual[i]);  // the output's shape and layout: the same index
#endif
#if EPI_ACT == 1
    v = v > 0.0 ? v : 0.0;
#elif EPI_ACT == 2
    v = v / (1.0 + exp(-v));
#elif EPI_ACT == 3
    v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
#endif
    y[i] = v;
}
