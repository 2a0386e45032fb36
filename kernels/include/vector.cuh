// Width consecutive floats as one access (float, float2, float4): the vector-type helper the
// kernels had each written out, written once.
//
//   Vec<W>::type             the W-wide word (vec_t in the kernels that tune VEC)
//   Vec<W>::load(p, o)       W floats at p (16-byte aligned for W = 4) into registers o[0..W)
//   Vec<W>::store(p, i)      i[0..W) to p as one vector store
//   Vec<W>::store_global(p, i)  the same to global memory as one st.global.v<W>.f32: NVVM splits
//                            a vector store of accumulators into scalar stores, the PTX keeps it
//   Vec<W>::unpack(v, o)     a word already read into o[0..W)
//   Vec<W>::pack(i)          i[0..W) as a word
//
// Every function is inline and unused ones produce no code, so a kernel's cubin is what it was
// when the kernel wrote its own copy (checked with tests/nvrtc/compare_cubins.py). Included with
// #include "vector.cuh"; the compiler hands NVRTC this file by name and keys its cubin cache on
// its text. The template parameter is not named in UPPER_CASE: the kernels' tunables arrive as
// macros.

#pragma once

template <int Width> struct Vec;

template <> struct Vec<1> {
    using type = float;
    static __device__ __forceinline__ void load(const float* p, float* o) { o[0] = *p; }
    static __device__ __forceinline__ void store(float* p, const float* i) { *p = i[0]; }
    static __device__ __forceinline__ void store_global(float* p, const float* i) { *p = i[0]; }
    static __device__ __forceinline__ void unpack(float v, float* o) { o[0] = v; }
    static __device__ __forceinline__ float pack(const float* i) { return i[0]; }
};

template <> struct Vec<2> {
    using type = float2;
    static __device__ __forceinline__ void load(const float* p, float* o) {
        const float2 v = *reinterpret_cast<const float2*>(p);
        o[0] = v.x; o[1] = v.y;
    }
    static __device__ __forceinline__ void store(float* p, const float* i) {
        *reinterpret_cast<float2*>(p) = make_float2(i[0], i[1]);
    }
    static __device__ __forceinline__ void store_global(float* p, const float* i) {
        asm volatile("st.global.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(i[0]), "f"(i[1]));
    }
    static __device__ __forceinline__ void unpack(float2 v, float* o) { o[0] = v.x; o[1] = v.y; }
    static __device__ __forceinline__ float2 pack(const float* i) {
        return make_float2(i[0], i[1]);
    }
};

template <> struct Vec<4> {
    using type = float4;
    static __device__ __forceinline__ void load(const float* p, float* o) {
        const float4 v = *reinterpret_cast<const float4*>(p);
        o[0] = v.x; o[1] = v.y; o[2] = v.z; o[3] = v.w;
    }
    static __device__ __forceinline__ void store(float* p, const float* i) {
        *reinterpret_cast<float4*>(p) = make_float4(i[0], i[1], i[2], i[3]);
    }
    static __device__ __forceinline__ void store_global(float* p, const float* i) {
        asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(i[0]), "f"(i[1]),
                     "f"(i[2]), "f"(i[3]));
    }
    static __device__ __forceinline__ void unpack(float4 v, float* o) {
        o[0] = v.x; o[1] = v.y; o[2] = v.z; o[3] = v.w;
    }
    static __device__ __forceinline__ float4 pack(const float* i) {
        return make_float4(i[0], i[1], i[2], i[3]);
    }
};
