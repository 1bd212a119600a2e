#pragma once
// The AArch64 kernel sets' tiles: neon (Armv8.0 Advanced SIMD, the baseline every AArch64 build is
// compiled for) and dotprod (Armv8.2 sdot, compiled per function with SMOL_TARGET_DOTPROD and run
// only after cpu_features() said the cores have it; dispatch.hpp guarantees that). Both compute
// each block's integer sums exactly, as reference.hpp's q4k_q8k_block_sums and q6k_q8k_block_sum
// define them, and take the same float step per block in block order (q4k_accumulate_block,
// q6k_accumulate_block), so every result has the reference's bits. The two sets differ only in
// how 16 byte products are summed into four i32 lanes (Armv8.0: widening multiplies and pairwise
// adds; Armv8.2: one sdot).
//
// A tile walks the blocks once: each row's block is unpacked into registers once and then meets
// every column of the tile, so a prompt's tiles unpack a weight block once per kTileCols tokens
// rather than once per token. Decode (one column) has kernels of its own (q4k_column, q6k_column). The i8mm set
// (kernels_i8mm.hpp) reuses the pieces here that are not about how products are summed.

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_NEON_KERNELS

#include <arm_neon.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/neon_dot.hpp"
#include "smol/quant/reference.hpp"

namespace smol::kernels_neon {

namespace detail {

// A Q4_K block's quants as signed bytes (0..15): sub-block j (weights 32j..32j+31) in q[2j] and
// q[2j + 1]. Chunk c of 32 quant bytes holds sub-block 2c in its low nibbles and 2c + 1 in its
// high ones (reference.hpp's q4k_q8k_block_sums).
SMOL_INLINE_INTO_SET inline void q4k_unpack_quants(const std::uint8_t* qs, int8x16_t (&q)[16]) {
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    SMOL_UNROLL
    for (int chunk = 0; chunk < 4; ++chunk) {
        const uint8x16_t bits0 = vld1q_u8(qs + 32 * chunk), bits1 = vld1q_u8(qs + 32 * chunk + 16);
        q[4 * chunk] = vreinterpretq_s8_u8(vandq_u8(bits0, low4));
        q[4 * chunk + 1] = vreinterpretq_s8_u8(vandq_u8(bits1, low4));
        q[4 * chunk + 2] = vreinterpretq_s8_u8(vshrq_n_u8(bits0, 4));
        q[4 * chunk + 3] = vreinterpretq_s8_u8(vshrq_n_u8(bits1, 4));
    }
}

// Sixteen Q6_K quants per vector as q6k_unpack_quants gives them (6 bits less 32, so -32..31),
// from 16 bytes each of the two ql runs and of qh that hold them: the low nibbles of l0 with qh's
// bit pairs 0-1, of l1 with pairs 2-3, then the high nibbles of l0 with pairs 4-5 and of l1 with
// 6-7. Bytewise, so it unpacks two rows' bytes interleaved as well as one row's.
SMOL_INLINE_INTO_SET inline void q6k_unpack_quarters(uint8x16_t l0, uint8x16_t l1, uint8x16_t h, int8x16_t (&out)[4]) {
    const uint8x16_t low4 = vdupq_n_u8(0x0f), top2 = vdupq_n_u8(0x30), offset = vdupq_n_u8(32);
    out[0] = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(vandq_u8(l0, low4), vandq_u8(vshlq_n_u8(h, 4), top2)), offset));
    out[1] = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(vandq_u8(l1, low4), vandq_u8(vshlq_n_u8(h, 2), top2)), offset));
    out[2] = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h, top2)), offset));
    out[3] = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(h, 2), top2)), offset));
}

// Where the 16-byte pieces of a Q6_K block's quant runs start: half h (weights 128h..128h+127),
// bytes 16p..16p+15 of each of its quarters (p = 0, 1). Quarter k of that piece holds weights
// 128h + 32k + 16p.. +15, sub-block 8h + 2k + p.
struct Q6KPiece {
    int ql0, ql1, qh, first_sub_block;
    static constexpr Q6KPiece at(int half, int part) {
        return {64 * half + 16 * part, 64 * half + 32 + 16 * part, 32 * half + 16 * part, 8 * half + part};
    }
};

// The sum of an i32 vector's lanes (horizontal).
SMOL_INLINE_INTO_SET inline std::int32_t lanes_sum(int32x4_t v) { return vaddvq_s32(v); }

// A Q4_K block unpacked for the columns of a tile: its quants, scales and mins.
struct Q4KUnpacked {
    int8x16_t q[16];
    std::int32_t scales[8];
    int16x8_t mins;
    float d, dmin;

