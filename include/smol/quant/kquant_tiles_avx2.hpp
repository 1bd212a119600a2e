#pragma once
// AVX2 tiles for the k-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K weights against Q8_K activations)
// and IQ4_XS (at the end), the set's entry points to the Q4_K and Q6_K row-group decode kernels
// (row_group_tiles.hpp), and the two drivers the AVX-512 and AVX-VNNI sets run too
// (kquant_tiles_avx512.hpp, kquant_tiles_avx_vnni.hpp): one for decode (a column), one for
// prompt GEMMs. A k-quant is written here as two small rows, a Decode kernel (its block's exact
// integer totals against one activation block) and a Gemm kernel (its block
// unpacked to unsigned quants plus the factors of its float step); adding one adds these, its
// AVX-512 Decode kernel and its row of type_table.hpp.
//
// The products are kernels_avx2.hpp's: maddubs (unsigned quants x i8 activations -> i16 pairs,
// never saturating here: at most 2 * 63 * 128) then madd with the sub-block scale, so every
// integer total is exact; signed quants (Q3_K, Q6_K) are used unsigned and their offset is taken
// out through the bsums. Then one float step per block, the reference's q4k_accumulate_block
// (with mins) or q6k_accumulate_block (without), so every kernel set gives the scalar
// reference's bits.

#include "smol/quant/kernels_avx2.hpp"
#include "smol/quant/legacy_tiles_avx2.hpp"  // IQ4_XS: IQ4_NL's table and wide products
#include "smol/quant/row_group_tiles.hpp"    // the Q4_K and Q6_K row-group decode kernels

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "smol/quant/blocks.hpp"
#include "smol/quant/dpbusd.hpp"
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
struct ScaleMinSums4 {  // Q4_K, Q5_K: q4k_min_dots' 4 lanes
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

// Decode (one activation column): the weights stream from DRAM once. A tile's rows are read one
// after the other, each whole, up to kDecodeChunk blocks at a time (kernels_avx2.hpp says why),
// so the weights arrive as one sequential stream; kernel.sums(weight block, activation block)
// gives a block's exact totals (Kernel::Sums: ScaleSums, or ScaleMinSums4/8 for types with
// mins) and the four rows' totals meet in one float step per block.
//
// The AVX-512 set runs this same driver with its own Decode kernels: its entry points carry the
// AVX-512 target and `flatten`, which inlines the driver and then their sums into them (see
// kquant_tiles_avx512.hpp). A Kernel is constructed once per call, for the constants it keeps.
template <class Kernel>
inline void kquant_column(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                          const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                          std::size_t out_stride) {
    using Weight = typename Kernel::Weight;
    const kernel_detail::TileOperands<Weight, BlockQ8K, 1> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    const Kernel kernel{};
    __m128 acc = _mm_setzero_ps();  // [row]
    const std::int64_t blocks = n / QK_K;
    for (std::int64_t b0 = 0; b0 < blocks; b0 += kDecodeChunk) {
        const int chunk = int(std::min<std::int64_t>(kDecodeChunk, blocks - b0));
        typename Kernel::Sums sums[kTileRows][kDecodeChunk];
        for (int r = 0; r < kTileRows; ++r)
            for (int i = 0; i < chunk; ++i) {
                const Weight& wb = t.w[r][b0 + i];
                prefetch_ahead(&wb, sizeof(Weight), ahead);
                sums[r][i] = kernel.sums(wb, t.a[0][b0 + i]);
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
// Q4_K's shape: 8 sub-blocks of 32, each with its own scale (and min). Q4_K and Q5_K.

// Sum over the 8 sub-blocks of scale_j * (u . a) for unsigned quants u, as 8 i32 partial sums.
// quants(std::integral_constant<int, j>) gives sub-block j's 32 quants; scales: the 8 scales as
// u8 (bytes 0-7) in both lanes.
template <class Quants>
inline __m256i eight_scale_dots(const BlockQ8K& ab, __m256i scales, Quants quants) {
    __m256i sum = _mm256_setzero_si256();
    for_each_constant<8>([&]<int j>(std::integral_constant<int, j> sub_block) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 32 * j));
        const __m256i products = _mm256_maddubs_epi16(quants(sub_block), a);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(products, _mm256_shuffle_epi8(scales, avx2::byte_to_words(j))));
    });
    return sum;
}

// Sub-block j's 4-bit quants: the low (j even) or high nibbles of qs[32 (j / 2) ..].
template <int j>
inline __m256i sub_block_nibbles(const std::uint8_t* qs) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (j / 2)));
    return _mm256_and_si256(j % 2 == 0 ? bits : _mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0f));
}

struct Q4KDecode {
    using Weight = BlockQ4K;
    using Sums = ScaleMinSums4;
    static Sums sums(const BlockQ4K& wb, const BlockQ8K& ab) {
        const __m128i unpacked = avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb)));  // [8 scales, 8 mins] u8
        const __m256i dots = eight_scale_dots(ab, _mm256_broadcastsi128_si256(unpacked),
                                              [&]<int j>(std::integral_constant<int, j>) { return sub_block_nibbles<j>(wb.qs); });
        return {dots, avx2::q4k_min_dots(unpacked, avx2::q8k_sub_block_sums(ab))};
    }
};

// Q5_K: Q4_K's block with a fifth bit per weight. Its first 16 bytes (d, dmin, the 12 scale
// bytes) are laid out as Q4_K's, so q4k_unpack_header and q4k_min_dots serve unchanged; quants
// run 0..31.

// The 32 quants of sub-block j (0..7): its nibbles with bit j of the qh bytes (`high`) as their
// fifth bit.
template <int j>
inline __m256i q5k_sub_block_quants(const BlockQ5K& wb, __m256i high) {
    return _mm256_or_si256(sub_block_nibbles<j>(wb.qs), move_bit<j, 4>(high));
}

