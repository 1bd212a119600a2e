#pragma once
// The instruction that sums 16 byte products into four i32 lanes, in the two ARM sets that have
// one, as types: a kernel written once over `Dot` (kernels_neon.hpp, legacy_tiles_neon.hpp,
// kquant_tiles_neon.hpp) runs as the neon set's with WideningDot (Armv8.0) and as the dotprod
// set's with SdotDot (Armv8.2 sdot, compiled into SMOL_TARGET_DOTPROD entry points). The lanes
// group the products differently, but every kernel reads only exact totals, so the same integers
// either way, and the same bits.

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_NEON_KERNELS

#include <arm_neon.h>

#include <cstdint>

namespace smol::kernels_neon::detail {

// acc + the sums of the products of signed bytes a and b in Armv8.0 instructions: every product
// of two bytes fits an i16 (at most 128 * 128), and the pairwise add widens to i32 before it adds,
// so the sum is exact. Which products share a lane differs from sdot's grouping; only the lanes'
// total is ever read.
struct WideningDot {
    SMOL_INLINE_INTO_SET static inline int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
        const int16x8_t low = vmull_s8(vget_low_s8(a), vget_low_s8(b));
        const int16x8_t high = vmull_high_s8(a, b);
        return vpadalq_s16(vpadalq_s16(acc, low), high);
    }
};

#if SMOL_HAVE_DOTPROD_KERNELS
// The same sums with Armv8.2's sdot. Not forced inline: the dotprod entry points inline it with
// `flatten`, and only they call it.
struct SdotDot {
    SMOL_TARGET_DOTPROD static inline int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
        return vdotq_s32(acc, a, b);
    }
};
#endif

// The exact sum of 32 products of a's and b's signed bytes (two 16-byte halves each).
template <class Dot>
SMOL_INLINE_INTO_SET inline std::int32_t dot32(int8x16_t a0, int8x16_t a1, const std::int8_t* b) {
    int32x4_t acc = Dot::dot(vdupq_n_s32(0), a0, vld1q_s8(b));
    acc = Dot::dot(acc, a1, vld1q_s8(b + 16));
    return vaddvq_s32(acc);
}

}  // namespace smol::kernels_neon::detail

#endif  // SMOL_HAVE_NEON_KERNELS
