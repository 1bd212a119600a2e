#pragma once
// The neon and dotprod sets' tiles for the block-of-32 weight formats against Q8_0 activations:
// Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 and IQ4_NL; and the ARM sets' Q8_0 activation quantizer.
//
// Each weight block is unpacked once per row into 32 signed bytes (the value's quant: q - 8 for
// Q4_0, q - 16 for Q5_0, q for Q4_1, Q5_1 and Q8_0, the table value for IQ4_NL) and met by every column of the tile: the exact
// integer dot of 32 byte products by the set's Dot (neon_dot.hpp), then the reference's float
// step. For the formats other than Q8_0 that is block32_accumulate into the partial sum of the block's
// index mod 8 (Q4_1's and Q5_1's min meets the exact sum of the activation quants in a second step), added
// at the end as block32_reduce adds them; for Q8_0 it is dot_q8_0_q8_0's running sum. Every
// result has the reference's bits.

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_NEON_KERNELS

#include <arm_neon.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "smol/core/error.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/neon_dot.hpp"
#include "smol/quant/reference.hpp"

namespace smol::kernels_neon {

namespace legacy {

// One weight block's quants, signed, as every column of the tile reads them.
struct Unpacked {
    int8x16_t lo, hi;  // values 0-15 and 16-31
};

// A block's nibbles (Q4_0, Q4_1, IQ4_NL; Q5_0's and Q5_1's low 4 bits): byte l's low nibble is
// value l, its high nibble value l + 16.
SMOL_INLINE_INTO_SET inline void nibbles(const std::uint8_t* qs, uint8x16_t& lo, uint8x16_t& hi) {
    const uint8x16_t bits = vld1q_u8(qs);
    lo = vandq_u8(bits, vdupq_n_u8(0x0f));
    hi = vshrq_n_u8(bits, 4);
}

// What a tile needs to know of one weight format.
//   Block:   its block struct;
//   kLanes:  the reference's partial sums (kBlock32Lanes, or 1 for Q8_0's running sum);
//   kHasMin: whether its blocks carry a min m (value = d * q + m);
//   unpack:  the block's signed quants.
struct Q8_0Kind {
    using Block = BlockQ8_0;
    static constexpr int kLanes = 1;
    static constexpr bool kHasMin = false;
    SMOL_INLINE_INTO_SET static Unpacked unpack(const Block& w) { return {vld1q_s8(w.qs), vld1q_s8(w.qs + 16)}; }
};

// The other block-of-32 formats in two steps, each written once: where a block's quants are
// (Bits: 4 bits in nibbles, or 5 with qh's fifth bit) and what turns 16 quants into signed
// values (Values: less an offset, or IQ4_NL's table).
struct FourBits {
    template <class Block>
    SMOL_INLINE_INTO_SET static void quants(const Block& w, uint8x16_t& lo, uint8x16_t& hi) {
        nibbles(w.qs, lo, hi);
    }
};

// Q5_0's and Q5_1's quants, 0..31. Bit l of the little-endian word qh is bit 4 of value l: byte
// i of the values 0-15 takes bit i % 8 of qh[i / 8], byte i of the values 16-31 bit i % 8 of
// qh[2 + i / 8].
struct FiveBits {
    template <class Block>
    SMOL_INLINE_INTO_SET static void quants(const Block& w, uint8x16_t& lo, uint8x16_t& hi) {
        nibbles(w.qs, lo, hi);
        const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201));  // byte i: bit i % 8
        const uint8x16_t sixteen = vdupq_n_u8(16);
        const auto fifth = [&](int byte) {  // 16 if the value's bit 4 is set: qh bytes `byte`, `byte` + 1
            const uint8x16_t spread = vcombine_u8(vdup_n_u8(w.qh[byte]), vdup_n_u8(w.qh[byte + 1]));
            return vandq_u8(vtstq_u8(spread, bit), sixteen);
        };
        lo = vorrq_u8(lo, fifth(0));
        hi = vorrq_u8(hi, fifth(2));
    }
};

