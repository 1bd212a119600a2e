#pragma once
// One float vector per instruction set, as a struct of static functions, so that a float kernel
// is written once against `Floats` and compiled per set (ops/kv_tiles_set.hpp,
// quant/float_tile_set.hpp): Avx2Floats (8 lanes, __m256), Avx512Floats (16 lanes, __m512) and,
// on AArch64, XsimdFloats (xsimd::batch<float>: 4 lanes of NEON). Each x86 function is the one
// instruction (or fixed sequence) the hand-written kernels used, so the shared kernel gives each
// set's former bits. Only where a set's operation differs in more than its width (a reduction's
// order, a mask against a blend) do the bodies differ.
//
// The reductions are the vector type's, so that no kernel spells a set's shuffles:
//   sum(v)                 the float tiles' lane sum
//   sum_folded(v)          the softmax's lane sum
//   sum_each8(a, scale, o) o[i] = scale * (the lanes of a[i] summed), i < 8: a score tile's sums,
//                          every a[i] summed in the same order, so a score does not depend on
//                          its slot
// Their orders are each set's own (x86 keeps the orders its kernels always had); the tests hold
// every set to the scalar references within a tolerance, and to its own bits where one result is
// computed two ways (a row scored in place and from a copy, a token alone and in a batch).
//
// xsimd's batch<float, avx512f> exists only when the whole program is compiled with AVX-512,
// which smol's x86-64-v3 baseline is not; hence the x86 types. Every Avx512Floats function
// carries SMOL_TARGET_AVX512, and so must every function that passes an Avx512Floats::V by value
// (clang rejects the call from a baseline function, GCC warns that the ABI changes): that is why
// the kernels over these are included once per set with the set's target attribute rather than
// written as templates over the set, as quant/legacy_tiles_avx2.hpp's integer driver is (its
// AVX-512 products pass only 256-bit vectors). On AArch64, NEON is the baseline, so
// XsimdFloats needs no attribute and no flags.

#include "smol/core/intrinsic_warnings.hpp"
#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

namespace smol::simd {

// The sum of 8 lanes by the tree ((0+4)+(2+6))+((1+5)+(3+7)): fold the halves, then pairs.
inline float sum8_lanes(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

struct Avx2Floats {
    using V = __m256;
    static constexpr int kLanes = 8;

    static V zero() { return _mm256_setzero_ps(); }
    static V set1(float x) { return _mm256_set1_ps(x); }
    static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
    static V load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V max(V a, V b) { return _mm256_max_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }    // a * b + c, one rounding
    static V fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a * b, one rounding
    static V round_nearest(V x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

    // 2^k for integral k in [-126, 127]: k + 127 put into the exponent field.
    static V exp2_integral(V k) {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23));
    }
    // value where x is not below limit, 0 where it is (a NaN x keeps its value).
    static V zero_below(V value, V x, float limit) {
        return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(limit), _CMP_LT_OQ), value);
    }

    // The first n < kLanes floats at p, the other lanes `fill`; and the first n lanes stored.
    static V load_first(const float* p, int n, float fill) {
        alignas(32) float lanes[kLanes];
        for (int i = 0; i < kLanes; ++i) lanes[i] = i < n ? p[i] : fill;
        return _mm256_load_ps(lanes);
    }
    static void store_first(float* p, int n, V v) {
        alignas(32) float lanes[kLanes];
        _mm256_store_ps(lanes, v);
        for (int i = 0; i < n; ++i) p[i] = lanes[i];
    }

    // The lanes as 8 (sums of) lanes: already 8.
    static __m256 fold8(V v) { return v; }
    // The softmax's sum: the tree ((0+4)+(2+6))+((1+5)+(3+7)).
    static float sum_folded(V v) { return sum8_lanes(v); }

    // Eight sums of eight accumulators, each summed by the same tree ((0+1)+(2+3))+((4+5)+(6+7)).
    static __m256 sum8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6, __m256 a7) {
        const __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
        const __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
        const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
        // u0 = [a0 a1 a2 a3 (low halves) | a0 a1 a2 a3 (high halves)], u1 likewise for a4..a7
        return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
    }
    static void sum_each8(const V* a, float scale, float* out) {
        _mm256_storeu_ps(out, _mm256_mul_ps(sum8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]), _mm256_set1_ps(scale)));
    }
    // The float tiles' lane sum in the order ((0+4)+(1+5))+((2+6)+(3+7)): the two halves added
    // lane by lane, then two horizontal adds; the order they used before they were written once.
    static float sum(V v) {
        __m256 t = _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 1));
        t = _mm256_hadd_ps(t, t);
        t = _mm256_hadd_ps(t, t);
        return _mm_cvtss_f32(_mm256_castps256_ps128(t));
    }
};

}  // namespace smol::simd