    SMOL_INLINE_INTO_SET explicit Q4KUnpacked(const BlockQ4K& w) {
        q4k_unpack_quants(w.qs, q);
        std::uint8_t scales_mins[16];
        q4k_unpack_scales_mins(w.scales, scales_mins);
        SMOL_UNROLL
        for (int j = 0; j < 8; ++j) scales[j] = scales_mins[j];
        mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(scales_mins + 8)));
        d = fp16_to_f32(w.d);
        dmin = fp16_to_f32(w.dmin);
    }

    // reference.hpp's q4k_q8k_block_sums against one activation block, then its float step.
    template <class Dot>
    SMOL_INLINE_INTO_SET float accumulate(float sum, const BlockQ8K& a) const {
        int32x4_t dot = vdupq_n_s32(0);
        SMOL_UNROLL
        for (int j = 0; j < 8; ++j) {
            const int32x4_t sub = Dot::dot(Dot::dot(vdupq_n_s32(0), q[2 * j], vld1q_s8(a.qs + 32 * j)), q[2 * j + 1],
                                           vld1q_s8(a.qs + 32 * j + 16));
            dot = vmlaq_n_s32(dot, sub, scales[j]);
        }
        // A sub-block of 32 meets bsums 2j and 2j + 1; each pair's sum fits an i16 (2 * 16 * 128).
        const int16x8_t bsums = vpaddq_s16(vld1q_s16(a.bsums), vld1q_s16(a.bsums + 8));
        const int32x4_t mins_dot = vmlal_high_s16(vmull_s16(vget_low_s16(mins), vget_low_s16(bsums)), mins, bsums);
        return q4k_accumulate_block(sum, d, dmin, a.d, lanes_sum(dot), lanes_sum(mins_dot));
    }
};

// A Q6_K block unpacked for the columns of a tile: sub-block j (weights 16j..16j+15) in q[j].
struct Q6KUnpacked {
    int8x16_t q[16];
    const std::int8_t* scales;
    float d;

    SMOL_INLINE_INTO_SET explicit Q6KUnpacked(const BlockQ6K& w) : scales(w.scales), d(fp16_to_f32(w.d)) {
        SMOL_UNROLL
        for (int half = 0; half < 2; ++half)
            SMOL_UNROLL
            for (int part = 0; part < 2; ++part) {
                const Q6KPiece piece = Q6KPiece::at(half, part);
                int8x16_t quarters[4];
                q6k_unpack_quarters(vld1q_u8(w.ql + piece.ql0), vld1q_u8(w.ql + piece.ql1), vld1q_u8(w.qh + piece.qh),
                                    quarters);
                SMOL_UNROLL
                for (int k = 0; k < 4; ++k) q[piece.first_sub_block + 2 * k] = quarters[k];
            }
    }

    // reference.hpp's q6k_q8k_block_sum against one activation block, then its float step.
    template <class Dot>
    SMOL_INLINE_INTO_SET float accumulate(float sum, const BlockQ8K& a) const {
        int32x4_t dot = vdupq_n_s32(0);
        SMOL_UNROLL
        for (int j = 0; j < 16; ++j)
            dot = vmlaq_n_s32(dot, Dot::dot(vdupq_n_s32(0), q[j], vld1q_s8(a.qs + 16 * j)), std::int32_t(scales[j]));
        return q6k_accumulate_block(sum, d, a.d, lanes_sum(dot));
    }
};

// Decode: kTileRows rows against one column, each block's 256 activations loaded once for all
// the rows. Per row and block the products are summed per sub-block in vector lanes (pairwise adds
// gather the sub-blocks' sums into lanes), multiplied by the scales in lanes and reduced once, so a
// block costs one horizontal add where the sums above take one per sub-block. The integer totals
// are the reference's (exact, in any order), and so is the float step.

// The 256 activations of a Q8_K block, one vector per 16 (sub-block i of Q6_K is register i).
struct Q8KVectors {
    int8x16_t q[16];
    SMOL_INLINE_INTO_SET explicit Q8KVectors(const BlockQ8K& a) {
        SMOL_UNROLL for (int i = 0; i < 16; ++i) q[i] = vld1q_s8(a.qs + 16 * i);
    }
};

