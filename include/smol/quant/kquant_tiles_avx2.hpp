#pragma once
// AVX2 tiles for the k-quants beside Q4_K and Q6_K: Q5_K, Q3_K and Q2_K weights against Q8_K
// activations. They are built the way kernels_avx2.hpp builds Q4_K and Q6_K, from its pieces:
// maddubs (unsigned quants x i8 activations -> i16 pairs, never saturating here: at most
// 2 * 31 * 128) then madd with the sub-block scale, so every integer total is exact; signed
// quants (Q3_K) are used unsigned and their offset is taken out through the bsums, as for Q6_K;
// one float step per block, q4k_accumulate (with mins) or q6k_accumulate (without), so every
// kernel set gives the scalar reference's bits.

#include "smol/quant/kernels_avx2.hpp"

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"

namespace smol::kernels_avx2 {

namespace kquant_detail {

namespace avx2 = detail;
using avx2::kDecodeChunk;

// Bit `from` of every byte moved to bit `to`, the other bits cleared. 16-bit shifts serve: the
// bits that cross into the neighbouring byte are the ones the mask drops.
template <int from, int to>
inline __m256i move_bit(__m256i v) {
    const __m256i mask = _mm256_set1_epi8(char(1 << to));
    if constexpr (from < to) return _mm256_and_si256(_mm256_slli_epi16(v, to - from), mask);
    else if constexpr (from > to) return _mm256_and_si256(_mm256_srli_epi16(v, from - to), mask);
    else return _mm256_and_si256(v, mask);
}

// A block's exact integer totals for one (row, column): 8 i32 partial sums of scale * dots and,
// for the types with mins, the partial sums of min * bsums (hsum_x4 reduces 4 or 8 lanes alike).
// (Plain structs: vector types lose their attributes as template arguments.)
struct ScaleSums {
    __m256i dots;
};
struct ScaleMinSums4 {  // Q5_K: q4k_min_dots' 4 lanes
    __m256i dots;
    __m128i mins;
};
struct ScaleMinSums8 {  // Q2_K: 8 lanes
    __m256i dots;
    __m256i mins;
};
template <class Sums>
concept WithMins = requires(const Sums& s) { s.mins; };

// [d] and [dmin] of four blocks whose fp16 d is followed by their fp16 dmin.
template <class Weight>
inline void d_dmin_x4(const Weight& b0, const Weight& b1, const Weight& b2, const Weight& b3, __m128& d, __m128& dmin) {
    static_assert(offsetof(Weight, dmin) == offsetof(Weight, d) + 2, "d and dmin are read as one 32-bit word");
    std::int32_t h[4];
    std::memcpy(&h[0], &b0.d, 4);
    std::memcpy(&h[1], &b1.d, 4);
    std::memcpy(&h[2], &b2.d, 4);
    std::memcpy(&h[3], &b3.d, 4);
    const __m256 both = _mm256_cvtph_ps(_mm_setr_epi32(h[0], h[1], h[2], h[3]));  // [d0 dmin0 d1 dmin1 | ...]
    const __m128 lo = _mm256_castps256_ps128(both), hi = _mm256_extractf128_ps(both, 1);
    d = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    dmin = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
}

// The float step of `count` blocks from block b0 for the four rows at once (acc lane r is row r),
// from their exact totals: the reference's q4k_accumulate_block for types with mins,
// q6k_accumulate_block for the others. Shared with the AVX-512 tiles.
template <class Weight, class Sums>
inline __m128 accumulate_run(__m128 acc, const Weight* const (&w)[kTileRows], const BlockQ8K* a, std::int64_t b0,
                             int count, const Sums (&sums)[kTileRows][kDecodeChunk]) {
    static_assert(kTileRows == 4, "the block totals are reduced four rows at a time");
    for (int i = 0; i < count; ++i) {
        const std::int64_t b = b0 + i;
        const __m128 ad = _mm_set1_ps(a[b].d);
        const __m128i dots = avx2::hsum_x4(sums[0][i].dots, sums[1][i].dots, sums[2][i].dots, sums[3][i].dots);
        if constexpr (WithMins<Sums>) {
            __m128 d, dmin;
            d_dmin_x4(w[0][b], w[1][b], w[2][b], w[3][b], d, dmin);
            acc = avx2::q4k_accumulate(acc, d, dmin, ad, dots,
                                       avx2::hsum_x4(sums[0][i].mins, sums[1][i].mins, sums[2][i].mins, sums[3][i].mins));
        } else {
            const __m128 d = _mm_cvtph_ps(_mm_setr_epi16(short(w[0][b].d), short(w[1][b].d), short(w[2][b].d),
                                                         short(w[3][b].d), 0, 0, 0, 0));
            acc = avx2::q6k_accumulate(acc, d, ad, dots);
        }
    }
    return acc;
}

// Decode (one activation column) as q4k_column and q6k_column do it: a tile's rows are read one
// after the other, each whole, up to kDecodeChunk blocks at a time, so the weights arrive as one
// sequential stream; Kernel::sums(weight block, activation block) gives a block's exact totals
// (Kernel::Sums: ScaleSums, or ScaleMinSums4/8 for types with mins) and the four rows' totals meet
// in one float step per block.
template <class Kernel>
inline void kquant_column(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                          const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                          std::size_t out_stride) {
    using Weight = typename Kernel::Weight;
    const kernel_detail::TileOperands<Weight, BlockQ8K, 1> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    __m128 acc = _mm_setzero_ps();  // [row]
    const std::int64_t blocks = n / QK_K;
    for (std::int64_t b0 = 0; b0 < blocks; b0 += kDecodeChunk) {
        const int chunk = int(std::min<std::int64_t>(kDecodeChunk, blocks - b0));
        typename Kernel::Sums sums[kTileRows][kDecodeChunk];
        for (int r = 0; r < kTileRows; ++r)
            for (int i = 0; i < chunk; ++i) {
                const Weight& wb = t.w[r][b0 + i];
                avx2::prefetch_ahead(&wb, sizeof(Weight), ahead);
                sums[r][i] = Kernel::sums(wb, t.a[0][b0 + i]);
            }
        acc = accumulate_run(acc, t.w, t.a[0], b0, chunk, sums);
    }
    avx2::store_column(acc, n_rows, n_cols, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// Q5_K x Q8_K: Q4_K's block with a fifth bit per weight. Its first 16 bytes (d, dmin, the 12
// scale bytes) are laid out as Q4_K's, so q4k_unpack_header and q4k_min_dots serve unchanged;
// quants run 0..31.

// Chunk c (64 weights, sub-blocks 2c and 2c + 1) of scale_j * (q . a), as 8 i32 partial sums.
// high: the block's 32 qh bytes; scales: its 8 scales as u8 (bytes 0-7) in both lanes.
template <int c>
inline __m256i q5k_chunk_dot(const BlockQ5K& wb, const BlockQ8K& ab, __m256i high, __m256i scales) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * c));
    const __m256i q_low = _mm256_or_si256(_mm256_and_si256(bits, low4), move_bit<2 * c, 4>(high));
    const __m256i q_high = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), low4), move_bit<2 * c + 1, 4>(high));
    const __m256i a_low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 64 * c));
    const __m256i a_high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 64 * c + 32));
    const __m256i low = _mm256_madd_epi16(_mm256_maddubs_epi16(q_low, a_low), _mm256_shuffle_epi8(scales, avx2::byte_to_words(2 * c)));
    const __m256i upper =
        _mm256_madd_epi16(_mm256_maddubs_epi16(q_high, a_high), _mm256_shuffle_epi8(scales, avx2::byte_to_words(2 * c + 1)));
    return _mm256_add_epi32(low, upper);
}

