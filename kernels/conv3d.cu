// Valid single-channel 3D convolution (cross-correlation), after the LeetGPU blog post: the filter
// lives in constant memory, a block of TILE_X x TILE_Y x TILE_Z threads computes an output tile
// staged through shared memory (USE_SMEM) or read straight from global memory, and every thread is
// coarsened: COARSEN contiguous outputs along COARSEN_AXIS (0 = columns, 1 = rows, 2 = depth; the
// blog's fastest kernel is a 32 x 16 x 1 block with COARSEN = 4 along depth), times VEC contiguous
// columns read as float2/float4 from shared memory (the bank-width idea of Chen et al.).
//
// A thread walks the input window behind its outputs once, row by row, and adds every value it
// loads into each of its outputs that the value reaches, so one load feeds up to COARSEN x VEC
// FMAs; with the loops unrolled, every filter tap is an immediate constant-bank operand.
// A block walks Z_STEPS output tiles down the depth; through shared memory the next tile's input
// is copied asynchronously (cp.async) while the current one is computed.
// RING = 1 is the depth coarsening taken to its end: a TILE_X x TILE_Y block walks Z_STEPS output
// depths, streaming the input through shared memory one depth slice at a time (a 3-stage cp.async
// pipeline), and every thread keeps Kd output depths of its COARSEN x VEC outputs as a ring of
// accumulators: a slice row loaded from shared memory feeds every filter depth at once, and no
// depth halo is re-read. Each step of the ring's fill and drain is unrolled with only the filter
// depths it reaches.
// Problem defines: D, R, Cc (input depth, rows, columns), Kd, Kr, Kc (filter).
// Tunables: TILE_X, TILE_Y, TILE_Z, COARSEN, COARSEN_AXIS, VEC, USE_SMEM, Z_STEPS, RING.

#define OD (D - Kd + 1)  // output sides
#define OR (R - Kr + 1)
#define OC (Cc - Kc + 1)
#define THREADS (TILE_X * TILE_Y * TILE_Z)

#if COARSEN_AXIS == 0 && VEC != 1
#error "coarsening along columns already makes the columns contiguous; VEC must be 1"
#endif
#if RING && (TILE_Z != 1 || !USE_SMEM || (COARSEN_AXIS == 2 && COARSEN != 1))
#error "the depth ring streams slices through shared memory to a flat block coarsened in-plane"
#endif

// Outputs per thread along each axis.
#define CZ ((COARSEN_AXIS == 2) ? COARSEN : 1)
#define CY ((COARSEN_AXIS == 1) ? COARSEN : 1)
#define CX ((COARSEN_AXIS == 0) ? COARSEN : VEC)
// Output tile of a block.
#define OUT_Z (TILE_Z * CZ)
#define OUT_Y (TILE_Y * CY)
#define OUT_X (TILE_X * CX)
// Input window behind one thread's outputs; a window row is read as NV aligned VEC-wide loads.
#define EZ (CZ + Kd - 1)
#define EY (CY + Kr - 1)
#define EX (CX + Kc - 1)
#define NV ((EX + VEC - 1) / VEC)
// A thread's output row is stored as SV-wide vectors, aligned when OC is a multiple of SV (ox is
// a multiple of VEC, hence of SV): each vector is then wholly inside the output or wholly past it.
#define SV ((VEC == 4 && OC % 4 == 0) ? 4 : (VEC >= 2 && OC % 2 == 0) ? 2 : 1)
// Shared tile: the block's input window; a row is padded to a multiple of 4 floats, so that the
// last thread's last vector fits and every row starts 16-byte aligned (VEC-wide reads, 4-float
// copies).
#define IN_Z (OUT_Z + Kd - 1)
#define IN_Y (OUT_Y + Kr - 1)
#define PITCH (OUT_X + ((Kc + 2) / 4) * 4)
#define PLANE (IN_Y * PITCH)
#define TILE_FLOATS (RING ? PLANE : IN_Z * PLANE)
// A block walking several depth tiles double-buffers them; the ring's slice pipeline has 3 stages.
#define STAGES 3
#define BUFFERS (RING ? STAGES : (Z_STEPS > 1) ? 2 : 1)
// Up to 48 KB the tiles are static (ptxas reports them); past that they are dynamic shared memory,
// which the plan sizes with the same formula and the evaluator opts in to.
#define STATIC_SMEM (BUFFERS * TILE_FLOATS * 4 <= 48 * 1024)

