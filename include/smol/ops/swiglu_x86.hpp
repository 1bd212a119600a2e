#pragma once
// SwiGLU's x86 kernels: swiglu_set.hpp compiled for AVX2 (8 floats a step) and AVX-512 (16).
// silu's exp is glibc's expf done in vector lanes with its own steps and constants
// (glibc_expf.hpp), so the kernels give swiglu_scalar's bits (std::exp is glibc's expf on the
// Linux systems smol runs on; tests/test_swiglu.cpp holds every set to it), at a small fraction of
// a scalar call per value.

#include "smol/core/intrinsic_warnings.hpp"
#include "smol/core/simd_targets.hpp"
#include "smol/ops/glibc_expf.hpp"
#include "smol/ops/silu.hpp"

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <cstdint>

SMOL_INTRINSIC_WARNINGS_OFF

namespace smol::swiglu_x86 {

// The lanes of one set (swiglu_set.hpp): F holds 2 * kDoubles floats, D kDoubles doubles, I as
// many 64-bit integers.
struct Avx2Lanes {
    using F = __m256;
    using D = __m256d;
    using I = __m256i;
    static constexpr int kDoubles = 4;
    static F load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
    static F one() { return _mm256_set1_ps(1.0f); }
    static F negate(F v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }
    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static F div(F a, F b) { return _mm256_div_ps(a, b); }
    // Whether a lane is NaN or at least 88 in magnitude: glibc's special cases.
    static bool any_outside_88(F v) {
        const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
        return _mm256_movemask_ps(_mm256_cmp_ps(magnitude, _mm256_set1_ps(88.0f), _CMP_NLT_UQ)) != 0;
    }
    static D low(F v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
    static D high(F v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
    static F to_floats(D low, D high) { return _mm256_set_m128(_mm256_cvtpd_ps(high), _mm256_cvtpd_ps(low)); }
    static D set1(double x) { return _mm256_set1_pd(x); }
    static D mul(D a, D b) { return _mm256_mul_pd(a, b); }
    static D fma(D a, D b, D c) { return _mm256_fmadd_pd(a, b, c); }  // a * b + c, one rounding
    // x * 32 / ln 2 = k + r as glibc's x86-64 build with FMA splits it (its __expf_fma): k
    // rounded to even by adding and taking away 1.5 * 2^52, r = x * 32 / ln 2 - k with one
    // rounding. k comes back as the bits of k + 1.5 * 2^52, whose low bits are k's.
    static I reduce(D x, D& r) {
        const D shifted = _mm256_fmadd_pd(x, set1(glibc_expf::kInvLn2N), set1(glibc_expf::kShift));
        r = _mm256_fmsub_pd(x, set1(glibc_expf::kInvLn2N), _mm256_sub_pd(shifted, set1(glibc_expf::kShift)));
        return _mm256_castpd_si256(shifted);
    }
    // 2^(k/32) for the integer k whose low bits k holds.
    static D exp2_over_32(I k) {
        const __m256i entry = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(glibc_expf::kTable),
                                                     _mm256_and_si256(k, _mm256_set1_epi64x(31)), 8);
        return _mm256_castsi256_pd(_mm256_add_epi64(entry, _mm256_slli_epi64(k, 47)));
    }
};

#if SMOL_HAVE_AVX512_KERNELS
struct Avx512Lanes {
    using F = __m512;
    using D = __m512d;
    using I = __m512i;
    static constexpr int kDoubles = 8;
    SMOL_TARGET_AVX512 static F load(const float* p) { return _mm512_loadu_ps(p); }
    SMOL_TARGET_AVX512 static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
    SMOL_TARGET_AVX512 static F one() { return _mm512_set1_ps(1.0f); }
    SMOL_TARGET_AVX512 static F negate(F v) { return _mm512_xor_ps(v, _mm512_set1_ps(-0.0f)); }
    SMOL_TARGET_AVX512 static F add(F a, F b) { return _mm512_add_ps(a, b); }
    SMOL_TARGET_AVX512 static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    SMOL_TARGET_AVX512 static F div(F a, F b) { return _mm512_div_ps(a, b); }
    SMOL_TARGET_AVX512 static bool any_outside_88(F v) {
        return _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(88.0f), _CMP_NLT_UQ) != 0;
    }
    SMOL_TARGET_AVX512 static D low(F v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
    SMOL_TARGET_AVX512 static D high(F v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }
    SMOL_TARGET_AVX512 static F to_floats(D low, D high) {
        return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(low)), _mm512_cvtpd_ps(high), 1);
    }
    SMOL_TARGET_AVX512 static D set1(double x) { return _mm512_set1_pd(x); }
    SMOL_TARGET_AVX512 static D mul(D a, D b) { return _mm512_mul_pd(a, b); }
    SMOL_TARGET_AVX512 static D fma(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
    SMOL_TARGET_AVX512 static I reduce(D x, D& r) {  // as Avx2Lanes
        const D shifted = _mm512_fmadd_pd(x, set1(glibc_expf::kInvLn2N), set1(glibc_expf::kShift));
        r = _mm512_fmsub_pd(x, set1(glibc_expf::kInvLn2N), _mm512_sub_pd(shifted, set1(glibc_expf::kShift)));
        return _mm512_castpd_si512(shifted);
    }
    // The table in four registers: two vpermt2q pick among entries 0-15 and 16-31 by k's low 4
    // bits, bit 4 chooses.
    SMOL_TARGET_AVX512 static D exp2_over_32(I k) {
        const auto* table = reinterpret_cast<const __m512i*>(glibc_expf::kTable);
        const __m512i first = _mm512_permutex2var_epi64(_mm512_load_si512(table), k, _mm512_load_si512(table + 1));
        const __m512i second = _mm512_permutex2var_epi64(_mm512_load_si512(table + 2), k, _mm512_load_si512(table + 3));
        const __m512i entry = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(k, _mm512_set1_epi64(16)), first, second);
        return _mm512_castsi512_pd(_mm512_add_epi64(entry, _mm512_slli_epi64(k, 47)));
    }
};
#endif

namespace avx2 {
using Lanes = Avx2Lanes;
#define SMOL_SET_TARGET
#include "smol/ops/swiglu_set.hpp"
#undef SMOL_SET_TARGET
}  // namespace avx2

#if SMOL_HAVE_AVX512_KERNELS
namespace avx512 {
using Lanes = Avx512Lanes;
#define SMOL_SET_TARGET SMOL_TARGET_AVX512
#include "smol/ops/swiglu_set.hpp"
#undef SMOL_SET_TARGET
}  // namespace avx512
#endif

}  // namespace smol::swiglu_x86

SMOL_INTRINSIC_WARNINGS_ON

#endif