// q4k_block_sums' totals, as [mins, dot, mins, dot] (against the scales' [d, dmin], each product
// of the float step finds one factor in lane 0 and the other by element: no lane moves): sub-block j's 32 products sum into lanes,
// vpaddq gathers sub-blocks 0..3 and 4..7 into one vector each, the scales (reference.hpp's
// q4k_unpack_scales_mins) multiply lane by lane;
// the mins meet the pairwise sums of the bsums (one per sub-block of 32).
template <class Dot>
SMOL_INLINE_INTO_SET inline int32x4_t q4k_block_sums_in_lanes(const BlockQ4K& w, const Q8KVectors& a,
                                                                  int16x8_t sub_block_bsums) {
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    const int32x4_t zero = vdupq_n_s32(0);
    int32x4_t chunk[4];  // chunk c: [sub-block 2c (two halves), sub-block 2c + 1 (two halves)]
    SMOL_UNROLL
    for (int c = 0; c < 4; ++c) {
        const uint8x16_t bits0 = vld1q_u8(w.qs + 32 * c), bits1 = vld1q_u8(w.qs + 32 * c + 16);
        int32x4_t low = Dot::dot(zero, vreinterpretq_s8_u8(vandq_u8(bits0, low4)), a.q[4 * c]);
        low = Dot::dot(low, vreinterpretq_s8_u8(vandq_u8(bits1, low4)), a.q[4 * c + 1]);
        int32x4_t high = Dot::dot(zero, vreinterpretq_s8_u8(vshrq_n_u8(bits0, 4)), a.q[4 * c + 2]);
        high = Dot::dot(high, vreinterpretq_s8_u8(vshrq_n_u8(bits1, 4)), a.q[4 * c + 3]);
        chunk[c] = vpaddq_s32(low, high);
    }
    const int32x4_t sums0123 = vpaddq_s32(chunk[0], chunk[1]), sums4567 = vpaddq_s32(chunk[2], chunk[3]);
    std::uint8_t scales_mins[16];  // scales 0..7, then mins 0..7
    q4k_unpack_scales_mins(w.scales, scales_mins);
    const uint8x16_t unpacked = vld1q_u8(scales_mins);
    const uint16x8_t scales16 = vmovl_u8(vget_low_u8(unpacked));
    int32x4_t dot = vmulq_s32(sums0123, vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(scales16))));
    dot = vmlaq_s32(dot, sums4567, vreinterpretq_s32_u32(vmovl_high_u16(scales16)));
    const int16x8_t mins16 = vreinterpretq_s16_u16(vmovl_high_u8(unpacked));
    const int32x4_t min_sums = vmlal_high_s16(vmull_s16(vget_low_s16(mins16), vget_low_s16(sub_block_bsums)), mins16,
                                              sub_block_bsums);
    const int32x4_t pairs = vpaddq_s32(min_sums, dot);
    return vpaddq_s32(pairs, pairs);  // [mins, dot, mins, dot]
}

// A block's half scales as floats for their products with the activations' scale, by fcvt alone.
// fcvt quiets a signalling NaN where fp16_to_f32 keeps it, but the product quiets it in the same
// way, so the products have the reference's bits for every half. halves_to_floats converts the
// four halves at `halves` (reading 8 bytes).
SMOL_INLINE_INTO_SET inline float32x4_t halves_to_floats(const std::uint16_t* halves) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(halves)));
}
SMOL_INLINE_INTO_SET inline float half_scale(std::uint16_t half) { return float(std::bit_cast<__fp16>(half)); }