struct Q5KDecode {
    using Weight = BlockQ5K;
    using Sums = ScaleMinSums4;
    static Sums sums(const BlockQ5K& wb, const BlockQ8K& ab) {
        const __m128i unpacked = avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb)));
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh));
        const __m256i dots = eight_scale_dots(ab, _mm256_broadcastsi128_si256(unpacked),
                                              [&]<int j>(std::integral_constant<int, j>) { return q5k_sub_block_quants<j>(wb, high); });
        return {dots, avx2::q4k_min_dots(unpacked, avx2::q8k_sub_block_sums(ab))};
    }
};

// ---------------------------------------------------------------------------------------------
// Q6_K's shape: 16 sub-blocks of 16, halves of 128 weights. Q6_K, Q3_K and Q2_K.

// Sum over the 16 sub-blocks of scale_j * (u . a) for unsigned quants u, as 8 i32 partial sums.
// quants(std::integral_constant<int, k>) gives chunk k's 32 quants (weights 32k..32k+31);
// scales16: the 16 scales as i16. Chunk k meets sub-block scales 2k and 2k + 1.
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

// Q6_K: quants used unsigned (0..63), the -32 offset taken out as 32 * sum_j scale_j * bsum_j.
// Chunk k's quants come from half k / 4's ql and qh bytes (kernels_avx2.hpp, q6k_chunk_quants).
struct Q6KDecode {
    using Weight = BlockQ6K;
    using Sums = ScaleSums;
    static Sums sums(const BlockQ6K& wb, const BlockQ8K& ab) {
        const __m256i scales16 = avx2::q6k_scales16(wb);
        const __m256i dots = sixteen_scale_dots(ab, scales16, [&]<int k>(std::integral_constant<int, k>) {
            constexpr int half = k / 4;
            const __m256i bits1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.ql + 64 * half));
            const __m256i bits2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.ql + 64 * half + 32));
            const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh + 32 * half));
            return avx2::q6k_chunk_quants<k % 4>(bits1, bits2, high);
        });
        return {_mm256_sub_epi32(dots, avx2::q6k_offset(scales16, avx2::q8k_bsums(ab)))};
    }
};

// Q3_K and Q2_K keep a quant's two low bits in qs: weight 32k + l (chunk k = 0..7) in bit pair
// 2 (k % 4) of qs[32 (k / 4) + l].

// Chunk k's two low bits of every weight (0..3).
template <int k>
inline __m256i low_bit_pairs(const std::uint8_t* qs) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (k / 4)));
    return _mm256_and_si256(_mm256_srli_epi16(bits, 2 * (k % 4)), _mm256_set1_epi8(0x03));
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
// Prompt GEMMs on activations packed 16 tokens to a block (packing.hpp). Each weight block is
// unpacked once, per row, by its type's Gemm kernel: its quants as unsigned bytes in weight
// order (UnpackedQuants) and the factors below. The drivers (kquant_gemm here, 8 tokens per
// vector; kquant_tiles_avx512.hpp's, 16) make each unpacked byte serve many tokens; each token's
// lane ends a block with the exact integer totals and takes the reference's float step, so the
// results are the decode tiles' bits.
//
// A Gemm kernel: Weight; kSubBlocks (8 of 32 weights or 16 of 16); kOffsetShift: 0 for the types
// with mins (dmin * min_j meets the bsums), else log2 of what the unsigned quants exceed the
// signed ones by (Q3_K: 4, Q6_K: 32), taken out as offset * sum_j scale_j * bsum_j (or, by the
// drivers that take it inside the runs, kOffsetInRuns below, through the lane sums); kMaxQuant,
// the largest unsigned quant (it bounds the i16 sums); and unpack(weight block, UnpackedQuants&,
// GemmFactors&).

struct GemmFactors {
    alignas(32) std::int16_t scales[16];  // [sub-block]: its scale (the first kSubBlocks)
    // [activation sum of kBsumWidth quants]: its sub-block's min, or scale; left unset by the types
    // that take their offset inside the runs (kOffsetInRuns: Q6_K, Q3_K), which no driver reads
    // them for
    std::int16_t bsum_factors[16];
    float d, dmin;                        // dmin: 0 for the types without mins
};

// Q4_K and Q5_K: 8 scales and mins of 6 bits, unpacked from the block's first 16 bytes.
inline void q4k_factors(const std::uint8_t* block, std::uint16_t d, std::uint16_t dmin, GemmFactors& f) {
    // 8 scales, then 8 mins: the mins are the factors of the sums of 32 (kBsumWidth)
    const __m128i unpacked = avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block)));
    _mm_store_si128(reinterpret_cast<__m128i*>(f.scales), _mm_cvtepu8_epi16(unpacked));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(f.bsum_factors), _mm_cvtepu8_epi16(_mm_srli_si128(unpacked, 8)));
    f.d = avx2::half_to_float(d);
    f.dmin = avx2::half_to_float(dmin);
}

// Reading rows from row groups (row_groups.hpp) as the GEMMs' unpacking reads them as stored: a
// Gemm kernel whose type has a row-group layout also has unpack_group(group block, first,
// UnpackedQuants[4], GemmFactors[4]), rows first..first + 3 (first: 0 or 4) unpacked to what
// unpack gives for each of those rows. Prompts then read the weights in the layout decode keeps
// (no rows restored into a buffer first), and the bits stay the same.

// The quant bytes of rows first..first + 3 from 8 consecutive groups (group k at groups + k *
// stride, each [8 rows][4 bytes]): rows[r] = row first + r's 32 bytes in group order, as its
// block holds them. A 4 x 4 transpose of 4-byte elements in each 128-bit lane (groups 0-3 in the
// low lane, 4-7 in the high).
inline void group_rows_x4(const std::uint8_t* groups, std::size_t stride, int first, __m256i (&rows)[kTileRows]) {
    const auto rows_of_group = [&](int k) {
        return _mm_loadu_si128(reinterpret_cast<const __m128i*>(groups + std::size_t(k) * stride + 4 * first));
    };
    const __m256i g04 = _mm256_set_m128i(rows_of_group(4), rows_of_group(0));
    const __m256i g15 = _mm256_set_m128i(rows_of_group(5), rows_of_group(1));
    const __m256i g26 = _mm256_set_m128i(rows_of_group(6), rows_of_group(2));
    const __m256i g37 = _mm256_set_m128i(rows_of_group(7), rows_of_group(3));
    const __m256i rows01_of_g01 = _mm256_unpacklo_epi32(g04, g15), rows23_of_g01 = _mm256_unpackhi_epi32(g04, g15);
    const __m256i rows01_of_g23 = _mm256_unpacklo_epi32(g26, g37), rows23_of_g23 = _mm256_unpackhi_epi32(g26, g37);
    rows[0] = _mm256_unpacklo_epi64(rows01_of_g01, rows01_of_g23);
    rows[1] = _mm256_unpackhi_epi64(rows01_of_g01, rows01_of_g23);
    rows[2] = _mm256_unpacklo_epi64(rows23_of_g01, rows23_of_g23);
    rows[3] = _mm256_unpackhi_epi64(rows23_of_g01, rows23_of_g23);
}

