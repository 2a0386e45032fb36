// tc_wgmma: implicit-GEMM convolution in NHWC on Hopper's warpgroup tensor cores (sm_90a).
//
// GEMM: D[M x F] = A[M x KG] * W[F x KG]^T, M = B*N*N output pixels, KG = K*K*C, the reduction
// ordered (ky, kx, c) so that it is contiguous in C for the NHWC input (B, S, S, C) and the FKKC
// filters alike. Both operands are K-major tiles in shared memory, one 128-byte row deep (BK = 64
// 16-bit or 32 FP32 elements), laid out in the 128-byte swizzle that wgmma's matrix descriptors
// read: the 16-byte chunk j of row r sits at chunk j ^ (r % 8), each 8-row group 1024 bytes
// (with TMA, STEP_BYTES = 64: one 64-byte row deep, in the 64-byte swizzle). A
// block computes BM pixels x BN filters with WG consumer warpgroups, each MI = BM / (64 WG) m64
// tiles of wgmma per 32-byte-deep step (m64nBNk16 for 16-bit storage, m64nBNk8 TF32 for FP32
// storage: the tensor cores read the FP32 bits and ignore their low 13 mantissa bits, so no
// conversion runs); FP32 accumulators in registers, output in the storage dtype (STORAGE 0
// float32, 1 float16, 2 bfloat16) or, with SPLIT_K > 1, FP32 partial sums that tc_wgmma_reduce
// adds up and stores. BN is 64, 96, 112, 128, 192, 224 or 256: 112 and 224 give the tiles of
// cuDNN's kernels on ResNet-50's 7x7 1x1 layers (64 x 112 and 128 x 224, there filters x
// pixels), here 64 pixels x 112 filters and 128 x 224: one wave of 125 and 130 tiles on those
// layers where their bests had 104 tiles of 128 x 64 and 208 of 128 x 128 (64 x 112 also loads
// fewer rows a step, 176 against 192; 128 x 224 loads more, 352 against 256, in one tile a
// block instead of up to two).
//
// Loads: STAGES shared slots filled by cp.async, 16-byte chunks (8 16-bit or 4 FP32 elements)
// where C is a whole number of chunks (a chunk never straddles a filter tap; rows and reduction
// past the edges zero-filled), element by element through registers otherwise (C = 3 of a first
// layer). The steps walk the reduction in order, or (C_OUTER) every tap of one BK-channel block
// in turn, so that neighbouring steps reread input rows, which L1_CACHE keeps in L1 (cp.async.ca).
//
// Pipeline, PRODUCER = 0: every thread loads and multiplies. A step waits for its tile, fences
// the generic-proxy writes for the async proxy, syncs, issues its wgmma group asynchronously,
// waits for the previous step's group (and, with two warpgroups, syncs again), then refills the
// previous step's slot: tiles STAGES - 1 ahead, one wgmma group in flight across each barrier.
// PRODUCER = 1: a separate producer warpgroup issues the copies, each slot's completing on its
// `full` mbarrier; the consumer warpgroups wait, fence, multiply and free the slot of the step
// before through its `empty` mbarrier once their wgmma on it retired (setmaxnreg moves
// registers from producer to consumers with two consumer warpgroups).
//
// TMA = 1 (with PRODUCER and C_OUTER): one producer thread loads each slot with two tensor-memory
// copies instead: the A tile by an im2col-mode map of the input (BM consecutive filter-window
// origins, one tap's BK channels each: the hardware walks the output pixels, steps by STRIDE and
// zero-fills past the batch and past C) and the B tile by a tiled map of the filters viewed as
// (C, K*K, F). Both land in the 128-byte swizzle, and complete on the slot's `full` mbarrier by
// their byte count. The maps come as __grid_constant__ parameters, encoded by the launcher.
// HALF_BLOCK = 1 (set by the plan with TMA where C's last channel block is at most half full:
// OverFeat's C = 96 in 16 bits, 64 + 32): that block's steps come through a second pair of maps
// with half the box, 64-byte rows in the 64-byte swizzle, and multiply through descriptors of
// that swizzle, so that its copies carry and write no zeros, which cost as much as data.
// GEMM_1X1 = 1 (TMA, a 1x1 filter at stride 1: no padding, no tail): the input is a plain
// (C, B*N*N) matrix, and the A tile comes through a tiled map of it, as a GEMM's operand would,
// without im2col addressing.
//
// STORE_TMA = 1 (with TMA, SPLIT_K = 1): each consumer warpgroup writes its rows of the finished
// tile (after the epilogue, in the storage type; 16-bit outputs without an epilogue by stmatrix,
// four 8 x 8 blocks a warp's instruction) into shared memory, in 128-byte-wide panels in
// the 128-byte swizzle, and one thread stores each panel by a tensor-memory copy through a tiled
// map of the output: whole 128-byte rows, clipped by the hardware at the output's edges, and
// issued asynchronously, so that the next tile's main loop runs while it drains (the staging
// tile is waited for only before it is written again). Where a tile's row is not whole panels
// (16-bit BN = 96, 112, 224; FP32 BN = 112) the rest, TAIL_COLS columns, is one more panel of
// dense unswizzled rows, stored through a map of its own (the swizzled maps take rows of whole
// 128 bytes): cuDNN's kernels on the 7x7 1x1 layers store 64 x 112 tiles this way, and the
// 16-bit wide tiles stored from registers lost to narrower ones there (results/h200/20261202b).
//
// RESIDUAL_TMA (STORE_TMA with a fused residual add, not a tunable): halfway through a tile's
// main loop each consumer warpgroup's first thread loads the tile's residual into its rows of
// the staging tile, by tensor-memory copies through a map of the residual shaped as the
// output's, completing on the warpgroup's mbarrier; the epilogue adds each output to the
// residual staged where the output then goes. Loaded output by output from global memory
// instead, the residual stalled the epilogue (ResNet-50's 56x56 C = 64 F = 256 conv3 layer in
// bf16 on the H200: 66.0 us fused at best, 48.6 us staged, 25.3 us plain; results/h200/20261130).
// STAGING = 2 (STORE_TMA, several tiles a block): two staging tiles, a block's tiles in turn in
// each. A tile's epilogue first issues the next tile's residual into the other staging tile (once
// the last tile's stores have read it), so that the residual lands during this epilogue and the
// next main loop rather than being waited for at once: with a one-step main loop (C = 64), the
// 56x56 layer's consumers spent a fifth of their time on that wait (results/h200/20261130b/ncu).
// Without a residual, a tile's output is staged while the last tile's stores still read theirs.
//
// WG = 3 (TMA): three consumer warpgroups of 64 rows each, a tile of 192 pixels, for grids that
// tiles of 128 or 256 leave a part-full wave: ResNet-50's 14x14 layers' 6,272 pixels are 33
// tiles of 192, and with 4 or 2 filter tiles (F / BN) the grid is 132 tiles, one wave of an
// H100 or H200 (cuBLAS runs those layers' GEMMs that way: 128 x 192 tiles, 132 blocks).
//
// PINGPONG = 1 (TMA, two consumer warpgroups, several tiles a block): the consumer warpgroups
// take a block's tiles in turn, each computing a whole BM x BN tile (MI = BM / 64), so that one
// warpgroup's epilogue and stores run while the other's main loop keeps the tensor cores busy.
// The producer loads the tiles in order; a warpgroup starts a tile's main loop once the other
// has waited for the last slot of its own (named barriers 3 and 4), which also keeps every
// consumer within one phase of each slot's `full` barrier, as parity waits need.
//
// STREAM_K = 1 (TMA, no split, no PINGPONG; a grid of one block a multiprocessor): the tiles of
// whole waves are the blocks' in turn as above; the rest, fewer tiles than blocks, are shared out
// by their reduction steps, each of the first SK blocks taking an even run of the rest's steps
// in order (tile-major), so that no multiprocessor idles through the last wave. A block whose
// run covers only part of a tile adds it into FP32 partial sums (sk_partials, two slots a
// block: the tile its run starts in, the tile it ends in); each consumer warpgroup then counts
// itself in on the tile's counter (sk_counters, one a tile and warpgroup), and the last to
// arrive adds up the others' partial sums, applies the epilogue, stores the tile and sets the
// counter back to zero for the next launch. No block waits for another.
//
// SPLIT_CLUSTER = 1 (with SPLIT_K > 1, TMA, one tile a block): the SPLIT_K blocks of a tile's
// split form a thread-block cluster instead of writing FP32 partial sums for tc_wgmma_reduce. Each
// block but the cluster's first leaves its accumulators in its own slots, free once the tile's
// last step has been multiplied, and the first adds them in over distributed shared memory and
// finishes the tile as an unsplit one (its epilogue, TMA stores). Made for layers of few tiles and
// long reductions, larger tiles split to fill the multiprocessors; on the H200 it won tf32's 7x7
// 3x3 layers (6-15%) and lost ResNet-50's 7x7 and 14x14 1x1 layers (0.47-0.89x the best unsplit
// tile in 16 bits), issuing at half the rate of the whole tile (results/h200/20261201k).
//
// MULTICAST = 1 or 2 (TMA, no stream-K): the grid runs in clusters of MULTICAST_BLOCKS blocks (two
// or four) on tiles that share one operand, each block copying its part of the shared tile into
// every block's slots by a multicast tensor-memory copy, so that L2 serves that tile once a step
// for the group. With 1 the group's tiles are neighbouring filter tiles of the same pixels (the
// input tile is shared); with 2, neighbouring pixel tiles of the same filters (the filter tile is
// shared). A slot may be filled again once every block's consumers freed it: each consumer
// warpgroup arrives on the slot's `empty` barrier in every block of the group. The tiles are
// numbered so that a cluster's blocks take the tiles of a group at each turn, the count rounded
// up to whole groups (a group's tile past the output computes zeros that no store writes). The
// blocks start together (a cluster barrier after the barriers' set-up) and each producer waits
// for its last slots' release before it exits, so that no arrival or copy reaches a block that
// has left. On ResNet-50's 1x1 layers with long reductions the loads bound the time: with its
// wgmma instructions taken out the kernel took as long (results/h200/20261202, call 3), so the
// bytes L2 serves a step are what four blocks a group cut.
//
// SPACE-TO-DEPTH (set by the plan for a strided layer whose C fills no 16-byte chunk, a first
// layer's C = 3): tc_wgmma_s2d first rewrites the input so that each STRIDE x STRIDE block of
// pixels is one pixel of STRIDE * STRIDE * C channels, padded to a whole chunk, and the filters
// to match (ceil(K / STRIDE) taps of those channels, zeros past the K x K window); the main
// kernel then computes that stride-1 layer, whose C fills whole chunks, with 16-byte copies
// where the element gather would have taken a load an element. B C N K F here are the
// rewritten layer's; S2D_STRIDE S2D_C S2D_K S2D_SIDE S2D_PAD the layer's own (its input side as
// stored, its padding).
//
// Defines: B C N K F STRIDE, PAD and TAIL (problem), STORAGE (0 fp32/tf32, 1 fp16, 2 bf16), BM
// BN WG STAGES SPLIT_K PRODUCER C_OUTER L1_CACHE TILES_PER_BLOCK TMA STORE_TMA GEMM_1X1
// STAGING PINGPONG STREAM_K MULTICAST MULTICAST_BLOCKS SPLIT_CLUSTER STEP_BYTES (and HALF_BLOCK and STREAM_K_BLOCKS, the plan's); with a fused epilogue, EPILOGUE and the EPI_ defines of epilogue.cuh: applied where
// the output is stored (store_tile, or with SPLIT_K > 1 tc_wgmma_reduce), whose kernel then
// takes the epilogue's inputs after y.

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "tc_wgmma needs the sm_90a target (wgmma): compile the plan with arch_specific"
#endif