struct Q5KDecode {
    using Weight = BlockQ5K;
    using Sums = ScaleMinSums4;
    static Sums sums(const BlockQ5K& wb, const BlockQ8K& ab) {
        const __m128i unpacked = avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb)));
        const __m256i scales = _mm256_broadcastsi128_si256(unpacked);
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh));
        const __m256i dots = _mm256_add_epi32(
            _mm256_add_epi32(q5k_chunk_dot<0>(wb, ab, high, scales), q5k_chunk_dot<1>(wb, ab, high, scales)),
            _mm256_add_epi32(q5k_chunk_dot<2>(wb, ab, high, scales), q5k_chunk_dot<3>(wb, ab, high, scales)));
        return {dots, avx2::q4k_min_dots(unpacked, avx2::q8k_sub_block_sums(ab))};
    }
};

// ---------------------------------------------------------------------------------------------
// Q3_K and Q2_K x Q8_K: Q6_K's shape (16 sub-blocks of 16, halves of 128 weights). Both keep a
// quant's two low bits in qs: weight 32k + l (chunk k = 0..7) in bit pair 2 (k % 4) of
// qs[32 (k / 4) + l].

// Chunk k's two low bits of every weight (0..3).
template <int k>
inline __m256i low_bit_pairs(const std::uint8_t* qs) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (k / 4)));
    return _mm256_and_si256(_mm256_srli_epi16(bits, 2 * (k % 4)), _mm256_set1_epi8(0x03));
}

