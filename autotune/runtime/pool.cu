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

// The running maximum of one chunk, taken the way PyTorch takes it (above); `any` says whether
// a value was taken yet.
template <typename T, int LANES, float (*VALUE)(T)>
__device__ __forceinline__ void take(const uint4& chunk, bool& any, T (&best)[LANES],
                                     float (&most)[LANES])
{
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

// A thread an output chunk, LANES values of storage type T (their bits) and the float each
// compares as. With the window's size known at compile time (KH, KW > 0: the 2 x 2 and 3 x 3 of
// VGG and ResNet) the window's chunks are all loaded before the first comparison, so that a
// thread waits for memory once instead of once a pixel (the runtime loop's loads were serial):
// 11-22% less time on VGG-16's and ResNet-50's poolings on the H200 (results/h200/20261202i).
template <typename T, int LANES, float (*VALUE)(T), int KH, int KW>
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
        const uint4* plane = x + image * height * width * chunks + c;  // 32 bits: pool_launch.py
        T best[LANES];
        float most[LANES];
        bool any = false;
        if (KH > 0) {
            uint4 window[KH > 0 ? KH * KW : 1];
            bool inside[KH > 0 ? KH * KW : 1];
#pragma unroll
            for (int k = 0; k < KH * KW; ++k) {
                const int iy = y0 + k / KW, ix = x0 + k % KW;
                inside[k] = iy >= 0 && iy < height && ix >= 0 && ix < width;
                if (inside[k]) window[k] = plane[(iy * width + ix) * chunks];
            }
#pragma unroll
            for (int k = 0; k < KH * KW; ++k)
                if (inside[k]) take<T, LANES, VALUE>(window[k], any, best, most);
        } else {
            for (int ky = 0; ky < kernel_h; ++ky) {
                const int iy = y0 + ky;
                if (iy < 0 || iy >= height) continue;
                for (int kx = 0; kx < kernel_w; ++kx) {
                    const int ix = x0 + kx;
                    if (ix < 0 || ix >= width) continue;
                    take<T, LANES, VALUE>(plane[(iy * width + ix) * chunks], any, best, most);
                }
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

// An entry a storage type and window: _KHxKW where the window is unrolled, none where it is
// walked at run time (the launcher picks; pool_launch.py names them).
#define POOL_ENTRY(name, T, LANES, VALUE, KH, KW)                                          \
    extern "C" __global__ void name(POOL_PARAMS)                                               \
    {                                                                                          \
        pool_chunks<T, LANES, VALUE, KH, KW>(POOL_ARGS);                                       \
    }
#define POOL_ENTRIES(name, T, LANES, VALUE)                                                    \
    POOL_ENTRY(name, T, LANES, VALUE, 0, 0)                                                    \
    POOL_ENTRY(name##_2x2, T, LANES, VALUE, 2, 2)                                              \
    POOL_ENTRY(name##_3x3, T, LANES, VALUE, 3, 3)

POOL_ENTRIES(max_pool_nhwc_f32, float, 4, lane_value)
POOL_ENTRIES(max_pool_nhwc_bf16, u16, 8, lane_value_bf16)
POOL_ENTRIES(max_pool_nhwc_f16, u16, 8, lane_value_f16)
