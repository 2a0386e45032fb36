// example: run every stored plan (or those whose indices are given) on random data, check it
// against a float64 convolution on the CPU, print the error, and time it as the tuner does (the L2
// cache flushed before each sample, every second sample twice), beside the time it stored.
//
//   build/example            every plan
//   build/example 0 3        plans 0 and 3 (their order in plans.json)
//   build/example --no-time  check only
//
// Exit status 0 when every plan matched the reference (relative L2 error within the tolerance
// the tuner verified it against: 1e-5 in FP32, the dtype's otherwise; and no NaN), 1 otherwise.
// The inputs are random values in [-1, 1] rounded to the plan's storage type, and the
// reference multiplies those rounded values in float64.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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

constexpr double kFullCheckMacs = 3e8;  // beyond this, a sample of outputs is checked
constexpr int kSampledOutputs = 4096;
constexpr int kWarmups = 2;
constexpr int kSamples = 15;
// The tuner's flush (autotune/gpu/timing.py): at least twice the L2 and at least this many bytes,
// written once before a sample and twice before the next, in turn (FLUSHES there: the GPU
// alternates between two states from one flush to the next, and a small kernel runs about 0.5 us
// slower in one; flushed once and twice in turn, every measurement meets both alike).
constexpr size_t kFlushMinBytes = size_t{256} << 20;
constexpr int kFlushes[] = {1, 2};

#define CHECK_CUDA(call)                                                                  \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
                         cudaGetErrorString(err_));                                       \
            std::exit(2);                                                                 \
        }                                                                                 \
    } while (0)

const char* dtype_name(autotune::DType d) {
    switch (d) {
        case autotune::kTF32: return "tf32";
        case autotune::kBF16: return "bf16";
        case autotune::kFP16: return "fp16";
        default: return "fp32";
    }
}

// Values as the device stores them: `values` rounded to the dtype in place, and their bytes.
std::vector<unsigned char> to_storage(autotune::DType dtype, std::vector<float>& values) {
    const size_t size = autotune::element_bytes(dtype);
    std::vector<unsigned char> bytes(values.size() * size);
    for (size_t i = 0; i < values.size(); ++i) {
        if (dtype == autotune::kBF16) {
            const __nv_bfloat16 v = __float2bfloat16(values[i]);
            values[i] = __bfloat162float(v);
            std::memcpy(&bytes[i * size], &v, size);
        } else if (dtype == autotune::kFP16) {
            const __half v = __float2half(values[i]);
            values[i] = __half2float(v);
            std::memcpy(&bytes[i * size], &v, size);
        } else {
            std::memcpy(&bytes[i * size], &values[i], size);
        }
    }
    return bytes;
}

float from_storage(autotune::DType dtype, const unsigned char* element) {
    if (dtype == autotune::kBF16) {
        __nv_bfloat16 v;
        std::memcpy(&v, element, sizeof v);
        return __bfloat162float(v);
    }
    if (dtype == autotune::kFP16) {
        __half v;
        std::memcpy(&v, element, sizeof v);
        return __half2float(v);
    }
    float v;
    std::memcpy(&v, element, sizeof v);
    return v;
}

// One output (its index in the output's layout) of the valid cross-correlation over the
// pre-padded input, in float64.
double reference_at(const autotune::Conv2dShape& s, const std::vector<float>& x,
                    const std::vector<float>& w, size_t index) {
    const size_t S = static_cast<size_t>(autotune::input_side(s));
    const size_t N = s.N, K = s.K, C = s.C, F = s.F;
    const bool nhwc = s.layout == autotune::kNHWC;
    size_t b, f, oy, ox;
    if (nhwc) {
        f = index % F, ox = (index / F) % N, oy = (index / (F * N)) % N, b = index / (F * N * N);
    } else {
        ox = index % N, oy = (index / N) % N, f = (index / (N * N)) % F, b = index / (N * N * F);
    }
    double sum = 0.0;
    for (size_t i = 0; i < K; ++i) {
        for (size_t j = 0; j < K; ++j) {
            const size_t iy = oy * s.stride + i, ix = ox * s.stride + j;
            for (size_t c = 0; c < C; ++c) {
                const size_t xi = nhwc ? ((b * S + iy) * S + ix) * C + c
                                       : ((b * C + c) * S + iy) * S + ix;
                const size_t wi = nhwc ? ((f * K + i) * K + j) * C + c
                                       : ((f * C + c) * K + i) * K + j;
                sum += static_cast<double>(x[xi]) * w[wi];
            }
        }
    }
    return sum;
}