typedef unsigned short u16;
typedef unsigned long long u64;

// The storage type: elements as the kernel moves them (raw bits), the output's type, and the
// wgmma operand type, depth (32 bytes of K a wgmma) and trailing operands (tf32 reads both
// operands K-major and takes no transpose immediates).
#if STORAGE == 0
typedef unsigned elem_t;  // FP32 bits, read by the tensor cores as TF32
typedef float out_t;
#define ELEM_BYTES 4
#define WG_TYPE "tf32"
#define WG_K "k8"
#define WG_TRANS ""
#elif STORAGE == 1 || STORAGE == 2
typedef u16 elem_t;
typedef u16 out_t;
#define ELEM_BYTES 2
#if STORAGE == 2
#define WG_TYPE "bf16"
#else
#define WG_TYPE "f16"
#endif
#define WG_K "k16"
#define WG_TRANS ", 0, 0"
#else
#error "tc_wgmma computes STORAGE 0 (fp32 as tf32), 1 (fp16) or 2 (bf16)"
#endif
// TAIL: rows and columns of the padded input past the last window (ConvProblem.tail), which
// widen the input: the cp.async gather's row pitch (S_IN), the im2col map's extents.
#ifndef TAIL
#define TAIL 0
#endif
#define S_IN ((N - 1) * STRIDE + K + TAIL)
#define KG (K * K * C)
#define M_ALL (B * N * N)
// Bytes of the reduction a step, a row of each tile: 128 (the 128-byte swizzle) or, with TMA,
// 64 (the 64-byte swizzle: half the slot, so twice the stages in the same shared memory, and
// 16-bit C = 96 in three whole steps where 128-byte ones take a full and a half one; cuDNN's
// kernels step 32 16-bit elements on OverFeat's C = 96 and VGG-16's 224x224 C = 64).
#ifndef STEP_BYTES
#define STEP_BYTES 128
#endif
#define BK (STEP_BYTES / ELEM_BYTES)  // reduction elements a step: one row of a tile
#define K_STEP (32 / ELEM_BYTES)  // reduction elements a wgmma: 32 bytes
#define CHUNK_ELEMS (16 / ELEM_BYTES)  // elements a 16-byte chunk
// 16-byte copies: C a whole number of chunks, so that none straddles a filter tap.
#define CHUNKED (C % CHUNK_ELEMS == 0)

#ifndef SPLIT_CLUSTER
#define SPLIT_CLUSTER 0
#endif
// Split-K's partial sums go through global memory to tc_wgmma_reduce (not with SPLIT_CLUSTER).
#define SPLIT_SUMS (SPLIT_K > 1 && !SPLIT_CLUSTER)

#if C_OUTER && !CHUNKED
#error "C_OUTER needs C to be a whole number of 16-byte chunks"
#endif
#if TMA && !(PRODUCER && C_OUTER)
#error "TMA copies are issued by the producer warpgroup, a tap of a channel block each (C_OUTER)"
#endif
#if STEP_BYTES != 128 && !(STEP_BYTES == 64 && TMA)
#error "STEP_BYTES: 128, or 64 with TMA (the gathers copy 8 chunks a row)"
#endif
#if WG == 3 && !TMA
#error "three consumer warpgroups (WG = 3) take TMA-loaded tiles: the gathers' producer needs more registers"
#endif
#ifndef STORE_TMA
#define STORE_TMA 0
#endif
#if STORE_TMA && !(TMA && !SPLIT_SUMS)
#error "STORE_TMA stores the tile's panels through the output's maps (TMA, no split)"
#endif
#ifndef STAGING
#define STAGING 1
#endif
#if STAGING != 1 && !(STAGING == 2 && STORE_TMA)
#error "STAGING: 1, or 2 staging tiles of STORE_TMA"
#endif
#ifndef PINGPONG
#define PINGPONG 0
#endif
#if PINGPONG && !(TMA && WG == 2 && SPLIT_K == 1)
#error "PINGPONG: two consumer warpgroups taking TMA-loaded tiles in turn, without a split"
#endif
#ifndef STREAM_K
#define STREAM_K 0
#endif
#if STREAM_K && !(TMA && SPLIT_K == 1 && !PINGPONG)
#error "STREAM_K shares TMA-loaded tiles' steps between blocks: no split, no ping-pong"
#endif
#ifndef MULTICAST
#define MULTICAST 0
#endif
#ifndef MULTICAST_BLOCKS
#define MULTICAST_BLOCKS 2
#endif
#if MULTICAST && !(TMA && !STREAM_K && MULTICAST <= 2 && (MULTICAST_BLOCKS == 2 || MULTICAST_BLOCKS == 4))
#error "MULTICAST 1 (a shared input tile) or 2 (a shared filter tile): TMA-loaded tiles, no stream-K, 2 or 4 blocks"
#endif
#if SPLIT_CLUSTER && !(SPLIT_K > 1 && TMA && !MULTICAST && TILES_PER_BLOCK == 1)
#error "SPLIT_CLUSTER: a split tile's blocks as one cluster (TMA, one tile a block, no MULTICAST)"
#endif
#define CLUSTER (MULTICAST ? MULTICAST_BLOCKS : SPLIT_CLUSTER ? SPLIT_K : 1)  // blocks a cluster
// Blocks whose consumers read (and free) a block's slots: every one of a MULTICAST group.
#define SLOT_BLOCKS (MULTICAST ? MULTICAST_BLOCKS : 1)
// A multicast copy's destinations: every block of the cluster.
#define MULTICAST_MASK ((1 << MULTICAST_BLOCKS) - 1)
// Blocks a tile: a SPLIT_CLUSTER cluster's, along x; else one (a split's blocks along z).
#define TILE_BLOCKS (SPLIT_CLUSTER ? SPLIT_K : 1)
// The most blocks sharing the stream-K tiles (the plan's partial-sum slots: two a block); a
// larger grid leaves the others out of them.
#ifndef STREAM_K_BLOCKS
#define STREAM_K_BLOCKS 132
#endif
// The shortest run of steps a stream-K block takes, unless that leaves a tile without a block.
#define SK_MIN_STEPS 4
// PAD zeros around the input (ConvProblem.padding), read by the im2col map, whose box starts PAD
// before the image and whose copies fill zeros outside it; 0: a pre-padded input (S_IN).
#ifndef PAD
#define PAD 0
#endif
#if PAD && !TMA
#error "a padded input (PAD > 0) is read through the im2col map (TMA = 1), which fills its zeros"
#endif

#define THREADS (128 * (WG + PRODUCER))
// Threads that load: a producer warpgroup, or every thread.
#define LOADERS (PRODUCER ? 128 : THREADS)
// Registers after setmaxnreg with two consumer warpgroups (168 a thread at launch, 384 threads:
// 128 x PRODUCER_REGS + 256 x CONSUMER_REGS <= 168 x 384); the 16-bit element gather's producer
// keeps its 8 offsets a chunk in fewer registers than ptxas wants at 72 (FP32 with its 4 spills
// at 56 on several tiles, not at 72). With three (128 a thread at launch, 512 threads), the TMA
// producer's one thread needs few, and a consumer's 64 rows hold at most 64 accumulators (96
// spilled with TMA stores).
#if WG == 3
#define PRODUCER_REGS 40
#define CONSUMER_REGS 152
#elif CHUNKED || ELEM_BYTES == 4
#define PRODUCER_REGS 72
#define CONSUMER_REGS 216
#else
#define PRODUCER_REGS 56
#define CONSUMER_REGS 224
#endif
// Consumer warpgroups sharing a tile's rows: all of them, or (PINGPONG) one a tile. Warpgroup
// cwg's rows of the tile start at ROW_GROUP(cwg) * MI * 64.
#define ROW_GROUPS (PINGPONG ? 1 : WG)
#define ROW_GROUP(cwg) (PINGPONG ? 0 : (cwg))
// FILTERS_M: the filters on wgmma's M, 64 a consumer warpgroup (BN = 64 WG), and the tile's BM
// pixels on its N, which takes any multiple of 8: a pixel tile need not be whole m64 tiles
// (cuDNN's one wave of 96-pixel tiles on ResNet-50's 14x14 C = 1024 F = 256).
#ifndef FILTERS_M
#define FILTERS_M 0
#endif
#define MI (FILTERS_M ? 1 : BM / (64 * ROW_GROUPS))
// A wgmma's N, of which a thread holds ACC_N / 2 accumulators an m64 tile.
#define ACC_N (FILTERS_M ? BM : BN)
// Reduction steps: KG in BK pieces, or (C_OUTER) every filter tap of one BK-channel block after
// another, so that consecutive steps gather overlapping input windows (L1 hits with L1_CACHE).
#if C_OUTER
#define KTILES (((C + BK - 1) / BK) * K * K)
#else
#define KTILES ((KG + BK - 1) / BK)
#endif
#define CHUNK_COLS 8  // 16-byte chunks a row
#define ROW_STEP (LOADERS / CHUNK_COLS)
#define A_ROWS (BM / ROW_STEP)
#define B_ROWS (BN / ROW_STEP)
#define A_BYTES (BM * STEP_BYTES)
#define STAGE_BYTES ((BM + BN) * STEP_BYTES)
#ifndef HALF_BLOCK
#define HALF_BLOCK 0
#endif
#define HALF_ROW 64  // bytes a row of HALF_BLOCK's steps
#if HALF_BLOCK
#define HALF_MAPS , &x_half_map, &w_half_map
#define HALF_MAP_PARAMS , const tensor_map_t *xh_map, const tensor_map_t *wh_map
#else
#define HALF_MAPS
#define HALF_MAP_PARAMS
#endif
// STORE_TMA's staging tile, after the slots (1024-aligned: (BM + BN) * 128 is a multiple of 1024):
// each consumer warpgroup's WG_ROWS rows in PANELS panels of WG_ROWS x 128 bytes, then where
// BN leaves TAIL_COLS columns over, a tail panel of WG_ROWS dense rows of TAIL_BYTES (with
// PINGPONG, each warpgroup's a whole tile of its own; with FILTERS_M, each warpgroup's 64
// filters of every pixel row). Each part starts 1024-aligned: WG_ROWS is a multiple of 8 and a
// row of BN outputs a multiple of 16 bytes.
#define PANEL_COLS (128 / ELEM_BYTES)
#define WG_COLS (FILTERS_M ? 64 : BN)  // a consumer warpgroup's columns (filters) of a tile
#define PANELS (WG_COLS / PANEL_COLS)
#define TAIL_COLS (WG_COLS % PANEL_COLS)
#define TAIL_BYTES (TAIL_COLS * ELEM_BYTES)
#define STORE_TAIL (STORE_TMA && TAIL_COLS)
#define WG_ROWS (FILTERS_M ? BM : MI * 64)
#define PANEL_BYTES (WG_ROWS * 128)
#define WG_STAGE_BYTES (WG_ROWS * WG_COLS * ELEM_BYTES)  // a consumer warpgroup's part of a staging tile
#define STAGING_BYTES (WG * WG_STAGE_BYTES)         // one staging tile
#if STORE_TAIL
#define Y_TAIL_PARAM , const tensor_map_t *yt_map
#define Y_TAIL_ARG , &y_tail_map
#else
#define Y_TAIL_PARAM
#define Y_TAIL_ARG
#endif
#define STORE_BYTES (STORE_TMA * STAGING * STAGING_BYTES)
#define REDUCE_BLOCK 256

