#pragma once
// The neon and dotprod sets' tiles for the 256-weight super-block types other than Q4_K and Q6_K
// (kernels_neon.hpp): Q2_K, Q3_K, Q5_K and IQ4_XS against Q8_K activations, and the ARM sets' Q8_K
// activation quantizer.
//
// Each weight block is unpacked once per row into one shape for all four types: its 256 quants
// as 16 vectors of signed bytes in weight order (IQ4_XS: its table values), the scale of every
// sub-block of 16 weights (a 32-weight sub-block of Q5_K or IQ4_XS gives its scale to both
// halves) and, for the types with mins, the min of every sub-block of 16 likewise. Every column
// of the tile then takes the same steps: 16 sums of 16 byte products (the set's Dot,
// neon_dot.hpp), each times its scale, and the mins against the activations' bsums, all exact in
// i32 as in reference.hpp's scale_min_block_sums, sixteen_scale_block_sum and
// iq4xs_q8k_block_sum (splitting a sub-block of 32 in two changes no integer). The float step per
// block, in block order, is the reference's (q4k_accumulate_block for Q2_K and Q5_K,
// q6k_accumulate_block for Q3_K and IQ4_XS), so every result has the reference's bits.

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_NEON_KERNELS

#include <arm_neon.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/error.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/kernels_neon.hpp"  // Q8KVectors, half_scale: the decode column kernels' pieces
#include "smol/quant/neon_dot.hpp"
#include "smol/quant/reference.hpp"

namespace smol::kernels_neon {

namespace kquant {

// One weight block as every column of the tile reads it.
struct Unpacked {
    int8x16_t q[16];      // [i]: the quants of weights 16i .. 16i + 15 (signed, or unsigned below 128)
    int32x4_t scales[4];  // [g]: the scales of sub-blocks of 16 4g .. 4g + 3
    int16x8_t mins[2];    // [h]: the mins of sub-blocks of 16 8h .. 8h + 7 (types with mins only)
};

// v >> bits, bits a run-time count (the _n_ forms need a literal).
SMOL_INLINE_INTO_SET inline uint8x16_t shift_right(uint8x16_t v, int bits) {
    return vshlq_u8(v, vdupq_n_s8(std::int8_t(-bits)));
}

// Bytes whose bit `bit` (0..7) is set in v become `value`, the others 0.
SMOL_INLINE_INTO_SET inline uint8x16_t where_bit(uint8x16_t v, int bit, std::uint8_t value) {
    return vandq_u8(vtstq_u8(v, vdupq_n_u8(std::uint8_t(1u << bit))), vdupq_n_u8(value));
}

// 16 unsigned bytes widened to four vectors of i32.
SMOL_INLINE_INTO_SET inline void widen(uint8x16_t v, int32x4_t (&out)[4]) {
    const uint16x8_t low = vmovl_u8(vget_low_u8(v)), high = vmovl_high_u8(v);
    out[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(low)));
    out[1] = vreinterpretq_s32_u32(vmovl_high_u16(low));
    out[2] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(high)));
    out[3] = vreinterpretq_s32_u32(vmovl_high_u16(high));
}

// 16 signed bytes widened to four vectors of i32.
SMOL_INLINE_INTO_SET inline void widen(int8x16_t v, int32x4_t (&out)[4]) {
    const int16x8_t low = vmovl_s8(vget_low_s8(v)), high = vmovl_high_s8(v);
    out[0] = vmovl_s16(vget_low_s16(low));
    out[1] = vmovl_high_s16(low);
    out[2] = vmovl_s16(vget_low_s16(high));
    out[3] = vmovl_high_s16(high);
}

// Unsigned bytes (below 128) widened to two vectors of i16.
SMOL_INLINE_INTO_SET inline void widen(uint8x16_t v, int16x8_t (&out)[2]) {
    out[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(v)));
    out[1] = vreinterpretq_s16_u16(vmovl_high_u8(v));
}

// The loops over a block's vectors are unrolled (`#pragma GCC unroll`, which Clang reads too) so
// that Unpacked lives in registers, not on the stack, while the columns read it.

// What a tile needs to know of one weight format.
//   Block:   its block struct;
//   kHasMin: whether it has mins (value = d * scale * q - dmin * min), so takes Q4_K's float step;
//   unpack:  the block as Unpacked.

