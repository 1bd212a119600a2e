#pragma once
// The dotprod kernel set's prompt GEMMs (Armv8.2 sdot, compiled per function with
// SMOL_TARGET_DOTPROD and run only after cpu_features() said the cores have it): Q4_K, Q6_K and
// IQ4_XS weights, kTileRows rows a call, against Q8_K activations packed 16 tokens to a block
// (BlockQ8Kx16, packing.hpp). The i8mm set runs them too (its cores have sdot).
//
// The by-element sdot (vdotq_laneq_s32) multiplies 4 bytes of each of a vector's four 4-byte
// groups by one 4-byte group of another vector: with the four rows' weights 4g..4g+3 side by side
// in one vector (a row quad's group g) and a packed block's 16-byte run of four tokens' quants
// 4g..4g+3, one instruction gives one token's four row sums, lane r for row r. So a packed block
// is read as it is, and every lane of an accumulator is one (row, token) of the result.
//
// Each weight block of four rows is unpacked once (RowQuadBlock: its 4-bit or 6-bit quants, or
// IQ4_XS's table values, as signed bytes, transposed into row-quad groups, and its sub-block
// scales as [row] i32 vectors) and meets all 16 tokens of the packed block. Per sub-block and
// group of four tokens the sums build in four short-lived accumulators, which the sub-block's
// scales then multiply into the block's 16 [row] totals: 16 totals, a sub-block's quants (8
// vectors) and four partial sums fit the 32 vector registers where a tile's worth per token pair
// would not.
//
// Each block's integer sums are exact, as reference.hpp's q4k_q8k_block_sums, q6k_q8k_block_sum
// and iq4xs_q8k_block_sum define them, and the float step per block is the reference's
// (q4k_accumulate_block, q6k_accumulate_block) in block order, four rows at once: so results have
// its bits. Missing rows of a call repeat the last one (kernel_api.hpp's tile_rows); a partial
// group's missing tokens are zeros (pack_q8k_x16), computed and not stored.

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_DOTPROD_KERNELS

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/kernels_neon.hpp"
#include "smol/quant/kquant_tiles_neon.hpp"  // iq4xs_scales
#include "smol/quant/reference.hpp"

namespace smol::kernels_neon {

namespace gemm_detail {

static_assert(kTileRows == 4, "a vector's four lanes are the four rows of a GEMM call");

// The 16 bytes at the same offset of four rows, transposed by 4-byte groups: out[g] holds row r's
// bytes 4g..4g+3 in bytes 4r..4r+3.
SMOL_INLINE_INTO_SET inline void transpose_groups(const std::uint8_t* const (&rows)[kTileRows], std::size_t offset,
                                                  uint8x16_t (&out)[4]) {
    const uint32x4_t r0 = vreinterpretq_u32_u8(vld1q_u8(rows[0] + offset));
    const uint32x4_t r1 = vreinterpretq_u32_u8(vld1q_u8(rows[1] + offset));
    const uint32x4_t r2 = vreinterpretq_u32_u8(vld1q_u8(rows[2] + offset));
    const uint32x4_t r3 = vreinterpretq_u32_u8(vld1q_u8(rows[3] + offset));
    const uint64x2_t low01 = vreinterpretq_u64_u32(vzip1q_u32(r0, r1)), high01 = vreinterpretq_u64_u32(vzip2q_u32(r0, r1));
    const uint64x2_t low23 = vreinterpretq_u64_u32(vzip1q_u32(r2, r3)), high23 = vreinterpretq_u64_u32(vzip2q_u32(r2, r3));
    out[0] = vreinterpretq_u8_u64(vzip1q_u64(low01, low23));
    out[1] = vreinterpretq_u8_u64(vzip2q_u64(low01, low23));
    out[2] = vreinterpretq_u8_u64(vzip1q_u64(high01, high23));
    out[3] = vreinterpretq_u8_u64(vzip2q_u64(high01, high23));
}

// Bytes j of four rows' 16 (each row's scales, say) as [row] vectors: out[j / 4] holds byte j of
// row r in byte 4(j % 4) + r, for the 8 bytes from `first` (0 or 8).
SMOL_INLINE_INTO_SET inline void transpose_bytes(uint8x16_t r0, uint8x16_t r1, uint8x16_t r2, uint8x16_t r3, int first,
                                                 uint8x16_t (&out)[2]) {
    const uint16x8_t pairs01 = vreinterpretq_u16_u8(first == 0 ? vzip1q_u8(r0, r1) : vzip2q_u8(r0, r1));
    const uint16x8_t pairs23 = vreinterpretq_u16_u8(first == 0 ? vzip1q_u8(r2, r3) : vzip2q_u8(r2, r3));
    out[0] = vreinterpretq_u8_u16(vzip1q_u16(pairs01, pairs23));
    out[1] = vreinterpretq_u8_u16(vzip2q_u16(pairs01, pairs23));
}

// Four sub-blocks' [row] bytes (transpose_bytes' out[i]) widened to i32 vectors, as signed or
// unsigned bytes.
template <bool Signed>
SMOL_INLINE_INTO_SET inline void widen_quad(uint8x16_t bytes, int32x4_t* out) {
    if constexpr (Signed) {
        const int8x16_t s = vreinterpretq_s8_u8(bytes);
        const int16x8_t low = vmovl_s8(vget_low_s8(s)), high = vmovl_high_s8(s);
        out[0] = vmovl_s16(vget_low_s16(low));
        out[1] = vmovl_high_s16(low);
        out[2] = vmovl_s16(vget_low_s16(high));
        out[3] = vmovl_high_s16(high);
    } else {
        const uint16x8_t low = vmovl_u8(vget_low_u8(bytes)), high = vmovl_high_u8(bytes);
        out[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(low)));
        out[1] = vreinterpretq_s32_u32(vmovl_high_u16(low));
        out[2] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(high)));
        out[3] = vreinterpretq_s32_u32(vmovl_high_u16(high));
    }
}