// Sum over the 16 sub-blocks of scale_j * (u . a) for unsigned quants u, as 8 i32 partial sums.
// quants(std::integral_constant<int, k>) gives chunk k's 32 quants; scales16: the 16 scales as
// i16. Chunk k meets sub-block scales 2k and 2k + 1 the way q6k_block_dot picks them.
template <class Quants>
inline __m256i sixteen_scale_dots(const BlockQ8K& ab, __m256i scales16, Quants quants) {
    const __m256i halves[2] = {_mm256_permute2x128_si256(scales16, scales16, 0x00),   // scales 0-7 twice
                               _mm256_permute2x128_si256(scales16, scales16, 0x11)};  // scales 8-15 twice
    __m256i sum = _mm256_setzero_si256();
    const auto chunk = [&]<int k>(std::integral_constant<int, k> index) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 32 * k));
        const __m256i scales = _mm256_shuffle_epi8(halves[k / 4], avx2::q6k_scale_picker(k % 4));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(quants(index), a), scales));
    };
    [&]<int... k>(std::integer_sequence<int, k...>) { (chunk(std::integral_constant<int, k>{}), ...); }(
        std::make_integer_sequence<int, 8>{});
    return sum;
}

// Q3_K: signed scales and quants -4..3, used unsigned as u = low two bits + 4 * third bit (0..7)
// = q + 4; the offset comes out once per block as 4 * sum_j scale_j * bsum_j.

// The block's 16 signed scales as i8, unpacked as q3k_unpack_scales() does: the 12 scale bytes are
// the top of a 16-byte load that ends with them (the 4 bytes before are qs, dropped).
inline __m128i q3k_scales(const BlockQ3K& wb) {
    const std::uint8_t* end = reinterpret_cast<const std::uint8_t*>(&wb) + offsetof(BlockQ3K, scales) + sizeof wb.scales;
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(end - 16));  // words: qs tail, a, b, top
    const __m128i a_b_a_b = _mm_shuffle_epi32(raw, _MM_SHUFFLE(2, 1, 2, 1));
    const __m128i top = _mm_shuffle_epi32(raw, _MM_SHUFFLE(3, 3, 3, 3));
    const __m128i low = _mm_and_si128(_mm_srlv_epi32(a_b_a_b, _mm_setr_epi32(0, 0, 4, 4)), _mm_set1_epi8(0x0f));
    const __m128i high = _mm_slli_epi32(_mm_and_si128(_mm_srlv_epi32(top, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(0x03)), 4);
    return _mm_sub_epi8(_mm_or_si128(low, high), _mm_set1_epi8(32));
}

// The offset the unsigned quants add: 4 * sum_j scale_j * bsum_j, as 8 i32 partial sums.
inline __m256i q3k_offset(__m256i scales16, __m256i bsums) {
    return _mm256_slli_epi32(_mm256_madd_epi16(scales16, bsums), 2);
}

struct Q3KDecode {
    using Weight = BlockQ3K;
    using Sums = ScaleSums;
    static Sums sums(const BlockQ3K& wb, const BlockQ8K& ab) {
        const __m256i scales16 = _mm256_cvtepi8_epi16(q3k_scales(wb));
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.hmask));
        const __m256i dots = sixteen_scale_dots(ab, scales16, [&]<int k>(std::integral_constant<int, k>) {
            return _mm256_or_si256(low_bit_pairs<k>(wb.qs), move_bit<k, 2>(high));  // chunk k's third bit: bit k
        });
        return {_mm256_sub_epi32(dots, q3k_offset(scales16, avx2::q8k_bsums(ab)))};
    }
};

// Q2_K: unsigned 4-bit scales and mins, quants 0..3; the mins meet the bsums directly.
struct Q2KDecode {
    using Weight = BlockQ2K;
    using Sums = ScaleMinSums8;
    static Sums sums(const BlockQ2K& wb, const BlockQ8K& ab) {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales));  // [j]: scale | min << 4
        const __m128i low4 = _mm_set1_epi8(0x0f);
        const __m256i scales16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, low4));
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
        const __m256i dots =
            sixteen_scale_dots(ab, scales16, [&]<int k>(std::integral_constant<int, k>) { return low_bit_pairs<k>(wb.qs); });
        return {dots, _mm256_madd_epi16(mins16, avx2::q8k_bsums(ab))};
    }
};

}  // namespace kquant_detail

// Decode kernels; a tile of a few columns (smol's matmul asks for one only where a type has no
// GEMM) takes them one at a time.
inline constexpr DotTileFn q2k_q8k = kernel_detail::column_by_column<kquant_detail::kquant_column<kquant_detail::Q2KDecode>>;
inline constexpr DotTileFn q3k_q8k = kernel_detail::column_by_column<kquant_detail::kquant_column<kquant_detail::Q3KDecode>>;
inline constexpr DotTileFn q5k_q8k = kernel_detail::column_by_column<kquant_detail::kquant_column<kquant_detail::Q5KDecode>>;

}  // namespace smol::kernels_avx2

#endif