#endif

#if SMOL_HAVE_AVX512_KERNELS

// GCC 12 reports the masked intrinsics' undefined seeds (core/intrinsic_warnings.hpp).
SMOL_INTRINSIC_WARNINGS_OFF

namespace smol::simd {

struct Avx512Floats {
    using V = __m512;
    static constexpr int kLanes = 16;

    SMOL_TARGET_AVX512 static V zero() { return _mm512_setzero_ps(); }
    SMOL_TARGET_AVX512 static V set1(float x) { return _mm512_set1_ps(x); }
    SMOL_TARGET_AVX512 static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
    SMOL_TARGET_AVX512 static V load(const float* p) { return _mm512_loadu_ps(p); }
    SMOL_TARGET_AVX512 static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
    SMOL_TARGET_AVX512 static V add(V a, V b) { return _mm512_add_ps(a, b); }
    SMOL_TARGET_AVX512 static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    SMOL_TARGET_AVX512 static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    SMOL_TARGET_AVX512 static V max(V a, V b) { return _mm512_max_ps(a, b); }
    SMOL_TARGET_AVX512 static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    SMOL_TARGET_AVX512 static V fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
    SMOL_TARGET_AVX512 static V round_nearest(V x) {
        return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }

    SMOL_TARGET_AVX512 static V exp2_integral(V k) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23));
    }
    // value where x >= limit, 0 elsewhere (a NaN x gives 0: the mask keeps only ordered lanes).
    SMOL_TARGET_AVX512 static V zero_below(V value, V x, float limit) {
        return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(limit), _CMP_GE_OQ), value);
    }

    SMOL_TARGET_AVX512 static V load_first(const float* p, int n, float fill) {
        return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), __mmask16((1u << n) - 1), p);
    }
    SMOL_TARGET_AVX512 static void store_first(float* p, int n, V v) {
        _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v);
    }

    // Lane l + 8 added to lane l: 8 sums, each then summed as an AVX2 lane is.
    SMOL_TARGET_AVX512 static __m256 fold8(V v) {
        return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    }
    // The float tiles' lane sum.
    SMOL_TARGET_AVX512 static float sum(V v) { return _mm512_reduce_add_ps(v); }
    // The softmax's sum and a score tile's: folded to 8 lanes, then summed as an AVX2 vector is.
    SMOL_TARGET_AVX512 static float sum_folded(V v) { return Avx2Floats::sum_folded(fold8(v)); }
    // [fold8(x) | fold8(y)]: lanes 0-7 of each plus its lanes 8-15.
    SMOL_TARGET_AVX512 static V folded_pair(V x, V y) {
        return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xee));
    }
    // _mm256_hadd_ps on each 256-bit half: [hadd(x.low, y.low) | hadd(x.high, y.high)].
    SMOL_TARGET_AVX512 static V hadd_halves(V x, V y) {
        return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xdd));
    }
    // A score tile's sums: each a[i] folded (fold8), then summed as Avx2Floats::sum8 sums, by
    // the same additions done for two accumulators at a time in 512-bit registers: 8 vector adds
    // and 18 shuffles where eight fold8 and sum8's 256-bit steps take 15 and 22 (a vhaddps
    // counted as the two shuffles and the add it runs as).
    SMOL_TARGET_AVX512 static void sum_each8(const V* a, float scale, float* out) {
        // fi = fold8(a[i]); sum8's t0 = hadd(f0, f1), t1 = hadd(f2, f3), and so on.
        const V t01 = hadd_halves(folded_pair(a[0], a[2]), folded_pair(a[1], a[3]));  // [t0 | t1]
        const V t23 = hadd_halves(folded_pair(a[4], a[6]), folded_pair(a[5], a[7]));  // [t2 | t3]
        // [u0 | u1]: sum8's u0 = hadd(t0, t1) and u1 = hadd(t2, t3).
        const V u = hadd_halves(_mm512_shuffle_f32x4(t01, t23, 0x44), _mm512_shuffle_f32x4(t01, t23, 0xee));
        // sum8's last step, [u0.low + u0.high, u1.low + u1.high], on the 128-bit quarters.
        const V quarters = _mm512_shuffle_f32x4(u, u, _MM_SHUFFLE(3, 1, 2, 0));  // u0.low, u1.low, u0.high, u1.high
        const __m256 sums = _mm256_add_ps(_mm512_castps512_ps256(quarters), _mm512_extractf32x8_ps(quarters, 1));
        _mm256_storeu_ps(out, _mm256_mul_ps(sums, _mm256_set1_ps(scale)));
    }
};

}  // namespace smol::simd

