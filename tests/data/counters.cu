// Kernels that count their blocks' arrivals on counters (KernelPlan.counters), for the tests of
// the evaluator's and the runtime's counters. Defines as reference_conv2d (FP32, NCHW).
#define S ((N - 1) * STRIDE + K)

__device__ float conv_at(const float* x, const float* w, long long i) {
    const int ox = (int)(i % N), oy = (int)((i / N) % N);
    const int f = (int)((i / ((long long)N * N)) % F), b = (int)(i / ((long long)N * N * F));
    float acc = 0.0f;
    for (int c = 0; c < C; ++c)
        for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx)
                acc += x[((long long)(b * C + c) * S + oy * STRIDE + ky) * S + ox * STRIDE + kx] *
                       w[((f * C + c) * K + ky) * K + kx];
    return acc;
}

// Whether this block is the grid's last to arrive at *counter, its writes (and every earlier
// block's) visible to it; the whole block gets the answer.
__device__ bool last_to_arrive(unsigned* counter) {
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    return last;
}

enum Reset { kNever, kAlways, kFirstRunOnly };

// The convolution, one output a thread, but the last output: the last block to arrive writes
// that one, so a counter that did not start at zero leaves it unwritten (the NaN poison shows).
__device__ void counted_conv(const float* x, const float* w, float* y, unsigned* counters,
                             Reset reset) {
    const long long total = (long long)B * F * N * N;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total - 1) y[i] = conv_at(x, w, i);
    if (!last_to_arrive(&counters[0]) || threadIdx.x != 0) return;
    const float before = y[total - 1];
    const bool first_run = before != before;  // NaN: the evaluator's poison, before any run
    y[total - 1] = conv_at(x, w, total - 1);
    if (reset == kAlways || (reset == kFirstRunOnly && first_run)) counters[0] = 0;
}

// Leaves its counter zero, as a plan must.
extern "C" __global__ void counted_and_reset(const float* x, const float* w, float* y,
                                             unsigned* counters) {
    counted_conv(x, w, y, counters, kAlways);
}

// Leaves it at the number of blocks.
extern "C" __global__ void counted_never_reset(const float* x, const float* w, float* y,
                                               unsigned* counters) {
    counted_conv(x, w, y, counters, kNever);
}

// Resets it in the checked run only (its output poisoned before it): the timed runs leave it.
extern "C" __global__ void counted_reset_on_first_run(const float* x, const float* w, float* y,
                                                      unsigned* counters) {
    counted_conv(x, w, y, counters, kFirstRunOnly);
}

// For the runtime: the last block to arrive at counters[0] writes the grid's size into y[0]
// (so y[0] is gridDim.x only where the counter started at zero), and with `reset` zeroes it.
extern "C" __global__ void count_arrivals(float* y, unsigned* counters, int reset) {
    if (!last_to_arrive(&counters[0]) || threadIdx.x != 0) return;
    y[0] = (float)gridDim.x;
    if (reset) counters[0] = 0;
}

// For the runtime: all ones over a scratch buffer of `words` 32-bit words, as a plan's scratch
// may be left.
extern "C" __global__ void scribble(unsigned* scratch, int words) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x)
        scratch[i] = 0xffffffffu;
}
