// example: run every stored plan (or those whose indices are given) on random data, check it
// against a float64 convolution on the CPU, print the error, and time it with the L2 cache
// flushed before each sample, beside the time the tuner stored.
//
//   build/example            every plan
//   build/example 0 3        plans 0 and 3 (their order in plans.json)
//   build/example --no-time  check only
//
// Exit status 0 when every plan matched the reference (relative L2 error <= 1e-5, the
// tuner's FP32 tolerance, and no NaN), 1 otherwise.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "autotune_conv2d.h"

namespace {

constexpr double kTolerance = 1e-5;
constexpr double kFullCheckMacs = 3e8;  // beyond this, a sample of outputs is checked
constexpr int kSampledOutputs = 4096;
constexpr int kWarmups = 2;
constexpr int kSamples = 15;

#define CHECK_CUDA(call)                                                                  \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
                         cudaGetErrorString(err_));                                       \
            std::exit(2);                                                                 \
        }                                                                                 \
    } while (0)

// One output of the valid cross-correlation over the pre-padded input, in float64.
double reference_at(const autotune::Conv2dShape& s, const std::vector<float>& x,
                    const std::vector<float>& w, size_t index) {
    const size_t S = static_cast<size_t>(autotune::input_side(s));
    const size_t N = s.N, K = s.K, C = s.C, F = s.F;
    const size_t ox = index % N, oy = (index / N) % N, f = (index / (N * N)) % F;
    const size_t b = index / (N * N * F);
    double sum = 0.0;
    for (size_t c = 0; c < C; ++c) {
        for (size_t i = 0; i < K; ++i) {
            const float* row = &x[((b * C + c) * S + oy * s.stride + i) * S + ox * s.stride];
            const float* taps = &w[((f * C + c) * K + i) * K];
            for (size_t j = 0; j < K; ++j) sum += static_cast<double>(row[j]) * taps[j];
        }
    }
    return sum;
}

