// Copies global -> shared memory that pass through no register (cp.async, sm_80 and later), and
// the groups that wait for them: the helpers the kernels had each written out, written once.
//
//   shared_address(p)              the shared-window address of a generic pointer, as cp.async
//                                  takes it
//   copy<Bytes>(dst, src)          Bytes (4, 8 or 16) bytes to dst (a shared address, or a
//                                  pointer to shared memory); 16-byte copies skip L1 (.cg),
//                                  smaller ones may not (.ca)
//   copy_zfill<Bytes, L1>(dst, src, src_bytes)
//                                  Bytes bytes of which only the first src_bytes are read and the
//                                  rest are written as zeros (0: all zeros, nothing read: the
//                                  copies past a tensor's edges); through L1 (.ca) or not (.cg)
//   commit()                       close the group of copies issued since the last commit
//   wait<Pending>()                wait until at most Pending committed groups are in flight
//
// Every function is inline and unused ones produce no code, so a kernel's cubin is what it was
// when the kernel wrote its own copy (checked with tests/nvrtc/compare_cubins.py). The template
// parameters are not named in UPPER_CASE: the kernels' tunables arrive as macros.

#pragma once

namespace cp_async {

__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <int Bytes> __device__ __forceinline__ void copy(unsigned dst, const void* src) {
    if constexpr (Bytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(src),
                     "n"(Bytes));
    }
}

template <int Bytes> __device__ __forceinline__ void copy(void* dst, const void* src) {
    copy<Bytes>(shared_address(dst), src);
}

template <int Bytes, bool L1>
__device__ __forceinline__ void copy_zfill(unsigned dst, const void* src, int src_bytes) {
    static_assert(L1 || Bytes == 16, "cp.async.cg copies 16 bytes");
    if constexpr (L1) {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src),
                     "n"(Bytes), "r"(src_bytes));
    } else {
        asm volatile("cp.async.cg.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src),
                     "n"(Bytes), "r"(src_bytes));
    }
}

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int Pending> __device__ __forceinline__ void wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

}  // namespace cp_async
