// Float64 reference for SGEMM: c_ref[M][N] = a[M][K] @ b[K][N], row-major. Products of two floats
// are exact in double and the sum accumulates in double, so the check measures the tuned kernel's
// error, not the reference's. 16 x 16 tiles through shared memory keep 8192^3 to about a second.
// Defines: M, N, K.
#define T 16

extern "C" __global__ void reference_gemm(const float* __restrict__ a,
                                          const float* __restrict__ b,
                                          double* __restrict__ c_ref) {
    __shared__ double as[T][T + 1];
    __shared__ double bs[T][T + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long row = (long long)blockIdx.y * T + ty;
    const long long col = (long long)blockIdx.x * T + tx;
    double acc = 0.0;
    for (int k0 = 0; k0 < K; k0 += T) {
        as[ty][tx] = (row < M && k0 + tx < K) ? (double)a[row * K + k0 + tx] : 0.0;
        bs[ty][tx] = (k0 + ty < K && col < N) ? (double)b[(long long)(k0 + ty) * N + col] : 0.0;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) acc += as[ty][k] * bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) c_ref[row * N + col] = acc;
}