// Byte pairs stored [pair p][row][2] for 4 pairs (8 bytes a row) -> rows first..first + 3's 8
// bytes: row first + r in the low (r even) or high half of two_rows[r / 2].
inline void pairs_to_rows(const __m128i (&pairs)[4], int first, __m128i (&two_rows)[2]) {
    const __m128i pairs01 = first == 0 ? _mm_unpacklo_epi16(pairs[0], pairs[1]) : _mm_unpackhi_epi16(pairs[0], pairs[1]);
    const __m128i pairs23 = first == 0 ? _mm_unpacklo_epi16(pairs[2], pairs[3]) : _mm_unpackhi_epi16(pairs[2], pairs[3]);
    two_rows[0] = _mm_unpacklo_epi32(pairs01, pairs23);
    two_rows[1] = _mm_unpackhi_epi32(pairs01, pairs23);
}

// Row first + r's 8 bytes of pairs_to_rows' output, widened to words (signed or unsigned bytes)
// and stored at `to`.
template <bool kSigned>
inline void store_row_words(const __m128i (&two_rows)[2], int r, std::int16_t* to) {
    const __m128i row = r % 2 == 0 ? two_rows[r / 2] : _mm_srli_si128(two_rows[r / 2], 8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to), kSigned ? _mm_cvtepi8_epi16(row) : _mm_cvtepu8_epi16(row));
}

inline __m128i load_128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

struct Q4KGemm {
    using Weight = BlockQ4K;
    using Group = BlockQ4Kx8;
    static constexpr int kSubBlocks = 8, kOffsetShift = 0, kMaxQuant = 15, kBsumWidth = 32;
    static void unpack(const BlockQ4K& wb, avx2::UnpackedQuants& u, GemmFactors& f) {
        q4k_factors(reinterpret_cast<const std::uint8_t*>(&wb), wb.d, wb.dmin, f);
        avx2::q4k_unpack(wb, u);
    }
    static void unpack_group(const BlockQ4Kx8& g, int first, avx2::UnpackedQuants (&u)[kTileRows],
                             GemmFactors (&f)[kTileRows]) {
        const __m256i low4 = _mm256_set1_epi8(0x0f);
        SMOL_UNROLL
        for (int chunk = 0; chunk < 4; ++chunk) {  // as q4k_unpack: low nibbles, then high
            __m256i rows[kTileRows];
            group_rows_x4(g.qs[chunk][0][0], sizeof g.qs[chunk][0], first, rows);
            SMOL_UNROLL
            for (int r = 0; r < kTileRows; ++r) {
                _mm256_store_si256(reinterpret_cast<__m256i*>(u[r].q + 64 * chunk), _mm256_and_si256(rows[r], low4));
                _mm256_store_si256(reinterpret_cast<__m256i*>(u[r].q + 64 * chunk + 32),
                                   _mm256_and_si256(_mm256_srli_epi16(rows[r], 4), low4));
            }
        }
        group_factors(g, first, f);
    }
    // Rows first..first + 3's factors alone (AVX-512 reads the quants in place).
    static void group_factors(const BlockQ4Kx8& g, int first, GemmFactors (&f)[kTileRows]) {
        // Scales are stored [sub-block j][row]: bytes (j, row) paired by sub-block pair first.
        const __m128i pair_up = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
        __m128i scale_pairs[4], mins[4], scales_by_row[2], mins_by_row[2];
        SMOL_UNROLL
        for (int p = 0; p < 4; ++p) {
            scale_pairs[p] = _mm_shuffle_epi8(load_128(g.scales[2 * p]), pair_up);
            mins[p] = load_128(g.mins[p]);
        }
        pairs_to_rows(scale_pairs, first, scales_by_row);
        pairs_to_rows(mins, first, mins_by_row);
        SMOL_UNROLL
        for (int r = 0; r < kTileRows; ++r) {
            store_row_words<false>(scales_by_row, r, f[r].scales);
            store_row_words<false>(mins_by_row, r, f[r].bsum_factors);
            f[r].d = avx2::half_to_float(g.d[first + r]);
            f[r].dmin = avx2::half_to_float(g.dmin[first + r]);
        }
    }
};

struct Q5KGemm {
    using Weight = BlockQ5K;
    static constexpr int kSubBlocks = 8, kOffsetShift = 0, kMaxQuant = 31, kBsumWidth = 32;
    static void unpack(const BlockQ5K& wb, avx2::UnpackedQuants& u, GemmFactors& f) {
        q4k_factors(reinterpret_cast<const std::uint8_t*>(&wb), wb.d, wb.dmin, f);
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh));
        for_each_constant<8>([&]<int j>(std::integral_constant<int, j>) {
            _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * j), q5k_sub_block_quants<j>(wb, high));
        });
    }
};