// q - Offset: Q4_0's 8 and Q5_0's 16 centre the quants; the types with a min keep them (0).
template <int Offset>
struct Less {
    SMOL_INLINE_INTO_SET static int8x16_t values(uint8x16_t q) {
        if constexpr (Offset == 0) return vreinterpretq_s8_u8(q);
        else return vsubq_s8(vreinterpretq_s8_u8(q), vdupq_n_s8(Offset));
    }
};

// IQ4_NL's nibbles index kIq4nlValues: one tbl per 16 values gives the signed values themselves.
struct Iq4nlTable {
    SMOL_INLINE_INTO_SET static int8x16_t values(uint8x16_t q) { return vqtbl1q_s8(vld1q_s8(kIq4nlValues), q); }
};

// A format of 32 values with an fp16 scale d (and, HasMin, a min m) per block: Bits' quants made
// Values.
template <class B, bool HasMin, class Bits, class Values>
struct Block32Kind {
    using Block = B;
    static constexpr int kLanes = kBlock32Lanes;
    static constexpr bool kHasMin = HasMin;
    SMOL_INLINE_INTO_SET static Unpacked unpack(const Block& w) {
        uint8x16_t lo, hi;
        Bits::quants(w, lo, hi);
        return {Values::values(lo), Values::values(hi)};
    }
};
using Q4_0Kind = Block32Kind<BlockQ4_0, false, FourBits, Less<8>>;
using Q4_1Kind = Block32Kind<BlockQ4_1, true, FourBits, Less<0>>;
using Q5_0Kind = Block32Kind<BlockQ5_0, false, FiveBits, Less<16>>;
using Q5_1Kind = Block32Kind<BlockQ5_1, true, FiveBits, Less<0>>;
using IQ4NLKind = Block32Kind<BlockIQ4NL, false, FourBits, Iq4nlTable>;

// The exact sum of a Q8_0 block's 32 quants (reference.hpp, q8_0_block_sum).
SMOL_INLINE_INTO_SET inline std::int32_t activation_sum(const BlockQ8_0& a) {
    return std::int32_t(vaddlvq_s8(vld1q_s8(a.qs))) + std::int32_t(vaddlvq_s8(vld1q_s8(a.qs + 16)));
}

// A tile of C columns (1: decode, kTileCols: prompts, of which n_cols are used): row by row, each
// block unpacked once and met by every column; the float steps as block32_dot (or dot_q8_0_q8_0)
// takes them.
template <class Kind, class Dot, int C>
inline void tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
                 std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    using Block = typename Kind::Block;
    const int cols = C == 1 ? 1 : n_cols;
    const std::int64_t blocks = n / QK8_0;
    for (int r = 0; r < n_rows; ++r) {
        const auto* w = reinterpret_cast<const Block*>(weights + std::size_t(r) * row_bytes);
        float s[C][Kind::kLanes] = {};
        for (std::int64_t b = 0; b < blocks; ++b) {
            const Unpacked u = Kind::unpack(w[b]);
            const float d = fp16_to_f32(w[b].d);
            for (int c = 0; c < cols; ++c) {
                const BlockQ8_0& a = reinterpret_cast<const BlockQ8_0*>(acts + std::size_t(c) * act_stride)[b];
                const float ad = fp16_to_f32(a.d);
                const std::int32_t dot = detail::dot32<Dot>(u.lo, u.hi, a.qs);
                float& lane = s[c][b % Kind::kLanes];
                if constexpr (Kind::kLanes == 1) {
                    lane += d * ad * float(dot);  // dot_q8_0_q8_0's step, written as it writes it
                } else {
                    lane = block32_accumulate(lane, d, ad, dot);
                    if constexpr (Kind::kHasMin) lane = block32_accumulate(lane, fp16_to_f32(w[b].m), ad, activation_sum(a));
                }
            }
        }
        for (int c = 0; c < cols; ++c) {
            float result;
            if constexpr (Kind::kLanes == 1) result = s[c][0];
            else result = block32_reduce(s[c]);
            out[std::size_t(c) * out_stride + std::size_t(r)] = result;
        }
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

}  // namespace legacy