// A fused epilogue in the output store (epilogue.cuh), or none: no parameters, the value as it is.
#ifndef EPILOGUE
#define EPILOGUE 0
#endif
#if EPILOGUE
#include "epilogue.cuh"
#else
#define EPI_PARAMS
#define EPI_ARGS
#define EPI(v, f, i) (v)
#endif
#if FILTERS_M && !(TMA && STORE_TMA && !EPILOGUE && SPLIT_K == 1 && !STREAM_K && !PINGPONG && STAGING == 1 && \
                   STEP_BYTES == 128 && !HALF_BLOCK && BN == 64 * WG && BM % 16 == 0)
#error "FILTERS_M: TMA loads and stores, no epilogue, split, stream-K or tiles in turn, 64 filters a warpgroup"
#endif
// The GEMM kernel applies it only where it stores the output itself; split-K's partial sums get
// it in tc_wgmma_reduce.
#define GEMM_EPILOGUE (!SPLIT_SUMS && EPILOGUE)
#if GEMM_EPILOGUE
#define GEMM_EPI_PARAMS EPI_PARAMS
#define GEMM_EPI_ARGS EPI_ARGS
#else
#define GEMM_EPI_PARAMS
#define GEMM_EPI_ARGS
#endif
// store_tile's runs: a row's BN / 8 column pairs of a lane in runs of at most 8 (EPI_RUN), each
// run's residual pairs (in[j]) fetched before its first store (epilogue.cuh).
#define EPI_RUNS ((BN / 8 + 7) / 8)
#define EPI_RUN ((BN / 8 + EPI_RUNS - 1) / EPI_RUNS)
#if GEMM_EPILOGUE
#define TILE_EPI(v, f, j, k) EPI_APPLY2(v, f, in[j], k)
#else
#define TILE_EPI(v, f, j, k) (v)
#endif
// store_tile_tma's runs: column pairs with every row of a lane, 8 residual pairs a run (4 where
// a tile's BN / 8 column groups are not whole runs of 4 / MI: 112 filters, 14 groups).
#define EPI_COLUMN_RUN ((BN / 8) % (4 / MI) == 0 ? 4 / MI : 2)
#if STORE_TMA && EPILOGUE && EPI_RESIDUAL
#define RESIDUAL_TMA 1
#else
#define RESIDUAL_TMA 0
#endif
#if RESIDUAL_TMA && TAIL_COLS  // the residual's tail panel, through a map of its own
#define R_TAIL_PARAM , const tensor_map_t *rt_map
#define R_TAIL_ARG , &r_tail_map  // the kernel's parameter
#define R_TAIL_PASS , rt_map      // store_tile_tma's, passed on
#else
#define R_TAIL_PARAM
#define R_TAIL_ARG
#define R_TAIL_PASS
#endif


// 16-byte copies, zero-filled past the edges (cp_async.cuh); the gathered input rows that
// neighbouring taps reread go through L1 (cp.async.ca) with L1_CACHE.
#include "cp_async.cuh"

__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int PENDING>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}

// Matrix descriptor of a K-major tile in the 128-byte swizzle: start address >> 4 (bits 0-13),
// leading byte offset unused there (1), stride byte offset 1024 >> 4 between 8-row groups
// (bits 32-45), swizzle mode 1 = 128 bytes (bits 62-63).
__device__ __forceinline__ u64 smem_desc(unsigned addr)
{
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}

// The same of a tile of 64-byte rows in the 64-byte swizzle (HALF_BLOCK's steps): 8-row groups
// 512 bytes apart, swizzle mode 2.
__device__ __forceinline__ u64 smem_desc64(unsigned addr)
{
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)1 << 16) | ((u64)(512 >> 4) << 32) | ((u64)2 << 62);
}

// The m64nNk16 wgmma (N = ACC_N: the filters, or with FILTERS_M the pixels) with both operands
// from shared memory (descriptors), D += A * B^T.
#if ACC_N == 64
__device__ __forceinline__ void wgmma_tile(float (&d)[ACC_N / 2], unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64" WG_K ".f32." WG_TYPE "." WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1" WG_TRANS ";\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(1));
}
#elif ACC_N == 96
__device__ __forceinline__ void wgmma_tile(float (&d)[ACC_N / 2], unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %50, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96" WG_K ".f32." WG_TYPE "." WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
        "}, %48, %49, p, 1, 1" WG_TRANS ";\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
        : "l"(da), "l"(db), "r"(1));
}
#elif ACC_N == 112
__device__ __forceinline__ void wgmma_tile(float (&d)[ACC_N / 2], unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %58, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n112" WG_K ".f32." WG_TYPE "." WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55"
        "}, %56, %57, p, 1, 1" WG_TRANS ";\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
        : "l"(da), "l"(db), "r"(1));
}
#elif ACC_N == 128
__device__ __forceinline__ void wgmma_tile(float (&d)[ACC_N / 2], unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128" WG_K ".f32." WG_TYPE "." WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1" WG_TRANS ";\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
}
#elif ACC_N == 192
__device__ __forceinline__ void wgmma_tile(float (&d)[ACC_N / 2], unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192" WG_K ".f32." WG_TYPE "." WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
        "}, %96, %97, p, 1, 1" WG_TRANS ";\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
        : "l"(da), "l"(db), "r"(1));
}
#elif ACC_N == 224
__device__ __forceinline__ void wgmma_tile(float (&d)[ACC_N / 2], unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %114, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n224" WG_K ".f32." WG_TYPE "." WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
        "}, %112, %113, p, 1, 1" WG_TRANS ";\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
        : "l"(da), "l"(db), "r"(1));
}
#elif ACC_N == 256
__device__ __forceinline__ void wgmma_tile(float (&d)[ACC_N / 2], unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256" WG_K ".f32." WG_TYPE "." WG_TYPE " "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1" WG_TRANS ";\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1));
}
#endif


#if STORAGE == 0
// FP32 storage is a TF32 convolution's: its output rounded to TF32 (to nearest, ties away), so
// that a convolution reading it next computes with it as cuDNN would with its own rounding. The
// tensor cores read an FP32 operand's bits from shared memory as TF32, dropping the low 13: a
// truncation whose bias, unlike rounding's error, compounds layer after layer (ResNet-50's
// logits 1.9e-2 from float64 on the H200 with unrounded outputs, eager PyTorch's 5.9e-4).
__device__ __forceinline__ float to_storage(float v)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
    return __uint_as_float(r);
}
#else
__device__ __forceinline__ u16 to_storage(float v)
{
    u16 h;
#if STORAGE == 2
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(v));
#else
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(h) : "f"(v));
#endif
    return h;
}

// Two neighbouring outputs as one 32-bit word, the lower column in the lower half.
__device__ __forceinline__ unsigned to_storage2(float lo, float hi)
{
    unsigned r;
#if STORAGE == 2
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}
#endif

__device__ __forceinline__ void st_shared16(unsigned dst, const unsigned (&v)[4])
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v[0]), "r"(v[1]), "r"(v[2]),
                 "r"(v[3]));
}

// One BK-deep step of both tiles into one slot: this thread's chunk column j of its A rows
// (gathered pixels) and B rows (filters). With C a whole number of chunks a 16-byte chunk lies in
// one filter tap and every row starts 16-byte aligned: one cp.async a chunk, zero-filled past
// the edges. Otherwise (C = 3 of a first layer) the chunk is gathered element by element, each
// element's tap of its own, through registers (two 16-bit elements or one FP32 a word).
__device__ __forceinline__ void load_tile(
    unsigned slot, int kt, const elem_t* __restrict__ x, const elem_t* __restrict__ w,
    const int (&a_base)[A_ROWS], int f_row0, int row0, int j)
{
    // Every row of a thread is row0 + i * ROW_STEP, ROW_STEP a multiple of 8: one swizzled column.
    const unsigned col = (unsigned)((j ^ (row0 & 7)) << 4);
#if CHUNKED
#if C_OUTER
    const int tap = kt % (K * K);
    const int c = (kt / (K * K)) * BK + CHUNK_ELEMS * j;
    const bool k_ok = c < C;
    const int kk = tap * C + c;
#else
    const int kk = kt * BK + CHUNK_ELEMS * j;
    const bool k_ok = kk < KG;
    const int tap = kk / C;
    const int c = kk - tap * C;
#endif
    const int ky = tap / K;
    const int kx = tap - ky * K;
    const int offset = (ky * S_IN + kx) * C + c;
#pragma unroll
    for (int i = 0; i < A_ROWS; ++i) {
        const bool ok = k_ok && a_base[i] >= 0;
        const unsigned dst = slot + (unsigned)((row0 + i * ROW_STEP) * 128) + col;
        cp_async::copy_zfill<16, L1_CACHE>(dst, ok ? (const void*)(x + a_base[i] + offset) : (const void*)x, ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < B_ROWS; ++i) {
        const int f = f_row0 + i * ROW_STEP;
        const bool ok = k_ok && f < F;
        const unsigned dst = slot + A_BYTES + (unsigned)((row0 + i * ROW_STEP) * 128) + col;
        cp_async::copy_zfill<16, false>(dst, ok ? (const void*)(w + (long long)f * KG + kk) : (const void*)w, ok ? 16 : 0);
    }
#else
    const int kk = kt * BK + CHUNK_ELEMS * j;  // C_OUTER is refused: the steps walk KG linearly
    int offset[CHUNK_ELEMS];  // -1 past the reduction
#pragma unroll
    for (int e = 0; e < CHUNK_ELEMS; ++e) {
        const int k = kk + e;
        const int tap = k / C;
        const int c = k - tap * C;
        const int ky = tap / K;
        offset[e] = k < KG ? (ky * S_IN + tap - ky * K) * C + c : -1;
    }
#pragma unroll
    for (int i = 0; i < A_ROWS; ++i) {
        unsigned v[4];
#pragma unroll
        for (int e = 0; e < CHUNK_ELEMS; e += CHUNK_ELEMS / 4) {
            const unsigned lo = (a_base[i] >= 0 && offset[e] >= 0) ? x[a_base[i] + offset[e]] : 0u;
#if ELEM_BYTES == 2
            const unsigned hi = (a_base[i] >= 0 && offset[e + 1] >= 0) ? x[a_base[i] + offset[e + 1]] : 0u;
            v[e / 2] = lo | (hi << 16);
#else
            v[e] = lo;
#endif
        }
        st_shared16(slot + (unsigned)((row0 + i * ROW_STEP) * 128) + col, v);
    }
#pragma unroll
    for (int i = 0; i < B_ROWS; ++i) {
        const int f = f_row0 + i * ROW_STEP;
        const elem_t* row = w + (long long)f * KG + kk;
        unsigned v[4];
#pragma unroll
        for (int e = 0; e < CHUNK_ELEMS; e += CHUNK_ELEMS / 4) {
            const unsigned lo = (f < F && offset[e] >= 0) ? row[e] : 0u;
#if ELEM_BYTES == 2
            const unsigned hi = (f < F && offset[e + 1] >= 0) ? row[e + 1] : 0u;
            v[e / 2] = lo | (hi << 16);
#else
            v[e] = lo;
#endif
        }
        st_shared16(slot + A_BYTES + (unsigned)((row0 + i * ROW_STEP) * 128) + col, v);
    }
#endif
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    asm volatile(
        "{\n.reg .pred done;\n"
        "WAIT_AGAIN:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_AGAIN;\n}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// This block's rank in its cluster (0 without clusters).
__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned rank;
    asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

// An arrive on the barrier at `bar` in the cluster's block `rank`. At the default (CTA) scope:
// the slot's readers are this thread's wgmmas, retired by their wait, and the copies that
// overwrite it are ordered by the barrier itself. A release at cluster scope made ptxas fence
// every arrive with MEMBAR.ALL.GPU (and the producer's acquire invalidate L1): 1.25-3.56x the
// time of the same configuration without clusters on the H200 (results/h200/20261201b, call 1).
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank)
{
    asm volatile(
        "{\n.reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
        "r"(rank)
        : "memory");
}

// A consumer warpgroup frees a slot: in its block, and with MULTICAST in every block of the
// group, whose producers all copy into it.
__device__ __forceinline__ void release_slot(unsigned bar)
{
#if MULTICAST
#pragma unroll
    for (unsigned rank = 0; rank < MULTICAST_BLOCKS; ++rank) mbar_arrive_cluster(bar, rank);
#else
    mbar_arrive(bar);
#endif
}

// Every thread of the cluster's blocks waits for all of them: the barriers' set-up, released to
// the cluster by its own fence (fence.mbarrier_init), is seen by the other block after.
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}

// A CUtensorMap, opaque: 128 bytes the driver encoded, 64-byte aligned.
struct __align__(64) tensor_map_t {
    unsigned long long bits[16];
};

// The producer's arrive on a slot's `full` barrier, which then also waits for `bytes` of
// tensor-memory copies to land.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void prefetch_map(const tensor_map_t* map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((u64)map) : "memory");
}