struct Q6KGemm {  // quants used unsigned, 0..63
    using Weight = BlockQ6K;
    using Group = BlockQ6Kx8;
    static constexpr int kSubBlocks = 16, kOffsetShift = 5, kMaxQuant = 63, kBsumWidth = 16;
    static void unpack(const BlockQ6K& wb, avx2::UnpackedQuants& u, GemmFactors& f) {
        const __m256i scales16 = avx2::q6k_scales16(wb);
        _mm256_store_si256(reinterpret_cast<__m256i*>(f.scales), scales16);
        f.d = avx2::half_to_float(wb.d);
        f.dmin = 0.0f;
        avx2::q6k_unpack(wb, u);
    }
    static void unpack_group(const BlockQ6Kx8& g, int first, avx2::UnpackedQuants (&u)[kTileRows],
                             GemmFactors (&f)[kTileRows]) {
        SMOL_UNROLL
        for (int half = 0; half < 2; ++half) {  // as q6k_unpack, from the three parts of the groups
            __m256i ql_a[kTileRows], ql_b[kTileRows], qh[kTileRows];
            group_rows_x4(g.q[half][0][0][0], sizeof g.q[half][0], first, ql_a);
            group_rows_x4(g.q[half][0][1][0], sizeof g.q[half][0], first, ql_b);
            group_rows_x4(g.q[half][0][2][0], sizeof g.q[half][0], first, qh);
            SMOL_UNROLL
            for (int r = 0; r < kTileRows; ++r) {
                auto* out = reinterpret_cast<__m256i*>(u[r].q + 128 * half);
                _mm256_store_si256(out + 0, avx2::q6k_chunk_quants<0>(ql_a[r], ql_b[r], qh[r]));
                _mm256_store_si256(out + 1, avx2::q6k_chunk_quants<1>(ql_a[r], ql_b[r], qh[r]));
                _mm256_store_si256(out + 2, avx2::q6k_chunk_quants<2>(ql_a[r], ql_b[r], qh[r]));
                _mm256_store_si256(out + 3, avx2::q6k_chunk_quants<3>(ql_a[r], ql_b[r], qh[r]));
            }
        }
        // Scales are stored [sub-block pair p][row][2], signed: sub-blocks 0-7 and 8-15 by row.
        __m128i low_pairs[4], high_pairs[4], low_by_row[2], high_by_row[2];
        SMOL_UNROLL
        for (int p = 0; p < 4; ++p) {
            low_pairs[p] = load_128(g.scales[p]);
            high_pairs[p] = load_128(g.scales[4 + p]);
        }
        pairs_to_rows(low_pairs, first, low_by_row);
        pairs_to_rows(high_pairs, first, high_by_row);
        SMOL_UNROLL
        for (int r = 0; r < kTileRows; ++r) {
            store_row_words<true>(low_by_row, r, f[r].scales);
            store_row_words<true>(high_by_row, r, f[r].scales + 8);
            f[r].d = avx2::half_to_float(g.d[first + r]);
            f[r].dmin = 0.0f;
        }
    }
};

struct Q3KGemm {  // quants used unsigned, 0..7
    using Weight = BlockQ3K;
    static constexpr int kSubBlocks = 16, kOffsetShift = 2, kMaxQuant = 7, kBsumWidth = 16;
    static void unpack(const BlockQ3K& wb, avx2::UnpackedQuants& u, GemmFactors& f) {
        const __m256i scales16 = _mm256_cvtepi8_epi16(q3k_scales(wb));
        _mm256_store_si256(reinterpret_cast<__m256i*>(f.scales), scales16);
        f.d = avx2::half_to_float(wb.d);
        f.dmin = 0.0f;
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.hmask));
        for_each_constant<8>([&]<int k>(std::integral_constant<int, k>) {
            _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * k), q3k_chunk_quants<k>(wb, high));
        });
    }
};

struct Q2KGemm {
    using Weight = BlockQ2K;
    static constexpr int kSubBlocks = 16, kOffsetShift = 0, kMaxQuant = 3, kBsumWidth = 16;
    static void unpack(const BlockQ2K& wb, avx2::UnpackedQuants& u, GemmFactors& f) {
        __m256i scales16, mins16;
        q2k_scales_mins(wb, scales16, mins16);
        _mm256_store_si256(reinterpret_cast<__m256i*>(f.scales), scales16);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(f.bsum_factors), mins16);
        f.d = avx2::half_to_float(wb.d);
        f.dmin = avx2::half_to_float(wb.dmin);
        for_each_constant<8>([&]<int k>(std::integral_constant<int, k>) {
            _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * k), low_bit_pairs<k>(wb.qs));
        });
    }
};

// The types whose drivers take the offset inside the integer runs, from the lane sums, rather than
// in the float step from the bsums (MaddubsProducts below says how).
template <class Kernel>
inline constexpr bool kOffsetInRuns = Kernel::kOffsetShift > 0 && Kernel::kBsumWidth == 16;
// Sub-block j's lane sums for half h's 8 tokens: two words per token.
inline __m256i lane_sums16(const BlockQ8Kx16& a, int j, int h) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(a.lane_sums16[j][8 * h]));
}

// The activation sums a Gemm kernel's bsum_factors meet: sums of kBsumWidth quants (16: the
// bsums; 32: the types whose mins or offsets go by sub-blocks of 32), in pairs, two words per
// token. Pair p of token t: bsum_pair<Kernel>(a, p) + 2 t.
template <class Kernel>
inline constexpr int kBsumPairs = QK_K / Kernel::kBsumWidth / 2;
template <class Kernel>
inline const std::int16_t* bsum_pair(const BlockQ8Kx16& a, int p) {
    static_assert(Kernel::kBsumWidth == 16 || Kernel::kBsumWidth == 32);
    if constexpr (Kernel::kBsumWidth == 32) return a.sums32[p][0];
    else return a.bsums[p][0];
}

// sum_k factor_k * sum_k over the activation sums of the 8 tokens of half h, as i32 per token:
// sum pair p meets factor_pairs[p][r], row r's factors 2p and 2p + 1 as words.
using BsumFactorPairs = __m256i[8][kTileRows];  // [sum pair p][row]

// How many 128-bit halves a factor array's first Words words fill (callers size their arrays with
// it: returning std::array<__m256i> draws -Wignored-attributes).
template <int Words>
inline constexpr int kFilledHalves = (Words + 7) / 8;
// The 128-bit halves of a 16-word factor array that its first Words words fill, each in both
// lanes: what the in-lane shuffles below pick single factors from (only those halves are read,
// so words a type leaves unset are never loaded).
template <int Words>
inline void filled_halves(const std::int16_t (&words)[16], __m256i (&halves)[kFilledHalves<Words>]) {
    SMOL_UNROLL
    for (int k = 0; k < kFilledHalves<Words>; ++k) halves[k] = _mm256_broadcastsi128_si256(load_128(words + 8 * k));
}

