#pragma once
// The AArch64 kernel sets' tiles: neon (Armv8.0 Advanced SIMD, the baseline every AArch64 build is
// compiled for) and dotprod (Armv8.2 sdot, compiled per function with SMOL_TARGET_DOTPROD and run
// only after cpu_features() said the cores have it; dispatch.hpp guarantees that). Both compute
// each block's integer sums exactly, as reference.hpp's q4k_q8k_block_sums and q6k_q8k_block_sum
// define them, and take the same float step per block in block order (q4k_accumulate_block,
// q6k_accumulate_block), so every result has the reference's bits. The two sets differ only in
// how 16 byte products are summed into four i32 lanes (Armv8.0: widening multiplies and pairwise
// adds; Armv8.2: one sdot).

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_NEON_KERNELS

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/neon_dot.hpp"  // WideningDot, SdotDot, dot32, dot16
#include "smol/quant/reference.hpp"

namespace smol::kernels_neon {

namespace detail {

// reference.hpp's q4k_q8k_block_sums: per chunk of 64 weights the low nibbles of 32 quant bytes
// against the chunk's first 32 activations (sub-block 2c) and the high nibbles against the next
// 32 (sub-block 2c + 1), each sub-block sum times its 6-bit scale; the mins meet the bsums.
template <class Dot>
SMOL_INLINE_INTO_SET inline Q4KBlockSums q4k_block_sums(const BlockQ4K& w, const BlockQ8K& a) {
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    Q4KBlockSums sums{0, 0};
    for (int chunk = 0; chunk < 4; ++chunk) {
        const uint8x16_t bits0 = vld1q_u8(w.qs + 32 * chunk), bits1 = vld1q_u8(w.qs + 32 * chunk + 16);
        const int8x16_t lo0 = vreinterpretq_s8_u8(vandq_u8(bits0, low4)), lo1 = vreinterpretq_s8_u8(vandq_u8(bits1, low4));
        const int8x16_t hi0 = vreinterpretq_s8_u8(vshrq_n_u8(bits0, 4)), hi1 = vreinterpretq_s8_u8(vshrq_n_u8(bits1, 4));
        const std::int32_t lo = dot32<Dot>(lo0, lo1, a.qs + 64 * chunk);
        const std::int32_t hi = dot32<Dot>(hi0, hi1, a.qs + 64 * chunk + 32);
        std::uint8_t sc_lo, m_lo, sc_hi, m_hi;
        q4k_scale_min(2 * chunk, w.scales, sc_lo, m_lo);
        q4k_scale_min(2 * chunk + 1, w.scales, sc_hi, m_hi);
        sums.dot += std::int32_t(sc_lo) * lo + std::int32_t(sc_hi) * hi;
        sums.mins += std::int32_t(m_lo) * (a.bsums[4 * chunk] + a.bsums[4 * chunk + 1]) +
                     std::int32_t(m_hi) * (a.bsums[4 * chunk + 2] + a.bsums[4 * chunk + 3]);
    }
    return sums;
}

// reference.hpp's q6k_q8k_block_sum: the quants as q6k_unpack_quants gives them (6 bits less 32,
// so -32..31), each sub-block of 16 against its activations, times its signed scale. Half h holds
// weights 128h..128h+127: the low nibbles of ql[64h..64h+31] with qh[32h..32h+31]'s bit pairs 0-1
// (weights +0..31), of ql[64h+32..64h+63] with pairs 2-3 (+32..63), then the high nibbles of the
// same ql bytes with pairs 4-5 (+64..95) and 6-7 (+96..127).
template <class Dot>
SMOL_INLINE_INTO_SET inline std::int32_t q6k_block_sum(const BlockQ6K& w, const BlockQ8K& a) {
    const uint8x16_t low4 = vdupq_n_u8(0x0f), top2 = vdupq_n_u8(0x30), offset = vdupq_n_u8(32);
    std::int32_t total = 0;
    for (int half = 0; half < 2; ++half) {
        const std::uint8_t* ql = w.ql + 64 * half;
        const std::uint8_t* qh = w.qh + 32 * half;
        const std::int8_t* q8 = a.qs + 128 * half;
        const std::int8_t* scales = w.scales + 8 * half;
        for (int part = 0; part < 2; ++part) {  // bytes 16 * part .. 16 * part + 15 of each quarter
            const uint8x16_t l0 = vld1q_u8(ql + 16 * part), l1 = vld1q_u8(ql + 32 + 16 * part);
            const uint8x16_t h = vld1q_u8(qh + 16 * part);
            const uint8x16_t quarter[4] = {
                vorrq_u8(vandq_u8(l0, low4), vandq_u8(vshlq_n_u8(h, 4), top2)),
                vorrq_u8(vandq_u8(l1, low4), vandq_u8(vshlq_n_u8(h, 2), top2)),
                vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h, top2)),
                vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(h, 2), top2)),
            };
            for (int k = 0; k < 4; ++k) {
                // Weights 32k + 16 part .. + 15 of this half: sub-block 2k + part.
                const int8x16_t q = vreinterpretq_s8_u8(vsubq_u8(quarter[k], offset));
                total += std::int32_t(scales[2 * k + part]) * dot16<Dot>(q, q8 + 32 * k + 16 * part);
            }
        }
    }
    return total;
}