// q6k_block_sum's total with the quants taken as 0..63: sum_j scale_j * (dot_j - 32 * bsum_j),
// where the reference subtracts 32 from each quant first; the same integer. Sub-block j (16
// weights) is one vector product, and two rounds of vpaddq gather sub-blocks 4i..4i+3 into lanes.
template <class Dot>
SMOL_INLINE_INTO_SET inline std::int32_t q6k_block_sum_in_lanes(const BlockQ6K& w, const Q8KVectors& a,
                                                                 int16x8_t bsums_low, int16x8_t bsums_high) {
    const uint8x16_t six_bits = vdupq_n_u8(0x3f), bits45 = vdupq_n_u8(0x30);
    const int32x4_t zero = vdupq_n_s32(0);
    int32x4_t products[16];  // [sub-block]
    SMOL_UNROLL
    for (int half = 0; half < 2; ++half)
        SMOL_UNROLL
        for (int part = 0; part < 2; ++part) {
            const uint8x16_t l0 = vld1q_u8(w.ql + 64 * half + 16 * part), l1 = vld1q_u8(w.ql + 64 * half + 32 + 16 * part);
            const uint8x16_t h = vld1q_u8(w.qh + 32 * half + 16 * part);
            const uint8x16_t h_shifted = vshrq_n_u8(h, 2);
            const uint8x16_t quarter[4] = {
                vandq_u8(vsliq_n_u8(l0, h, 4), six_bits),          // low nibbles, qh bits 0-1
                vandq_u8(vsliq_n_u8(l1, h_shifted, 4), six_bits),  // low nibbles, qh bits 2-3
                vsriq_n_u8(vandq_u8(h, bits45), l0, 4),            // high nibbles, qh bits 4-5
                vsriq_n_u8(vandq_u8(h_shifted, bits45), l1, 4),    // high nibbles, qh bits 6-7
            };
            SMOL_UNROLL
            for (int k = 0; k < 4; ++k) {  // weights 128 half + 32 k + 16 part .. + 15
                const int sub_block = 8 * half + 2 * k + part;
                products[sub_block] = Dot::dot(zero, vreinterpretq_s8_u8(quarter[k]), a.q[sub_block]);
            }
        }
    int32x4_t pairs[8];
    SMOL_UNROLL
    for (int i = 0; i < 8; ++i) pairs[i] = vpaddq_s32(products[2 * i], products[2 * i + 1]);
    const int8x16_t scales = vld1q_s8(w.scales);
    const int16x8_t scales_low = vmovl_s8(vget_low_s8(scales)), scales_high = vmovl_high_s8(scales);
    const int32x4_t scales32[4] = {vmovl_s16(vget_low_s16(scales_low)), vmovl_high_s16(scales_low),
                                   vmovl_s16(vget_low_s16(scales_high)), vmovl_high_s16(scales_high)};
    int32x4_t dot = vmulq_s32(vpaddq_s32(pairs[0], pairs[1]), scales32[0]);
    SMOL_UNROLL
    for (int i = 1; i < 4; ++i) dot = vmlaq_s32(dot, vpaddq_s32(pairs[2 * i], pairs[2 * i + 1]), scales32[i]);
    int32x4_t offsets = vmull_s16(vget_low_s16(scales_low), vget_low_s16(bsums_low));
    offsets = vmlal_high_s16(offsets, scales_low, bsums_low);
    offsets = vmlal_s16(offsets, vget_low_s16(scales_high), vget_low_s16(bsums_high));
    offsets = vmlal_high_s16(offsets, scales_high, bsums_high);
    return vaddvq_s32(dot) - 32 * vaddvq_s32(offsets);
}

template <class Dot>
SMOL_INLINE_INTO_SET inline void q4k_column(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                            const std::uint8_t* acts, std::size_t, int, float* out, std::size_t) {
    const BlockQ4K* w[kTileRows];
    kernel_detail::tile_rows(weights, row_bytes, n_rows, w);
    const auto* a = reinterpret_cast<const BlockQ8K*>(acts);
    float sum[kTileRows] = {};
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const Q8KVectors q8(a[b]);
        const int16x8_t sub_block_bsums = vpaddq_s16(vld1q_s16(a[b].bsums), vld1q_s16(a[b].bsums + 8));
        for (int r = 0; r < kTileRows; ++r) {
            const float32x4_t totals = vcvtq_f32_s32(q4k_block_sums_in_lanes<Dot>(w[r][b], q8, sub_block_bsums));
            const float32x4_t scales = vmulq_n_f32(halves_to_floats(&w[r][b].d), a[b].d);  // [d, dmin] * ad
            // q4k_accumulate_block in lane 0 (by-element fmla and fmls; GCC has no scalar form):
            // fma(d * ad, dot, sum), then sum - mins * (dmin * ad) in one rounding, which is
            // fma(-(dmin * ad), mins, sum)
            float32x4_t acc = vdupq_n_f32(sum[r]);
            acc = vfmaq_laneq_f32(acc, scales, totals, 1);
            acc = vfmsq_laneq_f32(acc, totals, scales, 1);
            sum[r] = vgetq_lane_f32(acc, 0);
        }
    }
    SMOL_UNROLL
    for (int r = 0; r < n_rows; ++r) out[r] = sum[r];
}

template <class Dot>
SMOL_INLINE_INTO_SET inline void q6k_column(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                            const std::uint8_t* acts, std::size_t, int, float* out, std::size_t) {
    const BlockQ6K* w[kTileRows];
    kernel_detail::tile_rows(weights, row_bytes, n_rows, w);
    const auto* a = reinterpret_cast<const BlockQ8K*>(acts);
    float sum[kTileRows] = {};
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const Q8KVectors q8(a[b]);
        const int16x8_t bsums_low = vld1q_s16(a[b].bsums), bsums_high = vld1q_s16(a[b].bsums + 8);
        for (int r = 0; r < kTileRows; ++r)
            sum[r] = q6k_accumulate_block(sum[r], half_scale(w[r][b].d), a[b].d,
                                          q6k_block_sum_in_lanes<Dot>(w[r][b], q8, bsums_low, bsums_high));
    }
    SMOL_UNROLL
    for (int r = 0; r < n_rows; ++r) out[r] = sum[r];
}