// The register budget: 512 threads' worth of blocks per multiprocessor (128 registers a thread),
// or one block when it is larger. With the thread count alone ptxas would aim at a full SM of small
// blocks and squeeze the accumulators into 32 registers.
#define MIN_BLOCKS ((THREADS >= 512) ? 1 : 512 / THREADS)
#define REG_BUDGET (65536 / ((THREADS > 512) ? THREADS : 512))

// Every FMA of a thread: up to 2048 (past that NVVM no longer unrolls the whole window) the window
// is unrolled whole and every tap is an immediate operand; larger bodies loop over the window's
// depth slices, with taps guarded and indexed at run time. Read-only global loads are not held
// back by the barrier after each row, so ptxas issues all of an unrolled window's (or slice's)
// loads up front: straight from global memory, the window is unrolled only when all of it fits
// the registers beside the accumulators, otherwise the kernel loops over every row.
#define FMAS (CZ * CY * CX * Kd * Kr * Kc)
#define WHOLE (FMAS <= 2048 && (USE_SMEM || EZ * EY * EX + CZ * CY * CX + 32 <= REG_BUDGET))
#define EZ_UNROLL (WHOLE ? EZ : 1)
#define EY_UNROLL ((WHOLE || USE_SMEM) ? EY : 1)

__constant__ float c_filter[Kd * Kr * Kc];

#include "cp_async.cuh"
#include "vector.cuh"

#if USE_SMEM
// Floats per asynchronous copy: 4 (16 bytes) when every input row starts 16-byte aligned.
#define COPY ((Cc % 4 == 0) ? 4 : 1)

// COPY floats of the tile, copied global -> shared asynchronously (cp_async.cuh: no register
// holds them); a source size of 0 writes zeros instead (past the input's far edges: those values
// only reach outputs that are never stored).
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool inside) {
    cp_async::copy_zfill<COPY * 4, true>(cp_async::shared_address(dst), src,
                                         inside ? COPY * 4 : 0);
}

// A thread's pieces of one depth slice of the block's input window are the same for every slice:
// their offsets and bounds are worked out once (PER of them). With COPY = 4, a piece starts at a
// column that is a multiple of 4 (x0 and PITCH are), so with Cc a multiple of 4 it is wholly inside
// or outside.
struct SlicePieces {
    static constexpr int PIECES = PLANE / COPY;
    static constexpr int PER = (PIECES + THREADS - 1) / THREADS;
    int src[PER];
    bool inside[PER];
    int tid;

    __device__ __forceinline__ SlicePieces(int y0, int x0, int tid_) : tid(tid_) {
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            const int e = (tid + i * THREADS) * COPY;
            const int gy = y0 + e / PITCH;
            const int gx = x0 + e % PITCH;
            inside[i] = e < PLANE && gy < R && gx < Cc;
            src[i] = inside[i] ? gy * Cc + gx : 0;
        }
    }
    // Copy input slice gz into the plane at dst; zeros past the input's depth unless the caller
    // knows the slice is inside (DEPTH_INSIDE).
    template <bool DEPTH_INSIDE = false>
    __device__ __forceinline__ void copy(const float* __restrict__ x, float* dst, int gz) const {
        const bool depth_inside = DEPTH_INSIDE || gz < D;
        const float* slice = x + (depth_inside ? (long long)gz * R * Cc : 0);
#pragma unroll
        for (int i = 0; i < PER; ++i) {
            const int piece = tid + i * THREADS;
            if (PIECES % THREADS == 0 || piece < PIECES)
                copy_async(dst + piece * COPY, slice + src[i], depth_inside && inside[i]);
        }
    }
};

// Start copying the input window behind the block's tile at output depth z0 into s, as one group
// of copies.
__device__ __forceinline__ void start_tile(const float* __restrict__ x, float* s, int z0, int y0,
                                           int x0, int tid) {
    const SlicePieces pieces(y0, x0, tid);
#pragma unroll 4
    for (int z = 0; z < IN_Z; ++z) pieces.copy(x, s + z * PLANE, z0 + z);
    cp_async::commit();
}
#endif

