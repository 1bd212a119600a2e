#pragma once
// AVX2 tiles for the block-of-32 weight formats (Q4_0, ...) against Q8_0 activations, and the
// tile drivers that the AVX-512 set instantiates with its own block products
// (legacy_tiles_avx512.hpp). Every tile gives the reference's bits (reference.hpp,
// block32_accumulate): per block the exact integer dot, then the reference's float step.
//
// The quants are used unsigned (Q4_0's q, whose value is q - 8), so maddubs (u8 x i8) or
// vpdpbusd multiply them with the activation quants, and the offset comes out per block as
// offset * (sum of the activation block's quants), exact; those sums are formed once per tile
// and shared by its rows.

#include "smol/quant/kernels_avx2.hpp"  // its exact integer reductions and prefetch

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"

namespace smol::kernels_avx2 {

namespace legacy {

using detail::half_to_float;
using detail::hsum_x4;
using detail::prefetch_ahead;

// 32 nibbles in weight order, unsigned: byte l's low nibble is weight l, its high nibble weight
// l + 16 (Q4_0's layout).
inline __m256i nibbles(const std::uint8_t* qs) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bits, 4), bits), _mm256_set1_epi8(0x0f));
}

inline __m256i load_quants(const BlockQ8_0& a) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)); }

// The integer products of one instruction set: AVX2's maddubs then madd. 8 i32 partial sums of
// q . a for unsigned q <= 31: a maddubs pair is at most 2 * 31 * 128 in magnitude, no saturation.
struct Avx2Ops {
    static __m256i dot(__m256i q, __m256i a) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), _mm256_set1_epi16(1));
    }
};

// An activation block's quants summed, as 8 i32 partial sums.
inline __m256i act_sum_lanes(const BlockQ8_0& a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), load_quants(a)), _mm256_set1_epi16(1));
}

// The fp16 scales of block b of four rows, as floats.
template <class Block>
inline __m128 row_scales(const Block* const (&w)[kTileRows], std::int64_t b) {
    static_assert(kTileRows == 4, "four rows to the lanes of one float step");
    return _mm_cvtph_ps(_mm_setr_epi16(short(w[0][b].d), short(w[1][b].d), short(w[2][b].d), short(w[3][b].d), 0, 0, 0, 0));
}

// What a tile needs to know of one weight format.
//   Block:   its block struct;
//   kOffset: what its unsigned quants exceed the signed values by (value = q - kOffset);
//   quants:  its 32 unsigned quants in weight order, with the instruction set's ops.
struct Q4_0Kind {
    using Block = BlockQ4_0;
    static constexpr int kOffset = 8;
    template <class Ops>
    static __m256i quants(const Block& b) { return nibbles(b.qs); }
};

// Lanes r of the four vectors (row r's totals of four blocks) regrouped so that vector k holds
// block k's totals of the four rows.
inline void transpose4(__m128i& v0, __m128i& v1, __m128i& v2, __m128i& v3) {
    const __m128i t0 = _mm_unpacklo_epi32(v0, v1), t1 = _mm_unpacklo_epi32(v2, v3);
    const __m128i t2 = _mm_unpackhi_epi32(v0, v1), t3 = _mm_unpackhi_epi32(v2, v3);
    v0 = _mm_unpacklo_epi64(t0, t1);
    v1 = _mm_unpackhi_epi64(t0, t1);
    v2 = _mm_unpacklo_epi64(t2, t3);
    v3 = _mm_unpackhi_epi64(t2, t3);
}

// Total dots minus the offset: vector lanes are four blocks (decode) or four columns (prompts).
template <class Kind>
inline __m128i remove_offset(__m128i dots, __m128i act_sums) {
    static_assert(std::has_single_bit(unsigned(Kind::kOffset)), "the offset is applied as a shift");
    return _mm_sub_epi32(dots, _mm_slli_epi32(act_sums, std::countr_zero(unsigned(Kind::kOffset))));
}

// Decode reads a tile's rows one after the other, each whole up to this many blocks (9-11 KB of
// weights, as Q4_K's decode run), so the weights arrive as one sequential stream. Per row, four
// blocks' exact totals are reduced at once (hsum_x4); then the float steps run with the four
// rows in the lanes of one vector, block by block, as the reference orders them.
inline constexpr int kRunBlocks = 512;