// A tile of up to kTileRows rows and Cols columns (n_cols <= Cols; Cols is 1 for decode, a
// constant trip count): per block, each row's block unpacked once, then all the columns. Each
// (row, column) takes its float steps in block order, as the reference does.
template <class Weight, class Unpacked, class Dot, int Cols>
SMOL_INLINE_INTO_SET inline void tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                      const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                      std::size_t out_stride) {
    const kernel_detail::TileOperands<Weight, BlockQ8K, Cols> ops(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const int cols = Cols == 1 ? 1 : n_cols;
    float sums[kTileRows][Cols] = {};
    for (std::int64_t b = 0; b < n / QK_K; ++b)
        for (int r = 0; r < n_rows; ++r) {
            const Unpacked block(ops.w[r][b]);
            for (int c = 0; c < cols; ++c) sums[r][c] = block.template accumulate<Dot>(sums[r][c], ops.a[c][b]);
        }
    kernel_detail::store_tile(sums, n_rows, n_cols, out, out_stride);
}

}  // namespace detail

// The neon set (Armv8.0): a tile for decode (one column) and one for prompts.
template <int Cols>
inline void q4k_q8k_columns(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                            const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                            std::size_t out_stride) {
    detail::tile<BlockQ4K, detail::Q4KUnpacked, detail::WideningDot, Cols>(n, weights, row_bytes, n_rows, acts,
                                                                          act_stride, n_cols, out, out_stride);
}
template <int Cols>
inline void q6k_q8k_columns(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                            const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                            std::size_t out_stride) {
    detail::tile<BlockQ6K, detail::Q6KUnpacked, detail::WideningDot, Cols>(n, weights, row_bytes, n_rows, acts,
                                                                          act_stride, n_cols, out, out_stride);
}
// Decode: the one-column kernels above (kTileRows rows, activations loaded once per block).
inline void q4k_q8k_decode(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                           const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    detail::q4k_column<detail::WideningDot>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}
inline void q6k_q8k_decode(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                           const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    detail::q6k_column<detail::WideningDot>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}
inline void q4k_q8k(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                    const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    kernel_detail::by_columns<q4k_q8k_decode, q4k_q8k_columns<kTileCols>>(n, weights, row_bytes, n_rows, acts,
                                                                          act_stride, n_cols, out, out_stride);
}
inline void q6k_q8k(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                    const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    kernel_detail::by_columns<q6k_q8k_decode, q6k_q8k_columns<kTileCols>>(n, weights, row_bytes, n_rows, acts,
                                                                          act_stride, n_cols, out, out_stride);
}

#if SMOL_HAVE_DOTPROD_KERNELS
// The dotprod set (Armv8.2): `flatten` inlines the whole call tree, SdotDot::dot included, into
// these entry points, which carry the target that sdot needs. The i8mm set decodes with the
// dotprod decode kernels.
template <int Cols>
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void q4k_q8k_dotprod_columns(
    std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
    std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    detail::tile<BlockQ4K, detail::Q4KUnpacked, detail::SdotDot, Cols>(n, weights, row_bytes, n_rows, acts, act_stride,
                                                                      n_cols, out, out_stride);
}
template <int Cols>
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void q6k_q8k_dotprod_columns(
    std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
    std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    detail::tile<BlockQ6K, detail::Q6KUnpacked, detail::SdotDot, Cols>(n, weights, row_bytes, n_rows, acts, act_stride,
                                                                      n_cols, out, out_stride);
}
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void q4k_q8k_dotprod_decode(
    std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
    std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    detail::q4k_column<detail::SdotDot>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void q6k_q8k_dotprod_decode(
    std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
    std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    detail::q6k_column<detail::SdotDot>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}
inline void q4k_q8k_dotprod(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                            const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                            std::size_t out_stride) {
    kernel_detail::by_columns<q4k_q8k_dotprod_decode, q4k_q8k_dotprod_columns<kTileCols>>(
        n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}
inline void q6k_q8k_dotprod(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                            const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                            std::size_t out_stride) {
    kernel_detail::by_columns<q6k_q8k_dotprod_decode, q6k_q8k_dotprod_columns<kTileCols>>(
        n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}
#endif

}  // namespace smol::kernels_neon

#endif  // SMOL_HAVE_NEON_KERNELS