// Quants 0..3: chunk k (weights 32k .. 32k + 31) is bit pair 2 (k % 4) of qs[32 (k / 4) + l];
// a scale byte holds the scale (low nibble) and min (high nibble) of one sub-block of 16.
struct Q2KKind {
    using Block = BlockQ2K;
    static constexpr bool kHasMin = true;
    SMOL_INLINE_INTO_SET static void unpack(const Block& w, Unpacked& u) {
        const uint8x16_t three = vdupq_n_u8(3);
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half)
#pragma GCC unroll 2
            for (int part = 0; part < 2; ++part) {  // weights 16 part .. 16 part + 15 of each chunk
                const uint8x16_t bits = vld1q_u8(w.qs + 32 * half + 16 * part);
#pragma GCC unroll 4
                for (int pair = 0; pair < 4; ++pair)  // chunk 4 half + pair
                    u.q[2 * (4 * half + pair) + part] = vreinterpretq_s8_u8(vandq_u8(shift_right(bits, 2 * pair), three));
            }
        const uint8x16_t packed = vld1q_u8(w.scales);
        widen(vandq_u8(packed, vdupq_n_u8(0x0f)), u.scales);
        widen(vshrq_n_u8(packed, 4), u.mins);
    }
};

// Quants -4..3: Q2_K's bit pairs with a third bit (bit k of hmask[l] for chunk k) that, clear,
// subtracts 4; 16 signed scales packed in 12 bytes (q3k_unpack_scales).
struct Q3KKind {
    using Block = BlockQ3K;
    static constexpr bool kHasMin = false;
    SMOL_INLINE_INTO_SET static void unpack(const Block& w, Unpacked& u) {
        const uint8x16_t three = vdupq_n_u8(3), four = vdupq_n_u8(4);
#pragma GCC unroll 2
        for (int part = 0; part < 2; ++part) {
            const uint8x16_t hmask = vld1q_u8(w.hmask + 16 * part);
#pragma GCC unroll 2
            for (int half = 0; half < 2; ++half) {
                const uint8x16_t bits = vld1q_u8(w.qs + 32 * half + 16 * part);
#pragma GCC unroll 4
                for (int pair = 0; pair < 4; ++pair) {
                    const int chunk = 4 * half + pair;
                    const uint8x16_t low = vandq_u8(shift_right(bits, 2 * pair), three);
                    // (low | third * 4) - 4: low - 4 where the third bit is clear, low where set.
                    u.q[2 * chunk + part] = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(low, where_bit(hmask, chunk, 4)), four));
                }
            }
        }
        std::int8_t scales[16];
        q3k_unpack_scales(w.scales, scales);
        widen(vld1q_s8(scales), u.scales);
    }
};

// Quants 0..31: Q4_K's nibbles (chunk c of 64 weights: the low nibbles of qs[32c .. 32c + 31],
// then their high nibbles) with a fifth bit, bit 2c (low nibbles) or 2c + 1 (high) of qh[l];
// eight 6-bit scales and mins of sub-blocks of 32, packed as Q4_K's.
struct Q5KKind {
    using Block = BlockQ5K;
    static constexpr bool kHasMin = true;
    SMOL_INLINE_INTO_SET static void unpack(const Block& w, Unpacked& u) {
        const uint8x16_t low4 = vdupq_n_u8(0x0f);
#pragma GCC unroll 2
        for (int part = 0; part < 2; ++part) {
            const uint8x16_t high = vld1q_u8(w.qh + 16 * part);
#pragma GCC unroll 4
            for (int chunk = 0; chunk < 4; ++chunk) {
                const uint8x16_t bits = vld1q_u8(w.qs + 32 * chunk + 16 * part);
                u.q[4 * chunk + part] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(bits, low4), where_bit(high, 2 * chunk, 0x10)));
                u.q[4 * chunk + 2 + part] =
                    vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(bits, 4), where_bit(high, 2 * chunk + 1, 0x10)));
            }
        }
        std::uint8_t scales_mins[16];  // [8 scales, 8 mins]
        q4k_unpack_scales_mins(w.scales, scales_mins);
        const uint8x16_t packed = vld1q_u8(scales_mins);
        widen(vzip1q_u8(packed, packed), u.scales);  // each sub-block of 32's scale for both its halves
        widen(vzip2q_u8(packed, packed), u.mins);    // and its min
    }
};