// One output row of a thread: CX values, of which the first `cols` are inside the output, as
// SV-wide stores (cols is a multiple of SV, so each vector is wholly in or out).
__device__ __forceinline__ void store_row(float* dst, const float* values, int cols) {
#pragma unroll
    for (int s = 0; s < CX; s += SV) {
        if (s < cols) Vec<SV>::store(dst + s, values + s);
    }
}

// The outputs of one thread in the tile at output depth z0: from the shared tile (window: the
// thread's corner of it) or straight from global memory.
__device__ __forceinline__ void compute_tile(const float* __restrict__ x, const float* window,
                                             float* __restrict__ y, int oz, int oy, int ox) {
    float acc[CZ][CY][CX];
#pragma unroll
    for (int kz = 0; kz < CZ; ++kz)
#pragma unroll
        for (int ky = 0; ky < CY; ++ky)
#pragma unroll
            for (int kx = 0; kx < CX; ++kx) acc[kz][ky][kx] = 0.0f;

#pragma unroll EZ_UNROLL
    for (int ez = 0; ez < EZ; ++ez) {
#pragma unroll EY_UNROLL
        for (int ey = 0; ey < EY; ++ey) {
            float row[NV * VEC];
#if USE_SMEM
#pragma unroll
            for (int v = 0; v < NV; ++v)
                Vec<VEC>::load(window + (ez * IN_Y + ey) * PITCH + v * VEC, row + v * VEC);
#else
            // Straight from global memory, cached in L1. Rows past the input are clamped to it,
            // columns past it read as zero; both only reach outputs that are never stored.
            const float* src =
                x + ((long long)min(oz + ez, D - 1) * R + min(oy + ey, R - 1)) * Cc + ox;
#pragma unroll
            for (int ex = 0; ex < EX; ++ex) row[ex] = ex < Cc - ox ? __ldg(src + ex) : 0.0f;
#endif
            // Every output the loaded values reach, with the tap that links them.
#pragma unroll
            for (int kz = 0; kz < CZ; ++kz) {
                const int dz = ez - kz;
                if (dz < 0 || dz >= Kd) continue;
#pragma unroll
                for (int ky = 0; ky < CY; ++ky) {
                    const int dy = ey - ky;
                    if (dy < 0 || dy >= Kr) continue;
#pragma unroll
                    for (int kx = 0; kx < CX; ++kx) {
#pragma unroll
                        for (int dx = 0; dx < Kc; ++dx) {
                            acc[kz][ky][kx] = fmaf(row[kx + dx], c_filter[(dz * Kr + dy) * Kc + dx],
                                                   acc[kz][ky][kx]);
                        }
                    }
                }
            }
            // Shared loads of later rows may not be hoisted above this point: otherwise ptxas
            // issues the whole unrolled window's loads up front and spills them.
            __syncwarp();
        }
    }

#pragma unroll
    for (int kz = 0; kz < CZ; ++kz) {
#pragma unroll
        for (int ky = 0; ky < CY; ++ky) {
            if (oz + kz >= OD || oy + ky >= OR) continue;
            store_row(y + ((long long)(oz + kz) * OR + oy + ky) * OC + ox, acc[kz][ky], OC - ox);
        }
    }
}

#if RING
// The ring: acc[k] holds the outputs at depth z - k while slice z streams through, so slice z
// meets filter depth k in acc[k]; after the slice, acc[Kd - 1] is complete and the ring moves on.
typedef float Ring[Kd][CY][CX];