// BM pixels x BK channels of the input: the filter-window origins from (w, h, n) on, each at
// tap (dw, dh), channels from c.
// With `multicast`, into the same place of every block of the cluster, completing on each one's
// barrier at `bar` (MULTICAST_MASK).
__device__ __forceinline__ void tma_im2col(
    unsigned dst, const tensor_map_t* map, int c, int w, int h, int n, u16 dw, u16 dh, unsigned bar,
    bool multicast = false)
{
    if (multicast)
        asm volatile(
            "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
            ".multicast::cluster [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8}, %9;\n" ::"r"(dst),
            "l"((u64)map), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(dw), "h"(dh), "h"((u16)MULTICAST_MASK)
            : "memory");
    else
        asm volatile(
            "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
            " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\n" ::"r"(dst),
            "l"((u64)map), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(dw), "h"(dh)
            : "memory");
}

// A box of the filters viewed as (C, K*K, F): BK channels of one tap, BN filters from f.
__device__ __forceinline__ void tma_tile3(
    unsigned dst, const tensor_map_t* map, int c, int tap, int f, unsigned bar, bool multicast = false)
{
    if (multicast)
        asm volatile(
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
            ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
            "l"((u64)map), "r"(c), "r"(tap), "r"(f), "r"(bar), "h"((u16)MULTICAST_MASK)
            : "memory");
    else
        asm volatile(
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
            " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
            "l"((u64)map), "r"(c), "r"(tap), "r"(f), "r"(bar)
            : "memory");
}

// A box of a 2D tensor through a tiled map, from column x of row y, completing on `bar`: a
// GEMM_1X1 input's BK channels of BM pixels, or a residual's panel (PANEL_COLS filters of
// WG_ROWS pixels).
__device__ __forceinline__ void tma_tile2(
    unsigned dst, const tensor_map_t* map, int x, int y, unsigned bar, bool multicast = false)
{
    if (multicast)
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
            ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
            "l"((u64)map), "r"(x), "r"(y), "r"(bar), "h"((u16)MULTICAST_MASK)
            : "memory");
    else
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
            " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
            "l"((u64)map), "r"(x), "r"(y), "r"(bar)
            : "memory");
}

// The barrier completes once every earlier cp.async of this thread has landed (counted in its
// initial count: noinc).
__device__ __forceinline__ void cp_async_arrive(unsigned bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// The gathered rows a loading thread copies: row0 + i * ROW_STEP of the block's BM pixels.
__device__ __forceinline__ void row_bases(int (&a_base)[A_ROWS], int m0, int row0)
{
#pragma unroll
    for (int i = 0; i < A_ROWS; ++i) {
        const int m = m0 + row0 + i * ROW_STEP;
        if (m < M_ALL) {
            const int b = m / (N * N);
            const int rem = m - b * (N * N);
            const int oy = rem / N;
            const int ox = rem - oy * N;
            a_base[i] = ((b * S_IN + oy * STRIDE) * S_IN + ox * STRIDE) * C;
        } else {
            a_base[i] = -1;
        }
    }
}

// A step past C (C_OUTER: the last channel block of every tap) or past KG (the last step)
// holds zeros beyond it, filled by the loads: its wgmmas along K stop at the last that reads
// data. Only where C (or KG) is not a whole number of steps: OverFeat's C = 96 in 16-bit steps
// of 64 spent a quarter of its wgmmas multiplying zeros. The short step is a code path of its
// own: a branch between the wgmmas of one group makes ptxas fence them.
#if C_OUTER
#define PARTIAL_STEPS (C % BK != 0)
#define LAST_SLICES ((C % BK + K_STEP - 1) / K_STEP)
#define SHORT_STEP(kt) ((kt) / (K * K) == C / BK)
#if HALF_BLOCK && !(TMA && STEP_BYTES == 128 && PARTIAL_STEPS && C % BK <= BK / 2)
#error "HALF_BLOCK: TMA copies of a last channel block at most half full, of 128-byte steps"
#endif
#else
#define PARTIAL_STEPS (KG % BK != 0)
#define LAST_SLICES ((KG % BK + K_STEP - 1) / K_STEP)
#define SHORT_STEP(kt) ((kt) == KG / BK)
#endif

// The first SLICES wgmmas along K of a step of consumer warpgroup cwg on the tiles in `slot`:
// tiles of ROW-byte rows, 128 in the 128-byte swizzle or 64 (STEP_BYTES = 64, or HALF_BLOCK's
// steps) in the 64-byte swizzle, the B tile after A's BM rows.
template <int SLICES, int ROW = STEP_BYTES>
__device__ __forceinline__ void mma_slices(float (&acc)[MI][ACC_N / 2], unsigned slot, int cwg)
{
    wgmma_fence();
    // Each wgmma's descriptors are the slot's plus their offset >> 4 in the start address's
    // field: every operand ends below 256 KB, so the sum never carries out of the field. With
    // the slot uniform (cwg broadcast) that is one uniform add a descriptor. Rebuilt from each
    // address in vector registers and moved to uniform ones, a consumer warp's step was 92-130
    // instructions; 45-54 this way (SASS of tf32 28x28 C = 512's bests, 4 and 8 wgmmas a step).
    const u64 d0 = ROW == 128 ? smem_desc(slot) : smem_desc64(slot);
#pragma unroll
    for (int ks = 0; ks < SLICES; ++ks) {
#if FILTERS_M
        // This warpgroup's 64 filter rows of the B tile as wgmma's A, the BM pixel rows as its B.
        wgmma_tile(acc[0], d0 + ((BM * ROW + cwg * 64 * ROW + ks * 32) >> 4), d0 + ((ks * 32) >> 4));
#else
        const u64 db = d0 + ((BM * ROW + ks * 32) >> 4);  // 32 bytes of K a wgmma
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            const u64 da = d0 + (((ROW_GROUP(cwg) * MI + mi) * 64 * ROW + ks * 32) >> 4);
            wgmma_tile(acc[mi], da, db);
        }
#endif
    }
    wgmma_commit();
}

// Reduction step kt's MMAs of consumer warpgroup cwg on the tiles in `slot`.
__device__ __forceinline__ void mma_step(float (&acc)[MI][ACC_N / 2], unsigned slot, int cwg, int kt)
{
#if PARTIAL_STEPS
    if (SHORT_STEP(kt)) {
        mma_slices<LAST_SLICES, HALF_BLOCK ? HALF_ROW : STEP_BYTES>(acc, slot, cwg);
        return;
    }
#endif
    mma_slices<BK / K_STEP>(acc, slot, cwg);
}

// The accumulators are the asynchronous wgmma's until its wait: each is tied to the wait (a
// memory clobber) so that no read of one moves above it.
__device__ __forceinline__ void after_wgmma_wait(float (&acc)[MI][ACC_N / 2])
{
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int i = 0; i < ACC_N / 2; ++i) asm volatile("" : "+f"(acc[mi][i])::"memory");
}

// What the GEMM kernel writes: the output in the storage type, or with SPLIT_SUMS a split's FP32
// partial sums.
#if !SPLIT_SUMS
typedef out_t gemm_out_t;
#define FINAL(v) to_storage(v)
#else
typedef float gemm_out_t;
#define FINAL(v) (v)  // a partial sum, rounded once summed (tc_wgmma_reduce)
#endif

// A finished tile's accumulators to global memory (FP32 outputs rounded to TF32, partial sums as
// they are). Fragment of m64nBN: warp q of the warpgroup
// holds rows 16q..16q+15; register i of a lane is row lane/4 + 8*((i/2)%2), column
// 8*(i/4) + 2*(lane%4) + i%2.
__device__ __forceinline__ void store_tile(
    float (&acc)[MI][ACC_N / 2], gemm_out_t* __restrict__ y, int m0, int f0, int ctid, int cwg
    GEMM_EPI_PARAMS)
{
    after_wgmma_wait(acc);
    const int lane = ctid % 32;
    const int q = (ctid % 128) / 32;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + (ROW_GROUP(cwg) * MI + mi) * 64 + 16 * q + lane / 4 + 8 * h;
            if (m >= M_ALL) continue;
            const long long row = (long long)m * F;  // flat index of (m, 0), NHWF
#pragma unroll
            for (int g0 = 0; g0 < BN / 8; g0 += EPI_RUN) {
#if GEMM_EPILOGUE
                EpiPair in[EPI_RUN];
#pragma unroll
                for (int j = 0; j < EPI_RUN && g0 + j < BN / 8; ++j) {
                    const int f = f0 + 8 * (g0 + j) + 2 * (lane % 4);
                    in[j] = EPI_FETCH2(row + f, f < F, f + 1 < F);
                }
#endif
#pragma unroll
                for (int j = 0; j < EPI_RUN && g0 + j < BN / 8; ++j) {
                    const int g = g0 + j;
                    const int f = f0 + 8 * g + 2 * (lane % 4);
                    const float v0 = TILE_EPI(acc[mi][4 * g + 2 * h], f, j, 0);
                    const float v1 = TILE_EPI(acc[mi][4 * g + 2 * h + 1], f, j, 1);
#if !SPLIT_SUMS && STORAGE != 0
                    u16* out = y + row + f;
                    if (F % 2 == 0) {
                        if (f < F) *(unsigned*)out = to_storage2(v0, v1);
                    } else {
                        if (f < F) out[0] = to_storage(v0);
                        if (f + 1 < F) out[1] = to_storage(v1);
                    }
#else
                    // A split's own partial sums; an unsplit output adds no blockIdx.z term: the
                    // text without it, 16 instructions shorter, ran tf32's layers 13-20% faster
                    // (results/h200/20261201k; the term alone was not timed).
                    float* out = y + (long long)(SPLIT_SUMS ? blockIdx.z : 0) * M_ALL * F + row + f;
                    if (F % 2 == 0) {
                        if (f < F) *(float2*)out = make_float2(FINAL(v0), FINAL(v1));
                    } else {
                        if (f < F) out[0] = FINAL(v0);
                        if (f + 1 < F) out[1] = FINAL(v1);
                    }
#endif
                }
            }
        }
    }
}

