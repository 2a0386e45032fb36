// Runs kernels/chen_general.cu (as rewritten by the test) over its whole grid on the
// CPU and compares the output with a float64 convolution. Arguments: grid x y z, threads, shared
// bytes. Exit status 0 iff every output is finite and the relative L2 error is at most 1e-5.
#include "shim.h"
#include "defines.h"
#include "kernel.cu"

int main(int argc, char** argv) {
    if (argc != 7) return 2;
    const int gx = atoi(argv[1]), gy = atoi(argv[2]), gz = atoi(argv[3]);
    const int threads = atoi(argv[4]);
    const size_t smem_bytes = strtoul(argv[5], nullptr, 10);
    const long long nx = (long long)B * C * S * S, nw = (long long)F * C * K * K;
    const long long ny = (long long)B * F * N * N;
    // Exactly sized heap blocks: AddressSanitizer, where enabled, sees any access past them.
    float* x = (float*)malloc(nx * sizeof(float));
    float* w = (float*)malloc(nw * sizeof(float));
    float* y = (float*)malloc(ny * sizeof(float));
    std::mt19937 rng(atoi(argv[6]));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (long long i = 0; i < nx; ++i) x[i] = uniform(rng);
    for (long long i = 0; i < nw; ++i) w[i] = uniform(rng);
    for (long long i = 0; i < ny; ++i) y[i] = NAN;

    for (int bx = 0; bx < gx; ++bx) {
        for (int by = 0; by < gy; ++by) {
            // The gz CTAs along z form one cluster (gridDim.z == CSPLIT == the cluster size).
            std::vector<float*> smem(gz);
            std::vector<std::barrier<>*> block_barriers(gz);
            for (int z = 0; z < gz; ++z) {
                smem[z] = (float*)malloc(smem_bytes);
                for (size_t i = 0; i < smem_bytes / sizeof(float); ++i) smem[z][i] = NAN;
                block_barriers[z] = new std::barrier<>(threads);
            }
            std::barrier<> cluster_barrier(threads * gz);
            std::vector<std::thread> pool;
            for (int z = 0; z < gz; ++z) {
                for (int t = 0; t < threads; ++t) {
                    pool.emplace_back([&, z, t] {
                        threadIdx = {(unsigned)t, 0, 0};
                        blockIdx = {(unsigned)bx, (unsigned)by, (unsigned)z};
                        host_block_barrier = block_barriers[z];
                        host_cluster_barrier = &cluster_barrier;
                        host_smem = smem[z];
                        host_cluster_smem = smem.data();
                        host_rank = z;
                        chen_general(x, w, y);
                    });
                }
            }
            for (auto& thread : pool) thread.join();
            for (int z = 0; z < gz; ++z) {
                free(smem[z]);
                delete block_barriers[z];
            }
        }
    }

    double num = 0.0, den = 0.0;
    long long nonfinite = 0;
    for (int b = 0; b < B; ++b)
        for (int f = 0; f < F; ++f)
            for (int oy = 0; oy < N; ++oy)
                for (int ox = 0; ox < N; ++ox) {
                    double ref = 0.0;
                    for (int c = 0; c < C; ++c)
                        for (int i = 0; i < K; ++i)
                            for (int j = 0; j < K; ++j) {
                                const long long xi =
                                    (((long long)b * C + c) * S + oy * STRIDE + i) * S + ox * STRIDE + j;
                                ref += (double)x[xi] * (double)w[((f * C + c) * K + i) * K + j];
                            }
                    const double got = y[(((long long)b * F + f) * N + oy) * N + ox];
                    if (!std::isfinite(got)) {
                        ++nonfinite;
                        continue;
                    }
                    num += (got - ref) * (got - ref);
                    den += ref * ref;
                }
    const double rel = den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
    printf("nonfinite=%lld rel=%.3e\n", nonfinite, rel);
    free(x);
    free(w);
    free(y);
    return nonfinite == 0 && rel <= 1e-5 ? 0 : 1;
}
