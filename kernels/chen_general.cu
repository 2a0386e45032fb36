// Chen et al. (DAC 2017), section 4 and Algorithm 2: direct convolution for the general case of
// C input channels. The grid is ceil(F / FTB) blocks in X (groups of FTB filters) by
// ceil(N / W) * ceil(N / H) * B blocks in Y (a W x H output tile of one image), times CSPLIT in Z
// (our addition: channel ranges of one tile, summed inside a thread-block cluster).
// A block is TX x TY threads, TX = FTB / FT along the filters and TY = (W * H) / WT along the
// pixels. A thread accumulates FT filters x WT horizontally contiguous outputs in registers. CSH
// channels of the input tile (with its halo) and of the FTB filters are staged in shared memory,
// the filters transposed ([channel][ky][kx][filter]) and each filter row padded by VEC words, so
// that the transposing stores do not pile onto one bank. Per channel and filter row ky, a thread
// reads one input row of (WT - 1) * STRIDE + K pixels into registers and slides along it for the
// K taps kx, reading FT filter values per tap: the inner loop is FT x WT FMAs from registers.
// Shared-memory reads are VEC-wide (float, float2, float4: the bank-width model's n). The next
// CSH channels are fetched from global memory into registers while the current ones are computed.
// Problem defines: B, C, N, K, F, STRIDE. Tunables: W, H, FTB, WT, FT, CSH, VEC, CSPLIT, PREFETCH
// (1: the paper's register prefetch; 0: plain copies between the barriers, for chunks too big).

#define S ((N - 1) * STRIDE + K)  // input side
#define KK (K * K)
#define TX (FTB / FT)
#define TY ((W * H) / WT)
#define THREADS (TX * TY)
#define PX_GROUPS (W / WT)  // threads along one tile row

#define SPAN ((WT - 1) * STRIDE + K)        // input columns behind a thread's WT outputs
#define SPAN_VECS ((SPAN + VEC - 1) / VEC)  // VEC-wide loads that cover them
#define IN_H ((H - 1) * STRIDE + K)         // input rows behind the tile
#define IN_W ((W - 1) * STRIDE + K)         // input columns behind the tile
// A staged input row: the last thread's last vector ends here (>= IN_W, a multiple of VEC).
#define IMG_STRIDE ((W - WT) * STRIDE + SPAN_VECS * VEC)
#define IMG_CHANNEL (IN_H * IMG_STRIDE)
#define FLT_STRIDE (FTB + VEC)  // padded transposed filter row
#define FLT_CHANNEL (KK * FLT_STRIDE)
#define RED_STRIDE (W * H + 1)  // partial sums of one filter, odd so that filters spread on banks

// Global -> register prefetch: each thread holds its share of one CSH-channel chunk.
#define IMG_ELEMS (CSH * IN_H * IN_W)
#define FLT_ELEMS (FTB * CSH * KK)
#define IMG_PF ((IMG_ELEMS + THREADS - 1) / THREADS)  // with PREFETCH
#define FLT_PF ((FLT_ELEMS + THREADS - 1) / THREADS)

#define TILES_X ((N + W - 1) / W)
#define TILES ((((N + H - 1) / H)) * TILES_X)
#define CHUNKS ((C + CSH - 1) / CSH)
#define CHUNKS_PER_SPLIT ((CHUNKS + CSPLIT - 1) / CSPLIT)

// Unrolling the K filter rows as well lets the scheduler load the next rows early; past about a
// thousand FMAs per channel those early loads take more registers than the accumulators leave
// (ptxas spilled K = 11 tiles), so larger bodies keep the row loop.
#define KY_UNROLL ((KK * FT * WT <= 1024) ? K : 1)

#if FT % VEC != 0 || (WT * STRIDE) % VEC != 0 || W % WT != 0 || (W * H) % WT != 0
#error "chen_general: FT and WT * STRIDE must be multiples of VEC, and WT must divide W"
#endif

// threadIdx.x behind an empty asm: index arithmetic built on it is redone at each use instead of
// being hoisted out of the channel loop, where it would hold 2-3 registers per prefetched word
// through all the FMAs (the registers the accumulators need).
__device__ __forceinline__ int opaque_tid() {
    int t = threadIdx.x;
    asm volatile("" : "+r"(t));
    return t;
}

// The n-wide shared-memory access unit of the bank-width model.
#include "vector.cuh"
using vec_t = Vec<VEC>::type;

