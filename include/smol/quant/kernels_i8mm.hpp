#pragma once
// The i8mm kernel set's kernels (Armv8.6 smmla, compiled per function with SMOL_TARGET_I8MM and
// run only after cpu_features() said the cores have it): Q4_K and Q6_K tiles against Q8_K
// activations, for prompts of 2 to 8 tokens (longer prompts run the dotprod set's GEMMs,
// kquant_gemm_dotprod.hpp, which executed fewer instructions than an smmla GEMM: docs/arm.md). One
// smmla (vmmlaq_s32) multiplies a 2 x 8 matrix of signed bytes by an 8 x 2 one into a 2 x 2 i32
// block, so a tile's rows go in pairs and its columns (tokens) in pairs: the
// first operand holds 8 weight bytes of two rows, the second 8 activation bytes of two columns,
// and the 2 x 2 block (lanes: row 0 column 0, row 0 column 1, row 1 column 0, row 1 column 1)
// gathers 8 products per lane per instruction, twice sdot's 4.
//
// The pairs are formed in registers as the blocks are loaded (vzip1q_s64/vzip2q_s64 of two rows'
// or two columns' 16 bytes give their first and second 8-byte pieces side by side), rather than
// by repacking the weights at load time as the x86 row groups are: the rows stay as the file
// stores them (decode reads them too), each zip serves every column pair (or row pair) of the
// tile, and a nibble or 6-bit unpack costs the same on interleaved bytes as on one row's.
//
// Each block's integer sums are exact, as reference.hpp's q4k_q8k_block_sums and
// q6k_q8k_block_sum define them: the smmla sums of a sub-block times its scale (the scale vector
// holds row 0's scale in lanes 0-1 and row 1's in lanes 2-3), the Q4_K mins against the bsums,
// all in i32 without overflow. The float step per block is the reference's (q4k_accumulate_block,
// q6k_accumulate_block), in block order, on four lanes at once: so results have its bits.
//
// Decode (one column) runs the dotprod set's tiles: with one token half of each smmla would be
// wasted, and decode waits on memory, not on products. A missing row or column of a tile (n_rows
// or n_cols of 1 or 3) repeats the last one (kernel_api.hpp's TileOperands), and its results are
// dropped.

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_I8MM_KERNELS

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/kernels_neon.hpp"
#include "smol/quant/reference.hpp"

namespace smol::kernels_i8mm {

namespace detail {

static_assert(kTileRows % 2 == 0 && kTileCols % 2 == 0, "the i8mm tiles take rows and columns in pairs");
inline constexpr int kRowPairs = kTileRows / 2, kColPairs = kTileCols / 2;

// The first 8 bytes of x and of y side by side (one smmla operand), and their last 8 bytes.
SMOL_INLINE_INTO_SET inline int8x16_t first_pieces(int8x16_t x, int8x16_t y) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}
SMOL_INLINE_INTO_SET inline int8x16_t last_pieces(int8x16_t x, int8x16_t y) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}
SMOL_INLINE_INTO_SET inline uint8x16_t first_pieces(uint8x16_t x, uint8x16_t y) {
    return vreinterpretq_u8_u64(vzip1q_u64(vreinterpretq_u64_u8(x), vreinterpretq_u64_u8(y)));
}
SMOL_INLINE_INTO_SET inline uint8x16_t last_pieces(uint8x16_t x, uint8x16_t y) {
    return vreinterpretq_u8_u64(vzip2q_u64(vreinterpretq_u64_u8(x), vreinterpretq_u64_u8(y)));
}

// The 16 bytes at x and at y as two smmla operands: their first 8-byte pieces, their last.
SMOL_INLINE_INTO_SET inline void interleave(const std::uint8_t* x, const std::uint8_t* y, uint8x16_t& first,
                                            uint8x16_t& last) {
    const uint8x16_t vx = vld1q_u8(x), vy = vld1q_u8(y);
    first = first_pieces(vx, vy);
    last = last_pieces(vx, vy);
}

// The two smmla operands of 16 activation bytes of a column pair: their first 8-byte pieces side
// by side, and their last (here from bytes offset..offset + 15 of two columns' blocks).
struct ColumnPairPieces {
    int8x16_t first, last;
    SMOL_INLINE_INTO_SET ColumnPairPieces(int8x16_t first_, int8x16_t last_) : first(first_), last(last_) {}
    SMOL_INLINE_INTO_SET ColumnPairPieces(const BlockQ8K& a0, const BlockQ8K& a1, int offset) {
        const int8x16_t x = vld1q_s8(a0.qs + offset), y = vld1q_s8(a1.qs + offset);
        first = first_pieces(x, y);
        last = last_pieces(x, y);
    }
};

