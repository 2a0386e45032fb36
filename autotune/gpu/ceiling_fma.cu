// FP32 FMA peak: every thread runs CHAINS independent multiply-add chains, so each warp
// scheduler always has an FMA ready and the SMs issue FMAs every cycle. Launched with enough
// blocks to fill every SM. FLOPs = 2 * CHAINS * UNROLL * iterations * threads.
#define CHAINS 8
#define UNROLL 64

extern "C" __global__ void __launch_bounds__(256) fma_peak(float* out, int iterations) {
    float a[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) a[c] = threadIdx.x * 1e-7f + c;
    const float m = 0.99999f, k = 1e-7f;
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int c = 0; c < CHAINS; ++c) a[c] = fmaf(a[c], m, k);
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) sum += a[c];
    // Never true for these inputs, but the compiler cannot drop the chains.
    if (sum == 1234.5f) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