// --- cluster primitives (sm_90): only the CSPLIT > 1 epilogue uses them ---
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}
// Every thread of every block of the cluster arrives; shared-memory writes before it are seen by
// the whole cluster after it.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
                 ::: "memory");
}
// The same shared-memory word in the block of cluster rank `rank` (distributed shared memory).
__device__ __forceinline__ const float* cluster_peer(const float* p, unsigned rank) {
    unsigned long long out;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(p), "r"(rank));
    return reinterpret_cast<const float*>(out);
}
// --- end cluster primitives ---

#if CSPLIT > 1
#define CLUSTER_DIMS __cluster_dims__(1, 1, CSPLIT)
#else
#define CLUSTER_DIMS
#endif

// Edge tiles and a last chunk past C exist only for some shapes; elsewhere the bounds checks
// (and the branches around the loads) compile away.
#define EDGE_TILES (N % W != 0 || N % H != 0)
#define CHANNEL_TAIL (C % CSH != 0)
#define FILTER_TAIL (F % FTB != 0)

// One word of a CSH-channel chunk of the input tile, element e in [ci][row][col] order (col
// fastest: consecutive threads read consecutive words of an input row). Pixels past the input
// and channels past C read as zero: they only feed outputs that are never stored, or add nothing.
__device__ __forceinline__ float image_word(const float* __restrict__ img, int e, int c0, int ox0,
                                            int oy0) {
    const int ci = e / (IN_H * IN_W);
    const int rem = e - ci * (IN_H * IN_W);
    const int row = rem / IN_W;
    const int col = rem - row * IN_W;
    bool ok = true;
    if (CHANNEL_TAIL) ok = ok && c0 + ci < C;
    if (EDGE_TILES) ok = ok && oy0 * STRIDE + row < S && ox0 * STRIDE + col < S;
    return ok ? img[(long long)c0 * S * S + ci * (S * S) + row * S + col] : 0.0f;
}

__device__ __forceinline__ int image_slot(int e) {
    const int ci = e / (IN_H * IN_W);
    const int rem = e - ci * (IN_H * IN_W);
    const int row = rem / IN_W;
    return ci * IMG_CHANNEL + row * IMG_STRIDE + (rem - row * IN_W);
}

// One word of the FTB filters' CSH-channel chunk, element e in [filter][ci * K * K + ky * K + kx]
// order: in global memory a filter's channels c0 .. c0 + CSH - 1 are consecutive words. Filters
// past F and channels past C read as zero.
__device__ __forceinline__ float filter_word(const float* __restrict__ flt, int e, int c0, int f0) {
    const int fl = e / (CSH * KK);
    const int rest = e - fl * (CSH * KK);
    bool ok = true;
    if (FILTER_TAIL) ok = ok && f0 + fl < F;
    if (CHANNEL_TAIL) ok = ok && c0 + rest / KK < C;
    return ok ? flt[c0 * KK + fl * (C * KK) + rest] : 0.0f;
}

// Transposed into [ci][ky * K + kx][filter], rows FLT_STRIDE apart.
__device__ __forceinline__ int filter_slot(int e) {
    const int fl = e / (CSH * KK);
    return (e - fl * (CSH * KK)) * FLT_STRIDE + fl;
}

#if PREFETCH
// Lines 4-5 and 8-9: this thread's share of a chunk, into registers.
__device__ __forceinline__ void fetch(const float* __restrict__ img, const float* __restrict__ flt,
                                      int c0, int ox0, int oy0, int f0, float (&r_img)[IMG_PF],
                                      float (&r_flt)[FLT_PF]) {
    const int tid = opaque_tid();
#pragma unroll
    for (int p = 0; p < IMG_PF; ++p) {
        const int e = tid + p * THREADS;
        const bool in = (p + 1) * THREADS <= IMG_ELEMS || e < IMG_ELEMS;
        r_img[p] = in ? image_word(img, e, c0, ox0, oy0) : 0.0f;
    }
#pragma unroll
    for (int p = 0; p < FLT_PF; ++p) {
        const int e = tid + p * THREADS;
        const bool in = (p + 1) * THREADS <= FLT_ELEMS || e < FLT_ELEMS;
        r_flt[p] = in ? filter_word(flt, e, c0, f0) : 0.0f;
    }
}