// [s0[j], s0[j], s1[j], s1[j]] for j = first, first + Stride, first + 2 Stride, first + 3 Stride:
// the i32 scale vectors of four sub-blocks of a row pair, from the rows' 16 signed byte scales.
template <int Stride>
SMOL_INLINE_INTO_SET inline void row_pair_scales(int8x16_t s0, int8x16_t s1, int first, int32x4_t (&out)[4]) {
    // Table bytes 0-15 are s0's, 16-31 s1's.
    static constexpr std::uint8_t pattern[16] = {0,          0,          16,              16,
                                                 Stride,     Stride,     16 + Stride,     16 + Stride,
                                                 2 * Stride, 2 * Stride, 16 + 2 * Stride, 16 + 2 * Stride,
                                                 3 * Stride, 3 * Stride, 16 + 3 * Stride, 16 + 3 * Stride};
    const uint8x16_t index = vaddq_u8(vld1q_u8(pattern), vdupq_n_u8(std::uint8_t(first)));
    const int8x16_t bytes = vqtbl2q_s8(int8x16x2_t{{s0, s1}}, index);
    const int16x8_t low = vmovl_s8(vget_low_s8(bytes)), high = vmovl_high_s8(bytes);
    out[0] = vmovl_s16(vget_low_s16(low));
    out[1] = vmovl_high_s16(low);
    out[2] = vmovl_s16(vget_low_s16(high));
    out[3] = vmovl_high_s16(high);
}

// [x0, x0, x1, x1]: a row pair's per-row float in the lanes of its 2 x 2 blocks.
SMOL_INLINE_INTO_SET inline float32x4_t row_pair_lanes(float x0, float x1) {
    return vcombine_f32(vdup_n_f32(x0), vdup_n_f32(x1));
}
// [x0, x1, x0, x1]: a column pair's per-column float in the lanes of its 2 x 2 blocks.
SMOL_INLINE_INTO_SET inline float32x4_t column_pair_lanes(float x0, float x1) {
    const float32x2_t pair = vset_lane_f32(x1, vdup_n_f32(x0), 1);
    return vcombine_f32(pair, pair);
}

// [sum of a's lanes, of b's, of c's, of d's].
SMOL_INLINE_INTO_SET inline int32x4_t lane_sums(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

// Where a block's columns come from: a tile's kTileCols Q8_K blocks, one per column. It gives,
// for column pair cp: the two smmla operands of 16 activation bytes, its scales as
// [d0, d1, d0, d1], and a Q4_K row pair's 2 x 2 block of mins (lane (r, c): sum_j min_r[j] *
// (bsums_c[2j] + bsums_c[2j + 1]), the reference's `mins`).
struct ColumnBlocks {
    static constexpr int kPairs = kColPairs;
    const BlockQ8K* a[kTileCols];

    SMOL_INLINE_INTO_SET ColumnPairPieces pieces(int cp, int offset) const {
        return ColumnPairPieces(*a[2 * cp], *a[2 * cp + 1], offset);
    }
    SMOL_INLINE_INTO_SET float32x4_t scales(int cp) const { return column_pair_lanes(a[2 * cp]->d, a[2 * cp + 1]->d); }
    // mins0, mins1: the rows' 8 mins.
    SMOL_INLINE_INTO_SET void q4k_mins(const std::uint8_t* mins0, const std::uint8_t* mins1,
                                       int32x4_t (&out)[kPairs]) const {
        const int16x8_t mins[2] = {vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mins0))),
                                   vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mins1)))};
        SMOL_UNROLL
        for (int cp = 0; cp < kPairs; ++cp) {
            // A column's bsums added in pairs: its sums over sub-blocks of 32 (each fits an i16).
            int16x8_t bsums[2];
            SMOL_UNROLL
            for (int c = 0; c < 2; ++c) {
                const std::int16_t* column = a[2 * cp + c]->bsums;
                bsums[c] = vpaddq_s16(vld1q_s16(column), vld1q_s16(column + 8));
            }
            int32x4_t products[2][2];
            SMOL_UNROLL
            for (int r = 0; r < 2; ++r)
                SMOL_UNROLL
                for (int c = 0; c < 2; ++c)
                    products[r][c] =
                        vmlal_high_s16(vmull_s16(vget_low_s16(mins[r]), vget_low_s16(bsums[c])), mins[r], bsums[c]);
            out[cp] = lane_sums(products[0][0], products[0][1], products[1][0], products[1][1]);
        }
    }
};

