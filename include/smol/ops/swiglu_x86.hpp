#pragma once
// SwiGLU's x86 kernels: swiglu_set.hpp compiled for AVX2 (8 floats a step) and AVX-512 (16).
// silu's exp is glibc's expf done in vector lanes with its own steps and constants, so the
// kernels give swiglu_scalar's bits (std::exp is glibc's expf on the Linux systems smol runs on;
// tests/test_swiglu.cpp holds every set to it), at a small fraction of a scalar call per value.

#include "smol/core/intrinsic_warnings.hpp"
#include "smol/core/simd_targets.hpp"
#include "smol/ops/silu.hpp"

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <cstdint>

SMOL_INTRINSIC_WARNINGS_OFF

namespace smol::swiglu_x86 {

// glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, glibc 2.27 and later), its data: 32 / ln 2, the
// shift that rounds to an integer, the polynomial for 2^(r/32) - 1 (C2 ~ ln 2 / 32), and
// kTable[i] = the bits of 2^(i/32) less i << 47, to which k << 47 adds k's integer part into the
// exponent (k's low 5 bits pick the entry). Read from the library (Debian 12's 2.36) and
// checked against its expf over every float by the tests.
namespace glibc_expf {
inline constexpr double kInvLn2N = 0x1.71547652b82fep+5;
inline constexpr double kShift = 0x1.8p52;
inline constexpr double kC0 = 0x1.c6af84b912394p-20, kC1 = 0x1.ebfce50fac4f3p-13, kC2 = 0x1.62e42ff0c52d6p-6;
alignas(64) inline constexpr std::uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
}  // namespace glibc_expf

// The lanes of one set (swiglu_set.hpp): F holds 2 * kDoubles floats, D kDoubles doubles.
struct Avx2Lanes {
    using F = __m256;
    using D = __m256d;
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
    static D sub(D a, D b) { return _mm256_sub_pd(a, b); }
    static D mul(D a, D b) { return _mm256_mul_pd(a, b); }
    static D fma(D a, D b, D c) { return _mm256_fmadd_pd(a, b, c); }  // a * b + c, one rounding
    static D fms(D a, D b, D c) { return _mm256_fmsub_pd(a, b, c); }  // a * b - c, one rounding
    // 2^(k/32) for the integer k whose bits `shifted` (k + 1.5 * 2^52) holds.
    static D exp2_over_32(D shifted) {
        const __m256i k = _mm256_castpd_si256(shifted);
        const __m256i entry = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(glibc_expf::kTable),
                                                     _mm256_and_si256(k, _mm256_set1_epi64x(31)), 8);
        return _mm256_castsi256_pd(_mm256_add_epi64(entry, _mm256_slli_epi64(k, 47)));
    }
};

#if SMOL_HAVE_AVX512_KERNELS
struct Avx512Lanes {
    using F = __m512;
    using D = __m512d;
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
    SMOL_TARGET_AVX512 static D sub(D a, D b) { return _mm512_sub_pd(a, b); }
    SMOL_TARGET_AVX512 static D mul(D a, D b) { return _mm512_mul_pd(a, b); }
    SMOL_TARGET_AVX512 static D fma(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
    SMOL_TARGET_AVX512 static D fms(D a, D b, D c) { return _mm512_fmsub_pd(a, b, c); }
    // The table in four registers: two vpermt2q pick among entries 0-15 and 16-31 by k's low 4
    // bits, bit 4 chooses.
    SMOL_TARGET_AVX512 static D exp2_over_32(D shifted) {
        const __m512i k = _mm512_castpd_si512(shifted);
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
