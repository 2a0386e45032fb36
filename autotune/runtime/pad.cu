// The runtime's padding: copy the caller's input into the pre-padded square input the kernels
// read, zeros outside the image (the padding) and rows or columns past the last window dropped.
// One entry per layout and element size: 16-bit types (bf16, fp16) are copied as their bits,
// and a zero of either is all zero bits.

template <typename T>
__device__ __forceinline__ void pad_planes(const T* __restrict__ x, T* __restrict__ out,
                                           int planes, int height, int width, int side,
                                           int offset)
{
    const long long total = (long long)planes * side * side;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const int col = (int)(i % side);
        const long long rest = i / side;
        const int row = (int)(rest % side);
        const long long plane = rest / side;
        const int sy = row - offset;
        const int sx = col - offset;
        const bool inside = sy >= 0 && sy < height && sx >= 0 && sx < width;
        out[i] = inside ? x[(plane * height + sy) * width + sx] : T(0);
    }
}

// NHWC: the channels innermost; `planes` counts images.
template <typename T>
__device__ __forceinline__ void pad_pixels(const T* __restrict__ x, T* __restrict__ out,
                                           int images, int height, int width, int side,
                                           int offset, int channels)
{
    const long long total = (long long)images * side * side * channels;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const int c = (int)(i % channels);
        long long rest = i / channels;
        const int col = (int)(rest % side);
        rest /= side;
        const int row = (int)(rest % side);
        const long long image = rest / side;
        const int sy = row - offset;
        const int sx = col - offset;
        const bool inside = sy >= 0 && sy < height && sx >= 0 && sx < width;
        out[i] = inside ? x[((image * height + sy) * width + sx) * channels + c] : T(0);
    }
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
