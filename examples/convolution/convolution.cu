// A 2D convolution (cross-correlation) of a 4096 x 4096 image with a 17 x 17 filter held in
// constant memory, after Kernel Tuner's convolution example, written anew. A block of
// block_size_x x block_size_y threads computes a tile of tile_size_x x tile_size_y outputs per
// thread; it first stages the input its outputs need (the tile plus the filter's border) in
// shared memory. The input is pre-padded: (4096 + 16) x (4096 + 16).
#define IMAGE_H 4096
#define IMAGE_W 4096
#define FILTER_H 17
#define FILTER_W 17
#define INPUT_W (IMAGE_W + FILTER_W - 1)

#define OUT_ROWS (block_size_y * tile_size_y)
#define OUT_COLS (block_size_x * tile_size_x)
#define IN_ROWS (OUT_ROWS + FILTER_H - 1)
#define IN_COLS (OUT_COLS + FILTER_W - 1)

__constant__ float d_filter[FILTER_H * FILTER_W];

// The launch bound caps the registers so that every block size in the space can launch (at
// 255 registers a thread, 448 threads already exceed the 65,536 registers of a block).
__global__ void __launch_bounds__(block_size_x * block_size_y)
convolution_kernel(float *output, const float *input, const float *filter) {
    __shared__ float staged[IN_ROWS][IN_COLS];
    const int row0 = blockIdx.y * OUT_ROWS;
    const int col0 = blockIdx.x * OUT_COLS;

    // A block width that does not divide the image leaves the last blocks partly outside it:
    // they stage zeros there and write nothing there (Kernel Tuner's original does neither, so
    // those widths write into the next row; its example gives no answer that would show it).
    for (int r = threadIdx.y; r < IN_ROWS; r += block_size_y) {
        for (int c = threadIdx.x; c < IN_COLS; c += block_size_x) {
            const bool inside = row0 + r < IMAGE_H + FILTER_H - 1 && col0 + c < INPUT_W;
            staged[r][c] = inside ? input[(row0 + r) * INPUT_W + col0 + c] : 0.0f;
        }
    }
    __syncthreads();

    float acc[tile_size_y][tile_size_x];
#pragma unroll
    for (int ty = 0; ty < tile_size_y; ty++) {
#pragma unroll
        for (int tx = 0; tx < tile_size_x; tx++) {
            acc[ty][tx] = 0.0f;
        }
    }
#pragma unroll
    for (int fr = 0; fr < FILTER_H; fr++) {
#pragma unroll
        for (int fc = 0; fc < FILTER_W; fc++) {
            const float w = d_filter[fr * FILTER_W + fc];
#pragma unroll
            for (int ty = 0; ty < tile_size_y; ty++) {
#pragma unroll
                for (int tx = 0; tx < tile_size_x; tx++) {
                    acc[ty][tx] += w * staged[threadIdx.y + ty * block_size_y + fr]
                                            [threadIdx.x + tx * block_size_x + fc];
                }
            }
        }
    }

#pragma unroll
    for (int ty = 0; ty < tile_size_y; ty++) {
#pragma unroll
        for (int tx = 0; tx < tile_size_x; tx++) {
            const int row = row0 + threadIdx.y + ty * block_size_y;
            const int col = col0 + threadIdx.x + tx * block_size_x;
            if (row < IMAGE_H && col < IMAGE_W) {
                output[row * IMAGE_W + col] = acc[ty][tx];
            }
        }
    }
}