// Row r's factor pairs, each in every lane of factor_pairs[p][r]: in-lane dword shuffles of the
// factors' two 128-bit halves (no trips through general registers).
template <class Kernel>
inline void bsum_factor_pair_vectors(const std::int16_t (&factors)[16], BsumFactorPairs& factor_pairs, int r) {
    __m256i halves[kFilledHalves<2 * kBsumPairs<Kernel>>];
    filled_halves<2 * kBsumPairs<Kernel>>(factors, halves);
    for_each_constant<kBsumPairs<Kernel>>([&]<int p>(std::integral_constant<int, p>) {
        factor_pairs[p][r] = _mm256_shuffle_epi32(halves[p / 4], (p % 4) * 0x55);
    });
}
template <class Kernel>
inline __m256i bsum_dots(const BlockQ8Kx16& ab, int h, const BsumFactorPairs& factor_pairs, int r) {
    __m256i sum = _mm256_setzero_si256();
    SMOL_UNROLL
    for (int p = 0; p < kBsumPairs<Kernel>; ++p)
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(
                                                          bsum_pair<Kernel>(ab, p) + 16 * h)),
                                                      factor_pairs[p][r]));
    return sum;
}

// The float step of one block for half h's 8 tokens (acc), as the reference's
// q4k_accumulate_block (with mins) or q6k_accumulate_block (the offset taken out first, unless
// the runs took it); factor_pairs, r: bsum_dots'.
template <class Kernel>
inline __m256 gemm_accumulate(const GemmFactors& f, const BlockQ8Kx16& ab, int h, __m256i dots,
                              const BsumFactorPairs& factor_pairs, int r, __m256 acc) {
    const __m256 ad = _mm256_load_ps(ab.d + 8 * h);
    if constexpr (kOffsetInRuns<Kernel>) {
        return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(f.d), ad), _mm256_cvtepi32_ps(dots), acc);
    }
    const __m256i bsum_term = bsum_dots<Kernel>(ab, h, factor_pairs, r);
    if constexpr (Kernel::kOffsetShift == 0) {
        acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(f.d), ad), _mm256_cvtepi32_ps(dots), acc);
        return _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_set1_ps(f.dmin), ad), _mm256_cvtepi32_ps(bsum_term), acc);
    } else {
        const __m256i total = _mm256_sub_epi32(dots, _mm256_slli_epi32(bsum_term, Kernel::kOffsetShift));
        return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(f.d), ad), _mm256_cvtepi32_ps(total), acc);
    }
}

// How a GEMM forms a sub-block's products and applies its scale: dots[r][i] += scale[r] * (row r's
// 4-byte groups first..first+Groups-1 . half h + i's 8 tokens' groups), exact, for the 4 rows and
// H halves (kHalvesAtOnce at most); scale[r] is row r's sub-block scale (each form's BlockScales
// says how it is read). Two forms, one driver (kquant_gemm).
//
// MaddubsProducts (AVX2): vpmaddubsw gives i16 pair sums, a run of them is added in i16 and one
// vpmaddwd per run applies the scale. A run is as many groups as a lane may sum in i16: a product
// pair is at most 2 * kMaxQuant * 128 in magnitude (Q8_K activations run -128..127), so the sum
// stays exact. Summing in i16 (vpaddw) and applying the scale once per run halves the multiplies of
// the plain maddubs + madd per group: Q4_K sums a whole sub-block of 32, Q5_K half of one.
// Every type's runs take both halves of a packed block at once: each broadcast weight group then
// meets 16 tokens, and the i32 totals that do not fit the registers live in memory. Since each
// run's last group meets the scale row by row (scaled_run), that pays for runs of 4 groups too
// (Q5_K, Q6_K, Q3_K, Q2_K; figures in docs/performance.md).
//
// The types with an offset and sub-blocks of 16 (Q6_K, Q3_K) take the offset inside the runs
// (kOffsetInRuns): a lane's run starts at minus 2^kOffsetShift times the sum of the activations it
// will meet (BlockQ8Kx16::lane_sums16), so it ends holding the signed quants' products. vpaddw
// wraps, so only that end value must fit an i16: at most 8 products of 2^kOffsetShift * 127 (the
// quantizer's activations run -127..127), 32512 for Q6_K. A Q6_K run is then a whole sub-block
// (4 groups, where its unsigned quants allowed 2) and the float step drops the bsum term: 1.25
// multiplies a group where there were 1.5 and 8 more a block.
template <class Kernel>  // a product's magnitude: unsigned quants against any byte, or signed ones against -127..127
inline constexpr int kLargestRunProduct = kOffsetInRuns<Kernel> ? (1 << Kernel::kOffsetShift) * 127 : Kernel::kMaxQuant * 128;
template <class Kernel>
inline constexpr int kGroupsPerWordSum = std::min(QK_K / 4 / Kernel::kSubBlocks, 32767 / (2 * kLargestRunProduct<Kernel>));

struct MaddubsProducts {
    static constexpr int kHalvesAtOnce = 2;
    // A block's sub-block scales are read where the runs meet them (avx2::RunScales), straight
    // from the rows' unpacked factors: nothing to prepare per block.
    template <int SubBlocks>
    struct BlockScales {
        const GemmFactors* factors = nullptr;
        void set(const GemmFactors (&f)[kTileRows]) { factors = f; }
        avx2::RunScales sub_block(int j) const {
            avx2::RunScales scales;
            SMOL_UNROLL
            for (int r = 0; r < kTileRows; ++r) scales.rows[r] = &factors[r].scales[j];
            return scales;
        }
    };
    template <class Kernel, int Groups, int H>
    __attribute__((always_inline)) static void add_sub_block(__m256i (&dots)[kTileRows][H],
                                                             const avx2::UnpackedQuants (&u)[kTileRows],
                                                             const BlockQ8Kx16& a, int h, int first,
                                                             const BlockScales<Kernel::kSubBlocks>& scales, int j) {
        const avx2::RunScales scale = scales.sub_block(j);
        constexpr int run = kGroupsPerWordSum<Kernel>;
        static_assert(run >= 1 && Groups % run == 0, "a sub-block splits into whole runs");
        if constexpr (kOffsetInRuns<Kernel>) {
            static_assert(run == Groups, "the offset is taken in one run per sub-block");
            __m256i run_starts[H];  // -2^shift * the lane sums of the half's tokens
            SMOL_UNROLL
            for (int i = 0; i < H; ++i)
                run_starts[i] = _mm256_sub_epi16(_mm256_setzero_si256(),
                                                 _mm256_slli_epi16(lane_sums16(a, first / Groups, h + i), Kernel::kOffsetShift));
            avx2::dot_group_run<run, 1, H>(dots, u, a, h, first, scale, run_starts);
        } else {
            avx2::dot_group_run<run, Groups / run, H>(dots, u, a, h, first, scale);
        }
    }
};