// The blocks carry the i8mm target themselves (GCC inlines vmmlaq_s32 only into a function whose
// target has i8mm), and the entry points below inline them with the rest of their call tree.

// One Q4_K block of kTileRows rows (w[r]) against a block of columns, into sums [row pair][column
// pair]: per chunk of 64 weights (sub-blocks 2c and 2c + 1: the low and the high nibbles of 32
// quant bytes), each row pair's quant bytes interleaved and unpacked once, then multiplied with
// every column pair's activations.
template <class Columns>
SMOL_TARGET_I8MM inline void q4k_block(const BlockQ4K* const (&w)[kTileRows], const Columns& columns,
                                       float32x4_t (&sums)[kRowPairs][Columns::kPairs]) {
    constexpr int pairs = Columns::kPairs;
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    std::uint8_t scales_mins[kTileRows][16];  // [row]: 8 scales, 8 mins
    int32x4_t scales[kRowPairs][8];           // [row pair][sub-block]
    SMOL_UNROLL
    for (int rp = 0; rp < kRowPairs; ++rp) {
        SMOL_UNROLL
        for (int r = 2 * rp; r < 2 * rp + 2; ++r) q4k_unpack_scales_mins(w[r]->scales, scales_mins[r]);
        // The scales are below 64, so their bytes read as signed are the same numbers.
        const int8x16_t s0 = vreinterpretq_s8_u8(vld1q_u8(scales_mins[2 * rp]));
        const int8x16_t s1 = vreinterpretq_s8_u8(vld1q_u8(scales_mins[2 * rp + 1]));
        int32x4_t four[4];
        row_pair_scales<1>(s0, s1, 0, four);
        SMOL_UNROLL
        for (int j = 0; j < 4; ++j) scales[rp][j] = four[j];
        row_pair_scales<1>(s0, s1, 4, four);
        SMOL_UNROLL
        for (int j = 0; j < 4; ++j) scales[rp][4 + j] = four[j];
    }
    int32x4_t dots[kRowPairs][pairs];
    for (auto& row : dots)
        for (int32x4_t& d : row) d = vdupq_n_s32(0);
    SMOL_UNROLL
    for (int chunk = 0; chunk < 4; ++chunk) {
        // [row pair][piece]: pieces 0-3 are weights 0-7, 8-15, 16-23, 24-31 of sub-block 2c,
        // pieces 4-7 the same of sub-block 2c + 1.
        int8x16_t quants[kRowPairs][8];
        SMOL_UNROLL
        for (int rp = 0; rp < kRowPairs; ++rp) {
            const std::uint8_t* q0 = w[2 * rp]->qs + 32 * chunk;
            const std::uint8_t* q1 = w[2 * rp + 1]->qs + 32 * chunk;
            SMOL_UNROLL
            for (int half = 0; half < 2; ++half) {
                uint8x16_t first, last;
                interleave(q0 + 16 * half, q1 + 16 * half, first, last);
                quants[rp][2 * half] = vreinterpretq_s8_u8(vandq_u8(first, low4));
                quants[rp][2 * half + 1] = vreinterpretq_s8_u8(vandq_u8(last, low4));
                quants[rp][4 + 2 * half] = vreinterpretq_s8_u8(vshrq_n_u8(first, 4));
                quants[rp][4 + 2 * half + 1] = vreinterpretq_s8_u8(vshrq_n_u8(last, 4));
            }
        }
        for (int cp = 0; cp < pairs; ++cp)
            SMOL_UNROLL
            for (int sub = 0; sub < 2; ++sub) {  // sub-block 2c + sub: activations 64c + 32 sub + 0..31
                const int offset = 64 * chunk + 32 * sub;
                const ColumnPairPieces a0 = columns.pieces(cp, offset), a1 = columns.pieces(cp, offset + 16);
                SMOL_UNROLL
                for (int rp = 0; rp < kRowPairs; ++rp) {
                    const int8x16_t* q = quants[rp] + 4 * sub;
                    int32x4_t products = vmmlaq_s32(vdupq_n_s32(0), q[0], a0.first);
                    products = vmmlaq_s32(products, q[1], a0.last);
                    products = vmmlaq_s32(products, q[2], a1.first);
                    products = vmmlaq_s32(products, q[3], a1.last);
                    dots[rp][cp] = vmlaq_s32(dots[rp][cp], products, scales[rp][2 * chunk + sub]);
                }
            }
    }
    SMOL_UNROLL
    for (int rp = 0; rp < kRowPairs; ++rp) {
        int32x4_t mins[pairs];
        columns.q4k_mins(scales_mins[2 * rp] + 8, scales_mins[2 * rp + 1] + 8, mins);
        const float32x4_t d = row_pair_lanes(fp16_to_f32(w[2 * rp]->d), fp16_to_f32(w[2 * rp + 1]->d));
        const float32x4_t dmin = row_pair_lanes(fp16_to_f32(w[2 * rp]->dmin), fp16_to_f32(w[2 * rp + 1]->dmin));
        for (int cp = 0; cp < pairs; ++cp) {
            const float32x4_t ad = columns.scales(cp);
            // q4k_accumulate_block: fma(d * ad, dot, sum), then fma(-(dmin * ad), mins, sum).
            const float32x4_t sum = vfmaq_f32(sums[rp][cp], vmulq_f32(d, ad), vcvtq_f32_s32(dots[rp][cp]));
            sums[rp][cp] = vfmaq_f32(sum, vnegq_f32(vmulq_f32(dmin, ad)), vcvtq_f32_s32(mins[cp]));
        }
    }
}

