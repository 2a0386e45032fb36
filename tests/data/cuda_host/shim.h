// Host stand-ins for the CUDA features kernels/chen_general.cu uses, so that the kernel
// source runs on the CPU in the CPU-only tests: one std::thread per CUDA thread, std::barrier for
// __syncthreads and for the cluster barrier, a heap block per CTA for its shared memory.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

struct host_uint3 {
    unsigned x, y, z;
};
thread_local host_uint3 threadIdx, blockIdx;
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }

thread_local std::barrier<>* host_block_barrier;
thread_local std::barrier<>* host_cluster_barrier;
thread_local float* host_smem;                  // this CTA's dynamic shared memory
thread_local float* const* host_cluster_smem;   // every CTA's of the cluster, by rank
thread_local unsigned host_rank;

inline void __syncthreads() { host_block_barrier->arrive_and_wait(); }
using std::max;
using std::min;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __align__(n) alignas(n)

// Replace the kernel's sm_90 PTX helpers (cluster rank, barrier, distributed shared memory).
#define HOST_CLUSTER_PRIMITIVES                                                  \
    inline unsigned cluster_rank() { return host_rank; }                         \
    inline void cluster_sync() { host_cluster_barrier->arrive_and_wait(); }      \
    inline const float* cluster_peer(const float* p, unsigned rank) {            \
        return host_cluster_smem[rank] + (p - host_smem);                        \
    }