// IQ4_XS's eight sub-block scales, iq4xs_unpack_scales' -32..31, in lanes: the low 4 bits from
// scales_l (each byte twice, shifted right by 0 and 4), the high 2 from scales_h (its 16 bits as
// four 16-bit lanes shifted right by 4k: bits 0-1 of lane k are sub-block 2k's, bits 2-3 moved to
// bits 8-9 are 2k + 1's), joined by a shift-left-insert that drops the low parts' upper bits.
SMOL_INLINE_INTO_SET inline int8x8_t iq4xs_scales(const BlockIQ4XS& w) {
    static constexpr std::int8_t kNibbleShifts[8] = {0, -4, 0, -4, 0, -4, 0, -4};
    static constexpr std::int16_t kPairShifts[4] = {0, -4, -8, -12};
    std::uint32_t low_bytes;
    std::memcpy(&low_bytes, w.scales_l, sizeof low_bytes);
    const uint8x8_t lows = vcreate_u8(low_bytes);
    const uint8x8_t low = vshl_u8(vzip1_u8(lows, lows), vld1_s8(kNibbleShifts));  // bits 4.. are dropped below
    const uint16x4_t high_bits = vshl_u16(vdup_n_u16(w.scales_h), vld1_s16(kPairShifts));
    const uint16x4_t pairs =
        vorr_u16(vand_u16(high_bits, vdup_n_u16(0x0003)), vshl_n_u16(vand_u16(high_bits, vdup_n_u16(0x000c)), 6));
    const uint8x8_t stored = vsli_n_u8(low, vreinterpret_u8_u16(pairs), 4);  // 0..63
    return vsub_s8(vreinterpret_s8_u8(stored), vdup_n_s8(32));
}

// Table values -127..113: IQ4_NL's nibbles (sub-block j of 32: the low nibbles of qs[16j ..
// 16j + 15], then their high nibbles) looked up in kIq4nlValues by tbl; eight signed scales
// (-32..31) of sub-blocks of 32, each given to both its halves. No mins: Q6_K's float step, as
// the reference (iq4xs_q8k_block_sum) takes it.
struct IQ4XSKind {
    using Block = BlockIQ4XS;
    static constexpr bool kHasMin = false;
    SMOL_INLINE_INTO_SET static void unpack(const Block& w, Unpacked& u) {
        const int8x16_t values = vld1q_s8(kIq4nlValues);
        const uint8x16_t low4 = vdupq_n_u8(0x0f);
#pragma GCC unroll 8
        for (int j = 0; j < QK_K / 32; ++j) {
            const uint8x16_t bits = vld1q_u8(w.qs + 16 * j);
            u.q[2 * j] = vqtbl1q_s8(values, vandq_u8(bits, low4));
            u.q[2 * j + 1] = vqtbl1q_s8(values, vshrq_n_u8(bits, 4));
        }
        const int8x8_t scales = iq4xs_scales(w);
        widen(vcombine_s8(vzip1_s8(scales, scales), vzip2_s8(scales, scales)), u.scales);
    }
};

// IQ4_XS decode (one column), as kernels_neon.hpp's q4k_column and q6k_column: kTileRows rows
// against a block's 256 activations loaded once for all of them. Per row, each sub-block of 32's
// products sum into lanes, two rounds of pairwise adds gather sub-blocks 0..3 and 4..7 into one
// vector each, the scales multiply them in lanes and one horizontal add gives
// iq4xs_q8k_block_sum's total (exact: see scaled_sum's bound); then Q6_K's float step.
template <class Dot>
SMOL_INLINE_INTO_SET inline std::int32_t iq4xs_block_sum_in_lanes(const BlockIQ4XS& w, const detail::Q8KVectors& a) {
    const int8x16_t values = vld1q_s8(kIq4nlValues);
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    int32x4_t sub[8];  // [sub-block of 32]
    SMOL_UNROLL
    for (int j = 0; j < 8; ++j) {
        const uint8x16_t bits = vld1q_u8(w.qs + 16 * j);
        sub[j] = Dot::dot(Dot::dot(vdupq_n_s32(0), vqtbl1q_s8(values, vandq_u8(bits, low4)), a.q[2 * j]),
                          vqtbl1q_s8(values, vshrq_n_u8(bits, 4)), a.q[2 * j + 1]);
    }
    const int32x4_t sums0123 = vpaddq_s32(vpaddq_s32(sub[0], sub[1]), vpaddq_s32(sub[2], sub[3]));
    const int32x4_t sums4567 = vpaddq_s32(vpaddq_s32(sub[4], sub[5]), vpaddq_s32(sub[6], sub[7]));
    const int16x8_t scales = vmovl_s8(iq4xs_scales(w));
    const int32x4_t dot = vmulq_s32(sums0123, vmovl_s16(vget_low_s16(scales)));
    return vaddvq_s32(vmlaq_s32(dot, sums4567, vmovl_high_s16(scales)));
}

