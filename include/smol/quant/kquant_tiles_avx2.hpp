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

// Calls f(std::integral_constant<int, k>{}) for k = 0 .. N - 1: loops over a block's chunks whose
// shifts must be compile-time constants.
template <int N, class F>
inline void for_each_constant(F f) {
    [&]<int... k>(std::integer_sequence<int, k...>) { (f(std::integral_constant<int, k>{}), ...); }(
        std::make_integer_sequence<int, N>{});
}

// ---------------------------------------------------------------------------------------------
// Q5_K x Q8_K: Q4_K's block with a fifth bit per weight. Its first 16 bytes (d, dmin, the 12
// scale bytes) are laid out as Q4_K's, so q4k_unpack_header and q4k_min_dots serve unchanged;
// quants run 0..31.

// The 32 quants of sub-block j (0..7): the low (j even) or high nibbles of qs[32 (j / 2) ..] with
// bit j of the qh bytes (`high`) as their fifth bit.
template <int j>
inline __m256i q5k_sub_block_quants(const BlockQ5K& wb, __m256i high) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * (j / 2)));
    const __m256i nibbles = _mm256_and_si256(j % 2 == 0 ? bits : _mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0f));
    return _mm256_or_si256(nibbles, move_bit<j, 4>(high));
}

struct Q5KDecode {
    using Weight = BlockQ5K;
    using Sums = ScaleMinSums4;
    static Sums sums(const BlockQ5K& wb, const BlockQ8K& ab) {
        const __m128i unpacked = avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb)));
        const __m256i scales = _mm256_broadcastsi128_si256(unpacked);  // 8 scales as u8 (bytes 0-7), both lanes
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh));
        __m256i dots = _mm256_setzero_si256();
        for_each_constant<8>([&]<int j>(std::integral_constant<int, j>) {
            const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 32 * j));
            const __m256i products = _mm256_maddubs_epi16(q5k_sub_block_quants<j>(wb, high), a);
            dots = _mm256_add_epi32(dots, _mm256_madd_epi16(products, _mm256_shuffle_epi8(scales, avx2::byte_to_words(j))));
        });
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
    for_each_constant<8>([&]<int k>(std::integral_constant<int, k> chunk) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 32 * k));
        const __m256i scales = _mm256_shuffle_epi8(halves[k / 4], avx2::q6k_scale_picker(k % 4));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(quants(chunk), a), scales));
    });
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

// Chunk k's unsigned quants: its two low bits and, from the hmask bytes (`high`), bit k as 4.
template <int k>
inline __m256i q3k_chunk_quants(const BlockQ3K& wb, __m256i high) {
    return _mm256_or_si256(low_bit_pairs<k>(wb.qs), move_bit<k, 2>(high));
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
        const __m256i dots = sixteen_scale_dots(
            ab, scales16, [&]<int k>(std::integral_constant<int, k>) { return q3k_chunk_quants<k>(wb, high); });
        return {_mm256_sub_epi32(dots, q3k_offset(scales16, avx2::q8k_bsums(ab)))};
    }
};

// Q2_K: unsigned 4-bit scales and mins, quants 0..3; the mins meet the bsums directly.

// The block's 16 scales (low nibbles) and 16 mins (high nibbles) as i16.
inline void q2k_scales_mins(const BlockQ2K& wb, __m256i& scales16, __m256i& mins16) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    scales16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, low4));
    mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
}

struct Q2KDecode {
    using Weight = BlockQ2K;
    using Sums = ScaleMinSums8;
    static Sums sums(const BlockQ2K& wb, const BlockQ8K& ab) {
        __m256i scales16, mins16;
        q2k_scales_mins(wb, scales16, mins16);
        const __m256i dots =
            sixteen_scale_dots(ab, scales16, [&]<int k>(std::integral_constant<int, k>) { return low_bit_pairs<k>(wb.qs); });
        return {dots, _mm256_madd_epi16(mins16, avx2::q8k_bsums(ab))};
    }
};

// ---------------------------------------------------------------------------------------------
// Prompt GEMMs on activations packed 16 tokens to a block, through kernels_avx2.hpp's
// kquant_gemm: each weight block is unpacked once (its quants as unsigned bytes in weight order,
// its sub-block scales as i16) and serves 8 tokens per vector; each token's lane ends a block
// with the exact integer totals and takes the reference's float step, so the results are the
// decode tiles' bits.

// sum_j factor_j * bsum_j over the 16 bsums of the 8 tokens of half h, as i32 per token: bsum
// pair p (sub-blocks of 16: 2p, 2p + 1) meets factors 2p and 2p + 1.
inline __m256i bsum_dots(const BlockQ8Kx16& ab, int h, const std::int16_t (&factors)[16]) {
    __m256i sum = _mm256_setzero_si256();
    for (int p = 0; p < 8; ++p)
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(ab.bsums[p][8 * h])),
                                                      avx2::word_pair(factors[2 * p], factors[2 * p + 1])));
    return sum;
}

// The float steps of one block for 16 tokens (acc[h]: half h's 8 tokens), as the reference's
// q4k_accumulate_block (with mins) and q6k_accumulate_block.
inline void accumulate_with_mins(float d, float dmin, const BlockQ8Kx16& ab, const __m256i (&dots)[2],
                                 const std::int16_t (&mins)[16], __m256 (&acc)[2]) {
    for (int h = 0; h < 2; ++h) {
        const __m256 ad = _mm256_load_ps(ab.d + 8 * h);
        acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(d), ad), _mm256_cvtepi32_ps(dots[h]), acc[h]);
        acc[h] = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dmin), ad), _mm256_cvtepi32_ps(bsum_dots(ab, h, mins)), acc[h]);
    }
}
inline void accumulate_scaled(float d, const BlockQ8Kx16& ab, const __m256i (&totals)[2], __m256 (&acc)[2]) {
    for (int h = 0; h < 2; ++h)
        acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(d), _mm256_load_ps(ab.d + 8 * h)), _mm256_cvtepi32_ps(totals[h]), acc[h]);
}