bool run_one(int index, bool time_it, float* flush, size_t flush_bytes) {
    const autotune::plans::Plan& p = autotune::plans::kPlans[index];
    const autotune::Conv2dShape s{p.B, p.C, p.N, p.K, p.F, p.stride};
    const size_t S = static_cast<size_t>(autotune::input_side(s));
    const size_t x_count = static_cast<size_t>(s.B) * s.C * S * S;
    const size_t w_count = static_cast<size_t>(s.F) * s.C * s.K * s.K;
    const size_t y_count = static_cast<size_t>(s.B) * s.F * s.N * s.N;

    std::mt19937 rng(1234 + index);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> x(x_count), w(w_count), y(y_count);
    for (float& v : x) v = uniform(rng);
    for (float& v : w) v = uniform(rng);

    float *dx = nullptr, *dw = nullptr, *dy = nullptr;
    void* workspace = nullptr;
    const size_t workspace_bytes = autotune::conv2d_workspace_bytes(s);
    CHECK_CUDA(cudaMalloc(&dx, x_count * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dw, w_count * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dy, y_count * sizeof(float)));
    if (workspace_bytes) CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
    CHECK_CUDA(cudaMemcpy(dx, x.data(), x_count * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dw, w.data(), w_count * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dy, 0xff, y_count * sizeof(float)));  // NaN: unwritten shows
    if (workspace_bytes) CHECK_CUDA(cudaMemset(workspace, 0xff, workspace_bytes));

    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    CHECK_CUDA(autotune::conv2d(s, dx, dw, dy, workspace, workspace_bytes, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(y.data(), dy, y_count * sizeof(float), cudaMemcpyDeviceToHost));

    // Every output when that is cheap on one CPU core, else a random sample and the corners.
    const double macs = static_cast<double>(y_count) * s.C * s.K * s.K;
    std::vector<size_t> checked;
    if (macs <= kFullCheckMacs) {
        checked.resize(y_count);
        for (size_t i = 0; i < y_count; ++i) checked[i] = i;
    } else {
        std::uniform_int_distribution<size_t> pick(0, y_count - 1);
        checked = {0, y_count - 1};
        for (int i = 0; i < kSampledOutputs; ++i) checked.push_back(pick(rng));
    }
    double diff2 = 0.0, ref2 = 0.0, max_abs = 0.0;
    bool finite = true;
    for (size_t i : checked) {
        const double ref = reference_at(s, x, w, i);
        const double got = y[i];
        if (!std::isfinite(got)) finite = false;
        const double d = got - ref;
        diff2 += d * d;
        ref2 += ref * ref;
        max_abs = std::max(max_abs, std::fabs(d));
    }
    const double rel = std::sqrt(diff2 / std::max(ref2, 1e-300));
    const bool ok = finite && rel <= kTolerance;

    double median_ms = NAN;
    if (time_it) {
        cudaEvent_t start[kSamples], end[kSamples];
        for (int i = 0; i < kSamples; ++i) {
            CHECK_CUDA(cudaEventCreate(&start[i]));
            CHECK_CUDA(cudaEventCreate(&end[i]));
        }
        for (int i = 0; i < kWarmups; ++i)
            CHECK_CUDA(autotune::conv2d(s, dx, dw, dy, workspace, workspace_bytes, stream));
        for (int i = 0; i < kSamples; ++i) {
            CHECK_CUDA(cudaMemsetAsync(flush, i, flush_bytes, stream));  // a cold L2
            CHECK_CUDA(cudaEventRecord(start[i], stream));
            CHECK_CUDA(autotune::conv2d(s, dx, dw, dy, workspace, workspace_bytes, stream));
            CHECK_CUDA(cudaEventRecord(end[i], stream));
        }
        CHECK_CUDA(cudaStreamSynchronize(stream));
        std::vector<float> ms(kSamples);
        for (int i = 0; i < kSamples; ++i) {
            CHECK_CUDA(cudaEventElapsedTime(&ms[i], start[i], end[i]));
            CHECK_CUDA(cudaEventDestroy(start[i]));
            CHECK_CUDA(cudaEventDestroy(end[i]));
        }
        std::sort(ms.begin(), ms.end());
        median_ms = ms[kSamples / 2];
    }

    std::printf("%3d  B=%d C=%d N=%d K=%d F=%d stride=%d  %-14s checked %zu  max_abs_err %.3e  "
                "rel_err %.3e  %s",
                index, s.B, s.C, s.N, s.K, s.F, s.stride, p.family, checked.size(), max_abs, rel,
                ok ? "OK" : "FAIL");
    if (time_it) std::printf("  time_ms %.4f (stored %.4f)", median_ms, p.time_ms);
    std::printf("\n");

    CHECK_CUDA(cudaStreamDestroy(stream));
    CHECK_CUDA(cudaFree(dx));
    CHECK_CUDA(cudaFree(dw));
    CHECK_CUDA(cudaFree(dy));
    if (workspace) CHECK_CUDA(cudaFree(workspace));
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    bool time_it = true;
    std::vector<int> wanted;
    for (int a = 1; a < argc; ++a) {
        if (std::strcmp(argv[a], "--no-time") == 0) {
            time_it = false;
            continue;
        }
        char* end = nullptr;
        const long i = std::strtol(argv[a], &end, 10);
        if (*end != '\0' || i < 0 || i >= autotune::plans::kNumPlans) {
            std::fprintf(stderr, "example: %s is not a plan index (0..%d) or --no-time\n",
                         argv[a], autotune::plans::kNumPlans - 1);
            return 2;
        }
        wanted.push_back(static_cast<int>(i));
    }
    if (wanted.empty())
        for (int i = 0; i < autotune::plans::kNumPlans; ++i) wanted.push_back(i);

    int device = 0;
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDevice(&device));
    CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
    std::printf("device: %s (sm_%d%d); plans tuned on %s (%s), timing protocol %d\n", prop.name,
                prop.major, prop.minor, autotune::plans::kDevice, autotune::plans::kArch,
                autotune::plans::kTimingProtocol);

    // Twice the L2 cache, written before each timed sample (the tuner's protocol 2).
    const size_t flush_bytes = 2 * static_cast<size_t>(std::max(prop.l2CacheSize, 1 << 20));
    float* flush = nullptr;
    if (time_it) CHECK_CUDA(cudaMalloc(&flush, flush_bytes));

    int failures = 0;
    for (int i : wanted) failures += run_one(i, time_it, flush, flush_bytes) ? 0 : 1;
    if (flush) CHECK_CUDA(cudaFree(flush));
    std::printf("%d of %zu plans matched the float64 reference\n",
                static_cast<int>(wanted.size()) - failures, wanted.size());
    return failures ? 1 : 0;
}
