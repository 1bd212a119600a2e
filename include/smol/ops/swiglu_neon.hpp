#pragma once
// SwiGLU's NEON kernel: swiglu_set.hpp compiled over NEON (4 floats a step, 2 doubles a vector),
// with glibc's aarch64 build of expf: the same data (glibc_expf.hpp) and polynomial as x86-64's,
// but k = round(x * 32 / ln 2) half away from zero (frinta, fcvtas) from the rounded product,
// and r = that product - k. So the kernel gives swiglu_scalar's bits with aarch64's glibc
// (tests/test_swiglu.cpp, run under qemu by scripts/test-arm.sh).

#include "smol/core/simd_targets.hpp"
#include "smol/ops/glibc_expf.hpp"
#include "smol/ops/silu.hpp"

#if SMOL_HAVE_NEON_KERNELS

#include <arm_neon.h>

#include <cmath>
#include <cstdint>

namespace smol::swiglu_neon {

struct NeonLanes {  // as swiglu_x86.hpp's Avx2Lanes
    using F = float32x4_t;
    using D = float64x2_t;
    using I = int64x2_t;
    static constexpr int kDoubles = 2;
    static F load(const float* p) { return vld1q_f32(p); }
    static void store(float* p, F v) { vst1q_f32(p, v); }
    static F one() { return vdupq_n_f32(1.0f); }
    static F negate(F v) { return vnegq_f32(v); }
    static F add(F a, F b) { return vaddq_f32(a, b); }
    static F mul(F a, F b) { return vmulq_f32(a, b); }
    static F div(F a, F b) { return vdivq_f32(a, b); }
    // Whether a lane is NaN or at least 88 in magnitude: not all lanes ordered and below 88.
    static bool any_outside_88(F v) { return vminvq_u32(vcltq_f32(vabsq_f32(v), vdupq_n_f32(88.0f))) == 0; }
    static D low(F v) { return vcvt_f64_f32(vget_low_f32(v)); }
    static D high(F v) { return vcvt_high_f64_f32(v); }
    static F to_floats(D low, D high) { return vcvt_high_f32_f64(vcvt_f32_f64(low), high); }
    static D set1(double x) { return vdupq_n_f64(x); }
    static D mul(D a, D b) { return vmulq_f64(a, b); }
    static D fma(D a, D b, D c) { return vfmaq_f64(c, a, b); }  // a * b + c, one rounding
    static I reduce(D x, D& r) {
        const D z = vmulq_f64(x, set1(glibc_expf::kInvLn2N));
        r = vsubq_f64(z, vrndaq_f64(z));
        return vcvtaq_s64_f64(z);
    }
    static D exp2_over_32(I k) {
        const std::uint64_t first = glibc_expf::kTable[vgetq_lane_s64(k, 0) & 31];
        const std::uint64_t second = glibc_expf::kTable[vgetq_lane_s64(k, 1) & 31];
        const uint64x2_t entry = vcombine_u64(vcreate_u64(first), vcreate_u64(second));
        return vreinterpretq_f64_u64(vaddq_u64(entry, vshlq_n_u64(vreinterpretq_u64_s64(k), 47)));
    }
};

namespace neon {
using Lanes = NeonLanes;
#define SMOL_SET_TARGET
#include "smol/ops/swiglu_set.hpp"
#undef SMOL_SET_TARGET
}  // namespace neon

}  // namespace smol::swiglu_neon

#endif
