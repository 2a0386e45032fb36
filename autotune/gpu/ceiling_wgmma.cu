// Dense tensor-core peak of one dtype on sm_90a: a loop of wgmma that does nothing else, as
// ceiling_fma.cu is for the FP32 FMA units. STORAGE: 0 tf32 (FP32 bits, read as TF32), 1 fp16,
// 2 bf16.
//
// One block (one per SM) fills its shared tiles once, then each of its WARPGROUPS warpgroups
// runs `iterations` groups of GROUP_WGMMAS m64n256 wgmmas (k16, or k8 for tf32: 32 bytes of K
// each, so a group walks one 128-byte row of K) into its FP32 accumulators in registers: its
// own 64 rows of A against the block's 256 rows of B, both read from shared memory through
// descriptors in the 128-byte swizzle. Each group is committed, and the warpgroup waits only
// for the group before it (wait_group 1), so one group is always queued behind the running one.
// FLOPs = 2 * 64 * 256 * k * GROUP_WGMMAS * iterations * WARPGROUPS * blocks.
//
// m64n256, the largest N: the most FLOPs per operand byte read from shared memory (64 * 256 * 2
// FLOPs per (64 + 256) * 2 bytes of K: 51 FLOPs a byte, against 32 for n64), so the loop is
// bound by the tensor cores, not by shared-memory reads (at 4096 FLOPs a clock an SM reads 80 of
// the ~128 bytes a clock its shared memory gives; n64 would need all of them).
// Two warpgroups (a 128 x 256 tile, as the fastest Hopper GEMMs run): the tensor cores take one
// warpgroup's wgmmas at a time, and while one warpgroup waits, fences and issues, the other's
// queued group keeps them busy. A third would fit (170 registers a thread) but only deepen a
// queue that two warpgroups with one group in flight each already keep from running dry.
//
// The operands are pseudo-random values in [-1, 1], not zeros: zeros would draw less power and
// overstate the rate the board sustains.

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "ceiling_wgmma needs the sm_90a target (wgmma): compile it with arch_specific"
#endif

#define WARPGROUPS 2
#define GROUP_WGMMAS 4  // a 128-byte row of K: 4 wgmmas of 32 bytes of K each
#define N_TILE 256
#define A_BYTES (WARPGROUPS * 64 * 128)
#define B_BYTES (N_TILE * 128)

#if !defined(STORAGE)
#error "ceiling_wgmma is compiled per dtype: define STORAGE"
#elif STORAGE == 0
#define ELEM_BYTES 4
#define WG_SHAPE "m64n256k8.f32.tf32.tf32"
#define WG_TRANS ""  // tf32 reads both operands K-major and takes no transpose immediates
#elif STORAGE == 1
#define ELEM_BYTES 2
#define WG_SHAPE "m64n256k16.f32.f16.f16"
#define WG_TRANS ", 0, 0"
#elif STORAGE == 2
#define ELEM_BYTES 2
#define WG_SHAPE "m64n256k16.f32.bf16.bf16"
#define WG_TRANS ", 0, 0"
#else
#error "ceiling_wgmma measures STORAGE 0 (tf32), 1 (fp16) or 2 (bf16)"
#endif

typedef unsigned long long u64;

// A value in [-1, 1] from a hash of its index, as the storage dtype's bits (in the low half for
// 16-bit types).
__device__ __forceinline__ unsigned random_bits(unsigned i)
{
    unsigned h = i * 0x9E3779B1u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    const float v = (h >> 8) * (2.0f / 16777216.0f) - 1.0f;
#if STORAGE == 0
    return __float_as_uint(v);
#else
    unsigned short bits;
#if STORAGE == 2
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(bits) : "f"(v));
#else
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(bits) : "f"(v));
#endif
    return bits;
#endif
}

// K-major tile in the 128-byte swizzle, as kernels/tc_wgmma.cu describes it: start address >> 4,
// leading byte offset 1 (unused), 1024 bytes between 8-row groups, swizzle mode 1 (128 bytes).
__device__ __forceinline__ u64 smem_desc(unsigned addr)
{
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}

#define ACC8(i)                                                                                \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])

// D += A * B^T, m64n256, both operands from shared memory (scale-d 1: accumulate).
__device__ __forceinline__ void wgmma(float (&d)[128], u64 da, u64 db)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned." WG_SHAPE " {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
        "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, "
        "%125, %126, %127}, %128, %129, p, 1, 1" WG_TRANS ";\n}\n"
        : ACC8(0), ACC8(8), ACC8(16), ACC8(24), ACC8(32), ACC8(40), ACC8(48), ACC8(56),
          ACC8(64), ACC8(72), ACC8(80), ACC8(88), ACC8(96), ACC8(104), ACC8(112), ACC8(120)
        : "l"(da), "l"(db), "r"(1));
}

extern "C" __global__ void __launch_bounds__(128 * WARPGROUPS, 1)
    wgmma_peak(float* out, int iterations)
{
    __shared__ __align__(1024) unsigned char tiles[A_BYTES + B_BYTES];
    const unsigned seed = blockIdx.x * (A_BYTES + B_BYTES);
    for (unsigned i = threadIdx.x; i < (A_BYTES + B_BYTES) / ELEM_BYTES; i += blockDim.x) {
#if ELEM_BYTES == 4
        reinterpret_cast<unsigned*>(tiles)[i] = random_bits(seed + i);
#else
        reinterpret_cast<unsigned short*>(tiles)[i] = (unsigned short)random_bits(seed + i);
#endif
    }
    // The generic-proxy writes above, visible to the wgmmas' async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();

    const unsigned base = (unsigned)__cvta_generic_to_shared(tiles);
    const unsigned a_rows = base + (threadIdx.x / 128) * 64 * 128;  // this warpgroup's 64 rows
    const unsigned b_rows = base + A_BYTES;
    float d[128];
#pragma unroll
    for (int j = 0; j < 128; ++j) d[j] = 0.0f;

    for (int it = 0; it < iterations; ++it) {
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int ks = 0; ks < GROUP_WGMMAS; ++ks)
            wgmma(d, smem_desc(a_rows + ks * 32), smem_desc(b_rows + ks * 32));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");

    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 128; ++j) {
        asm volatile("" : "+f"(d[j])::"memory");  // read after the wait, not moved above it
        sum += d[j];
    }
    // Never true for these inputs, but the compiler cannot drop the accumulators.
    if (sum == 1234.5f) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