// Slice z of the walk (window: the thread's corner of it in shared memory) into the ring, filter
// depths KLO .. KHI only: at the walk's ends the others would add into depths outside the walk.
template <int KLO, int KHI>
__device__ __forceinline__ void ring_slice(Ring& acc, const float* window) {
#pragma unroll
    for (int ey = 0; ey < EY; ++ey) {
        float row[NV * VEC];
#pragma unroll
        for (int v = 0; v < NV; ++v) Vec<VEC>::load(window + ey * PITCH + v * VEC, row + v * VEC);
#pragma unroll
        for (int kd = KLO; kd <= KHI; ++kd) {
#pragma unroll
            for (int ky = 0; ky < CY; ++ky) {
                const int dy = ey - ky;
                if (dy < 0 || dy >= Kr) continue;
#pragma unroll
                for (int kx = 0; kx < CX; ++kx) {
#pragma unroll
                    for (int dx = 0; dx < Kc; ++dx) {
                        acc[kd][ky][kx] = fmaf(row[kx + dx], c_filter[(kd * Kr + dy) * Kc + dx],
                                               acc[kd][ky][kx]);
                    }
                }
            }
        }
        // As in compute_tile: keeps ptxas from hoisting every row's loads to the top.
        __syncwarp();
    }
}

// What a step of the walk needs besides the ring. out: where the thread's outputs of the depth
// that the current step completes go; rows, cols: how many of its rows and columns are inside.
struct Walk {
    const SlicePieces& pieces;
    const float* __restrict__ x;
    float* s_in;
    float* out;
    int rows, cols, z0, slices, corner;
    int buffer;  // offset of the current slice's stage
};

// One step of the walk: wait for slice z, start the copy of slice z + STAGES - 1 into the stage
// that slice z - 1 leaves, add slice z into the ring (filter depths KLO .. KHI), store the depth
// it completes (STORE: 0 none yet, 1 always, 2 when z >= Kd - 1), move the ring.
template <int KLO, int KHI, int STORE>
__device__ __forceinline__ void ring_step(Ring& acc, Walk& w, int z) {
    cp_async::wait<STAGES - 2>();  // this thread's copies of slice z are in
    __syncthreads();            // everyone's are, and everyone is done with slice z - 1
    const int refill = w.buffer == 0 ? (STAGES - 1) * PLANE : w.buffer - PLANE;
    if (z + STAGES - 1 < w.slices)
        w.pieces.copy<true>(w.x, w.s_in + refill, w.z0 + z + STAGES - 1);
    cp_async::commit();  // possibly empty: keeps one group per step for the wait above
    ring_slice<KLO, KHI>(acc, w.s_in + w.buffer + w.corner);
    w.buffer = w.buffer == (STAGES - 1) * PLANE ? 0 : w.buffer + PLANE;

    if (STORE == 1 || (STORE == 2 && z >= Kd - 1)) {
#pragma unroll
        for (int ky = 0; ky < CY; ++ky) {
            if (ky < w.rows) store_row(w.out + ky * OC, acc[Kd - 1][ky], w.cols);
        }
    }
    w.out += OR * OC;
#pragma unroll
    for (int kd = Kd - 1; kd > 0; --kd)
#pragma unroll
        for (int ky = 0; ky < CY; ++ky)
#pragma unroll
            for (int kx = 0; kx < CX; ++kx) acc[kd][ky][kx] = acc[kd - 1][ky][kx];
#pragma unroll
    for (int ky = 0; ky < CY; ++ky)
#pragma unroll
        for (int kx = 0; kx < CX; ++kx) acc[0][ky][kx] = 0.0f;
}

// The ring filling (slice J < Kd - 1 reaches filter depths 0 .. J) and draining (slice
// outputs + J reaches filter depths J + 1 .. Kd - 1), each step unrolled with its own depths.
template <int J> struct Fill {
    static __device__ __forceinline__ void run(Ring& acc, Walk& w) {
        ring_step<0, J, 0>(acc, w, J);
        Fill<J + 1>::run(acc, w);
    }
};
template <> struct Fill<Kd - 1> {
    static __device__ __forceinline__ void run(Ring&, Walk&) {}
};
template <int J> struct Drain {
    static __device__ __forceinline__ void run(Ring& acc, Walk& w, int outputs) {
        ring_step<J + 1, Kd - 1, 1>(acc, w, outputs + J);
        Drain<J + 1>::run(acc, w, outputs);
    }
};
template <> struct Drain<Kd - 1> {
    static __device__ __forceinline__ void run(Ring&, Walk&, int) {}
};
#endif