// Four rows' fp16 scales as [row] floats (fcvtl: see kernels_neon.hpp's halves_to_floats).
SMOL_INLINE_INTO_SET inline float32x4_t row_halves(const std::uint16_t* h0, const std::uint16_t* h1,
                                                   const std::uint16_t* h2, const std::uint16_t* h3) {
    uint16x4_t halves = vld1_dup_u16(h0);
    halves = vld1_lane_u16(h1, halves, 1);
    halves = vld1_lane_u16(h2, halves, 2);
    halves = vld1_lane_u16(h3, halves, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(halves));
}

// A block of four rows as the GEMM reads it: quants[g] holds the rows' weights 4g..4g+3 (row r's
// in bytes 4r..4r+3) as signed bytes, scales[j] sub-block j's scales [row].
template <int SubBlocks>
struct RowQuadBlock {
    static constexpr int kGroups = QK_K / 4 / SubBlocks;  // groups of 4 weights per sub-block
    int8x16_t quants[QK_K / 4];
    int32x4_t scales[SubBlocks];
};

// The block's exact integer dots against a packed block's 16 tokens: dots[t] lane r =
// sum_j scale[r][j] * (row r's sub-block j . token t's), reference.hpp's `dot`.
template <int SubBlocks>
SMOL_TARGET_DOTPROD inline void block_dots(const RowQuadBlock<SubBlocks>& w, const BlockQ8Kx16& a,
                                           int32x4_t (&dots)[kPackedTokens]) {
    constexpr int groups = RowQuadBlock<SubBlocks>::kGroups;
    SMOL_UNROLL
    for (int t = 0; t < kPackedTokens; ++t) dots[t] = vdupq_n_s32(0);
    // Not unrolled: one sub-block's code, its quants loaded from the unpacked block.
    for (int j = 0; j < SubBlocks; ++j) {
        const int8x16_t* q = w.quants + groups * j;
        const std::int8_t(*acts)[kPackedTokens][4] = a.qs + groups * j;
        SMOL_UNROLL
        for (int quad = 0; quad < kPackedTokens / 4; ++quad) {  // tokens 4 quad .. 4 quad + 3
            int32x4_t part[4];
            SMOL_UNROLL
            for (int i = 0; i < 4; ++i) part[i] = vdupq_n_s32(0);
            SMOL_UNROLL
            for (int g = 0; g < groups; ++g) {
                const int8x16_t four_tokens = vld1q_s8(acts[g][4 * quad]);
                part[0] = vdotq_laneq_s32(part[0], q[g], four_tokens, 0);
                part[1] = vdotq_laneq_s32(part[1], q[g], four_tokens, 1);
                part[2] = vdotq_laneq_s32(part[2], q[g], four_tokens, 2);
                part[3] = vdotq_laneq_s32(part[3], q[g], four_tokens, 3);
            }
            SMOL_UNROLL
            for (int i = 0; i < 4; ++i) dots[4 * quad + i] = vmlaq_s32(dots[4 * quad + i], part[i], w.scales[j]);
        }
    }
}

// What the types without mins (Q6_K, IQ4_XS) share: the unpacked block holds the four rows' d
// beside the quants and scales, and the float step is q6k_accumulate_block for the 16 tokens.
template <int SubBlocks>
struct WithoutMins {
    struct Unpacked : RowQuadBlock<SubBlocks> {
        float32x4_t d;
    };