// One Q6_K block of kTileRows rows against a block of columns, as q4k_block: per piece
// (kernels_neon.hpp's Q6KPiece: 16 bytes of each quant run, four sub-blocks of 16), each row
// pair's bytes interleaved and unpacked once, then multiplied with every column pair's.
template <class Columns>
SMOL_TARGET_I8MM inline void q6k_block(const BlockQ6K* const (&w)[kTileRows], const Columns& columns,
                                       float32x4_t (&sums)[kRowPairs][Columns::kPairs]) {
    using kernels_neon::detail::Q6KPiece;
    constexpr int pairs = Columns::kPairs;
    int32x4_t dots[kRowPairs][pairs];
    for (auto& row : dots)
        for (int32x4_t& d : row) d = vdupq_n_s32(0);
    SMOL_UNROLL
    for (int half = 0; half < 2; ++half)
        SMOL_UNROLL
        for (int part = 0; part < 2; ++part) {
            const Q6KPiece piece = Q6KPiece::at(half, part);
            // [row pair][k]: sub-block piece.first_sub_block + 2k, its first and last 8 weights
            // of each row; scales [row pair][k] the same sub-blocks'.
            int8x16_t first[kRowPairs][4], last[kRowPairs][4];
            int32x4_t scales[kRowPairs][4];
            SMOL_UNROLL
            for (int rp = 0; rp < kRowPairs; ++rp) {
                const BlockQ6K& w0 = *w[2 * rp];
                const BlockQ6K& w1 = *w[2 * rp + 1];
                uint8x16_t l0f, l0l, l1f, l1l, hf, hl;
                interleave(w0.ql + piece.ql0, w1.ql + piece.ql0, l0f, l0l);
                interleave(w0.ql + piece.ql1, w1.ql + piece.ql1, l1f, l1l);
                interleave(w0.qh + piece.qh, w1.qh + piece.qh, hf, hl);
                kernels_neon::detail::q6k_unpack_quarters(l0f, l1f, hf, first[rp]);
                kernels_neon::detail::q6k_unpack_quarters(l0l, l1l, hl, last[rp]);
                row_pair_scales<2>(vld1q_s8(w0.scales), vld1q_s8(w1.scales), piece.first_sub_block, scales[rp]);
            }
            for (int cp = 0; cp < pairs; ++cp)
                SMOL_UNROLL
                for (int k = 0; k < 4; ++k) {
                    const ColumnPairPieces act = columns.pieces(cp, 16 * (piece.first_sub_block + 2 * k));
                    SMOL_UNROLL
                    for (int rp = 0; rp < kRowPairs; ++rp) {
                        const int32x4_t products =
                            vmmlaq_s32(vmmlaq_s32(vdupq_n_s32(0), first[rp][k], act.first), last[rp][k], act.last);
                        dots[rp][cp] = vmlaq_s32(dots[rp][cp], products, scales[rp][k]);
                    }
                }
        }
    SMOL_UNROLL
    for (int rp = 0; rp < kRowPairs; ++rp) {
        const float32x4_t d = row_pair_lanes(fp16_to_f32(w[2 * rp]->d), fp16_to_f32(w[2 * rp + 1]->d));
        // q6k_accumulate_block: fma(d * ad, dot, sum).
        for (int cp = 0; cp < pairs; ++cp)
            sums[rp][cp] = vfmaq_f32(sums[rp][cp], vmulq_f32(d, columns.scales(cp)), vcvtq_f32_s32(dots[rp][cp]));
    }
}