template <class Kind>
inline constexpr DotTileFn legacy_tile = kernel_detail::by_columns<legacy::tile<Kind, detail::WideningDot, 1>,
                                                                   legacy::tile<Kind, detail::WideningDot, kTileCols>>;
inline constexpr DotTileFn q8_0_q8_0 = legacy_tile<legacy::Q8_0Kind>;
inline constexpr DotTileFn q4_0_q8_0 = legacy_tile<legacy::Q4_0Kind>;
inline constexpr DotTileFn q5_0_q8_0 = legacy_tile<legacy::Q5_0Kind>;
inline constexpr DotTileFn q4_1_q8_0 = legacy_tile<legacy::Q4_1Kind>;
inline constexpr DotTileFn q5_1_q8_0 = legacy_tile<legacy::Q5_1Kind>;
inline constexpr DotTileFn iq4_nl_q8_0 = legacy_tile<legacy::IQ4NLKind>;

#if SMOL_HAVE_DOTPROD_KERNELS
template <class Kind>
inline constexpr DotTileFn legacy_tile_dotprod =
    kernel_detail::by_columns<legacy::tile_dotprod<Kind, 1>, legacy::tile_dotprod<Kind, kTileCols>>;
inline constexpr DotTileFn q8_0_q8_0_dotprod = legacy_tile_dotprod<legacy::Q8_0Kind>;
inline constexpr DotTileFn q4_0_q8_0_dotprod = legacy_tile_dotprod<legacy::Q4_0Kind>;
inline constexpr DotTileFn q5_0_q8_0_dotprod = legacy_tile_dotprod<legacy::Q5_0Kind>;
inline constexpr DotTileFn q4_1_q8_0_dotprod = legacy_tile_dotprod<legacy::Q4_1Kind>;
inline constexpr DotTileFn q5_1_q8_0_dotprod = legacy_tile_dotprod<legacy::Q5_1Kind>;
inline constexpr DotTileFn iq4_nl_q8_0_dotprod = legacy_tile_dotprod<legacy::IQ4NLKind>;
#endif

// The Q8_0 activation quantizer of every ARM set (plain Armv8.0 code), byte for byte the
// reference's (reference.hpp, quantize_row_q8_0): the same maximum magnitude (fmaxnm skips NaNs
// as std::fmax does), the same scale and its fp16 rounding, the same float products, rounded
// half away from zero by fcvtas as std::round rounds them.
inline void quantize_row_q8_0(const float* x, BlockQ8_0* out, std::int64_t n) {  // x: [n]
    if (n % QK8_0 != 0) fail("quantize_row_q8_0: row length must be a multiple of ", QK8_0, ", got ", n);
    for (std::int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
        float32x4_t v[8];
        float32x4_t vmax = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; ++k) {
            v[k] = vld1q_f32(x + 4 * k);
            vmax = vmaxnmq_f32(vmax, vabsq_f32(v[k]));
        }
        const float d = vmaxnmvq_f32(vmax) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = f32_to_fp16(d);
        const float32x4_t vid = vdupq_n_f32(id);
        for (int k = 0; k < 8; k += 4) {  // 16 quants
            int16x8_t words[2];
            for (int h = 0; h < 2; ++h)
                words[h] = vcombine_s16(vmovn_s32(vcvtaq_s32_f32(vmulq_f32(v[k + 2 * h], vid))),
                                        vmovn_s32(vcvtaq_s32_f32(vmulq_f32(v[k + 2 * h + 1], vid))));
            vst1q_s8(out[b].qs + 4 * k, vcombine_s8(vmovn_s16(words[0]), vmovn_s16(words[1])));
        }
    }
}

}  // namespace smol::kernels_neon

#endif  // SMOL_HAVE_NEON_KERNELS