    SMOL_INLINE_INTO_SET static void accumulate(const Unpacked& w, const BlockQ8Kx16& a,
                                                const int32x4_t (&dots)[kPackedTokens],
                                                float32x4_t (&sums)[kPackedTokens]) {
        SMOL_UNROLL
        for (int quad = 0; quad < kPackedTokens / 4; ++quad) {
            const float32x4_t ad = vld1q_f32(a.d + 4 * quad);
            SMOL_UNROLL
            for (int i = 0; i < 4; ++i)
                sums[4 * quad + i] =
                    vfmaq_f32(sums[4 * quad + i], vmulq_laneq_f32(w.d, ad, i), vcvtq_f32_s32(dots[4 * quad + i]));
        }
    }
};

// Q4_K: the quants of chunk c (32 bytes a row) are sub-block 2c's in the low nibbles and 2c + 1's
// in the high ones (reference.hpp's q4k_q8k_block_sums).
struct Q4KGemm {
    using Weight = BlockQ4K;
    struct Unpacked : RowQuadBlock<8> {
        int16x4_t mins[8];  // [sub-block]: the rows' mins
        float32x4_t d, dmin;
    };

    SMOL_INLINE_INTO_SET static void unpack(const BlockQ4K* const (&w)[kTileRows], Unpacked& out) {
        const std::uint8_t* qs[kTileRows] = {w[0]->qs, w[1]->qs, w[2]->qs, w[3]->qs};
        const uint8x16_t low4 = vdupq_n_u8(0x0f);
        SMOL_UNROLL
        for (int chunk = 0; chunk < 4; ++chunk)
            SMOL_UNROLL
            for (int half = 0; half < 2; ++half) {
                uint8x16_t groups[4];
                transpose_groups(qs, std::size_t(32 * chunk + 16 * half), groups);
                SMOL_UNROLL
                for (int i = 0; i < 4; ++i) {
                    out.quants[16 * chunk + 4 * half + i] = vreinterpretq_s8_u8(vandq_u8(groups[i], low4));
                    out.quants[16 * chunk + 8 + 4 * half + i] = vreinterpretq_s8_u8(vshrq_n_u8(groups[i], 4));
                }
            }
        std::uint8_t scales_mins[kTileRows][16];  // [row]: 8 scales, 8 mins
        SMOL_UNROLL
        for (int r = 0; r < kTileRows; ++r) q4k_unpack_scales_mins(w[r]->scales, scales_mins[r]);
        const uint8x16_t s0 = vld1q_u8(scales_mins[0]), s1 = vld1q_u8(scales_mins[1]);
        const uint8x16_t s2 = vld1q_u8(scales_mins[2]), s3 = vld1q_u8(scales_mins[3]);
        uint8x16_t scales[2], mins[2];
        transpose_bytes(s0, s1, s2, s3, 0, scales);
        transpose_bytes(s0, s1, s2, s3, 8, mins);
        widen_quad<false>(scales[0], out.scales);
        widen_quad<false>(scales[1], out.scales + 4);
        SMOL_UNROLL
        for (int i = 0; i < 2; ++i) {  // the mins are below 64: as i16 they are the same numbers
            const int16x8_t low = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins[i])));
            const int16x8_t high = vreinterpretq_s16_u16(vmovl_high_u8(mins[i]));
            out.mins[4 * i] = vget_low_s16(low);
            out.mins[4 * i + 1] = vget_high_s16(low);
            out.mins[4 * i + 2] = vget_low_s16(high);
            out.mins[4 * i + 3] = vget_high_s16(high);
        }
        out.d = row_halves(&w[0]->d, &w[1]->d, &w[2]->d, &w[3]->d);
        out.dmin = row_halves(&w[0]->dmin, &w[1]->dmin, &w[2]->dmin, &w[3]->dmin);
    }

    // q4k_accumulate_block for the 16 tokens, the mins (lane r of token t: sum_j min[r][j] *
    // (bsums 2j + 2j + 1 of token t), the reference's `mins`) taken here.
    SMOL_INLINE_INTO_SET static void accumulate(const Unpacked& w, const BlockQ8Kx16& a,
                                                const int32x4_t (&dots)[kPackedTokens],
                                                float32x4_t (&sums)[kPackedTokens]) {
        SMOL_UNROLL
        for (int half = 0; half < 2; ++half) {  // tokens 8 half .. 8 half + 7
            int16x8_t bsums[8];                 // [sub-block]: each token's sum over it (fits an i16)
            SMOL_UNROLL
            for (int q = 0; q < 4; ++q) {  // sums32 holds sub-blocks 2q and 2q + 1 as word pairs per token
                const int16x8x2_t pair = vld2q_s16(a.sums32[q][8 * half]);
                bsums[2 * q] = pair.val[0];
                bsums[2 * q + 1] = pair.val[1];
            }
            SMOL_UNROLL
            for (int quad = 2 * half; quad < 2 * half + 2; ++quad) {
                const float32x4_t ad = vld1q_f32(a.d + 4 * quad);
                SMOL_UNROLL
                for (int i = 0; i < 4; ++i) {
                    const int t = 4 * quad + i;
                    int32x4_t mins = vmull_laneq_s16(w.mins[0], bsums[0], t % 8);
                    SMOL_UNROLL
                    for (int j = 1; j < 8; ++j) mins = vmlal_laneq_s16(mins, w.mins[j], bsums[j], t % 8);
                    // fma(d * ad, dot, sum), then fma(-(dmin * ad), mins, sum): fmls negates its
                    // product operand as the reference's minus does.
                    const float32x4_t sum = vfmaq_f32(sums[t], vmulq_laneq_f32(w.d, ad, i), vcvtq_f32_s32(dots[t]));
                    sums[t] = vfmsq_f32(sum, vmulq_laneq_f32(w.dmin, ad, i), vcvtq_f32_s32(mins));
                }
            }
        }
    }
};