// DpbusdProducts (AVX-VNNI; AVX-512's VNNI runs it in tests; AVX2 runs it over MaddubsDot for
// IQ4_XS, whose quants pass MaddubsProducts' i16 bounds): one vpdpbusd per group and row adds
// the group's 4 products into i32 runs (a Q4_K sub-block at most 32 * 15 * 128), and one vpmulld
// per sub-block and row applies the scale: 1 instruction per group where vpmaddubsw + vpaddw took
// 2. Each row keeps two runs, its even and odd groups: vpdpbusd adds into its accumulator with a
// latency of 5 cycles on Golden Cove, so 4 chains would wait on it; 8 do not, and with the rows'
// block totals they hold 12 of the 16 registers.
template <class Dot>
struct DpbusdProducts {
    static constexpr int kHalvesAtOnce = 1;
    // A block's sub-block scales as i32 vectors, made once a block: read as vpmulld's memory operands.
    template <int SubBlocks>
    struct BlockScales {
        __m256i vectors[SubBlocks][kTileRows];
        void set(const GemmFactors (&f)[kTileRows]) {
            SMOL_UNROLL
            for (int j = 0; j < SubBlocks; ++j) {
                SMOL_UNROLL
                for (int r = 0; r < kTileRows; ++r) vectors[j][r] = _mm256_set1_epi32(f[r].scales[j]);
            }
        }
    };

    // runs[r][k % 2] += row r's group `first` . the tokens' group, for K groups from `first`.
    template <int K>
    __attribute__((always_inline)) static void group_runs(__m256i (&runs)[kTileRows][2],
                                                          const avx2::UnpackedQuants (&u)[kTileRows],
                                                          const BlockQ8Kx16& a, int h, int first) {
        if constexpr (K > 0) {
            const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(a.qs[first][8 * h]));
            SMOL_UNROLL
            for (int r = 0; r < kTileRows; ++r)
                runs[r][K % 2] = Dot::dpbusd(runs[r][K % 2], avx2::broadcast_group(u[r], first), x);
            group_runs<K - 1>(runs, u, a, h, first + 1);
        }
    }

    template <class Kernel, int Groups, int H>
    __attribute__((always_inline)) static void add_sub_block(__m256i (&dots)[kTileRows][H],
                                                             const avx2::UnpackedQuants (&u)[kTileRows],
                                                             const BlockQ8Kx16& a, int h, int first,
                                                             const BlockScales<Kernel::kSubBlocks>& scales, int j) {
        const __m256i (&scale)[kTileRows] = scales.vectors[j];
        static_assert(H == 1, "one half at a time: two would need 16 registers of runs");
        __m256i runs[kTileRows][2];  // [row][group parity] i32
        __m256i start = _mm256_setzero_si256();
        if constexpr (kOffsetInRuns<Kernel>)  // the offset in i32: each token's two lane sums times -2^shift
            start = _mm256_madd_epi16(lane_sums16(a, first / Groups, h), _mm256_set1_epi16(short(-(1 << Kernel::kOffsetShift))));
        SMOL_UNROLL
        for (int r = 0; r < kTileRows; ++r) {
            runs[r][0] = start;
            runs[r][1] = _mm256_setzero_si256();
        }
        group_runs<Groups>(runs, u, a, h, first);
        SMOL_UNROLL
        for (int r = 0; r < kTileRows; ++r)
            dots[r][0] =
                _mm256_add_epi32(dots[r][0], _mm256_mullo_epi32(_mm256_add_epi32(runs[r][0], runs[r][1]), scale[r]));
    }
};

// Where a GEMM's kTileRows rows come from, block by block: unpack(b, u, factors) unpacks block b
// of each. StoredRows: a tile's rows as stored (missing rows repeat the last); GroupRows: rows
// first..first + 3 of a row group.
template <class Kernel>
struct StoredRows {
    const typename Kernel::Weight* w[kTileRows];
    StoredRows(const std::uint8_t* weights, std::size_t row_bytes, int n_rows) {
        kernel_detail::tile_rows(weights, row_bytes, n_rows, w);
    }
    SMOL_INLINE_INTO_SET void unpack(std::int64_t b, avx2::UnpackedQuants (&u)[kTileRows],
                                     GemmFactors (&factors)[kTileRows]) const {
        SMOL_UNROLL
        for (int r = 0; r < kTileRows; ++r) Kernel::unpack(w[r][b], u[r], factors[r]);
    }
};
template <class Kernel>
struct GroupRows {
    const typename Kernel::Group* group;  // the group's first block
    int first;
    SMOL_INLINE_INTO_SET void unpack(std::int64_t b, avx2::UnpackedQuants (&u)[kTileRows],
                                     GemmFactors (&factors)[kTileRows]) const {
        prefetch(b);
        Kernel::unpack_group(group[b], first, u, factors);
    }
    // The group blocks ahead of block b into L2, by the call over the group's first rows only.
    SMOL_INLINE_INTO_SET void prefetch(std::int64_t b) const {
        if (first == 0) prefetch_ahead<PrefetchInto::l2>(&group[b], sizeof(group[b]), kPrefetchBytes);
    }
};

