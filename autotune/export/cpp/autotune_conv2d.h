// autotune_conv2d.h: run the convolution plans that `autotune export` stored, from C++.
//
// Header-only. Link the embedded kernels (build/libautotune_conv2d.a) and the CUDA runtime
// (nvcc links it by default; needs CUDA 12.0 or newer for the library-management API).
//
//   autotune::Conv2dShape s{B, C, N, K, F, stride};   // N: the output side
//   size_t bytes = autotune::conv2d_workspace_bytes(s);
//   cudaError_t e = autotune::conv2d(s, x, w, y, workspace, bytes, stream);
//
// Layouts as measured: x is NCHW with the padding already in it (side (N-1)*stride+K), w is
// FCKK, y is NFHW; FP32; cross-correlation, as every DNN framework computes it. The call only
// queues work on `stream`. It returns cudaErrorNotSupported for a shape the table does not
// hold (autotune::find_plan says beforehand), and the CUDA error of the first call that failed.
// A plan that copies w to constant memory (a "constant" step from buffer w in plans.json) has
// one such copy per process: calls of that shape with different filters must not overlap on
// different streams.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "autotune_plans.h"

namespace autotune {

struct Conv2dShape {
    int B, C, N, K, F, stride;
};

inline int input_side(const Conv2dShape& s) { return (s.N - 1) * s.stride + s.K; }

// The stored plan of this shape, or nullptr.
inline const plans::Plan* find_plan(const Conv2dShape& s) {
    for (const plans::Plan& p : plans::kPlans) {
        if (p.B == s.B && p.C == s.C && p.N == s.N && p.K == s.K && p.F == s.F &&
            p.stride == s.stride) {
            return &p;
        }
    }
    return nullptr;
}

// Device memory the plan needs besides x, w and y (layout copies, partial sums); 0 for none.
inline size_t conv2d_workspace_bytes(const Conv2dShape& s) {
    const plans::Plan* p = find_plan(s);
    return p ? static_cast<size_t>(p->workspace_bytes) : 0;
}

namespace detail {

constexpr unsigned kDefaultSmemBytes = 48 * 1024;  // beyond this a kernel must opt in

struct LoadedModule {
    std::once_flag once;
    cudaError_t status = cudaSuccess;
    cudaLibrary_t library = nullptr;
    cudaKernel_t kernels[plans::kMaxKernelsPerModule] = {};
    std::atomic<std::uint64_t> devices_ready{0};  // bit d: shared-memory limits set on device d
    std::mutex attributes;
};

inline LoadedModule* loaded_modules() {
    static LoadedModule modules[plans::kNumModules];
    return modules;
}

// The module's kernels, loaded once per process (the library serves every device), with the
// dynamic shared memory limits its launches need raised on the current device.
inline cudaError_t module_kernels(int index, const cudaKernel_t** kernels) {
    LoadedModule& m = loaded_modules()[index];
    const plans::Module& spec = plans::kModules[index];
    std::call_once(m.once, [&] {
        m.status = cudaLibraryLoadData(&m.library, spec.image, nullptr, nullptr, 0, nullptr,
                                       nullptr, 0);
        for (int k = 0; m.status == cudaSuccess && k < spec.num_kernels; ++k) {
            m.status = cudaLibraryGetKernel(&m.kernels[k], m.library,
                                            plans::kKernels[spec.first_kernel + k].name);
        }
    });
    if (m.status != cudaSuccess) return m.status;
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    const std::uint64_t bit = device < 64 ? (std::uint64_t{1} << device) : 0;
    if (bit == 0 || !(m.devices_ready.load(std::memory_order_acquire) & bit)) {
        std::lock_guard<std::mutex> hold(m.attributes);
        for (int k = 0; k < spec.num_kernels; ++k) {
            const unsigned smem = plans::kKernels[spec.first_kernel + k].max_smem_bytes;
            if (smem > kDefaultSmemBytes) {
                err = cudaKernelSetAttributeForDevice(
                    m.kernels[k], cudaFuncAttributeMaxDynamicSharedMemorySize,
                    static_cast<int>(smem), device);
                if (err != cudaSuccess) return err;
            }
        }
        m.devices_ready.fetch_or(bit, std::memory_order_acq_rel);
    }
    *kernels = m.kernels;
    return cudaSuccess;
}

inline cudaError_t run_plan(const plans::Plan& p, const float* x, const float* w, float* y,
                            char* workspace, cudaStream_t stream) {
    const cudaKernel_t* kernels = nullptr;
    cudaError_t err = module_kernels(p.module, &kernels);
    if (err != cudaSuccess) return err;

    void* pointers[plans::kMaxBuffersPerPlan] = {};
    size_t sizes[plans::kMaxBuffersPerPlan] = {};
    for (int b = 0; b < p.num_buffers; ++b) {
        const plans::Buffer& buffer = plans::kBuffers[p.first_buffer + b];
        sizes[b] = static_cast<size_t>(buffer.bytes);
        switch (buffer.role) {
            case plans::kInputX: pointers[b] = const_cast<float*>(x); break;
            case plans::kInputW: pointers[b] = const_cast<float*>(w); break;
            case plans::kOutputY: pointers[b] = y; break;
            default: pointers[b] = workspace + buffer.workspace_offset; break;
        }
        if (buffer.role == plans::kZeroInput) {
            err = cudaMemsetAsync(pointers[b], 0, sizes[b], stream);
            if (err != cudaSuccess) return err;
        }
    }

    for (int s = 0; s < p.num_steps; ++s) {
        const plans::Step& step = plans::kSteps[p.first_step + s];
        if (step.kernel < 0) {
            // A table the kernels read from constant memory: copied from a buffer (an input,
            // or a scratch table that an earlier launch filled), in stream order.
            void* symbol = nullptr;
            size_t symbol_bytes = 0;
            err = cudaLibraryGetGlobal(&symbol, &symbol_bytes,
                                       loaded_modules()[p.module].library, step.symbol);
            if (err != cudaSuccess) return err;
            if (symbol_bytes < sizes[step.source_buffer]) return cudaErrorInvalidValue;
            err = cudaMemcpyAsync(symbol, pointers[step.source_buffer],
                                  sizes[step.source_buffer], cudaMemcpyDeviceToDevice, stream);
            if (err != cudaSuccess) return err;
            continue;
        }
        void* values[plans::kMaxArgsPerLaunch];
        int ints[plans::kMaxArgsPerLaunch];
        for (int a = 0; a < step.num_args; ++a) {
            const plans::Arg& arg = plans::kArgs[step.first_arg + a];
            if (arg.buffer >= 0) {
                values[a] = &pointers[arg.buffer];
            } else {
                ints[a] = arg.value;
                values[a] = &ints[a];
            }
        }
        const dim3 grid(step.grid[0], step.grid[1], step.grid[2]);
        const dim3 block(step.block[0], step.block[1], step.block[2]);
        err = cudaLaunchKernel(reinterpret_cast<const void*>(kernels[step.kernel]), grid, block,
                               values, step.smem_bytes, stream);
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

}  // namespace detail

// Queue the stored plan of `shape` on `stream`: y = conv2d(x, w). `workspace` holds at least
// conv2d_workspace_bytes(shape) bytes of device memory; with nullptr the call takes it from
// the stream-ordered allocator (cudaMallocAsync) and frees it in stream order.
inline cudaError_t conv2d(const Conv2dShape& shape, const float* x, const float* w, float* y,
                          void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    const plans::Plan* p = find_plan(shape);
    if (p == nullptr) return cudaErrorNotSupported;
    const size_t needed = static_cast<size_t>(p->workspace_bytes);
    if (workspace != nullptr || needed == 0) {
        if (workspace_bytes < needed) return cudaErrorInvalidValue;
        return detail::run_plan(*p, x, w, y, static_cast<char*>(workspace), stream);
    }
    void* own = nullptr;
    cudaError_t err = cudaMallocAsync(&own, needed, stream);
    if (err != cudaSuccess) return err;
    err = detail::run_plan(*p, x, w, y, static_cast<char*>(own), stream);
    const cudaError_t freed = cudaFreeAsync(own, stream);
    return err != cudaSuccess ? err : freed;
}

}  // namespace autotune