bool run_one(int index, bool time_it, float* flush, size_t flush_bytes) {
    const autotune::plans::Plan& p = autotune::plans::kPlans[index];
    const autotune::Conv2dShape s{p.B,
                                  p.C,
                                  p.N,
                                  p.K,
                                  p.F,
                                  p.stride,
                                  static_cast<autotune::DType>(p.dtype),
                                  static_cast<autotune::Layout>(p.layout)};
    const size_t S = static_cast<size_t>(autotune::input_side(s));
    const size_t x_count = static_cast<size_t>(s.B) * s.C * S * S;
    const size_t w_count = static_cast<size_t>(s.F) * s.C * s.K * s.K;
    const size_t y_count = static_cast<size_t>(s.B) * s.F * s.N * s.N;
    const size_t element = autotune::element_bytes(s.dtype);

    std::mt19937 rng(1234 + index);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> x(x_count), w(w_count);
    for (float& v : x) v = uniform(rng);
    for (float& v : w) v = uniform(rng);
    const std::vector<unsigned char> x_bytes = to_storage(s.dtype, x);
    const std::vector<unsigned char> w_bytes = to_storage(s.dtype, w);
    std::vector<unsigned char> y_bytes(y_count * element);

    void *dx = nullptr, *dw = nullptr, *dy = nullptr;
    void* workspace = nullptr;
    const size_t workspace_bytes = autotune::conv2d_workspace_bytes(s);
    CHECK_CUDA(cudaMalloc(&dx, x_bytes.size()));
    CHECK_CUDA(cudaMalloc(&dw, w_bytes.size()));
    CHECK_CUDA(cudaMalloc(&dy, y_bytes.size()));
    if (workspace_bytes) CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
    CHECK_CUDA(cudaMemcpy(dx, x_bytes.data(), x_bytes.size(), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dw, w_bytes.data(), w_bytes.size(), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dy, 0xff, y_bytes.size()));  // NaN in every dtype: unwritten shows
    if (workspace_bytes) CHECK_CUDA(cudaMemset(workspace, 0xff, workspace_bytes));

    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    CHECK_CUDA(autotune::conv2d(s, dx, dw, dy, workspace, workspace_bytes, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(y_bytes.data(), dy, y_bytes.size(), cudaMemcpyDeviceToHost));

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
        const double got = from_storage(s.dtype, &y_bytes[i * element]);
        if (!std::isfinite(got)) finite = false;
        const double d = got - ref;
        diff2 += d * d;
        ref2 += ref * ref;
        max_abs = std::max(max_abs, std::fabs(d));
    }
    const double rel = std::sqrt(diff2 / std::max(ref2, 1e-300));
    const bool ok = finite && rel <= p.tolerance;

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
            for (int f = 0; f < kFlushes[i % 2]; ++f)  // a cold L2
                CHECK_CUDA(cudaMemsetAsync(flush, 0, flush_bytes, stream));
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

    std::printf("%3d  B=%d C=%d N=%d K=%d F=%d stride=%d %s %s  %-16s checked %zu  "
                "max_abs_err %.3e  rel_err %.3e (tolerance %.0e)  %s",
                index, s.B, s.C, s.N, s.K, s.F, s.stride, dtype_name(s.dtype),
                s.layout == autotune::kNHWC ? "NHWC" : "NCHW", p.family, checked.size(), max_abs,
                rel, p.tolerance, ok ? "OK" : "FAIL");
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

    // Twice the L2 cache or kFlushMinBytes, written before each timed sample (protocol 2).
    const size_t flush_bytes =
        std::max(2 * static_cast<size_t>(std::max(prop.l2CacheSize, 1 << 20)), kFlushMinBytes);
    float* flush = nullptr;
    if (time_it) CHECK_CUDA(cudaMalloc(&flush, flush_bytes));

    int failures = 0;
    for (int i : wanted) failures += run_one(i, time_it, flush, flush_bytes) ? 0 : 1;
    if (flush) CHECK_CUDA(cudaFree(flush));
    std::printf("%d of %zu plans matched the float64 reference\n",
                static_cast<int>(wanted.size()) - failures, wanted.size());
    return failures ? 1 : 0;
}