// The call's halves half..half+H-1 (8 tokens each, of one packed block `a`; H > 1 starts at an
// even half) against the 4 unpacked rows of block b: their exact totals (products, scales, bsum
// term) and the float step into acc[r][half + i] (the driver's [row][half] sums).
template <class Kernel, class Products, int H>
SMOL_INLINE_INTO_SET inline void halves_step(const avx2::UnpackedQuants (&u)[kTileRows],
                                             const GemmFactors (&factors)[kTileRows],
                                             const typename Products::template BlockScales<Kernel::kSubBlocks>& scales,
                                             const BsumFactorPairs& bsum_factor_pairs, const BlockQ8Kx16& a,
                                             float (&acc)[kTileRows][kGemmTokensAvx2 / 8][8], int half) {
    constexpr int groups_per_sub_block = QK_K / 4 / Kernel::kSubBlocks;
    const int h = half % 2;  // the half's place in its packed block
    __m256i dots[kTileRows][H];
    SMOL_UNROLL
    for (int r = 0; r < kTileRows; ++r) {
        SMOL_UNROLL
        for (int i = 0; i < H; ++i) dots[r][i] = _mm256_setzero_si256();
    }
    for (int j = 0; j < Kernel::kSubBlocks; ++j)
        Products::template add_sub_block<Kernel, groups_per_sub_block, H>(dots, u, a, h, groups_per_sub_block * j,
                                                                          scales, j);
    SMOL_UNROLL
    for (int r = 0; r < kTileRows; ++r) {
        SMOL_UNROLL
        for (int i = 0; i < H; ++i) {
            float* sums = acc[r][half + i];
            _mm256_store_ps(sums, gemm_accumulate<Kernel>(factors[r], a, h + i, dots[r][i], bsum_factor_pairs, r,
                                                          _mm256_load_ps(sums)));
        }
    }
}

// A call's tokens (up to kGemmTokensAvx2: groups of 16, two halves of 8 each) against the tile's
// rows: each weight block is unpacked once for all of them. Products::kHalvesAtOnce halves at a
// time keep their 4 rows' runs in registers (and one half its i32 block totals too); the float
// sums wait in memory. Products: one of the two forms above; Rows: StoredRows or GroupRows.
template <class Kernel, class Products, class Rows>
inline void kquant_gemm_rows(std::int64_t n, const Rows& rows, int n_rows, const BlockQ8Kx16* acts, int n_tokens,
                             float* out, std::size_t out_stride) {
    constexpr int R = kTileRows, SubBlocks = Kernel::kSubBlocks, H = Products::kHalvesAtOnce;
    constexpr int kMaxHalves = kGemmTokensAvx2 / 8;
    if (n_rows <= 0 || n_tokens <= 0) return;
    const std::int64_t blocks = n / QK_K;
    const int halves = (std::min(n_tokens, kGemmTokensAvx2) + 7) / 8;  // packed groups hold 16: a half past n_tokens is zero
    alignas(32) float acc[R][kMaxHalves][8] = {};  // [row][half]: 8 tokens' sums, a row's tokens in a run
    avx2::UnpackedQuants u[R];
    GemmFactors factors[R];
    typename Products::template BlockScales<SubBlocks> scales;
    BsumFactorPairs bsum_factor_pairs;  // the factors of bsum pairs, two words: read as vpmaddwd's memory operands
    for (std::int64_t b = 0; b < blocks; ++b) {
        rows.unpack(b, u, factors);
        scales.set(factors);
        if constexpr (!kOffsetInRuns<Kernel>) {
            SMOL_UNROLL
            for (int r = 0; r < R; ++r) bsum_factor_pair_vectors<Kernel>(factors[r].bsum_factors, bsum_factor_pairs, r);
        }
        int half = 0;
        for (; half + H <= halves; half += H)  // H halves start at an even half: they share a packed block
            halves_step<Kernel, Products, H>(u, factors, scales, bsum_factor_pairs, acts[(half / 2) * blocks + b],
                                             acc, half);
        if constexpr (H > 1) {
            if (half < halves)  // an odd last half (n_tokens % 16 in 1..8) alone, not with the zeros after it
                halves_step<Kernel, Products, 1>(u, factors, scales, bsum_factor_pairs,
                                                 acts[(half / 2) * blocks + b], acc, half);
        }
    }
    kernel_detail::store_token_major(&acc[0][0][0], kMaxHalves * 8, n_rows, std::min(n_tokens, kGemmTokensAvx2), out,
                                     out_stride);
}

// The two entry points: a GemmTileFn over rows as stored, a GroupGemmFn over a row group's rows.
template <class Kernel, class Products>
inline void kquant_gemm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                        const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    kquant_gemm_rows<Kernel, Products>(n, StoredRows<Kernel>(weights, row_bytes, n_rows), n_rows, acts, n_tokens, out,
                                       out_stride);
}
template <class Kernel, class Products>
inline void kquant_group_gemm(std::int64_t n, const std::uint8_t* group, int first_row, const BlockQ8Kx16* acts,
                              int n_tokens, float* out, std::size_t out_stride) {
    const GroupRows<Kernel> rows{reinterpret_cast<const typename Kernel::Group*>(group), first_row};
    kquant_gemm_rows<Kernel, Products>(n, rows, kTileRows, acts, n_tokens, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// IQ4_XS: 8 sub-blocks of 32 with signed scales (-32..31) and IQ4_NL's table values. Its values
// are used unsigned (table + 128, 1..241: legacy_tiles_avx2.hpp's kIq4nlShifted); the offset comes
// out once per block as 128 * sum_j scale_j * (bsum_2j + bsum_2j+1), exact, and the block takes
// Q6_K's float step (the reference's dot_iq4xs_q8k).

// Sub-block j's 32 unsigned values in weight order: the low nibbles of qs[16 j ..] are weights
// 0-15, their high nibbles weights 16-31, each looked up in the table (vpshufb).
SMOL_INLINE_INTO_SET inline __m256i iq4xs_sub_block_values(const BlockIQ4XS& wb, int j) {
    const __m256i table = _mm256_load_si256(reinterpret_cast<const __m256i*>(legacy::kIq4nlShifted.bytes));
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.qs + 16 * j));
    const __m256i nibbles = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(0x0f));
    return _mm256_shuffle_epi8(table, nibbles);
}

