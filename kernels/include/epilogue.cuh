// A fused epilogue (autotune/model/epilogue.py) in a kernel's output store, in FP32: an
// accumulator v of filter f at the output's flat index i becomes
//   act(v * scale[f] + bias[f] + residual[i])
// before it is rounded to the storage type. Included only where the problem has an epilogue
// (EPILOGUE defined), so that a plain kernel's code is untouched.
//
// The includer defines elem_t (the stored elements' raw bits: unsigned FP32 bits, or u16 FP16 /
// BF16 bits) and STORAGE (0 FP32, 1 FP16, 2 BF16); the plan defines EPI_SCALE, EPI_BIAS,
// EPI_RESIDUAL (0 or 1) and EPI_ACT (0 none, 1 ReLU, 2 SiLU, 3 GELU, the exact one).
// The kernel takes the epilogue's inputs as the parameters EPI_PARAMS (scale, bias, residual,
// those present, each in the storage type) and passes them on with EPI_ARGS; EPI(v, f, i) is the
// epilogue applied, EPI_FETCH2 and EPI_APPLY2 the same for a pair of outputs in two steps.

#ifndef AUTOTUNE_EPILOGUE_CUH
#define AUTOTUNE_EPILOGUE_CUH

#if EPI_SCALE
#define EPI_P_SCALE , const elem_t* __restrict__ epi_scale
#define EPI_A_SCALE , epi_scale
#else
#define EPI_P_SCALE
#define EPI_A_SCALE
#endif
#if EPI_BIAS
#define EPI_P_BIAS , const elem_t* __restrict__ epi_bias
#define EPI_A_BIAS , epi_bias
#else
#define EPI_P_BIAS
#define EPI_A_BIAS
#endif
#if EPI_RESIDUAL
#define EPI_P_RESIDUAL , const elem_t* __restrict__ epi_residual
#define EPI_A_RESIDUAL , epi_residual
#else
#define EPI_P_RESIDUAL
#define EPI_A_RESIDUAL
#endif
#define EPI_PARAMS EPI_P_SCALE EPI_P_BIAS EPI_P_RESIDUAL
#define EPI_ARGS EPI_A_SCALE EPI_A_BIAS EPI_A_RESIDUAL

// A stored element's bits as FP32.
__device__ __forceinline__ float epi_float(elem_t bits)
{
#if STORAGE == 0
    return __uint_as_float(bits);
#elif STORAGE == 1
    float v;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(v) : "h"(bits));
    return v;
#else
    return __uint_as_float(((unsigned)bits) << 16);  // BF16: the top half of an FP32
#endif
}

// A stored element as FP32.
__device__ __forceinline__ float epi_load(const elem_t* p, long long i) { return epi_float(__ldg(p + i)); }

// The activation, applied last. NaN passes through each (as in PyTorch), so the check still sees it.
__device__ __forceinline__ float epi_activation(float v)
{
#if EPI_ACT == 1
    v = v < 0.0f ? 0.0f : v;
#elif EPI_ACT == 2
    v = v / (1.0f + __expf(-v));
#elif EPI_ACT == 3
    v = 0.5f * v * (1.0f + erff(v * 0.70710678f));
#elif EPI_ACT != 0
#error "EPI_ACT is 0 (none), 1 (ReLU), 2 (SiLU) or 3 (GELU)"
#endif
    return v;
}

__device__ __forceinline__ float epilogue(float v, int f, long long i EPI_PARAMS)
{
#if EPI_SCALE
    v *= epi_load(epi_scale, f);
#endif
#if EPI_BIAS
    v += epi_load(epi_bias, f);
#endif
#if EPI_RESIDUAL
    v += epi_load(epi_residual, i);
#endif
    return epi_activation(v);
}

// The same in two steps, for a store loop over pairs of neighbouring outputs (f and f + 1 at
// flat indices i and i + 1): EPI_FETCH2 loads a pair's residual, EPI_APPLY2 applies the
// epilogue with it. A loop that fetches a run of pairs before it applies and stores the first
// has the run's loads in flight together: one memory latency a run. Fetched where each was
// used, a residual's loads were waited for one or two at a time, and ResNet-50's 56x56 1x1 layer
// (C = 64, F = 256, tf32) took 385 us with its residual add against 66 us plain on the H200
// (Nsight Compute: L1TEX scoreboard stalls). The per-filter scale and bias stay where they are
// used: small vectors that L1 holds, they are not worth a run's registers (fetched in the run
// too, a wide tile spilled). ok0 and ok1 say which of the two outputs exist (f < F, f + 1 < F).
struct EpiPair {
    float residual[2];
};

__device__ __forceinline__ EpiPair epi_fetch2(long long i, bool ok0, bool ok1 EPI_PARAMS)
{
    EpiPair in;
#if EPI_RESIDUAL
    in.residual[0] = ok0 ? epi_load(epi_residual, i) : 0.0f;
    in.residual[1] = ok1 ? epi_load(epi_residual, i + 1) : 0.0f;
#endif
    return in;
}


// The scale and bias of a pair of neighbouring filters (f and f + 1, where each exists), loaded
// once for every row of the pair that a thread stores: a store loop over rows inside column pairs
// (STORE_TMA's) loads them 2 MI times fewer than EPI_APPLY2, which reloads them each row.
struct EpiColumns {
    float scale[2];
    float bias[2];
};

__device__ __forceinline__ EpiColumns epi_columns(int f, bool ok0, bool ok1 EPI_PARAMS)
{
    EpiColumns col;
#if EPI_SCALE
    col.scale[0] = ok0 ? epi_load(epi_scale, f) : 0.0f;
    col.scale[1] = ok1 ? epi_load(epi_scale, f + 1) : 0.0f;
#endif
#if EPI_BIAS
    col.bias[0] = ok0 ? epi_load(epi_bias, f) : 0.0f;
    col.bias[1] = ok1 ? epi_load(epi_bias, f + 1) : 0.0f;
#endif
    return col;
}

// Output k of the pair (0 or 1, a constant where inlined) with its scale and bias loaded.
__device__ __forceinline__ float epi_apply_columns(float v, const EpiColumns& col, const EpiPair& in, int k)
{
#if EPI_SCALE
    v *= col.scale[k];
#endif
#if EPI_BIAS
    v += col.bias[k];
#endif
#if EPI_RESIDUAL
    v += in.residual[k];
#endif
    return epi_activation(v);
}

// The same, loading output k's scale and bias where it is applied.
__device__ __forceinline__ float epi_apply2(float v, int f, const EpiPair& in, int k EPI_PARAMS)
{
    EpiColumns col;
#if EPI_SCALE
    col.scale[k] = epi_load(epi_scale, f + k);
#endif
#if EPI_BIAS
    col.bias[k] = epi_load(epi_bias, f + k);
#endif
    return epi_apply_columns(v, col, in, k);
}

#define EPI(v, f, i) epilogue((v), (f), (i)EPI_ARGS)
#define EPI_COLUMNS(f, ok0, ok1) epi_columns((f), (ok0), (ok1)EPI_ARGS)
#define EPI_FETCH2(i, ok0, ok1) epi_fetch2((i), (ok0), (ok1)EPI_ARGS)
#define EPI_APPLY2(v, f, in, k) epi_apply2((v), (f), (in), (k)EPI_ARGS)

#endif