template <class Kind, class Ops>
inline void column(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                   const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    using Block = typename Kind::Block;
    const kernel_detail::TileOperands<Block, BlockQ8_0, 1> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const BlockQ8_0* a = t.a[0];
    const std::size_t ahead = prefetch_distance(row_bytes);
    const std::int64_t blocks = n / QK8_0;
    __m128 acc = _mm_setzero_ps();  // [row]
    for (std::int64_t b0 = 0; b0 < blocks; b0 += kRunBlocks) {
        const int run = int(std::min<std::int64_t>(kRunBlocks, blocks - b0));
        const int groups = (run + 3) / 4;
        // The last group's blocks past the run repeat its last block; their totals go unread.
        const auto block = [b0, run](int i) { return b0 + std::min(i, run - 1); };
        alignas(16) std::int32_t act_sums[kRunBlocks];
        alignas(16) std::int32_t totals[kTileRows][kRunBlocks];  // [row][block]: exact integer dots
        for (int i = 0; i < 4 * groups; i += 4)
            _mm_store_si128(reinterpret_cast<__m128i*>(act_sums + i),
                            hsum_x4(act_sum_lanes(a[block(i)]), act_sum_lanes(a[block(i + 1)]),
                                    act_sum_lanes(a[block(i + 2)]), act_sum_lanes(a[block(i + 3)])));
        for (int r = 0; r < kTileRows; ++r) {
            const Block* w = t.w[r];
            for (int i = 0; i < 4 * groups; i += 4) {
                prefetch_ahead(w + b0 + i, 4 * sizeof(Block), ahead);
                __m256i dots[4];
                for (int k = 0; k < 4; ++k) {
                    const std::int64_t b = block(i + k);
                    dots[k] = Ops::dot(Kind::template quants<Ops>(w[b]), load_quants(a[b]));
                }
                const __m128i sums = _mm_load_si128(reinterpret_cast<const __m128i*>(act_sums + i));
                _mm_store_si128(reinterpret_cast<__m128i*>(totals[r] + i),
                                remove_offset<Kind>(hsum_x4(dots[0], dots[1], dots[2], dots[3]), sums));
            }
        }
        for (int i = 0; i < run; i += 4) {
            __m128i v[4];
            for (int r = 0; r < kTileRows; ++r) v[r] = _mm_load_si128(reinterpret_cast<const __m128i*>(totals[r] + i));
            transpose4(v[0], v[1], v[2], v[3]);  // v[k]: block i + k of every row
            for (int k = 0; k < 4 && i + k < run; ++k) {
                const std::int64_t b = b0 + i + k;
                const __m128 ad = _mm_set1_ps(half_to_float(a[b].d));
                acc = _mm_fmadd_ps(_mm_mul_ps(row_scales(t.w, b), ad), _mm_cvtepi32_ps(v[k]), acc);
            }
        }
    }
    detail::store_column(acc, n_rows, n_cols, out, out_stride);
}

// Prompt tiles: kTileCols columns, whose lanes carry one float step per row and block. Each
// weight block is unpacked once for the columns.
template <class Kind, class Ops>
inline void tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                 const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    using Block = typename Kind::Block;
    constexpr int C = kTileCols;
    static_assert(C == 4, "four columns to the lanes of one float step");
    const kernel_detail::TileOperands<Block, BlockQ8_0, C> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    __m128 acc[kTileRows];  // [row][column]
    for (int r = 0; r < kTileRows; ++r) acc[r] = _mm_setzero_ps();
    const std::int64_t blocks = n / QK8_0;
    for (std::int64_t b = 0; b < blocks; ++b) {
        __m256i x[C];
        for (int c = 0; c < C; ++c) x[c] = load_quants(t.a[c][b]);
        const __m128i act_sums = hsum_x4(act_sum_lanes(t.a[0][b]), act_sum_lanes(t.a[1][b]), act_sum_lanes(t.a[2][b]),
                                         act_sum_lanes(t.a[3][b]));
        const __m128 ad = _mm_cvtph_ps(_mm_setr_epi16(short(t.a[0][b].d), short(t.a[1][b].d), short(t.a[2][b].d),
                                                      short(t.a[3][b].d), 0, 0, 0, 0));
        for (int r = 0; r < kTileRows; ++r) {
            const Block& wb = t.w[r][b];
            prefetch_ahead(&wb, sizeof(Block), ahead);
            const __m256i q = Kind::template quants<Ops>(wb);
            const __m128i dots = remove_offset<Kind>(
                hsum_x4(Ops::dot(q, x[0]), Ops::dot(q, x[1]), Ops::dot(q, x[2]), Ops::dot(q, x[3])), act_sums);
            const __m128 d = _mm_set1_ps(half_to_float(wb.d));
            acc[r] = _mm_fmadd_ps(_mm_mul_ps(d, ad), _mm_cvtepi32_ps(dots), acc[r]);
        }
    }
    float result[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r) _mm_storeu_ps(result[r], acc[r]);
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

}  // namespace legacy

inline constexpr DotTileFn q4_0_q8_0 = kernel_detail::by_columns<legacy::column<legacy::Q4_0Kind, legacy::Avx2Ops>,
                                                                 legacy::tile<legacy::Q4_0Kind, legacy::Avx2Ops>>;

}  // namespace smol::kernels_avx2

#endif
