// Kernels with known durations, for the GPU tests of the timer (tests/test_gpu_timer.py).

extern "C" __global__ void empty_kernel() {}

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// One thread spins for `cycles` SM clock cycles; with `out`, it also reports the nanoseconds of
// the global timer that the spin took and the cycles it counted, so the test knows the SM clock
// the kernel ran at (the boost clock is not the clock under every load).
extern "C" __global__ void spin(long long cycles, unsigned long long* out) {
    const unsigned long long t0 = global_ns();
    const long long start = clock64();
    long long now = start;
    while (now - start < cycles) {
        now = clock64();
    }
    const unsigned long long t1 = global_ns();
    if (out != nullptr) {
        out[0] = t1 - t0;
        out[1] = (unsigned long long)(now - start);
    }
}