SMOL_INTRINSIC_WARNINGS_ON

#endif

#if SMOL_HAVE_NEON_KERNELS

#if !__has_include(<xsimd/xsimd.hpp>)
#error "smol on AArch64 needs xsimd (Debian: libxsimd-dev): its float kernels are built on xsimd::batch<float>"
#endif
#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "smol/core/half.hpp"

namespace smol::simd {

// xsimd's batch<float> for the architecture the program is compiled for: NEON's 4 lanes on every
// AArch64 core. Every operation rounds once, as the x86 types' do (fnma is fma of -a: negation
// is exact, and xsimd 8's own fnma multiplies and adds in two steps).
struct XsimdFloats {
    using V = xsimd::batch<float>;
    static constexpr int kLanes = int(V::size);
    static_assert(8 % kLanes == 0, "sum_each8 sums 8 accumulators kLanes at a time");

    static V zero() { return V(0.0f); }
    static V set1(float x) { return V(x); }
    static V broadcast(const float* p) { return V(*p); }
    static V load(const float* p) { return V::load_unaligned(p); }
    static void store(float* p, V v) { v.store_unaligned(p); }
    static V add(V a, V b) { return a + b; }
    static V sub(V a, V b) { return a - b; }
    static V mul(V a, V b) { return a * b; }
    static V max(V a, V b) { return xsimd::max(a, b); }
    static V fma(V a, V b, V c) { return xsimd::fma(a, b, c); }   // a * b + c, one rounding
    static V fnma(V a, V b, V c) { return xsimd::fma(-a, b, c); }  // c - a * b, one rounding
    static V round_nearest(V x) { return xsimd::nearbyint(x); }    // ties to even

    // 2^k for integral k in [-126, 127]: k + 127 put into the exponent field.
    static V exp2_integral(V k) {
        using I = xsimd::batch<std::int32_t>;
        return xsimd::bitwise_cast<V>((xsimd::batch_cast<std::int32_t>(k) + I(127)) << 23);
    }
    // value where x is not below limit, 0 where it is (a NaN x keeps its value, as on AVX2).
    static V zero_below(V value, V x, float limit) { return xsimd::select(x < V(limit), V(0.0f), value); }

    static V load_first(const float* p, int n, float fill) {
        alignas(16) float lanes[kLanes];
        for (int i = 0; i < kLanes; ++i) lanes[i] = i < n ? p[i] : fill;
        return V::load_aligned(lanes);
    }
    static void store_first(float* p, int n, V v) {
        alignas(16) float lanes[kLanes];
        v.store_aligned(lanes);
        for (int i = 0; i < n; ++i) p[i] = lanes[i];
    }

    // kLanes stored values as floats, for the set files' loaders (quant/float_tiles_xsimd.hpp,
    // ops/kv_tiles_xsimd.hpp): every conversion exact, so the values are the reference's.
    // fp16 a value at a time by half.hpp's conversion, the reference's own (xsimd 8 has no half
    // batch), bf16 as its bits moved into the top of a float's, int8 widened.
    static V load_fp16(const std::uint16_t* p) {
        alignas(16) float lanes[kLanes];
        for (int i = 0; i < kLanes; ++i) lanes[i] = fp16_to_f32(p[i]);
        return V::load_aligned(lanes);
    }
    static V load_bf16(const std::uint16_t* p) {
        const auto wide = xsimd::load_as<std::uint32_t>(p, xsimd::unaligned_mode());
        return xsimd::bitwise_cast<V>(wide << 16);
    }
    static V load_int8(const std::int8_t* p) { return xsimd::load_as<float>(p, xsimd::unaligned_mode()); }

    // One lane sum serves all three uses: xsimd's hadd, on NEON (0+1)+(2+3) (pairwise adds).
    static float sum(V v) { return xsimd::hadd(v); }
    static float sum_folded(V v) { return xsimd::hadd(v); }
    // haddp sums kLanes accumulators at once, each in hadd's order.
    static void sum_each8(const V* a, float scale, float* out) {
        for (int i = 0; i < 8; i += kLanes) (xsimd::haddp(a + i) * V(scale)).store_unaligned(out + i);
    }
};

}  // namespace smol::simd

#endif
