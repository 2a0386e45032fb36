// The runtime's max pooling of channels-last (NHWC) tensors whose pixels are whole 16-byte
// chunks: a thread reads one chunk (8 16-bit or 4 FP32 channels) of each input pixel in its
// output's window and writes the chunk of maxima. PyTorch's own NHWC max pooling ran 5 times
// slower than its bytes at the copy bandwidth on the H200 (VGG-16's five pools in bf16 at batch
// 32: 0.61 ms a forward, results/h200/20261202h), and optimize() runs models channels-last.
//
// The maximum as PyTorch's max_pool2d takes it: the window walked row by row, a value replacing
// the maximum where it is greater or NaN (so NaN propagates, and of equal values the first
// stays), positions in the padding skipped. The result is one of the inputs, bit for bit.

typedef unsigned short u16;

__device__ __forceinline__ float lane_value(float v) { return v; }
__device__ __forceinline__ float lane_value_bf16(u16 bits) { return __uint_as_float((unsigned)bits << 16); }
__device__ __forceinline__ float lane_value_f16(u16 bits)
{
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(bits));
    return v;
}

// A chunk as LANES values of storage type T (their bits) and the float each compares as.
template <typename T, int LANES, float (*VALUE)(T)>
__device__ __forceinline__ void pool_chunks(const uint4* __restrict__ x, uint4* __restrict__ y,
                                            int height, int width, int chunks, int out_h,
                                            int out_w, int kernel_h, int kernel_w, int stride_h,
                                            int stride_w, int pad_h, int pad_w, unsigned total)
{
    const unsigned step = gridDim.x * blockDim.x;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const int c = (int)(i % chunks);
        unsigned rest = i / chunks;
        const int ox = (int)(rest % out_w);
        rest /= out_w;
        const int oy = (int)(rest % out_h);
        const unsigned image = rest / out_h;
        const int y0 = oy * stride_h - pad_h;
        const int x0 = ox * stride_w - pad_w;
        T best[LANES];
        float most[LANES];
#pragma unroll
        for (int l = 0; l < LANES; ++l) most[l] = -__int_as_float(0x7f800000);  // -inf
        bool any = false;
        for (int ky = 0; ky < kernel_h; ++ky) {
            const int iy = y0 + ky;
            if (iy < 0 || iy >= height) continue;
            for (int kx = 0; kx < kernel_w; ++kx) {
                const int ix = x0 + kx;
                if (ix < 0 || ix >= width) continue;
                const uint4 chunk = x[((image * height + iy) * width + ix) * chunks + c];
                const T* lanes = reinterpret_cast<const T*>(&chunk);
#pragma unroll
                for (int l = 0; l < LANES; ++l) {
                    const float v = VALUE(lanes[l]);
                    if (!any || v > most[l] || v != v) {
                        most[l] = v;
                        best[l] = lanes[l];
                    }
                }
                any = true;
            }
        }
        uint4 out;
        T* lanes = reinterpret_cast<T*>(&out);
#pragma unroll
        for (int l = 0; l < LANES; ++l) lanes[l] = best[l];
        y[i] = out;
    }
}

#define POOL_PARAMS                                                                                \
    const uint4 *__restrict__ x, uint4 *__restrict__ y, int height, int width, int chunks,        \
        int out_h, int out_w, int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_h,  \
        int pad_w, unsigned total
#define POOL_ARGS                                                                                  \
    x, y, height, width, chunks, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_h,     \
        pad_w, total

extern "C" __global__ void max_pool_nhwc_f32(POOL_PARAMS)
{
    pool_chunks<float, 4, lane_value>(POOL_ARGS);
}
extern "C" __global__ void max_pool_nhwc_bf16(POOL_PARAMS)
{
    pool_chunks<u16, 8, lane_value_bf16>(POOL_ARGS);
}
extern "C" __global__ void max_pool_nhwc_f16(POOL_PARAMS)
{
    pool_chunks<u16, 8, lane_value_f16>(POOL_ARGS);
}