__device__ __forceinline__ void warpgroup_sync(int cwg)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + cwg) : "memory");  // barrier 0 is the block's
}

#if STORE_TMA
// store_tile_tma applies the epilogue (STORE_TMA stores no partial sums) in runs of column pairs, each
// with every row a thread stores: a pair's scale and bias are loaded once for its 2 MI rows (an
// output at a time, they were loaded again each row: Nsight Compute found the fused layers'
// warps stalled on those loads), a run's residual pairs read from the staging tile together.

// One panel of the staging tile to the output: PANEL_COLS filters from f, WG_ROWS pixels from m.
__device__ __forceinline__ void tma_store2(const tensor_map_t* map, unsigned src, int f, int m)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"((u64)map),
        "r"(f), "r"(m), "r"(src)
        : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// The staging tile may be written again once the stores issued from it have read it (all but
// the last `Pending` groups this thread committed).
template <int Pending = 0>
__device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(Pending) : "memory");
}

// Where row r, column c of the tile lies in warpgroup `stage`'s panels: column c's byte in its
// 128-byte panel row, the 16-byte chunk swizzled by r % 8 (as the output's map writes it); in
// the tail panel, its byte in a dense row. (c is known at compile time once the loops unroll.)
__device__ __forceinline__ unsigned staged_at(unsigned stage, int r, int c)
{
    const int byte = c * ELEM_BYTES;
#if STORE_TAIL
    if (byte >= PANELS * 128) return stage + PANELS * PANEL_BYTES + r * TAIL_BYTES + byte % 128;
#endif
    return stage + (byte / 128) * PANEL_BYTES + r * 128 + ((((byte % 128) / 16) ^ (r % 8)) * 16) + byte % 16;
}

// Two neighbouring outputs of row r, columns c and c + 1, into the staging tile. The staging
// tile's loads and stores are volatile, which keeps them in program order among themselves and
// with the barriers and fences around them, but they clobber no memory, so that the compiler
// may issue the epilogue's loads of its scale and bias ahead of them (Nsight Compute found the
// fused 56x56 C = 64 F = 256 bf16 layer's warps stalled on those loads).
__device__ __forceinline__ void stage_pair(unsigned stage, int r, int c, float v0, float v1)
{
    const unsigned at = staged_at(stage, r, c);
#if STORAGE == 0
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(FINAL(v0)), "f"(FINAL(v1)));
#else
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(to_storage2(v0, v1)));
#endif
}

#if STORAGE != 0
// Four 8 x 8 matrices of 16-bit outputs into the staging tile by one stmatrix: this lane's
// registers hold its pair (row lane / 4, columns 2 (lane % 4) and + 1) of each matrix, as
// wgmma's accumulators hold an 8 x 8 block, and `at` is where row lane % 8 of matrix lane / 8
// goes. One instruction a warp stores what 4 st.shared a thread did: a 16-bit 128 x 224 tile's
// staging took 0.97 us that way, issuing (results/h200/20261203b).
__device__ __forceinline__ void stage_matrices(unsigned at, unsigned m0, unsigned m1, unsigned m2, unsigned m3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(at), "r"(m0), "r"(m1),
                 "r"(m2), "r"(m3));
}

#if FILTERS_M
// The same, each matrix transposed: memory row i of matrix j (at lane 8j + i's `at`) gets
// column i of the lanes' 8 x 8 block, so filter-row accumulators land as pixel rows.
__device__ __forceinline__ void stage_matrices_t(unsigned at, unsigned m0, unsigned m1, unsigned m2, unsigned m3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(at), "r"(m0),
                 "r"(m1), "r"(m2), "r"(m3));
}
#endif
#endif

#if RESIDUAL_TMA
// The residual pair staged where outputs c and c + 1 of row r go, as FP32.
__device__ __forceinline__ EpiPair staged_residual(unsigned stage, int r, int c)
{
    const unsigned at = staged_at(stage, r, c);
    EpiPair in;
#if STORAGE == 0
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(in.residual[0]), "=f"(in.residual[1]) : "r"(at));
#else
    unsigned bits;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(bits) : "r"(at));
    in.residual[0] = epi_float((elem_t)(bits & 0xffffu));
    in.residual[1] = epi_float((elem_t)(bits >> 16));
#endif
    return in;
}

// Warpgroup cwg's rows of the tile's residual into its part of the staging tile, once the last
// tile's stores have read it; issued by the warpgroup's first thread (through the residual's
// map of whole panels and, with a tail panel, rt_map).
__device__ __forceinline__ void load_residual(
    unsigned staging, const tensor_map_t* r_map, unsigned bar, int m0, int f0, int cwg R_TAIL_PARAM)
{
    const unsigned stage = staging + cwg * WG_STAGE_BYTES;
    const int m = m0 + ROW_GROUP(cwg) * WG_ROWS;
    bulk_wait_read();
    mbar_arrive_expect_tx(bar, WG_STAGE_BYTES);
#pragma unroll
    for (int p = 0; p < PANELS; ++p) tma_tile2(stage + p * PANEL_BYTES, r_map, f0 + p * PANEL_COLS, m, bar);
#if STORE_TAIL
    tma_tile2(stage + PANELS * PANEL_BYTES, rt_map, f0 + PANELS * PANEL_COLS, m, bar);
#endif
}
#endif

// A finished tile through shared memory and tensor-memory stores (STORE_TMA): consumer
// warpgroup cwg's rows, the epilogue applied where the output exists (zeros elsewhere, which
// the map's edges clip), then one store a panel by the warpgroup's first thread, left to drain
// (a tail panel's through yt_map).
// With RESIDUAL_TMA, the residual staged there is waited for (residual_bar's phase `parity`)
// and each output replaces its residual; with two staging tiles, the next tile's residual (at
// next_m0, next_f0; none where next_m0 < 0) is first issued into the other one, `next_staging`.
__device__ __forceinline__ void store_tile_tma(
    float (&acc)[MI][ACC_N / 2], unsigned staging, const tensor_map_t* y_map, int m0, int f0, int ctid,
    int cwg, unsigned residual_bar, unsigned parity, unsigned next_staging,
    const tensor_map_t* r_map, unsigned next_bar, int next_m0, int next_f0 Y_TAIL_PARAM R_TAIL_PARAM GEMM_EPI_PARAMS)
{
    after_wgmma_wait(acc);
    const int lane = ctid % 32;
    const int q = (ctid % 128) / 32;
    const bool leader = ctid % 128 == 0;
    const unsigned stage = staging + cwg * WG_STAGE_BYTES;
    // The warpgroup's part of the tile: its rows of every filter, or (FILTERS_M) its 64 filters
    // of every pixel.
    const int row0 = m0 + (FILTERS_M ? 0 : ROW_GROUP(cwg) * WG_ROWS);
    const int col0 = f0 + (FILTERS_M ? 64 * cwg : 0);
#if RESIDUAL_TMA
#if STAGING == 2
    // The other staging tile held the last tile's output: load_residual waits for its stores'
    // reads (issued a main loop ago) before loading over it.
    if (leader && next_m0 >= 0) load_residual(next_staging, r_map, next_bar, next_m0, next_f0, cwg R_TAIL_PASS);
#endif
    mbar_wait(residual_bar, parity);  // issued once the stores that last read this tile had
#else
    // This staging tile's last stores (STAGING tiles ago) have read it; with two, the other's
    // may still be reading.
    if (leader) bulk_wait_read<STAGING - 1>();
    warpgroup_sync(cwg);
#endif
#if FILTERS_M
    // The accumulators are 64 filters (warp q's rows 16q..16q+15) x BM pixels, the staging tile
    // pixel rows of filters: each 8 x 8 block goes in transposed (the map's edges clip what lies
    // past the output). 16-bit: four blocks a stmatrix, filter halves h of pixel groups g, g + 1;
    // FP32: one value a store.
    (void)row0;
#if STORAGE != 0
    {
        const int j = lane / 8;  // the block this lane addresses a pixel row of: h = j % 2, group g + j / 2
        const int c = 16 * q + 8 * (j % 2);
#pragma unroll
        for (int g = 0; g < BM / 8; g += 2)
            stage_matrices_t(staged_at(stage, 8 * (g + j / 2) + lane % 8, c),
                             to_storage2(acc[0][4 * g], acc[0][4 * g + 1]),
                             to_storage2(acc[0][4 * g + 2], acc[0][4 * g + 3]),
                             to_storage2(acc[0][4 * g + 4], acc[0][4 * g + 5]),
                             to_storage2(acc[0][4 * g + 6], acc[0][4 * g + 7]));
    }
#else
#pragma unroll
    for (int g = 0; g < BM / 8; ++g)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = 8 * g + 2 * (lane % 4) + i % 2;  // the pixel
            const int c = 16 * q + 8 * (i / 2) + lane / 4;  // the filter
            asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(staged_at(stage, r, c)), "f"(FINAL(acc[0][4 * g + i])));
        }
#endif
#elif EPILOGUE
    static_assert((BN / 8) % EPI_COLUMN_RUN == 0, "a tile's column pairs are whole runs");
    // In runs of EPI_COLUMN_RUN column pairs: a run's scale and bias pairs, and its residual
    // pairs of every row this thread stores (read from the staging tile), loaded first, so that
    // their loads are in flight together; then each output computed and staged, over its
    // residual where there is one.
#pragma unroll
    for (int g0 = 0; g0 < BN / 8; g0 += EPI_COLUMN_RUN) {
        EpiColumns col[EPI_COLUMN_RUN];
        EpiPair in[EPI_COLUMN_RUN][MI][2];
#pragma unroll
        for (int j = 0; j < EPI_COLUMN_RUN; ++j) {
            const int c = 8 * (g0 + j) + 2 * (lane % 4);
            col[j] = EPI_COLUMNS(f0 + c, f0 + c < F, f0 + c + 1 < F);
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
#if RESIDUAL_TMA
                    in[j][mi][h] = staged_residual(stage, mi * 64 + 16 * q + lane / 4 + 8 * h, c);
#else
                    in[j][mi][h] = EpiPair{};
#endif
                }
        }