// Lines 17-18: the registers into shared memory.
__device__ __forceinline__ void stage(float* __restrict__ sh_img, float* __restrict__ sh_flt,
                                      const float (&r_img)[IMG_PF], const float (&r_flt)[FLT_PF]) {
    const int tid = opaque_tid();
#pragma unroll
    for (int p = 0; p < IMG_PF; ++p) {
        const int e = tid + p * THREADS;
        if ((p + 1) * THREADS <= IMG_ELEMS || e < IMG_ELEMS) sh_img[image_slot(e)] = r_img[p];
    }
#pragma unroll
    for (int p = 0; p < FLT_PF; ++p) {
        const int e = tid + p * THREADS;
        if ((p + 1) * THREADS <= FLT_ELEMS || e < FLT_ELEMS) sh_flt[filter_slot(e)] = r_flt[p];
    }
}
#else
// Without prefetch (where a thread's share of a chunk would hold too many registers): straight
// from global into shared memory between the barriers, a few loads in flight at a time.
__device__ __forceinline__ void copy(const float* __restrict__ img, const float* __restrict__ flt,
                                     int c0, int ox0, int oy0, int f0, float* __restrict__ sh_img,
                                     float* __restrict__ sh_flt) {
#pragma unroll 4
    for (int e = threadIdx.x; e < IMG_ELEMS; e += THREADS) {
        sh_img[image_slot(e)] = image_word(img, e, c0, ox0, oy0);
    }
#pragma unroll 4
    for (int e = threadIdx.x; e < FLT_ELEMS; e += THREADS) {
        sh_flt[filter_slot(e)] = filter_word(flt, e, c0, f0);
    }
}
#endif