// Q6_K: the quants unpack to -32..31 (q6k_unpack_quarters), so the dots need no bsums.
struct Q6KGemm : WithoutMins<16> {
    using Weight = BlockQ6K;

    SMOL_INLINE_INTO_SET static void unpack(const BlockQ6K* const (&w)[kTileRows], Unpacked& out) {
        const std::uint8_t* ql[kTileRows] = {w[0]->ql, w[1]->ql, w[2]->ql, w[3]->ql};
        const std::uint8_t* qh[kTileRows] = {w[0]->qh, w[1]->qh, w[2]->qh, w[3]->qh};
        SMOL_UNROLL
        for (int half = 0; half < 2; ++half)
            SMOL_UNROLL
            for (int part = 0; part < 2; ++part) {
                const detail::Q6KPiece piece = detail::Q6KPiece::at(half, part);
                uint8x16_t l0[4], l1[4], h[4];
                transpose_groups(ql, std::size_t(piece.ql0), l0);
                transpose_groups(ql, std::size_t(piece.ql1), l1);
                transpose_groups(qh, std::size_t(piece.qh), h);
                SMOL_UNROLL
                for (int i = 0; i < 4; ++i) {  // weights 4i..4i+3 of each quarter's 16
                    int8x16_t quarters[4];
                    detail::q6k_unpack_quarters(l0[i], l1[i], h[i], quarters);
                    SMOL_UNROLL
                    for (int k = 0; k < 4; ++k) out.quants[4 * (piece.first_sub_block + 2 * k) + i] = quarters[k];
                }
            }
        const uint8x16_t s0 = vld1q_u8(reinterpret_cast<const std::uint8_t*>(w[0]->scales));
        const uint8x16_t s1 = vld1q_u8(reinterpret_cast<const std::uint8_t*>(w[1]->scales));
        const uint8x16_t s2 = vld1q_u8(reinterpret_cast<const std::uint8_t*>(w[2]->scales));
        const uint8x16_t s3 = vld1q_u8(reinterpret_cast<const std::uint8_t*>(w[3]->scales));
        SMOL_UNROLL
        for (int first = 0; first < 16; first += 8) {
            uint8x16_t scales[2];
            transpose_bytes(s0, s1, s2, s3, first, scales);
            widen_quad<true>(scales[0], out.scales + first);
            widen_quad<true>(scales[1], out.scales + first + 4);
        }
        out.d = row_halves(&w[0]->d, &w[1]->d, &w[2]->d, &w[3]->d);
    }
};

// IQ4_XS: sub-block j's 16 quant bytes hold its weights 0..15 in their low nibbles and 16..31 in
// their high ones (reference.hpp's iq4xs_unpack_values); tbl turns each transposed group's
// nibbles into kIq4nlValues in place. Its scales are signed (-32..31) and it has no mins, so the
// dots need no bsums and the float step is Q6_K's.
struct IQ4XSGemm : WithoutMins<8> {
    using Weight = BlockIQ4XS;