#pragma unroll
        for (int j = 0; j < EPI_COLUMN_RUN; ++j) {
            const int g = g0 + j;
            const int c = 8 * g + 2 * (lane % 4);
            const int f = f0 + c;
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int r = mi * 64 + 16 * q + lane / 4 + 8 * h;
                    float v0 = 0.0f, v1 = 0.0f;
                    if (row0 + r < M_ALL) {
                        if (f < F) v0 = epi_apply_columns(acc[mi][4 * g + 2 * h], col[j], in[j][mi][h], 0);
                        if (f + 1 < F) v1 = epi_apply_columns(acc[mi][4 * g + 2 * h + 1], col[j], in[j][mi][h], 1);
                    }
                    stage_pair(stage, r, c, v0, v1);
                }
        }
    }
#elif STORAGE != 0
    // No epilogue, 16-bit outputs: the accumulators as they are (the map's edges clip the rows
    // and columns past the output), two column groups of both row halves a stmatrix.
    static_assert((BN / 8) % 2 == 0, "whole pairs of 8-column groups");
    (void)row0;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        const int j = lane / 8;  // the matrix this lane addresses a row of: row half j % 2, group g + j / 2
        const int r = mi * 64 + 16 * q + 8 * (j % 2) + lane % 8;
#pragma unroll
        for (int g = 0; g < BN / 8; g += 2)
            stage_matrices(staged_at(stage, r, 8 * (g + j / 2)), to_storage2(acc[mi][4 * g], acc[mi][4 * g + 1]),
                           to_storage2(acc[mi][4 * g + 2], acc[mi][4 * g + 3]),
                           to_storage2(acc[mi][4 * g + 4], acc[mi][4 * g + 5]),
                           to_storage2(acc[mi][4 * g + 6], acc[mi][4 * g + 7]));
    }
#else
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = mi * 64 + 16 * q + lane / 4 + 8 * h;
            const int m = row0 + r;
#pragma unroll
            for (int g = 0; g < BN / 8; ++g) {
                const int c = 8 * g + 2 * (lane % 4);
                const int f = f0 + c;
                float v0 = 0.0f, v1 = 0.0f;
                if (m < M_ALL) {
                    if (f < F) v0 = EPI(acc[mi][4 * g + 2 * h], f, (long long)m * F + f);
                    if (f + 1 < F) v1 = EPI(acc[mi][4 * g + 2 * h + 1], f + 1, (long long)m * F + f + 1);
                }
                stage_pair(stage, r, c, v0, v1);
            }
        }
    }
#endif
    fence_proxy_async();  // the generic-proxy writes, for the tensor-memory copies' async proxy
    warpgroup_sync(cwg);
    if (leader) {
#pragma unroll
        for (int p = 0; p < PANELS; ++p) tma_store2(y_map, stage + p * PANEL_BYTES, col0 + p * PANEL_COLS, row0);
#if STORE_TAIL
        tma_store2(yt_map, stage + PANELS * PANEL_BYTES, col0 + PANELS * PANEL_COLS, row0);
#endif
        bulk_commit();
    }
}
#endif

#if PINGPONG
// Tile k's main loop (k >= 1) starts once tile k - 1's has waited for its last slot: named
// barrier 3 + k % 2, which the other warpgroup's 128 threads arrive at and this one's wait on.
__device__ __forceinline__ void turn_wait(int k)
{
    asm volatile("bar.sync %0, 256;\n" ::"r"(3 + k % 2) : "memory");
}

__device__ __forceinline__ void turn_pass(int k)
{
    asm volatile("bar.arrive %0, 256;\n" ::"r"(3 + k % 2) : "memory");
}
#endif

__device__ __forceinline__ void zero(float (&acc)[MI][ACC_N / 2])
{
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int i = 0; i < ACC_N / 2; ++i) acc[mi][i] = 0.0f;
}

#define TILES_F ((F + BN - 1) / BN)
#define TILES_M ((M_ALL + BM - 1) / BM)
// Tile t's first output pixel and filter: filter tiles fastest, so that neighbouring blocks
// share their input rows in L2; with MULTICAST, tiles gq to gq + g - 1 (g = MULTICAST_BLOCKS, a
// cluster's at one turn) are a group, neighbouring filter tiles (1) or pixel tiles (2), the
// groups in that order.
#define MC MULTICAST_BLOCKS
#if MULTICAST == 1
#define GROUPS_F ((TILES_F + MC - 1) / MC)
#define TILES (MC * GROUPS_F * TILES_M)
__device__ __forceinline__ int tile_m0(int t) { return (t / MC / GROUPS_F) * BM; }
__device__ __forceinline__ int tile_f0(int t) { return (t / MC % GROUPS_F * MC + t % MC) * BN; }
#elif MULTICAST == 2
#define TILES (TILES_F * MC * ((TILES_M + MC - 1) / MC))
__device__ __forceinline__ int tile_m0(int t) { return (t / MC / TILES_F * MC + t % MC) * BM; }
__device__ __forceinline__ int tile_f0(int t) { return (t / MC % TILES_F) * BN; }
#else
#define TILES (TILES_F * TILES_M)
__device__ __forceinline__ int tile_m0(int t) { return (t / TILES_F) * BM; }
__device__ __forceinline__ int tile_f0(int t) { return (t % TILES_F) * BN; }
#endif

#if PRODUCER && TMA
// The producer's copies of a tile's reduction steps [kt_begin, kt_end) into the slots, its
// step count g over all the block's tiles naming slot and phase.
__device__ __forceinline__ void produce_steps(
    int tile, int kt_begin, int kt_end, int& g, unsigned base, unsigned full, unsigned empty,
    const tensor_map_t* x_map, const tensor_map_t* w_map HALF_MAP_PARAMS)
{
    const int f0 = tile_f0(tile);
    // The first output pixel (b, oy, ox) of this block's copy: the tile's, or with MULTICAST = 1
    // that of its part of the shared input tile.
    const int m0 = tile_m0(tile) + (MULTICAST == 1 ? cluster_rank() * (BM / MC) : 0);
    const int b = m0 / (N * N);
    const int oy = (m0 - b * (N * N)) / N;
    const int ox = m0 - b * (N * N) - oy * N;
    for (int kt = kt_begin; kt < kt_end; ++kt, ++g) {
        const int s = g % STAGES;
        if (g >= STAGES) mbar_wait(empty + 8 * s, ((g / STAGES) + 1) & 1);
        const int tap = kt % (K * K);
        const int c = (kt / (K * K)) * BK;
        const unsigned slot = base + s * STAGE_BYTES;
        const unsigned bar = full + 8 * s;
#if HALF_BLOCK
        // The last channel block through the half maps: 64-byte rows, half the bytes.
        const bool short_step = SHORT_STEP(kt);
        const tensor_map_t* xm = short_step ? xh_map : x_map;
        const tensor_map_t* wm = short_step ? wh_map : w_map;
        const unsigned row = short_step ? HALF_ROW : STEP_BYTES;
#else
        const tensor_map_t* xm = x_map;
        const tensor_map_t* wm = w_map;
        const unsigned row = STEP_BYTES;
#endif
        // Both tiles land in every block: a part of the shared one from each block of the group.
        mbar_arrive_expect_tx(bar, (BM + BN) * row);
#if MULTICAST == 1
        const unsigned a_dst = slot + cluster_rank() * (BM / MC) * row;
#else
        const unsigned a_dst = slot;
#endif
#if GEMM_1X1
        tma_tile2(a_dst, xm, c, m0, bar, MULTICAST == 1);
#else
        const u16 kx = (u16)(tap % K), ky = (u16)(tap / K);
        tma_im2col(a_dst, xm, c, ox * STRIDE - PAD, oy * STRIDE - PAD, b, kx, ky, bar, MULTICAST == 1);
#endif
#if MULTICAST == 2
        const unsigned part = cluster_rank() * (BN / MC);
        tma_tile3(slot + BM * row + part * row, wm, c, tap, f0 + part, bar, true);
#else
        tma_tile3(slot + BM * row, wm, c, tap, f0, bar, false);
#endif
    }
}
#endif

// The stream-K schedule (the same in every thread of the grid): tiles [0, dp_end) in whole waves
// of the grid, and the `total` steps of the rest shared by the first `blocks` blocks, block j
// taking steps [j * total / blocks, (j + 1) * total / blocks) of them (tile dp_end + i / KTILES,
// step i % KTILES).
struct StreamK {
    int dp_end;
    int total;
    int blocks;
};

__device__ __forceinline__ StreamK stream_k_schedule()
{
    StreamK sk;
#if STREAM_K
    const int rest = TILES % gridDim.x;  // every tile where there are fewer than blocks
    sk.dp_end = TILES - rest;
    sk.total = rest * KTILES;
    sk.blocks = min(min(max(rest, sk.total / SK_MIN_STEPS), (int)gridDim.x), STREAM_K_BLOCKS);
#else
    sk.dp_end = TILES;
    sk.total = 0;
    sk.blocks = 0;
#endif
    return sk;
}

#if STREAM_K
__device__ __forceinline__ int sk_begin(const StreamK& sk, int block)
{
    return (int)((long long)block * sk.total / sk.blocks);
}

// The block whose run holds stream-K step i.
__device__ __forceinline__ int sk_block_of(const StreamK& sk, int i)
{
    return (int)(((long long)(i + 1) * sk.blocks - 1) / sk.total);
}

// Consumer warpgroup cwg's partial sums of stream-K tile r from `block`: slot 0 holds the tile
// its run starts in, slot 1 the one it ends in; MI x BN / 2 accumulators a thread, as float4s,
// each a 128-thread run (coalesced).
__device__ __forceinline__ float4* sk_slot(float* partials, const StreamK& sk, int block, int r, int cwg)
{
    const int which = sk_begin(sk, block) >= r * KTILES ? 0 : 1;
    return (float4*)(partials + ((long long)(2 * block + which) * WG + cwg) * (MI * 64 * BN));
}

__device__ __forceinline__ void sk_store(const float (&acc)[MI][ACC_N / 2], float4* slot, int lane)
{
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) {
            const float* a = &acc[mi][4 * i];
            asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(slot + (mi * (BN / 8) + i) * 128 + lane),
                         "f"(a[0]), "f"(a[1]), "f"(a[2]), "f"(a[3])
                         : "memory");
        }
}

// Another block's partial sums added in, read from L2 (cg: this multiprocessor's L1 may hold
// the slot's lines from an earlier read).
__device__ __forceinline__ void sk_add(float (&acc)[MI][ACC_N / 2], const float4* slot, int lane)
{
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) {
            float v0, v1, v2, v3;
            asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                         : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3)
                         : "l"(slot + (mi * (BN / 8) + i) * 128 + lane)
                         : "memory");
            acc[mi][4 * i] += v0;
            acc[mi][4 * i + 1] += v1;
            acc[mi][4 * i + 2] += v2;
            acc[mi][4 * i + 3] += v3;
        }
}