// One block per multiprocessor is enough to launch: the promise lets ptxas give a thread its
// whole share of the register file, which the FT x WT accumulators need.
extern "C" __global__ void __launch_bounds__(THREADS, 1) CLUSTER_DIMS
chen_general(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
    // The staged chunk: CSH channels of the input tile, then of the transposed filters.
    extern __shared__ __align__(16) float smem[];

    // tx picks the filters, ty the pixels: the TX threads that share ty read the same input
    // words (a shared-memory broadcast), consecutive tx read consecutive filter vectors.
    const int tx = threadIdx.x % TX;
    const int ty = threadIdx.x / TX;
    const int py = ty / PX_GROUPS;        // output row within the tile
    const int px = ty % PX_GROUPS * WT;   // first output column within the tile

    const int f0 = blockIdx.x * FTB;
    const int b = blockIdx.y / TILES;
    const int tile = blockIdx.y % TILES;
    const int oy0 = tile / TILES_X * H;
    const int ox0 = tile % TILES_X * W;
    const int c_begin = blockIdx.z * (CHUNKS_PER_SPLIT * CSH);
    const int c_end = min(C, c_begin + CHUNKS_PER_SPLIT * CSH);

    const float* img = x + (long long)b * C * S * S + (long long)(oy0 * STRIDE) * S + ox0 * STRIDE;
    const float* flt = w + (long long)f0 * C * KK;

    // Line 1: the accumulators, the input row and the filter values live in registers.
    float acc[FT][WT];
#pragma unroll
    for (int f = 0; f < FT; ++f) {
#pragma unroll
        for (int j = 0; j < WT; ++j) acc[f][j] = 0.0f;
    }

#if PREFETCH
    float pf_img[IMG_PF];
    float pf_flt[FLT_PF];
#endif
    // Lines 17-18 (with prefetch: the registers fetched for chunk c0), or a plain copy.
    auto put_chunk = [&](float* dst, int c0) {
#if PREFETCH
        (void)c0;
        stage(dst, dst + CSH * IMG_CHANNEL, pf_img, pf_flt);
#else
        copy(img, flt, c0, ox0, oy0, f0, dst, dst + CSH * IMG_CHANNEL);
#endif
    };

    // Lines 4-6: the first chunk into shared memory (a split past C, which the space never
    // launches, would have none).
    if (c_begin < c_end) {
#if PREFETCH
        fetch(img, flt, c_begin, ox0, oy0, f0, pf_img, pf_flt);
#endif
        put_chunk(smem, c_begin);
    }
    __syncthreads();

    // Line 7. `more` is the same for the whole block, so every thread meets the barriers.
#pragma unroll 1
    for (int c0 = c_begin; c0 < c_end; c0 += CSH) {
        const bool more = c0 + CSH < c_end;
#if PREFETCH
        // Lines 8-9: the loads are issued now and consumed only after the FMAs below.
        if (more) fetch(img, flt, c0 + CSH, ox0, oy0, f0, pf_img, pf_flt);
#endif
        // Lines 10-15.
        const float* sh_img = smem;
        const float* sh_flt = smem + CSH * IMG_CHANNEL;
#pragma unroll 1
        for (int i = 0; i < CSH; ++i) {
            const float* img_rows = sh_img + i * IMG_CHANNEL + py * STRIDE * IMG_STRIDE + px * STRIDE;
            const float* flt_rows = sh_flt + i * FLT_CHANNEL + tx * VEC;
#pragma unroll KY_UNROLL
            for (int ky = 0; ky < K; ++ky) {
                // Line 12: one input row, VEC-wide.
                float row[SPAN_VECS * VEC];
                const vec_t* src = reinterpret_cast<const vec_t*>(img_rows + ky * IMG_STRIDE);
#pragma unroll
                for (int q = 0; q < SPAN_VECS; ++q) Vec<VEC>::unpack(src[q], row + q * VEC);
#pragma unroll
                for (int kx = 0; kx < K; ++kx) {
                    // Line 14: FT filter values; thread tx owns filters (m * TX + tx) * VEC + v.
                    float fv[FT];
                    const vec_t* fsrc =
                        reinterpret_cast<const vec_t*>(flt_rows + (ky * K + kx) * FLT_STRIDE);
#pragma unroll
                    for (int m = 0; m < FT / VEC; ++m) Vec<VEC>::unpack(fsrc[m * TX], fv + m * VEC);
                    // Line 15: the row slides by kx; pure register FMAs.
#pragma unroll
                    for (int f = 0; f < FT; ++f) {
#pragma unroll
                        for (int j = 0; j < WT; ++j) {
                            acc[f][j] = fmaf(fv[f], row[j * STRIDE + kx], acc[f][j]);
                        }
                    }
                }
            }
        }
        if (more) {
            __syncthreads();  // line 16: nobody reads the chunk any more
            put_chunk(smem, c0 + CSH);  // lines 17-18
            __syncthreads();  // line 19
        }
    }

#if CSPLIT == 1
    // Line 20: straight from the registers, WT consecutive words per filter, 4 or 2 at a time
    // where the output rows keep them aligned (N, and so W and WT, multiples of the width).
    constexpr int SV = (WT % 4 == 0 && N % 4 == 0) ? 4 : (WT % 2 == 0 && N % 2 == 0) ? 2 : 1;
    const int oy = oy0 + py;
    if (!EDGE_TILES || oy < N) {
#pragma unroll
        for (int f = 0; f < FT; ++f) {
            const int fo = f0 + (f / VEC * TX + tx) * VEC + f % VEC;
            if (FILTER_TAIL && fo >= F) continue;
            float* dst = y + (((long long)b * F + fo) * N + oy) * N + ox0 + px;
#pragma unroll
            for (int j = 0; j < WT; j += SV) {
                // N is a multiple of SV: a group is wholly inside the row or wholly past it.
                if (EDGE_TILES && ox0 + px + j >= N) break;
                if constexpr (SV == 4) {
                    *reinterpret_cast<float4*>(dst + j) = Vec<4>::pack(&acc[f][j]);
                } else if constexpr (SV == 2) {
                    *reinterpret_cast<float2*>(dst + j) = Vec<2>::pack(&acc[f][j]);
                } else {
                    dst[j] = Vec<1>::pack(&acc[f][j]);
                }
            }
        }
    }
#else
    // The CSPLIT blocks of a cluster computed the same outputs over different channel ranges.
    // Each leaves its partial sums in its own shared memory; then every block sums one slice of
    // the tile over all blocks (in rank order, so the result does not depend on timing) and
    // stores it, consecutive threads on consecutive pixels.
    __syncthreads();  // the staged chunk is dead; its space takes the partial sums
    float* red = smem;
#pragma unroll
    for (int f = 0; f < FT; ++f) {
        const int fl = (f / VEC * TX + tx) * VEC + f % VEC;
#pragma unroll
        for (int j = 0; j < WT; ++j) red[fl * RED_STRIDE + py * W + px + j] = acc[f][j];
    }
    cluster_sync();
    const unsigned rank = cluster_rank();
    const float* peers[CSPLIT];
#pragma unroll
    for (int q = 0; q < CSPLIT; ++q) peers[q] = cluster_peer(red, q);
#pragma unroll 1
    for (int e = rank * THREADS + threadIdx.x; e < FTB * W * H; e += CSPLIT * THREADS) {
        const int fl = e / (W * H);
        const int pix = e - fl * (W * H);
        const int ry = pix / W;
        const int rx = pix - ry * W;
        float sum = 0.0f;
#pragma unroll
        for (int q = 0; q < CSPLIT; ++q) sum += peers[q][fl * RED_STRIDE + pix];
        if (f0 + fl < F && oy0 + ry < N && ox0 + rx < N) {
            y[(((long long)b * F + f0 + fl) * N + oy0 + ry) * N + ox0 + rx] = sum;
        }
    }
    cluster_sync();  // no block leaves while a peer may still read its shared memory
#endif
}