template <class Dot>
SMOL_INLINE_INTO_SET inline void iq4xs_column(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes,
                                              int n_rows, const std::uint8_t* acts, std::size_t, int, float* out,
                                              std::size_t) {
    const BlockIQ4XS* w[kTileRows];
    kernel_detail::tile_rows(weights, row_bytes, n_rows, w);
    const auto* a = reinterpret_cast<const BlockQ8K*>(acts);
    float sum[kTileRows] = {};
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const detail::Q8KVectors q8(a[b]);
        for (int r = 0; r < kTileRows; ++r)
            sum[r] = q6k_accumulate_block(sum[r], detail::half_scale(w[r][b].d), a[b].d,
                                          iq4xs_block_sum_in_lanes<Dot>(w[r][b], q8));
    }
    SMOL_UNROLL
    for (int r = 0; r < n_rows; ++r) out[r] = sum[r];
}

// sum_j scale_j * (q . a over sub-block of 16 j), exact: at most 16 * 31 * 128 * 63 * 16 (Q5_K's
// quants and scales; IQ4_XS's values and scales: 16 * 128 * 127 * 32 * 16, twice that), well inside i32.
template <class Dot>
SMOL_INLINE_INTO_SET inline std::int32_t scaled_sum(const Unpacked& u, const BlockQ8K& a) {
    int32x4_t total = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
        int32x4_t p[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) p[k] = Dot::dot(vdupq_n_s32(0), u.q[4 * g + k], vld1q_s8(a.qs + 16 * (4 * g + k)));
        const int32x4_t sums = vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));  // [sub-block 4g + k]
        total = vmlaq_s32(total, sums, u.scales[g]);
    }
    return vaddvq_s32(total);
}

// sum_j min_j * bsum_j over the sub-blocks of 16, exact.
SMOL_INLINE_INTO_SET inline std::int32_t mins_sum(const Unpacked& u, const BlockQ8K& a) {
    const int16x8_t b0 = vld1q_s16(a.bsums), b1 = vld1q_s16(a.bsums + 8);
    int32x4_t m = vmull_s16(vget_low_s16(u.mins[0]), vget_low_s16(b0));
    m = vmlal_high_s16(m, u.mins[0], b0);
    m = vmlal_s16(m, vget_low_s16(u.mins[1]), vget_low_s16(b1));
    m = vmlal_high_s16(m, u.mins[1], b1);
    return vaddvq_s32(m);
}

// A tile of C columns (1: decode, kTileCols: prompts, of which n_cols are used): row by row, each
// block unpacked once and met by every column.
template <class Kind, class Dot, int C>
inline void tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
                 std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    using Block = typename Kind::Block;
    const int cols = C == 1 ? 1 : n_cols;
    const std::int64_t blocks = n / QK_K;
    for (int r = 0; r < n_rows; ++r) {
        const auto* w = reinterpret_cast<const Block*>(weights + std::size_t(r) * row_bytes);
        float sum[C] = {};
        for (std::int64_t b = 0; b < blocks; ++b) {
            Unpacked u;
            Kind::unpack(w[b], u);
            const float d = fp16_to_f32(w[b].d);
            for (int c = 0; c < cols; ++c) {
                const BlockQ8K& a = reinterpret_cast<const BlockQ8K*>(acts + std::size_t(c) * act_stride)[b];
                const std::int32_t dot = scaled_sum<Dot>(u, a);
                if constexpr (Kind::kHasMin)
                    sum[c] = q4k_accumulate_block(sum[c], d, fp16_to_f32(w[b].dmin), a.d, dot, mins_sum(u, a));
                else
                    sum[c] = q6k_accumulate_block(sum[c], d, a.d, dot);
            }
        }
        for (int c = 0; c < cols; ++c) out[std::size_t(c) * out_stride + std::size_t(r)] = sum[c];
    }
}

