// autotune_conv2d.h: run the convolution plans that `autotune export` stored, from C++.
//
// Header-only. Link the embedded kernels (build/libautotune_conv2d.a) and the CUDA runtime
// (nvcc links it by default; needs CUDA 12.5 or newer: the library-management API, and the
// driver's entry points for the TMA tensor maps some plans take, without linking libcuda).
//
//   autotune::Conv2dShape s{B, C, N, K, F, stride};                     // FP32, NCHW
//   autotune::Conv2dShape t{B, C, N, K, F, stride, autotune::kBF16, autotune::kNHWC};
//   size_t bytes = autotune::conv2d_workspace_bytes(s);
//   cudaError_t e = autotune::conv2d(s, x, w, y, workspace, bytes, stream);
//
// Layouts as measured, the padding already in x (side (N-1)*stride+K): NCHW x, FCKK w, NFHW y;
// or NHWC x, FKKC w, NHWF y. Elements: float for kFP32 and kTF32 (a kTF32 plan multiplies them
// as TF32 on the tensor cores, as PyTorch does with TF32 allowed), __nv_bfloat16 for kBF16,
// __half for kFP16. Cross-correlation, as every DNN framework computes it. The call only
// queues work on `stream`. It returns cudaErrorNotSupported for a shape, dtype and layout the
// table does not hold (autotune::find_plan says beforehand), and the CUDA error of the first
// call that failed. A plan that copies w to constant memory (a "constant" step from buffer w in
// plans.json) has one such copy per process: calls of that shape with different filters must
// not overlap on different streams.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace autotune {

enum DType : int { kFP32 = 0, kTF32 = 1, kBF16 = 2, kFP16 = 3 };
enum Layout : int { kNCHW = 0, kNHWC = 1 };

}  // namespace autotune

#include "autotune_plans.h"

namespace autotune {

struct Conv2dShape {
    int B, C, N, K, F, stride;
    DType dtype = kFP32;
    Layout layout = kNCHW;
};

inline int input_side(const Conv2dShape& s) { return (s.N - 1) * s.stride + s.K; }

// Bytes of one element of x, w and y.
inline size_t element_bytes(DType dtype) { return dtype == kBF16 || dtype == kFP16 ? 2 : 4; }

// The stored plan of this shape, dtype and layout, or nullptr.
inline const plans::Plan* find_plan(const Conv2dShape& s) {
    for (const plans::Plan& p : plans::kPlans) {
        if (p.B == s.B && p.C == s.C && p.N == s.N && p.K == s.K && p.F == s.F &&
            p.stride == s.stride && p.dtype == s.dtype && p.layout == s.layout) {
            return &p;
        }
    }
    return nullptr;
}

// Device memory the plan needs besides x, w and y (layout copies, partial sums, zeroed
// counters); 0 for none.
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

// The driver's tensor-map encoders, looked up once per process through the runtime (no libcuda
// link); nullptr where the driver has none.
struct MapEncoders {
    PFN_cuTensorMapEncodeTiled_v12000 tiled = nullptr;
    PFN_cuTensorMapEncodeIm2col_v12000 im2col = nullptr;
};

inline const MapEncoders& map_encoders() {
    static const MapEncoders encoders = [] {
        MapEncoders e;
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                             cudaEnableDefault, &found) == cudaSuccess &&
            found == cudaDriverEntryPointSuccess) {
            e.tiled = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
        }
        fn = nullptr;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeIm2col", &fn, 12000,
                                             cudaEnableDefault, &found) == cudaSuccess &&
            found == cudaDriverEntryPointSuccess) {
            e.im2col = reinterpret_cast<PFN_cuTensorMapEncodeIm2col_v12000>(fn);
        }
        return e;
    }();
    return encoders;
}

// A plan's tensor map encoded for its buffer's address (a map holds the address, so a call
// encodes it: about a microsecond of host time each), as the tuner's launcher encodes it.
inline cudaError_t encode_map(const plans::TensorMapSpec& m, void* address, CUtensorMap* out) {
    const MapEncoders& e = map_encoders();
    const auto type = static_cast<CUtensorMapDataType>(m.data_type);
    const auto rank = static_cast<cuuint32_t>(m.rank);
    const auto swizzle = static_cast<CUtensorMapSwizzle>(m.swizzle);
    CUresult r;
    if (m.im2col) {
        if (e.im2col == nullptr) return cudaErrorNotSupported;
        r = e.im2col(out, type, rank, address, m.dims, m.strides, m.lower, m.upper, m.box[0],
                     m.box[1], m.element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    } else {
        if (e.tiled == nullptr) return cudaErrorNotSupported;
        r = e.tiled(out, type, rank, address, m.dims, m.strides, m.box, m.element_strides,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    }
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

inline cudaError_t run_plan(const plans::Plan& p, const void* x, const void* w, void* y,
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
            case plans::kInputX: pointers[b] = const_cast<void*>(x); break;
            case plans::kInputW: pointers[b] = const_cast<void*>(w); break;
            case plans::kOutputY: pointers[b] = y; break;
            default: pointers[b] = workspace + buffer.workspace_offset; break;
        }
        // Zeroed on every call: an input the call has no argument for (a bias), or counters
        // that the plan's run must find zero (and leaves so) in a workspace that is the caller's.
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
        alignas(64) CUtensorMap maps[plans::kNumTensorMaps ? plans::kMaxArgsPerLaunch : 1];
        for (int a = 0; a < step.num_args; ++a) {
            const plans::Arg& arg = plans::kArgs[step.first_arg + a];
            if (arg.buffer >= 0) {
                values[a] = &pointers[arg.buffer];
            } else if (arg.map >= 0) {
                const plans::TensorMapSpec& spec = plans::kTensorMaps[arg.map];
                err = encode_map(spec, pointers[spec.buffer], &maps[a]);
                if (err != cudaSuccess) return err;
                values[a] = &maps[a];
            } else {
                ints[a] = arg.value;
                values[a] = &ints[a];
            }
        }
        dim3 grid(step.grid[0], step.grid[1], step.grid[2]);
        if (step.blocks_per_sm > 0) {
            // A persistent kernel walks its x extent by gridDim.x: as many blocks as the
            // device holds at once (the runtime caches the attribute).
            int device = 0, sms = 0;
            err = cudaGetDevice(&device);
            if (err == cudaSuccess) {
                err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
            }
            if (err != cudaSuccess) return err;
            // Whole clusters: a cluster kernel's grid is a multiple of its cluster.
            unsigned resident = step.blocks_per_sm * static_cast<unsigned>(sms);
            resident -= resident % step.cluster;
            if (grid.x > resident) grid.x = resident;
        }
        const dim3 block(step.block[0], step.block[1], step.block[2]);
        err = cudaLaunchKernel(reinterpret_cast<const void*>(kernels[step.kernel]), grid, block,
                               values, step.smem_bytes, stream);
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

}  // namespace detail

// Queue the stored plan of `shape` on `stream`: y = conv2d(x, w), the tensors in the shape's
// dtype and layout. `workspace` holds at least conv2d_workspace_bytes(shape) bytes of device
// memory; with nullptr the call takes it from the stream-ordered allocator (cudaMallocAsync)
// and frees it in stream order.
inline cudaError_t conv2d(const Conv2dShape& shape, const void* x, const void* w, void* y,
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