    SMOL_INLINE_INTO_SET static void unpack(const BlockIQ4XS* const (&w)[kTileRows], Unpacked& out) {
        const std::uint8_t* qs[kTileRows] = {w[0]->qs, w[1]->qs, w[2]->qs, w[3]->qs};
        const int8x16_t values = vld1q_s8(kIq4nlValues);
        const uint8x16_t low4 = vdupq_n_u8(0x0f);
        SMOL_UNROLL
        for (int j = 0; j < 8; ++j) {
            uint8x16_t groups[4];  // weights 4i..4i+3 (low nibbles) and 16 + 4i..16 + 4i + 3 (high)
            transpose_groups(qs, std::size_t(16 * j), groups);
            SMOL_UNROLL
            for (int i = 0; i < 4; ++i) {
                out.quants[8 * j + i] = vqtbl1q_s8(values, vandq_u8(groups[i], low4));
                out.quants[8 * j + 4 + i] = vqtbl1q_s8(values, vshrq_n_u8(groups[i], 4));
            }
        }
        uint8x16_t scales[kTileRows];  // [row]: its 8 scales (the upper 8 bytes unread)
        SMOL_UNROLL
        for (int r = 0; r < kTileRows; ++r) {
            const uint8x8_t row_scales = vreinterpret_u8_s8(kquant::iq4xs_scales(*w[r]));
            scales[r] = vcombine_u8(row_scales, row_scales);
        }
        uint8x16_t quads[2];
        transpose_bytes(scales[0], scales[1], scales[2], scales[3], 0, quads);
        widen_quad<true>(quads[0], out.scales);
        widen_quad<true>(quads[1], out.scales + 4);
        out.d = row_halves(&w[0]->d, &w[1]->d, &w[2]->d, &w[3]->d);
    }
};

// A GEMM (GemmTileFn) over packed tokens: per group of 16 tokens a walk over the blocks of up to
// kTileRows rows, each block unpacked once for the group.
template <class Type>
SMOL_INLINE_INTO_SET inline void gemm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                      const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    using Weight = typename Type::Weight;
    if (n_rows <= 0) return;
    const Weight* rows[kTileRows];
    kernel_detail::tile_rows(weights, row_bytes, n_rows, rows);
    const std::int64_t blocks = n / QK_K;
    for (int first = 0; first < n_tokens; first += kPackedTokens) {
        const BlockQ8Kx16* group = acts + std::size_t(first / kPackedTokens) * std::size_t(blocks);
        float32x4_t sums[kPackedTokens];  // [token]: lane r for row r
        SMOL_UNROLL
        for (int t = 0; t < kPackedTokens; ++t) sums[t] = vdupq_n_f32(0.0f);
        for (std::int64_t b = 0; b < blocks; ++b) {
            const Weight* w[kTileRows] = {rows[0] + b, rows[1] + b, rows[2] + b, rows[3] + b};
            typename Type::Unpacked block;
            Type::unpack(w, block);
            int32x4_t dots[kPackedTokens];
            block_dots(block, group[b], dots);
            Type::accumulate(block, group[b], dots, sums);
        }
        const int tokens = n_tokens - first < kPackedTokens ? n_tokens - first : kPackedTokens;
        for (int t = 0; t < tokens; ++t) {
            float* column = out + std::size_t(first + t) * out_stride;
            if (n_rows == kTileRows) {
                vst1q_f32(column, sums[t]);
            } else {
                float lanes[kTileRows];
                vst1q_f32(lanes, sums[t]);
                for (int r = 0; r < n_rows; ++r) column[r] = lanes[r];
            }
        }
    }
}

}  // namespace gemm_detail

// The entry points, whose `flatten` inlines the whole call tree into a function with the target
// sdot needs.
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void q4k_q8k_gemm_dotprod(std::int64_t n, const std::uint8_t* weights,
                                                                             std::size_t row_bytes, int n_rows,
                                                                             const BlockQ8Kx16* acts, int n_tokens,
                                                                             float* out, std::size_t out_stride) {
    gemm_detail::gemm<gemm_detail::Q4KGemm>(n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
}
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void q6k_q8k_gemm_dotprod(std::int64_t n, const std::uint8_t* weights,
                                                                             std::size_t row_bytes, int n_rows,
                                                                             const BlockQ8Kx16* acts, int n_tokens,
                                                                             float* out, std::size_t out_stride) {
    gemm_detail::gemm<gemm_detail::Q6KGemm>(n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
}
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void iq4xs_q8k_gemm_dotprod(
    std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const BlockQ8Kx16* acts,
    int n_tokens, float* out, std::size_t out_stride) {
    gemm_detail::gemm<gemm_detail::IQ4XSGemm>(n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
}

}  // namespace smol::kernels_neon

#endif  // SMOL_HAVE_DOTPROD_KERNELS