// Writes the 2 x 2 float blocks ([row pair][column pair]) of n_rows x n_cols results:
// out[c * out_stride + r], as kernel_api.hpp's store_tile.
template <int Pairs>
SMOL_INLINE_INTO_SET inline void store_pairs(const float32x4_t (&sums)[kRowPairs][Pairs], int n_rows, int n_cols,
                                             float* out, std::size_t out_stride) {
    SMOL_UNROLL
    for (int rp = 0; rp < kRowPairs; ++rp)
        SMOL_UNROLL
        for (int cp = 0; cp < Pairs; ++cp) {
            float lanes[4];
            vst1q_f32(lanes, sums[rp][cp]);
            SMOL_UNROLL
            for (int i = 0; i < 4; ++i) {
                const int r = 2 * rp + i / 2, c = 2 * cp + i % 2;
                if (r < n_rows && c < n_cols) out[std::size_t(c) * out_stride + std::size_t(r)] = lanes[i];
            }
        }
}

template <int Pairs>
SMOL_INLINE_INTO_SET inline void zero(float32x4_t (&sums)[kRowPairs][Pairs]) {
    for (auto& row : sums)
        for (float32x4_t& s : row) s = vdupq_n_f32(0.0f);
}

// A tile (DotTileFn) over Q8_K columns: kTileRows x kTileCols results per block walk, the
// missing rows and columns repeating the last.
template <class Weight, void (*Block)(const Weight* const (&)[kTileRows], const ColumnBlocks&,
                                      float32x4_t (&)[kRowPairs][kColPairs])>
SMOL_INLINE_INTO_SET inline void tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                      const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                      std::size_t out_stride) {
    const kernel_detail::TileOperands<Weight, BlockQ8K, kTileCols> ops(weights, row_bytes, n_rows, acts, act_stride,
                                                                       n_cols);
    float32x4_t sums[kRowPairs][kColPairs];
    zero(sums);
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const Weight* w[kTileRows];
        for (int r = 0; r < kTileRows; ++r) w[r] = ops.w[r] + b;
        ColumnBlocks columns;
        for (int c = 0; c < kTileCols; ++c) columns.a[c] = ops.a[c] + b;
        Block(w, columns, sums);
    }
    store_pairs(sums, n_rows, n_cols, out, out_stride);
}

}  // namespace detail

// The prompt tiles, whose `flatten` inlines the whole call tree into a function with the target
// smmla needs.
SMOL_TARGET_I8MM __attribute__((flatten)) inline void q4k_q8k_pairs(std::int64_t n, const std::uint8_t* weights,
                                                                   std::size_t row_bytes, int n_rows,
                                                                   const std::uint8_t* acts, std::size_t act_stride,
                                                                   int n_cols, float* out, std::size_t out_stride) {
    detail::tile<BlockQ4K, detail::q4k_block<detail::ColumnBlocks>>(n, weights, row_bytes, n_rows, acts, act_stride,
                                                                   n_cols, out, out_stride);
}
SMOL_TARGET_I8MM __attribute__((flatten)) inline void q6k_q8k_pairs(std::int64_t n, const std::uint8_t* weights,
                                                                   std::size_t row_bytes, int n_rows,
                                                                   const std::uint8_t* acts, std::size_t act_stride,
                                                                   int n_cols, float* out, std::size_t out_stride) {
    detail::tile<BlockQ6K, detail::q6k_block<detail::ColumnBlocks>>(n, weights, row_bytes, n_rows, acts, act_stride,
                                                                   n_cols, out, out_stride);
}
// The i8mm set's tiles: one column through the dotprod set's decode tile, more through smmla.
inline void q4k_q8k_i8mm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                         const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                         std::size_t out_stride) {
    kernel_detail::by_columns<kernels_neon::q4k_q8k_dotprod_decode, q4k_q8k_pairs>(
        n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}
inline void q6k_q8k_i8mm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                         const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                         std::size_t out_stride) {
    kernel_detail::by_columns<kernels_neon::q6k_q8k_dotprod_decode, q6k_q8k_pairs>(
        n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}

}  // namespace smol::kernels_i8mm

#endif  // SMOL_HAVE_I8MM_KERNELS
