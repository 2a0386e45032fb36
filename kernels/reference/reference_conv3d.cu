// Float64 reference for valid single-channel 3D convolution (cross-correlation): one thread per
// output, accumulating in double so the check measures the tuned kernel's error, not its own.
// Defines: D, R, Cc (input depth, rows, columns), Kd, Kr, Kc (filter).
#define OD (D - Kd + 1)
#define OR (R - Kr + 1)
#define OC (Cc - Kc + 1)

extern "C" __global__ void reference_conv3d(const float* __restrict__ x,
                                            const float* __restrict__ w,
                                            double* __restrict__ y) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)OD * OR * OC) return;
    const int oc = (int)(i % OC);
    const int orow = (int)((i / OC) % OR);
    const int od = (int)(i / ((long long)OC * OR));
    double sum = 0.0;
    for (int dz = 0; dz < Kd; ++dz) {
        for (int dy = 0; dy < Kr; ++dy) {
            const float* src = x + ((long long)(od + dz) * R + orow + dy) * Cc + oc;
            const float* taps = w + (dz * Kr + dy) * Kc;
            for (int dx = 0; dx < Kc; ++dx) sum += (double)src[dx] * (double)taps[dx];
        }
    }
    y[i] = sum;
}
