// The runtime's padding: copy an NCHW input into the pre-padded square input the kernels read,
// zeros outside the image (the padding) and rows or columns past the last window dropped.
extern "C" __global__ void pad_nchw(const float* __restrict__ x, float* __restrict__ out,
                                    int planes, int height, int width, int side, int offset)
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
        out[i] = inside ? x[(plane * height + sy) * width + sx] : 0.0f;
    }
}