// Whether `v` holds in any thread of consumer warpgroup cwg (a barrier of its 128 threads).
__device__ __forceinline__ bool warpgroup_any(int cwg, bool v)
{
    unsigned any;
    asm volatile(
        "{\n.reg .pred p, q;\n"
        "setp.ne.u32 p, %1, 0;\n"
        "bar.red.or.pred q, %2, 128, p;\n"
        "selp.u32 %0, 1, 0, q;\n}\n"
        : "=r"(any)
        : "r"((unsigned)v), "r"(1 + cwg)
        : "memory");
    return any != 0;
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// The counter's old value, one added: a release of what this thread's warpgroup stored before
// its last barrier, and an acquire of what the shares counted in before stored.
__device__ __forceinline__ unsigned add_acq_rel(unsigned* p, unsigned v)
{
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

// Stream-K tile r's share of this block (from step k0), in consumer warpgroup cwg's
// accumulators: true where this share stores the tile, with every other share's partial sums
// added in. A share that is the whole tile stores it. Else it counts itself in on the tile's
// counter, after storing its partial sums; the last to arrive adds the others' and sets the
// counter back to zero. The share of the tile's first steps comes at the end of its block's run,
// after the others' (at the start of theirs): it looks at the counter first, and where every
// other share is in, adds theirs without storing its own.
__device__ __forceinline__ bool sk_gather(
    float (&acc)[MI][ACC_N / 2], const StreamK& sk, int r, int k0, float* partials, unsigned* counters,
    int ctid, int cwg)
{
    const int first = sk_block_of(sk, r * KTILES);
    const int last = sk_block_of(sk, (r + 1) * KTILES - 1);
    if (first == last) return true;
    after_wgmma_wait(acc);
    const int lane = ctid % 128;
    const bool leader = lane == 0;
    unsigned* counter = counters + r * WG + cwg;
    const unsigned others = (unsigned)(last - first);
    bool finishes = k0 == 0 && warpgroup_any(cwg, leader && load_acquire(counter) == others);
    if (!finishes) {
        // Every thread's partial sums, then the leader's count: its release carries the
        // warpgroup's stores across the barrier (no fence a thread: as __threadfence, a
        // sequentially consistent MEMBAR, Nsight Compute found it 10% of the stall samples).
        sk_store(acc, sk_slot(partials, sk, blockIdx.x, r, cwg), lane);
        warpgroup_sync(cwg);
        finishes = warpgroup_any(cwg, leader && add_acq_rel(counter, 1u) == others);
        if (!finishes) return false;
    }
    // The leader's acquire (of the look or the count) and the barrier after it order the
    // warpgroup's loads of the others' partial sums after their stores.
    if (leader) atomicExch(counter, 0u);  // every share of this launch is in
    for (int block = first; block <= last; ++block)
        if (block != (int)blockIdx.x) sk_add(acc, sk_slot(partials, sk, block, r, cwg), lane);
    return true;
}
// A stream-K tile's last share stores it through the staging tile by TMA where a second copy of
// that path fits the registers beside the partial sums' loads (64 accumulators a thread; at 128,
// ptxas spilled), and no residual would have to be staged first; else directly.
#define SK_STORE_TMA (STORE_TMA && !RESIDUAL_TMA && MI * BN / 2 <= 64)
#define SK_PARAMS , float* __restrict__ sk_partials, unsigned* __restrict__ sk_counters
#else
#define SK_PARAMS
#endif

#if CLUSTER > 1
#define CLUSTER_DIMS __cluster_dims__(CLUSTER, 1, 1)
#else
#define CLUSTER_DIMS
#endif

#if SPLIT_CLUSTER
#define CONSUMERS (128 * WG)
#define CONSUMERS_BARRIER 7  // after the block's (0), the warpgroups' (1-3) and the turns' (3-4)

// The block's share of a split tile into the cluster's first block, which finishes the tile: each
// other block stores its accumulators in its own slots (as float4s, thread-major within each, so
// that a warp's stores are conflict-free), and the first adds them in, reading them across the
// cluster, before either side goes on. True in the first block.
__device__ __forceinline__ bool split_gather(float (&acc)[MI][ACC_N / 2], unsigned base, int ctid)
{
    after_wgmma_wait(acc);
    const unsigned rank = cluster_rank();
    const unsigned mine = base + 16u * ctid;
    if (rank != 0) {
        // Every consumer warpgroup's wgmmas have retired: no slot is read any more.
        asm volatile("bar.sync %0, %1;\n" ::"n"(CONSUMERS_BARRIER), "n"(CONSUMERS) : "memory");
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int i = 0; i < BN / 8; ++i) {
                const float* a = &acc[mi][4 * i];
                asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(mine + 16u * CONSUMERS * (mi * (BN / 8) + i)),
                             "f"(a[0]), "f"(a[1]), "f"(a[2]), "f"(a[3])
                             : "memory");
            }
    }
    // The others' stores released to the first block, which acquires them (exited threads, the
    // producers', do not hold the barrier).
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    if (rank == 0) {
#pragma unroll 1
        for (unsigned r = 1; r < SPLIT_K; ++r) {
            unsigned remote;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(mine), "r"(r));
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int i = 0; i < BN / 8; ++i) {
                    float v0, v1, v2, v3;
                    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3)
                                 : "r"(remote + 16u * CONSUMERS * (mi * (BN / 8) + i))
                                 : "memory");
                    acc[mi][4 * i] += v0;
                    acc[mi][4 * i + 1] += v1;
                    acc[mi][4 * i + 2] += v2;
                    acc[mi][4 * i + 3] += v3;
                }
        }
    }
    // The others' shared memory must outlive the first block's reads of it.
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
    return rank == 0;
}
#endif

// A block computes the output tiles first_tile, first_tile + tile_stride, ... (blockIdx.x and
// gridDim.x over TILE_BLOCKS; TILES_PER_BLOCK of them at most; filter tiles fastest, so that
// neighbouring blocks share their gathered rows), each over its split's share of the reduction.
extern "C" __global__ void __launch_bounds__(THREADS, 1) CLUSTER_DIMS tc_wgmma(
    const elem_t* __restrict__ x, const elem_t* __restrict__ w, gemm_out_t* __restrict__ y
    GEMM_EPI_PARAMS SK_PARAMS
#if TMA
    ,
    const __grid_constant__ tensor_map_t x_map, const __grid_constant__ tensor_map_t w_map
#endif
#if HALF_BLOCK
    ,
    const __grid_constant__ tensor_map_t x_half_map, const __grid_constant__ tensor_map_t w_half_map
#endif
#if STORE_TMA
    ,
    const __grid_constant__ tensor_map_t y_map
#endif
#if STORE_TAIL
    ,
    const __grid_constant__ tensor_map_t y_tail_map
#endif
#if RESIDUAL_TMA
    ,
    const __grid_constant__ tensor_map_t r_map
#endif
#if RESIDUAL_TMA && TAIL_COLS
    ,
    const __grid_constant__ tensor_map_t r_tail_map
#endif
)
{
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem_raw);
    const unsigned base = (raw + 1023u) & ~1023u;  // the swizzle pattern repeats every 1024 bytes
    const int tid = threadIdx.x;

    // This block's share of the reduction: whole BK steps [kt0, kt0 + steps), its split the
    // grid's z or (SPLIT_CLUSTER) its rank in the tile's cluster.
    const int per_split = (KTILES + SPLIT_K - 1) / SPLIT_K;
    const int kt0 = (SPLIT_CLUSTER ? (int)cluster_rank() : (int)blockIdx.z) * per_split;
    // The block's first tile and the stride between its tiles: a cluster of SPLIT_CLUSTER's
    // shares one tile.
    const int first_tile = blockIdx.x / TILE_BLOCKS, tile_stride = gridDim.x / TILE_BLOCKS;
    const int steps = max(0, min(KTILES - kt0, per_split));
    // Tiles [0, dp_end) a block's in turn; with STREAM_K the rest's steps shared after them.
    const StreamK sk = stream_k_schedule();
    const int dp_end = sk.dp_end;

    float acc[MI][ACC_N / 2];

#if PRODUCER
    // Warp-specialised: warpgroup 0 loads (cp.async completing on the slot's `full` barrier),
    // warpgroups 1..WG multiply and free a slot (its `empty` barrier) once their wgmma on it
    // has retired. No block-wide barrier after the set-up: the producer runs ahead into the
    // block's next tile while the consumers store the last one. Slot and phase follow the
    // block's step count g over all its tiles.
    const unsigned staging = base + STAGES * STAGE_BYTES;  // STORE_TMA's (STORE_BYTES)
    const unsigned full = staging + STORE_BYTES;
    const unsigned empty = full + 8 * STAGES;
    // RESIDUAL_TMA's: one a consumer warpgroup and staging tile, warpgroup cwg's of tile t at
    // residual_bars + 8 * (cwg * STAGING + t % STAGING).
    const unsigned residual_bars = empty + 8 * STAGES;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, TMA ? 1 : LOADERS);
            mbar_init(empty + 8 * s, ROW_GROUPS * SLOT_BLOCKS);  // the warpgroups that read the slot
        }
#if RESIDUAL_TMA
        for (int i = 0; i < WG * STAGING; ++i) mbar_init(residual_bars + 8 * i, 1);
#endif
#if MULTICAST
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
    }
#if MULTICAST
    cluster_sync();  // the other blocks' copies and arrivals may now reach this one's barriers
#else
    __syncthreads();
#endif
    if (tid < LOADERS) {
#if WG > 1
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
#endif
#if TMA
        if (tid != 0) return;
        prefetch_map(&x_map);
        prefetch_map(&w_map);
#if HALF_BLOCK
        prefetch_map(&x_half_map);
        prefetch_map(&w_half_map);
#endif
        int g = 0;
        for (int tile = first_tile; tile < dp_end; tile += tile_stride)
            produce_steps(tile, kt0, kt0 + steps, g, base, full, empty, &x_map, &w_map HALF_MAPS);
#if STREAM_K
        if ((int)blockIdx.x < sk.blocks) {
            const int end = sk_begin(sk, blockIdx.x + 1);
            for (int i = sk_begin(sk, blockIdx.x); i < end;) {
                const int r = i / KTILES, k0 = i - r * KTILES, k1 = min(KTILES, k0 + end - i);
                produce_steps(dp_end + r, k0, k1, g, base, full, empty, &x_map, &w_map HALF_MAPS);
                i += k1 - k0;
            }
        }
#endif
#if MULTICAST
        // The block stays until every block's consumers have freed its last slots: their
        // arrivals on this block's barriers are the last that reach it.
        for (int last = max(0, g - STAGES); last < g; ++last) mbar_wait(empty + 8 * (last % STAGES), (last / STAGES) & 1);
#endif
        return;
#else
        const int row0 = tid / CHUNK_COLS;
        const int j = tid % CHUNK_COLS;
        int g = 0;
        for (int tile = first_tile; tile < TILES; tile += tile_stride) {
            const int f0 = tile_f0(tile);
            int a_base[A_ROWS];
            row_bases(a_base, tile_m0(tile), row0);
            for (int t = 0; t < steps; ++t, ++g) {
                const int s = g % STAGES;
                if (g >= STAGES) mbar_wait(empty + 8 * s, ((g / STAGES) + 1) & 1);
                load_tile(base + s * STAGE_BYTES, kt0 + t, x, w, a_base, f0 + row0, row0, j);
#if CHUNKED
                cp_async_arrive(full + 8 * s);
#else
                mbar_arrive(full + 8 * s);  // element gather: plain stores, released by the arrive
#endif
            }
        }
        cp_async::wait<0>();
        return;
#endif
    }
#if WG > 1
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
#endif
    const int ctid = tid - LOADERS;
    // Broadcast, so that the compiler holds it, and the slots and descriptors made from it, in
    // uniform registers (a warp's threads are all of one warpgroup).
    const int cwg = __shfl_sync(0xffffffffu, ctid / 128, 0);
    const bool leader = ctid % 128 == 0;