inline void q5k_gemm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                     const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    avx2::kquant_gemm<BlockQ5K>(n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride,
                                [](std::int64_t blocks, const BlockQ5K* const* w, const BlockQ8Kx16* a, __m256 (&acc)[kTileRows][2]) {
        const auto unpack = [](const BlockQ5K& wb, avx2::UnpackedQuants& u, std::int16_t* scales) {
            const __m128i sm = avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb)));
            _mm_store_si128(reinterpret_cast<__m128i*>(scales), _mm_cvtepu8_epi16(sm));  // the 8 scales
            const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh));
            for_each_constant<8>([&]<int j>(std::integral_constant<int, j>) {
                _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * j), q5k_sub_block_quants<j>(wb, high));
            });
        };
        const auto finish = [](const BlockQ5K& wb, const BlockQ8Kx16& ab, const __m256i (&dots)[2], __m256 (&acc)[2]) {
            std::uint8_t scales_mins[16];  // 8 scales, 8 mins
            q4k_unpack_scales_mins(wb.scales, scales_mins);
            std::int16_t mins[16];  // a min per sub-block of 32: both bsums of its pair
            for (int j = 0; j < 16; ++j) mins[j] = scales_mins[8 + j / 2];
            accumulate_with_mins(avx2::half_to_float(wb.d), avx2::half_to_float(wb.dmin), ab, dots, mins, acc);
        };
        avx2::kquant_gemm_group<BlockQ5K, 8>(blocks, w, a, unpack, finish, acc);
    });
}

inline void q3k_gemm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                     const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    avx2::kquant_gemm<BlockQ3K>(n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride,
                                [](std::int64_t blocks, const BlockQ3K* const* w, const BlockQ8Kx16* a, __m256 (&acc)[kTileRows][2]) {
        const auto unpack = [](const BlockQ3K& wb, avx2::UnpackedQuants& u, std::int16_t* scales) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(scales), _mm256_cvtepi8_epi16(q3k_scales(wb)));
            const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.hmask));
            for_each_constant<8>([&]<int k>(std::integral_constant<int, k>) {
                _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * k), q3k_chunk_quants<k>(wb, high));
            });
        };
        // The quants were used unsigned (q + 4): the offset is 4 * sum_j scale_j * bsum_j.
        const auto finish = [](const BlockQ3K& wb, const BlockQ8Kx16& ab, const __m256i (&dots)[2], __m256 (&acc)[2]) {
            std::int8_t scale_bytes[16];
            q3k_unpack_scales(wb.scales, scale_bytes);
            std::int16_t scales[16];
            for (int j = 0; j < 16; ++j) scales[j] = scale_bytes[j];
            const __m256i totals[2] = {_mm256_sub_epi32(dots[0], _mm256_slli_epi32(bsum_dots(ab, 0, scales), 2)),
                                       _mm256_sub_epi32(dots[1], _mm256_slli_epi32(bsum_dots(ab, 1, scales), 2))};
            accumulate_scaled(avx2::half_to_float(wb.d), ab, totals, acc);
        };
        avx2::kquant_gemm_group<BlockQ3K, 16>(blocks, w, a, unpack, finish, acc);
    });
}

inline void q2k_gemm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                     const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    avx2::kquant_gemm<BlockQ2K>(n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride,
                                [](std::int64_t blocks, const BlockQ2K* const* w, const BlockQ8Kx16* a, __m256 (&acc)[kTileRows][2]) {
        const auto unpack = [](const BlockQ2K& wb, avx2::UnpackedQuants& u, std::int16_t* scales) {
            __m256i scales16, mins16;
            q2k_scales_mins(wb, scales16, mins16);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(scales), scales16);
            for_each_constant<8>([&]<int k>(std::integral_constant<int, k>) {
                _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * k), low_bit_pairs<k>(wb.qs));
            });
        };
        const auto finish = [](const BlockQ2K& wb, const BlockQ8Kx16& ab, const __m256i (&dots)[2], __m256 (&acc)[2]) {
            std::int16_t mins[16];
            for (int j = 0; j < 16; ++j) mins[j] = std::int16_t(wb.scales[j] >> 4);
            accumulate_with_mins(avx2::half_to_float(wb.d), avx2::half_to_float(wb.dmin), ab, dots, mins, acc);
        };
        avx2::kquant_gemm_group<BlockQ2K, 16>(blocks, w, a, unpack, finish, acc);
    });
}

}  // namespace kquant_detail

// Decode takes the column kernels, prompts the GEMMs; a tile of a few columns (smol's matmul
// never asks for one) goes column by column. All give the reference's bits.
inline constexpr DotTileFn q2k_q8k = kernel_detail::column_by_column<kquant_detail::kquant_column<kquant_detail::Q2KDecode>>;
inline constexpr DotTileFn q3k_q8k = kernel_detail::column_by_column<kquant_detail::kquant_column<kquant_detail::Q3KDecode>>;
inline constexpr DotTileFn q5k_q8k = kernel_detail::column_by_column<kquant_detail::kquant_column<kquant_detail::Q5KDecode>>;
inline constexpr GemmTileFn q2k_q8k_gemm = kquant_detail::q2k_gemm;
inline constexpr GemmTileFn q3k_q8k_gemm = kquant_detail::q3k_gemm;
inline constexpr GemmTileFn q5k_q8k_gemm = kquant_detail::q5k_gemm;

}  // namespace smol::kernels_avx2

#endif