// One weight row against one activation column: reference.hpp's kquant_dot with these sums.
template <class Dot>
SMOL_INLINE_INTO_SET inline float q4k_row_dot(std::int64_t n, const BlockQ4K* w, const BlockQ8K* a) {
    float sum = 0.0f;
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const Q4KBlockSums s = q4k_block_sums<Dot>(w[b], a[b]);
        sum = q4k_accumulate_block(sum, fp16_to_f32(w[b].d), fp16_to_f32(w[b].dmin), a[b].d, s.dot, s.mins);
    }
    return sum;
}

template <class Dot>
SMOL_INLINE_INTO_SET inline float q6k_row_dot(std::int64_t n, const BlockQ6K* w, const BlockQ8K* a) {
    float sum = 0.0f;
    for (std::int64_t b = 0; b < n / QK_K; ++b)
        sum = q6k_accumulate_block(sum, fp16_to_f32(w[b].d), a[b].d, q6k_block_sum<Dot>(w[b], a[b]));
    return sum;
}

// A tile, one (row, column) pair at a time, as the scalar set runs it.
template <class Weight, float (*RowDot)(std::int64_t, const Weight*, const BlockQ8K*)>
SMOL_INLINE_INTO_SET inline void tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                      const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                      std::size_t out_stride) {
    for (int r = 0; r < n_rows; ++r) {
        const auto* w = reinterpret_cast<const Weight*>(weights + std::size_t(r) * row_bytes);
        for (int c = 0; c < n_cols; ++c)
            out[std::size_t(c) * out_stride + std::size_t(r)] =
                RowDot(n, w, reinterpret_cast<const BlockQ8K*>(acts + std::size_t(c) * act_stride));
    }
}

}  // namespace detail

// The neon set (Armv8.0).
inline void q4k_q8k(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                    const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    detail::tile<BlockQ4K, detail::q4k_row_dot<detail::WideningDot>>(n, weights, row_bytes, n_rows, acts, act_stride,
                                                                      n_cols, out, out_stride);
}
inline void q6k_q8k(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                    const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    detail::tile<BlockQ6K, detail::q6k_row_dot<detail::WideningDot>>(n, weights, row_bytes, n_rows, acts, act_stride,
                                                                      n_cols, out, out_stride);
}

#if SMOL_HAVE_DOTPROD_KERNELS
// The dotprod set (Armv8.2): `flatten` inlines the whole call tree, SdotDot::dot included, into
// these entry points, which carry the target that sdot needs.
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void q4k_q8k_dotprod(std::int64_t n, const std::uint8_t* weights,
                                                                        std::size_t row_bytes, int n_rows,
                                                                        const std::uint8_t* acts, std::size_t act_stride,
                                                                        int n_cols, float* out, std::size_t out_stride) {
    detail::tile<BlockQ4K, detail::q4k_row_dot<detail::SdotDot>>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols,
                                                                  out, out_stride);
}
SMOL_TARGET_DOTPROD __attribute__((flatten)) inline void q6k_q8k_dotprod(std::int64_t n, const std::uint8_t* weights,
                                                                        std::size_t row_bytes, int n_rows,
                                                                        const std::uint8_t* acts, std::size_t act_stride,
                                                                        int n_cols, float* out, std::size_t out_stride) {
    detail::tile<BlockQ6K, detail::q6k_row_dot<detail::SdotDot>>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols,
                                                                  out, out_stride);
}
#endif

}  // namespace smol::kernels_neon

#endif  // SMOL_HAVE_NEON_KERNELS