#if RESIDUAL_TMA
    if (leader) prefetch_map(&r_map);
#endif
    // The block's tiles k = 0, 1, ... in the producer's order (tile first_tile + k * tile_stride):
    // every one, or (PINGPONG) every WG-th from k = cwg, the slots of the others' steps skipped.
    const int turns = PINGPONG ? WG : 1;
    int k = PINGPONG ? cwg : 0;
    int g = k * steps;
    int done = 0;  // tiles this warpgroup has finished: their staging tile and residual's phase
    for (int tile = first_tile + k * tile_stride; tile < dp_end;
         tile += turns * tile_stride, k += turns, g += (turns - 1) * steps, ++done) {
        const int m0 = tile_m0(tile), f0 = tile_f0(tile);
#if STORE_TMA
        const unsigned tile_staging = staging + (done % STAGING) * STAGING_BYTES;
        const unsigned residual_bar = residual_bars + 8 * (cwg * STAGING + done % STAGING);
#endif
        zero(acc);
#if PINGPONG
        if (k > 0) turn_wait(k);
#endif
        for (int t = 0; t < steps; ++t, ++g) {
            const int s = g % STAGES;
            mbar_wait(full + 8 * s, (g / STAGES) & 1);
#if !TMA
            fence_proxy_async();  // the loaders' generic-proxy writes, for the wgmma's async proxy
#endif
            mma_step(acc, base + s * STAGE_BYTES, cwg, kt0 + t);
            wgmma_wait<1>();
            if (t > 0 && leader) release_slot(empty + 8 * ((g - 1) % STAGES));
#if RESIDUAL_TMA
            // Halfway: the last tile's stores have had half a main loop to drain, and the
            // residual has the other half to land (STORE_TMA has no split: steps >= 1). With two
            // staging tiles, the last tile's epilogue issued it (but the block's first tile's).
            if (t == steps / 2 && leader && (STAGING == 1 || done == 0) && (!SPLIT_CLUSTER || cluster_rank() == 0))
                load_residual(tile_staging, &r_map, residual_bar, m0, f0, cwg R_TAIL_ARG);
#endif
        }
#if PINGPONG
        if (tile + tile_stride < dp_end) turn_pass(k + 1);  // the next tile's main loop may start
#endif
        wgmma_wait<0>();
        if (steps > 0 && leader) release_slot(empty + 8 * ((g - 1) % STAGES));
#if SPLIT_CLUSTER
        if (!split_gather(acc, base, ctid)) return;  // the cluster's first block finishes the tile
#endif
#if STORE_TMA
        const int next = tile + turns * tile_stride;  // this warpgroup's next tile
#if RESIDUAL_TMA
        const tensor_map_t* residual_map = &r_map;
#else
        const tensor_map_t* residual_map = nullptr;
#endif
        store_tile_tma(acc, tile_staging, &y_map, m0, f0, ctid, cwg, residual_bar, (done / STAGING) & 1,
                       staging + ((done + 1) % STAGING) * STAGING_BYTES, residual_map,
                       residual_bars + 8 * (cwg * STAGING + (done + 1) % STAGING),
                       next < dp_end ? tile_m0(next) : -1, tile_f0(next) Y_TAIL_ARG R_TAIL_ARG GEMM_EPI_ARGS);
#else
        store_tile(acc, y, m0, f0, ctid, cwg GEMM_EPI_ARGS);
#endif
    }
#if STREAM_K
    // The stream-K steps, in the producer's order; the share that stores a tile (sk_gather)
    // stores it (SK_STORE_TMA: through the staging tile, as the whole waves' tiles are).
    if ((int)blockIdx.x < sk.blocks) {
        const int end = sk_begin(sk, blockIdx.x + 1);
        for (int i = sk_begin(sk, blockIdx.x); i < end;) {
            const int r = i / KTILES, k0 = i - r * KTILES, k1 = min(KTILES, k0 + end - i);
            i += k1 - k0;
            zero(acc);
            for (int kt = k0; kt < k1; ++kt, ++g) {
                const int s = g % STAGES;
                mbar_wait(full + 8 * s, (g / STAGES) & 1);
                mma_step(acc, base + s * STAGE_BYTES, cwg, kt);
                wgmma_wait<1>();
                if (kt > k0 && leader) release_slot(empty + 8 * ((g - 1) % STAGES));
            }
            wgmma_wait<0>();
            if (leader) release_slot(empty + 8 * ((g - 1) % STAGES));
            if (!sk_gather(acc, sk, r, k0, sk_partials, sk_counters, ctid, cwg)) continue;
            const int tile = dp_end + r, m0 = tile_m0(tile), f0 = tile_f0(tile);
#if SK_STORE_TMA
            store_tile_tma(acc, staging + (done % STAGING) * STAGING_BYTES, &y_map, m0, f0, ctid, cwg, 0, 0, 0,
                           nullptr, 0, -1, 0 Y_TAIL_ARG R_TAIL_ARG GEMM_EPI_ARGS);
            ++done;
#else
            store_tile(acc, y, m0, f0, ctid, cwg GEMM_EPI_ARGS);
#endif
        }
    }
#endif
#if STORE_TMA
    // The block's shared memory must outlive the last stores' reads of it, not their writes:
    // waiting for the writes as well held each multiprocessor from its next block (Nsight
    // Compute: 8% of the fused 56x56 conv3's warp samples on that wait).
    if (leader) bulk_wait_read();
#endif
#else
    // Every thread loads and multiplies: a step waits for its tile, syncs, issues its wgmma
    // group, waits for the previous step's, (with two warpgroups syncs again,) and refills the
    // previous step's slot.
    const int row0 = tid / CHUNK_COLS;
    const int j = tid % CHUNK_COLS;
    const int cwg = __shfl_sync(0xffffffffu, tid / 128, 0);  // uniform, as the producer's form's
    for (int tile = first_tile; tile < TILES; tile += tile_stride) {
        const int f0 = tile_f0(tile);
        const int m0 = tile_m0(tile);
        int a_base[A_ROWS];
        row_bases(a_base, m0, row0);
        zero(acc);
        __syncthreads();  // every warpgroup's wgmma of the last tile has retired: slots are free
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < steps) load_tile(base + s * STAGE_BYTES, kt0 + s, x, w, a_base, f0 + row0, row0, j);
            cp_async::commit();
        }
        for (int t = 0; t < steps; ++t) {
            cp_async::wait<STAGES - 2>();
            fence_proxy_async();
            __syncthreads();
            mma_step(acc, base + (t % STAGES) * STAGE_BYTES, cwg, kt0 + t);
            wgmma_wait<1>();
#if WG > 1
            __syncthreads();
#endif
            const int next = t + STAGES - 1;
            if (next < steps)
                load_tile(base + (next % STAGES) * STAGE_BYTES, kt0 + next, x, w, a_base, f0 + row0, row0, j);
            cp_async::commit();
        }
        wgmma_wait<0>();
        store_tile(acc, y, m0, f0, tid, cwg GEMM_EPI_ARGS);
    }
#endif
}

#ifdef S2D_STRIDE
// Space-to-depth: the layer's input (B, S2D_SIDE, S2D_SIDE, S2D_C) as (B, S_IN, S_IN, C) and its
// filters (F, S2D_K, S2D_K, S2D_C) as (F, K, K, C), channel c of a rewritten pixel (y, x) being
// channel c % S2D_C of the pixel (dy, dx) = (c / S2D_C / S2D_STRIDE, c / S2D_C % S2D_STRIDE) of
// its block, at (y * S2D_STRIDE + dy - S2D_PAD, x * S2D_STRIDE + dx - S2D_PAD) of the input and
// tap (ky * S2D_STRIDE + dy, kx * S2D_STRIDE + dx) of a filter; zeros outside the input, past
// the window and past S2D_STRIDE^2 * S2D_C channels. One 16-byte chunk of either a thread.
#define S2D_CHANNELS (S2D_STRIDE * S2D_STRIDE * S2D_C)
#if !CHUNKED || STRIDE != 1 || S2D_CHANNELS > C
#error "the space-to-depth layer is a stride-1 layer of whole chunks holding every rewritten channel"
#endif
#define S2D_X_CHUNKS ((long long)B * S_IN * S_IN * C / CHUNK_ELEMS)
#define S2D_W_CHUNKS ((long long)F * K * K * C / CHUNK_ELEMS)
#define S2D_BLOCK 256

extern "C" __global__ void __launch_bounds__(S2D_BLOCK) tc_wgmma_s2d(
    const elem_t* __restrict__ x, const elem_t* __restrict__ w, elem_t* __restrict__ xs,
    elem_t* __restrict__ ws)
{
    const long long chunk = (long long)blockIdx.x * S2D_BLOCK + threadIdx.x;
    if (chunk >= S2D_X_CHUNKS + S2D_W_CHUNKS) return;
    const bool filters = chunk >= S2D_X_CHUNKS;
    const long long i = (filters ? chunk - S2D_X_CHUNKS : chunk) * CHUNK_ELEMS;  // first element
    const int c0 = (int)(i % C);
    const long long pixel = i / C;  // (b, y, x) or (f, ky, kx)
    const int side = filters ? K : S_IN;
    const int px = (int)(pixel % side), py = (int)(pixel / side % side);
    const long long image = pixel / side / side;
    union {
        uint4 chunk;
        elem_t e[CHUNK_ELEMS];
    } v;
#pragma unroll
    for (int e = 0; e < CHUNK_ELEMS; ++e) {
        const int c = c0 + e;
        const int cell = c / S2D_C, dy = cell / S2D_STRIDE, dx = cell % S2D_STRIDE;
        elem_t value = 0;
        if (c < S2D_CHANNELS) {
            if (filters) {
                const int ky = py * S2D_STRIDE + dy, kx = px * S2D_STRIDE + dx;
                if (ky < S2D_K && kx < S2D_K)
                    value = w[((image * S2D_K + ky) * S2D_K + kx) * S2D_C + c % S2D_C];
            } else {
                const int iy = py * S2D_STRIDE + dy - S2D_PAD, ix = px * S2D_STRIDE + dx - S2D_PAD;
                if (iy >= 0 && iy < S2D_SIDE && ix >= 0 && ix < S2D_SIDE)
                    value = x[((image * S2D_SIDE + iy) * S2D_SIDE + ix) * S2D_C + c % S2D_C];
            }
        }
        v.e[e] = value;
    }
    *reinterpret_cast<uint4*>((filters ? ws : xs) + i) = v.chunk;
}
#endif

// Split-K: the SPLIT_K partial sums of every output added up, the epilogue (if any) applied,
// and stored in the storage dtype.
extern "C" __global__ void __launch_bounds__(REDUCE_BLOCK)
    tc_wgmma_reduce(const float* __restrict__ partial, out_t* __restrict__ y EPI_PARAMS)
{
    const long long total = (long long)M_ALL * F;
    const long long i = (long long)blockIdx.x * REDUCE_BLOCK + threadIdx.x;
    if (i >= total) return;
    float sum = 0.0f;
#pragma unroll
    for (int s = 0; s < SPLIT_K; ++s) sum += partial[s * total + i];
    y[i] = to_storage(EPI(sum, (int)(i % F), i));
}