#if SMOL_HAVE_DOTPROD_KERNELS
// The dotprod set's: `flatten` inlines the whole tile, SdotDot::dot included, into this entry point.
template <class Kind, int C>
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void tile_dotprod(std::int64_t n, const std::uint8_t* weights,
                                                                      std::size_t row_bytes, int n_rows,
                                                                      const std::uint8_t* acts, std::size_t act_stride,
                                                                      int n_cols, float* out, std::size_t out_stride) {
    tile<Kind, detail::SdotDot, C>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}
#endif

}  // namespace kquant

template <class Kind>
inline constexpr DotTileFn kquant_tile = kernel_detail::by_columns<kquant::tile<Kind, detail::WideningDot, 1>,
                                                                   kquant::tile<Kind, detail::WideningDot, kTileCols>>;
inline constexpr DotTileFn q2k_q8k = kquant_tile<kquant::Q2KKind>;
inline constexpr DotTileFn q3k_q8k = kquant_tile<kquant::Q3KKind>;
inline constexpr DotTileFn q5k_q8k = kquant_tile<kquant::Q5KKind>;
// IQ4_XS: decode by its own column kernel, prompts by the tile.
inline void iq4xs_q8k_decode(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                             const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                             std::size_t out_stride) {
    kquant::iq4xs_column<detail::WideningDot>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}
inline constexpr DotTileFn iq4xs_q8k =
    kernel_detail::by_columns<iq4xs_q8k_decode, kquant::tile<kquant::IQ4XSKind, detail::WideningDot, kTileCols>>;

#if SMOL_HAVE_DOTPROD_KERNELS
template <class Kind>
inline constexpr DotTileFn kquant_tile_dotprod =
    kernel_detail::by_columns<kquant::tile_dotprod<Kind, 1>, kquant::tile_dotprod<Kind, kTileCols>>;
inline constexpr DotTileFn q2k_q8k_dotprod = kquant_tile_dotprod<kquant::Q2KKind>;
inline constexpr DotTileFn q3k_q8k_dotprod = kquant_tile_dotprod<kquant::Q3KKind>;
inline constexpr DotTileFn q5k_q8k_dotprod = kquant_tile_dotprod<kquant::Q5KKind>;
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void iq4xs_q8k_dotprod_decode(
    std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
    std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    kquant::iq4xs_column<detail::SdotDot>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}
inline constexpr DotTileFn iq4xs_q8k_dotprod =
    kernel_detail::by_columns<iq4xs_q8k_dotprod_decode, kquant::tile_dotprod<kquant::IQ4XSKind, kTileCols>>;
#endif

// The Q8_K activation quantizer of every ARM set (plain Armv8.0 code), byte for byte the
// reference's (reference.hpp, quantize_row_q8_k): the same maximum (fmaxnm skips NaNs as the
// reference's `>` does; the first element of largest magnitude sets the sign), the same float
// products, rounded half to even by fcvtns (nearbyint under the default mode), the same clamp,
// and bsums summed from the quants.
inline void quantize_row_q8_k(const float* x, BlockQ8K* out, std::int64_t n) {  // x: [n]
    if (n % QK_K != 0) fail("quantize_row_q8_k: row length must be a multiple of ", QK_K, ", got ", n);
    const int32x4_t limit = vdupq_n_s32(127);
    for (std::int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        BlockQ8K& block = out[b];
        float32x4_t vmax = vdupq_n_f32(0.0f);
        for (int i = 0; i < QK_K; i += 4) vmax = vmaxnmq_f32(vmax, vabsq_f32(vld1q_f32(x + i)));
        const float amax = vmaxnmvq_f32(vmax);
        if (amax == 0.0f) {
            std::memset(&block, 0, sizeof(block));
            continue;
        }
        int first = 0;
        while (std::fabs(x[first]) != amax) ++first;
        const float iscale = -127.0f / x[first];
        const float32x4_t vscale = vdupq_n_f32(iscale);
        for (int i = 0; i < QK_K; i += 16) {
            int32x4_t q[4];
            for (int k = 0; k < 4; ++k)
                q[k] = vminq_s32(vcvtnq_s32_f32(vmulq_f32(vscale, vld1q_f32(x + i + 4 * k))), limit);
            const int16x8_t low = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
            const int16x8_t high = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
            const int8x16_t bytes = vcombine_s8(vmovn_s16(low), vmovn_s16(high));
            vst1q_s8(block.qs + i, bytes);
            block.bsums[i / 16] = vaddlvq_s8(bytes);
        }
        block.d = 1.0f / iscale;
    }
}

}  // namespace smol::kernels_neon

#endif  // SMOL_HAVE_NEON_KERNELS
