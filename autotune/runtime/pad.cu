// The runtime's padding: copy the caller's input into the pre-padded square input the kernels
// read, zeros outside the image (the padding) and rows or columns past the last window dropped.
// One entry per layout and element size: 16-bit types (bf16, fp16) are copied as their bits,
// and a zero of either is all zero bits. NHWC inputs whose pixels are whole 16-byte chunks (as
// every layer past a network's first is) have an entry of their own that moves a chunk a thread.

// The element-wise copies index in I: 32-bit where both the caller's input and the padded one
// have fewer than 2^31 elements (every network layer), 64-bit otherwise. Three 64-bit divisions an element held the
// 224 x 224 x 3 input of VGG-16's first layer in bf16 at 0.14 ms on the H200, 30 times its
// time at the copy bandwidth.
template <typename T, typename I>
__device__ __forceinline__ void pad_planes_in(const T* __restrict__ x, T* __restrict__ out,
                                              I planes, int height, int width, int side,
                                              int offset)
{
    const I total = planes * side * side;
    const I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const int col = (int)(i % side);
        const I rest = i / side;
        const int row = (int)(rest % side);
        const I plane = rest / side;
        const int sy = row - offset;
        const int sx = col - offset;
        const bool inside = sy >= 0 && sy < height && sx >= 0 && sx < width;
        out[i] = inside ? x[(plane * height + sy) * width + sx] : T(0);
    }
}

template <typename T>
__device__ __forceinline__ void pad_planes(const T* __restrict__ x, T* __restrict__ out,
                                           int planes, int height, int width, int side,
                                           int offset)
{
    const long long larger = (long long)planes * max(side * side, height * width);
    if (larger < (1LL << 31))
        pad_planes_in<T, unsigned>(x, out, planes, height, width, side, offset);
    else
        pad_planes_in<T, long long>(x, out, planes, height, width, side, offset);
}

// NHWC: the channels innermost; `images` counts images.
template <typename T, typename I>
__device__ __forceinline__ void pad_pixels_in(const T* __restrict__ x, T* __restrict__ out,
                                              I images, int height, int width, int side,
                                              int offset, int channels)
{
    const I total = images * side * side * channels;
    const I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const int c = (int)(i % channels);
        I rest = i / channels;
        const int col = (int)(rest % side);
        rest /= side;
        const int row = (int)(rest % side);
        const I image = rest / side;
        const int sy = row - offset;
        const int sx = col - offset;
        const bool inside = sy >= 0 && sy < height && sx >= 0 && sx < width;
        out[i] = inside ? x[((image * height + sy) * width + sx) * channels + c] : T(0);
    }
}

template <typename T>
__device__ __forceinline__ void pad_pixels(const T* __restrict__ x, T* __restrict__ out,
                                           int images, int height, int width, int side,
                                           int offset, int channels)
{
    const long long larger = (long long)images * max(side * side, height * width) * channels;
    if (larger < (1LL << 31))
        pad_pixels_in<T, unsigned>(x, out, images, height, width, side, offset, channels);
    else
        pad_pixels_in<T, long long>(x, out, images, height, width, side, offset, channels);
}

extern "C" __global__ void pad_nchw(const float* __restrict__ x, float* __restrict__ out,
                                    int planes, int height, int width, int side, int offset)
{
    pad_planes<float>(x, out, planes, height, width, side, offset);
}

extern "C" __global__ void pad_nchw_16(const unsigned short* __restrict__ x,
                                       unsigned short* __restrict__ out, int planes, int height,
                                       int width, int side, int offset)
{
    pad_planes<unsigned short>(x, out, planes, height, width, side, offset);
}

extern "C" __global__ void pad_nhwc(const float* __restrict__ x, float* __restrict__ out,
                                    int images, int height, int width, int side, int offset,
                                    int channels)
{
    pad_pixels<float>(x, out, images, height, width, side, offset, channels);
}

extern "C" __global__ void pad_nhwc_16(const unsigned short* __restrict__ x,
                                       unsigned short* __restrict__ out, int images, int height,
                                       int width, int side, int offset, int channels)
{
    pad_pixels<unsigned short>(x, out, images, height, width, side, offset, channels);
}

// NHWC whose pixels are whole 16-byte chunks (channels x element bytes a multiple of 16), any
// element type: one chunk a thread, and 32-bit index arithmetic (the launch keeps the number of
// chunks below 2^31). The element-wise entries above divide 64-bit indices per element, which
// left ResNet-50's bf16 padding at a fifth of the copy bandwidth on the H200.
extern "C" __global__ void pad_nhwc_chunks(const uint4* __restrict__ x, uint4* __restrict__ out,
                                           int images, int height, int width, int side,
                                           int offset, int chunks)
{
    const unsigned total = (unsigned)images * side * side * chunks;
    const unsigned step = gridDim.x * blockDim.x;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const unsigned c = i % chunks;
        unsigned rest = i / chunks;
        const int col = (int)(rest % side);
        rest /= side;
        const int row = (int)(rest % side);
        const unsigned image = rest / side;
        const int sy = row - offset;
        const int sx = col - offset;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (sy >= 0 && sy < height && sx >= 0 && sx < width) {
            v = x[((size_t)(image * height + sy) * width + sx) * chunks + c];
        }
        out[i] = v;
    }
}