// A block walks Z_STEPS output tiles down the depth. Through shared memory the tiles are double
// buffered: the next tile's copy is in flight while the current one is computed.
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
conv3d(const float* __restrict__ x, float* __restrict__ y) {
    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    const int oy = blockIdx.y * OUT_Y + ty * CY;  // this thread's first output row and column
    const int ox = blockIdx.x * OUT_X + tx * CX;
    const int tile0 = blockIdx.z * Z_STEPS;       // the block's first depth tile
    // Same for the whole block, so every thread reaches every barrier below.
    const int steps = min(Z_STEPS, (OD + OUT_Z - 1) / OUT_Z - tile0);

#if USE_SMEM
#if STATIC_SMEM
    __shared__ __align__(16) float s_in[BUFFERS * TILE_FLOATS];
#else
    extern __shared__ __align__(16) float s_in[];
#endif
    const int tid = (tz * TILE_Y + ty) * TILE_X + tx;
#if RING
    // The walk: output depths z0 .. z0 + outputs - 1, from input slices z0 .. z0 + outputs + Kd - 2
    // (all inside the input).
    const int z0 = blockIdx.z * Z_STEPS;
    const int outputs = min(Z_STEPS, OD - z0);
    const int slices = outputs + Kd - 1;
    const SlicePieces pieces(blockIdx.y * OUT_Y, blockIdx.x * OUT_X, tid);
#pragma unroll
    for (int i = 0; i < STAGES - 1; ++i) {
        if (i < slices) pieces.copy<true>(x, s_in + i * PLANE, z0 + i);
        cp_async::commit();
    }
    Ring acc;
#pragma unroll
    for (int kd = 0; kd < Kd; ++kd)
#pragma unroll
        for (int ky = 0; ky < CY; ++ky)
#pragma unroll
            for (int kx = 0; kx < CX; ++kx) acc[kd][ky][kx] = 0.0f;
    // The depth completed by slice z is z0 + z - (Kd - 1); slice Kd - 1 completes the first.
    Walk w{pieces,
           x,
           s_in,
           y + ((long long)(z0 - (Kd - 1)) * OR + oy) * OC + ox,
           OR - oy,
           OC - ox,
           z0,
           slices,
           (ty * CY) * PITCH + tx * CX,
           0};
    // A walk at least Kd - 1 long fills the ring, runs with every filter depth, then drains it;
    // a shorter one (the last, or a thin output) runs every step with every filter depth (what
    // lands in depths outside the walk is never stored).
    const bool long_walk = outputs >= Kd - 1;
    int z = 0;
    if (long_walk) {
        Fill<0>::run(acc, w);
        z = Kd - 1;
    }
    const int middle_end = long_walk ? outputs : slices;
#pragma unroll 1
    for (; z < middle_end; ++z) ring_step<0, Kd - 1, 2>(acc, w, z);
    if (long_walk) Drain<0>::run(acc, w, outputs);
    (void)steps;
    (void)tile0;
#else
    const int y0 = blockIdx.y * OUT_Y, x0 = blockIdx.x * OUT_X;
    const int corner = ((tz * CZ) * IN_Y + ty * CY) * PITCH + tx * CX;
    start_tile(x, s_in, tile0 * OUT_Z, y0, x0, tid);
#pragma unroll 1
    for (int step = 0; step < steps; ++step) {
        const float* buffer = s_in + (step % BUFFERS) * TILE_FLOATS;
        if (BUFFERS > 1 && step + 1 < steps) {
            start_tile(x, s_in + ((step + 1) % BUFFERS) * TILE_FLOATS, (tile0 + step + 1) * OUT_Z,
                       y0, x0, tid);
            cp_async::wait<1>();
        } else {
            cp_async::wait<0>();
        }
        __syncthreads();  // the whole tile is in
        compute_tile(x, buffer + corner, y, (tile0 + step) * OUT_Z + tz * CZ, oy, ox);
        __syncthreads();  // every thread is done with the buffer the next copy refills
        if (BUFFERS == 1 && step + 1 < steps) {
            start_tile(x, s_in, (tile0 + step + 1) * OUT_Z, y0, x0, tid);
        }
    }
#endif
#else
#pragma unroll 1
    for (int step = 0; step < steps; ++step) {
        compute_tile(x, nullptr, y, (tile0 + step) * OUT_Z + tz * CZ, oy, ox);
    }
#endif
}