// Decode, through the instruction set's wide products (Ops::wide_dot: no i16 saturation for
// quants up to 255).
template <class Ops>
struct IQ4XSDecode {
    using Weight = BlockIQ4XS;
    using Sums = ScaleSums;
    SMOL_INLINE_INTO_SET static Sums sums(const BlockIQ4XS& wb, const BlockQ8K& ab) {
        std::int8_t scales[QK_K / 32];
        iq4xs_unpack_scales(wb, scales);
        __m256i dots = _mm256_setzero_si256();
        std::int32_t offset = 0;
        for (int j = 0; j < QK_K / 32; ++j) {
            const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 32 * j));
            const __m256i products = Ops::wide_dot(iq4xs_sub_block_values(wb, j), a);
            dots = _mm256_add_epi32(dots, _mm256_mullo_epi32(products, _mm256_set1_epi32(scales[j])));
            offset += std::int32_t(scales[j]) * (ab.bsums[2 * j] + ab.bsums[2 * j + 1]);
        }
        return {_mm256_sub_epi32(dots, _mm256_setr_epi32(128 * offset, 0, 0, 0, 0, 0, 0, 0))};
    }
};

// The prompt GEMMs' Gemm kernel (the k-quants' drivers above and kquant_tiles_avx512.hpp's):
// values 1..241 need products exact past 127, so the AVX2 set runs it with DpbusdProducts over
// MaddubsDot (dpbusd.hpp) rather than the i16 runs of MaddubsProducts, the AVX-VNNI and AVX-512
// sets with their vpdpbusd. Each sub-block's scale meets its sum of 32 (kBsumWidth).
struct IQ4XSGemm {
    using Weight = BlockIQ4XS;
    static constexpr int kSubBlocks = 8, kOffsetShift = 7, kMaxQuant = 241, kBsumWidth = 32;
    static void unpack(const BlockIQ4XS& wb, avx2::UnpackedQuants& u, GemmFactors& f) {
        std::int8_t scales[QK_K / 32];
        iq4xs_unpack_scales(wb, scales);
        for (int j = 0; j < QK_K / 32; ++j) {
            f.scales[j] = scales[j];
            f.bsum_factors[j] = scales[j];
            _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 32 * j), iq4xs_sub_block_values(wb, j));
        }
        f.d = avx2::half_to_float(wb.d);
        f.dmin = 0.0f;
    }
};

}  // namespace kquant_detail

// Decode takes the column kernels, prompts the GEMMs; a tile of a few columns (a batch of fewer
// than kMinGemmTokens tokens: a speculative verify step) goes column by column, each weight block
// unpacked once per column (a version sharing the unpacking gained nothing clear, so the simpler
// form stays). All give the reference's bits.
template <class Decode>
inline constexpr DotTileFn kquant_tile = kernel_detail::column_by_column<kquant_detail::kquant_column<Decode>>;
inline constexpr DotTileFn q2k_q8k = kquant_tile<kquant_detail::Q2KDecode>;
inline constexpr DotTileFn q3k_q8k = kquant_tile<kquant_detail::Q3KDecode>;
inline constexpr DotTileFn q4k_q8k = kquant_tile<kquant_detail::Q4KDecode>;
inline constexpr DotTileFn q5k_q8k = kquant_tile<kquant_detail::Q5KDecode>;
inline constexpr DotTileFn q6k_q8k = kquant_tile<kquant_detail::Q6KDecode>;
inline constexpr DotTileFn iq4xs_q8k = kquant_tile<kquant_detail::IQ4XSDecode<legacy::Avx2Ops>>;
template <class Gemm>
inline constexpr GemmTileFn maddubs_gemm = kquant_detail::kquant_gemm<Gemm, kquant_detail::MaddubsProducts>;
inline constexpr GemmTileFn q2k_q8k_gemm = maddubs_gemm<kquant_detail::Q2KGemm>;
inline constexpr GemmTileFn q3k_q8k_gemm = maddubs_gemm<kquant_detail::Q3KGemm>;
inline constexpr GemmTileFn q4k_q8k_gemm = maddubs_gemm<kquant_detail::Q4KGemm>;
inline constexpr GemmTileFn q5k_q8k_gemm = maddubs_gemm<kquant_detail::Q5KGemm>;
inline constexpr GemmTileFn q6k_q8k_gemm = maddubs_gemm<kquant_detail::Q6KGemm>;
inline constexpr GemmTileFn iq4xs_q8k_gemm =
    kquant_detail::kquant_gemm<kquant_detail::IQ4XSGemm, kquant_detail::DpbusdProducts<MaddubsDot>>;
inline constexpr GroupGemmFn q4k_x8_q8k_gemm =
    kquant_detail::kquant_group_gemm<kquant_detail::Q4KGemm, kquant_detail::MaddubsProducts>;
inline constexpr GroupGemmFn q6k_x8_q8k_gemm =
    kquant_detail::kquant_group_gemm<kquant_detail::Q6KGemm, kquant_detail::MaddubsProducts>;

// The row-group decode kernels (row_group_tiles.hpp) as GroupDotFns: all columns in one pass over
// the weights. Four columns spill a few of AVX2's 16 registers and still beat two passes of two,
// which read the weights from DRAM twice.
inline void q4k_x8_q8k(std::int64_t n, const std::uint8_t* group, const std::uint8_t* acts, std::size_t act_stride,
                       int n_cols, float* out, std::size_t out_stride) {
    row_group_tiles::by_column_count<row_group_tiles::Q4KColumns>(n, group, acts, act_stride, n_cols, out, out_stride);
}
inline void q6k_x8_q8k(std::int64_t n, const std::uint8_t* group, const std::uint8_t* acts, std::size_t act_stride,
                       int n_cols, float* out, std::size_t out_stride) {
    row_group_tiles::by_column_count<row_group_tiles::Q6KColumns>(n, group, acts, act_stride, n_cols, out, out_stride);
}

}  // namespace smol::kernels_avx2

#endif
