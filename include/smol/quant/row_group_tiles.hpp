#pragma once
// Decode kernels over row groups (row_groups.hpp): one 32-byte load holds 4 packed quant bytes of
// each of 8 rows; its low nibbles are 4 weights of sub-block 2c, its high nibbles 4 weights of
// sub-block 2c + 1. One vpbroadcastd of the token's 4 matching activation bytes and one
// vpmaddubsw give every row's two i16 pair sums; a sub-block's 8 groups are added in i16 (exact:
// at most 8 * 2 * 15 * 128 = 30720), one vpmaddwd with the rows' scale words turns them into
// scale * products in each row's i32 lane. The mins meet the activation's sub-block sums the same
// way, and each row's lane takes the reference's float step (q4k_accumulate_block), so the bits
// are the reference's and the column kernels'.
//
// Written once with AVX2 intrinsics; this file holds the kernels only, each set's entry points
// (GroupDotFns) are in its kquant_tiles_* file (avx2, avx512, avx_vnni). The AVX-512 set (which
// requires VNNI) runs the VNNI form below, compiled for its target (EVEX encodings, 32
// registers) through an entry point with `flatten`: vpdpbusd takes a group's 4 products per row
// in one instruction. It matters when a step carries several tokens (speculative verification): with
// 2 to 4 tokens the VNNI form reads the weights faster than the vpmaddubsw form, and a 3B step of
// 4 tokens costs less against one. Two groups per zmm vpdpbusd (the activation bytes spread by
// vpermd or a masked broadcast) were slower. (Figures: docs/performance.md, "Design measurements
// behind the kernels".)
// The AVX-VNNI set runs the same VNNI form with VEX vpdpbusd (dpbusd.hpp) and AVX2's 16 registers;
// the tests run it with the instruction emulated in AVX2, on any CPU.
//
// For one token a group kernel reads the weights faster than the column kernel, from L2 and from
// DRAM, and two tokens per call cost from DRAM what one does.
//
// A thread reads its groups as one sequential stream, and an Intel Xeon core (Emerald Rapids)
// does not keep enough of one stream in flight by itself: there the kernels alone ran decode
// slower than the column kernels. Every line of a block is therefore prefetched kPrefetchBytes
// ahead into L2 (prefetch_to_l2_ahead), which brought the Xeon level with or ahead of the column
// kernels and helps on Zen 5 too. Into L1 (T0) it was slower on Zen 5; one prefetch per block
// instead of per line gained nothing on the Xeon. Q4_K asks for its quant lines between the
// loads, one per two groups: all 19 lines at the top of the block were slower on Zen 5 (same
// instructions, worse schedule), though not in Q6_K's kernel. (The Xeon ran the top-of-block
// form; both ask for the same lines.) Figures for all of this: docs/performance.md, "Design
// measurements behind the kernels".

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/quant/blocks.hpp"
#include "smol/quant/dpbusd.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/row_groups.hpp"

namespace smol::row_group_tiles {

// The vpmaddubsw kernels' groups are unrolled at compile time: as a loop, gcc tests `k == k0` on
// every trip of the 3- and 4-column kernels and copies their runs between registers, which the
// unrolled form avoids (it reads the weights faster).
#define SMOL_UNROLL_GROUPS _Pragma("GCC unroll 8")

// Asks for the `bytes` bytes kPrefetchBytes past `block` (kernel_api.hpp) into L2.
SMOL_INLINE_INTO_SET inline void prefetch_to_l2_ahead(const void* block, std::size_t bytes) {
    prefetch_ahead<PrefetchInto::l2>(block, bytes, kPrefetchBytes);
}

// The token's 4 activation bytes at `four` in every 32-bit lane (one per row).
SMOL_INLINE_INTO_SET inline __m256i broadcast_four(const std::int8_t* four) {
    std::int32_t bytes;
    std::memcpy(&bytes, four, 4);
    return _mm256_set1_epi32(bytes);
}

// Group k of a Q4_K block's chunk: the 8 rows' 4 quant bytes as low nibbles (4 weights of
// sub-block 2 chunk) and high nibbles (sub-block 2 chunk + 1). Asks for a quant line kPrefetchBytes
// ahead every other group: between the loads, which Zen 5 prefers to all at the block's top.
SMOL_INLINE_INTO_SET inline void q4k_group_nibbles(const BlockQ4Kx8& wb, int chunk, int k, __m256i& low,
                                                   __m256i& high) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    if (k % 2 == 0) prefetch_to_l2_ahead(wb.qs[chunk][k], 64);
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs[chunk][k]));
    low = _mm256_and_si256(bits, low4);
    high = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
}

// Group k of a Q6_K block's half h: q[x] holds the 8 rows' 4 unsigned quants (0..63) of
// sub-block 8h + 2x + k/4, from the row's ql and qh bytes (BlockQ6Kx8's parts 0, 1, 2).
SMOL_INLINE_INTO_SET inline void q6k_group_quants(const BlockQ6Kx8& wb, int h, int k, __m256i (&q)[4]) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), top2 = _mm256_set1_epi8(0x30);
    const __m256i ql_a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.q[h][k][0]));
    const __m256i ql_b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.q[h][k][1]));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.q[h][k][2]));
    q[0] = _mm256_or_si256(_mm256_and_si256(ql_a, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top2));
    q[1] = _mm256_or_si256(_mm256_and_si256(ql_b, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top2));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_a, 4), low4), _mm256_and_si256(qh, top2));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_b, 4), low4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), top2));
}

// A Q4_K group block's end, for every column: the mins meet the activation's sub-block sums, and
// each row's lane takes the reference's float step with dots[col] = sum_j scale_j * products_j.
template <int C>
SMOL_INLINE_INTO_SET inline void q4k_finish_block(const BlockQ4Kx8& wb, const BlockQ8K* const (&acts)[C],
                                                  std::int64_t b, const __m256i (&dots)[C], __m256 (&acc)[C]) {
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d)));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.dmin)));
    for (int col = 0; col < C; ++col) {
        const BlockQ8K& a = acts[col][b];
        // The activation's 8 sub-block sums (bsums added pairwise, at most 32 * 128: i16).
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
        const __m256i sub_sums =
            _mm256_castsi128_si256(_mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1)));
        __m256i mins = _mm256_setzero_si256();  // [row] i32: sum_j min_j * sub-block sum j
        for (int pair = 0; pair < 4; ++pair) {
            const __m256i min_words = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.mins[pair])));
            const __m256i sums_pair = _mm256_permutevar8x32_epi32(sub_sums, _mm256_set1_epi32(pair));
            mins = _mm256_add_epi32(mins, _mm256_madd_epi16(min_words, sums_pair));
        }
        const __m256 ad = _mm256_set1_ps(a.d);
        acc[col] = _mm256_fmadd_ps(_mm256_mul_ps(d, ad), _mm256_cvtepi32_ps(dots[col]), acc[col]);
        acc[col] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, ad), _mm256_cvtepi32_ps(mins), acc[col]);
    }
}

// A Q6_K group block's end, for every column: the -32 offset (32 * sum_j scale_j * bsum_j) comes
// off dots[col] = sum_j scale_j * (unsigned products_j), and each row's lane takes the float step.
template <int C>
SMOL_INLINE_INTO_SET inline void q6k_finish_block(const BlockQ6Kx8& wb, const BlockQ8K* const (&acts)[C],
                                                  std::int64_t b, const __m256i (&dots)[C], __m256 (&acc)[C]) {
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d)));
    for (int col = 0; col < C; ++col) {
        const BlockQ8K& a = acts[col][b];
        __m256i offset = _mm256_setzero_si256();  // [row] i32: sum_j scale_j * bsum_j
        for (int p = 0; p < 8; ++p) {
            const __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales[p])));
            std::int32_t bsum_pair;
            std::memcpy(&bsum_pair, a.bsums + 2 * p, 4);
            offset = _mm256_add_epi32(offset, _mm256_madd_epi16(scales, _mm256_set1_epi32(bsum_pair)));
        }
        const __m256i total = _mm256_sub_epi32(dots[col], _mm256_slli_epi32(offset, 5));
        acc[col] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(a.d)), _mm256_cvtepi32_ps(total), acc[col]);
    }
}

// C columns (tokens) of a Q4_K group, all 8 rows. i16 runs are chained through an empty asm:
// left alone, gcc reassociates the 8 adds of a run into a tree and spills (as in the prompt GEMMs).
template <int C>
inline void q4k_x8_columns(std::int64_t n, const BlockQ4Kx8* group, const BlockQ8K* const (&acts)[C], float* out,
                           std::size_t out_stride) {
    // Bytes 0-3 (lane 0) or 4-7 (lane 1) of a broadcast 8-byte scale row, each as the word pair
    // (s, s): vpmaddwd then scales both pair sums of a row by its own scale.
    const __m256i scale_words = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,  //
                                                 4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    __m256 acc[C];  // [row] per column
    for (int col = 0; col < C; ++col) acc[col] = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const BlockQ4Kx8& wb = group[b];
        prefetch_to_l2_ahead(&wb, offsetof(BlockQ4Kx8, qs));  // d, dmin, scales, mins; qs below
        __m256i dots[C];  // [row] i32: sum_j scale_j * (sub-block j's products)
        for (int col = 0; col < C; ++col) dots[col] = _mm256_setzero_si256();
        for (int chunk = 0; chunk < 4; ++chunk) {
            __m256i low_run[C], high_run[C];  // [row][pair] i16: sub-blocks 2 chunk and 2 chunk + 1
            SMOL_UNROLL_GROUPS
            for (int k = 0; k < 8; ++k) {
                __m256i low, high;
                q4k_group_nibbles(wb, chunk, k, low, high);
                for (int col = 0; col < C; ++col) {
                    const __m256i low_acts = broadcast_four(acts[col][b].qs + 64 * chunk + 4 * k);
                    const __m256i high_acts = broadcast_four(acts[col][b].qs + 64 * chunk + 32 + 4 * k);
                    const __m256i low_pairs = _mm256_maddubs_epi16(low, low_acts);
                    const __m256i high_pairs = _mm256_maddubs_epi16(high, high_acts);
                    low_run[col] = k == 0 ? low_pairs : _mm256_add_epi16(low_run[col], low_pairs);
                    high_run[col] = k == 0 ? high_pairs : _mm256_add_epi16(high_run[col], high_pairs);
                    asm("" : "+v"(low_run[col]), "+v"(high_run[col]));
                }
            }
            std::int64_t low_scales, high_scales;
            std::memcpy(&low_scales, wb.scales[2 * chunk], 8);
            std::memcpy(&high_scales, wb.scales[2 * chunk + 1], 8);
            const __m256i low_scale = _mm256_shuffle_epi8(_mm256_set1_epi64x(low_scales), scale_words);
            const __m256i high_scale = _mm256_shuffle_epi8(_mm256_set1_epi64x(high_scales), scale_words);
            for (int col = 0; col < C; ++col)
                dots[col] = _mm256_add_epi32(dots[col], _mm256_add_epi32(_mm256_madd_epi16(low_run[col], low_scale),
                                                                         _mm256_madd_epi16(high_run[col], high_scale)));
        }
        q4k_finish_block<C>(wb, acts, b, dots, acc);
    }
    for (int col = 0; col < C; ++col) _mm256_storeu_ps(out + std::size_t(col) * out_stride, acc[col]);
}

// C columns of a Q6_K group. Per half h and group k, the row's ql bytes 64h + 4k and 64h + 32 + 4k
// and qh bytes 32h + 4k give 4 weights of each of the sub-blocks 8h + k/4 + {0, 2, 4, 6} (weights
// 128h + 4k + {0, 32, 64, 96}), as unsigned quants 0..63; the -32 offset is taken out once per
// block as 32 * sum_j scale_j * bsum_j. Pairs reach 2 * 63 * 128, so a run adds 2 groups in i16.
template <int C>
inline void q6k_x8_columns(std::int64_t n, const BlockQ6Kx8* group, const BlockQ8K* const (&acts)[C], float* out,
                           std::size_t out_stride) {
    // Byte 2r + e of a scale pair's 16 bytes (row r, sub-block 2p + e) into the high byte of both
    // words of row r (lane 0: rows 0-3, lane 1: rows 4-7); an arithmetic shift then makes (s, s).
    const auto scale_picker = [](int e) {
        return _mm256_setr_epi8(-1, char(0 + e), -1, char(0 + e), -1, char(2 + e), -1, char(2 + e),    //
                                -1, char(4 + e), -1, char(4 + e), -1, char(6 + e), -1, char(6 + e),    //
                                -1, char(8 + e), -1, char(8 + e), -1, char(10 + e), -1, char(10 + e),  //
                                -1, char(12 + e), -1, char(12 + e), -1, char(14 + e), -1, char(14 + e));
    };
    const __m256i pick_even = scale_picker(0), pick_odd = scale_picker(1);
    __m256 acc[C];
    for (int col = 0; col < C; ++col) acc[col] = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const BlockQ6Kx8& wb = group[b];
        prefetch_to_l2_ahead(&wb, sizeof(wb));
        __m256i dots[C];  // [row] i32: sum_j scale_j * (sub-block j's unsigned products)
        for (int col = 0; col < C; ++col) dots[col] = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h)
            for (int k0 = 0; k0 < 8; k0 += 2) {  // groups k0, k0 + 1: one run per sub-block
                __m256i run[C][4] = {};  // every element set by group k0 (gcc cannot tell)
                SMOL_UNROLL_GROUPS
                for (int k = k0; k < k0 + 2; ++k) {
                    __m256i q[4];
                    q6k_group_quants(wb, h, k, q);
                    for (int col = 0; col < C; ++col)
                        for (int x = 0; x < 4; ++x) {
                            const __m256i pairs =
                                _mm256_maddubs_epi16(q[x], broadcast_four(acts[col][b].qs + 128 * h + 32 * x + 4 * k));
                            run[col][x] = k == k0 ? pairs : _mm256_add_epi16(run[col][x], pairs);
                        }
                }
                for (int x = 0; x < 4; ++x) {  // sub-block 8h + 2x + k0/4: pair 4h + x, element k0/4
                    const __m256i pair = _mm256_broadcastsi128_si256(
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales[4 * h + x])));
                    const __m256i scale = _mm256_srai_epi16(_mm256_shuffle_epi8(pair, k0 < 4 ? pick_even : pick_odd), 8);
                    for (int col = 0; col < C; ++col)
                        dots[col] = _mm256_add_epi32(dots[col], _mm256_madd_epi16(run[col][x], scale));
                }
            }
        q6k_finish_block<C>(wb, acts, b, dots, acc);
    }
    for (int col = 0; col < C; ++col) _mm256_storeu_ps(out + std::size_t(col) * out_stride, acc[col]);
}

// The same two kernels for CPUs with VNNI: vpdpbusd multiplies a row's 4 unsigned quant bytes by
// the token's 4 activation bytes and adds the 4 products into the row's i32 lane in one
// instruction, where vpmaddubsw + an i16 add took two and i16 runs had to stop short of overflow.
// A sub-block's run is then i32 (Q4_K at most 32 * 15 * 128, Q6_K 16 * 63 * 128) and meets its
// scale in one vpmulld per sub-block. Integer totals are the same, so the bits are the same.
// Dot supplies the instruction: EVEX on AVX-512 VNNI (32 registers), VEX on AVX-VNNI.
template <class Dot, int C>
SMOL_INLINE_INTO_SET inline void q4k_x8_columns_vnni(std::int64_t n, const BlockQ4Kx8* group,
                                                     const BlockQ8K* const (&acts)[C], float* out,
                                                     std::size_t out_stride) {
    __m256 acc[C];  // [row] per column
    for (int col = 0; col < C; ++col) acc[col] = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const BlockQ4Kx8& wb = group[b];
        prefetch_to_l2_ahead(&wb, offsetof(BlockQ4Kx8, qs));  // d, dmin, scales, mins; qs below
        __m256i dots[C];  // [row] i32: sum_j scale_j * (sub-block j's products)
        for (int col = 0; col < C; ++col) dots[col] = _mm256_setzero_si256();
        for (int chunk = 0; chunk < 4; ++chunk) {
            __m256i low_run[C], high_run[C];  // [row] i32: sub-blocks 2 chunk and 2 chunk + 1
            for (int col = 0; col < C; ++col) low_run[col] = high_run[col] = _mm256_setzero_si256();
            for (int k = 0; k < 8; ++k) {
                __m256i low, high;
                q4k_group_nibbles(wb, chunk, k, low, high);
                for (int col = 0; col < C; ++col) {
                    const __m256i low_acts = broadcast_four(acts[col][b].qs + 64 * chunk + 4 * k);
                    const __m256i high_acts = broadcast_four(acts[col][b].qs + 64 * chunk + 32 + 4 * k);
                    low_run[col] = Dot::dpbusd(low_run[col], low, low_acts);
                    high_run[col] = Dot::dpbusd(high_run[col], high, high_acts);
                }
            }
            const __m256i low_scale =
                _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scales[2 * chunk])));
            const __m256i high_scale =
                _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scales[2 * chunk + 1])));
            for (int col = 0; col < C; ++col)
                dots[col] = _mm256_add_epi32(dots[col], _mm256_add_epi32(_mm256_mullo_epi32(low_run[col], low_scale),
                                                                         _mm256_mullo_epi32(high_run[col], high_scale)));
        }
        q4k_finish_block<C>(wb, acts, b, dots, acc);
    }
    for (int col = 0; col < C; ++col) _mm256_storeu_ps(out + std::size_t(col) * out_stride, acc[col]);
}

template <class Dot, int C>
SMOL_INLINE_INTO_SET inline void q6k_x8_columns_vnni(std::int64_t n, const BlockQ6Kx8* group,
                                                     const BlockQ8K* const (&acts)[C], float* out,
                                                     std::size_t out_stride) {
    // Byte 2r + e of a scale pair's 16 bytes (row r, sub-block 2p + e) into byte r of the low 8.
    const __m128i pick_even = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i pick_odd = _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256 acc[C];
    for (int col = 0; col < C; ++col) acc[col] = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const BlockQ6Kx8& wb = group[b];
        prefetch_to_l2_ahead(&wb, sizeof(wb));
        __m256i dots[C];  // [row] i32: sum_j scale_j * (sub-block j's unsigned products)
        for (int col = 0; col < C; ++col) dots[col] = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h)
            for (int k0 = 0; k0 < 8; k0 += 4) {  // groups k0..k0 + 3: a whole sub-block per run
                __m256i run[C][4];  // [row] i32 per sub-block 8h + 2x + k0/4
                for (int col = 0; col < C; ++col)
                    for (int x = 0; x < 4; ++x) run[col][x] = _mm256_setzero_si256();
                for (int k = k0; k < k0 + 4; ++k) {
                    __m256i q[4];
                    q6k_group_quants(wb, h, k, q);
                    for (int col = 0; col < C; ++col)
                        for (int x = 0; x < 4; ++x) {
                            run[col][x] = Dot::dpbusd(run[col][x], q[x],
                                                      broadcast_four(acts[col][b].qs + 128 * h + 32 * x + 4 * k));
                        }
                }
                for (int x = 0; x < 4; ++x) {
                    const __m128i pair = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales[4 * h + x]));
                    const __m256i scale = _mm256_cvtepi8_epi32(_mm_shuffle_epi8(pair, k0 < 4 ? pick_even : pick_odd));
                    for (int col = 0; col < C; ++col)
                        dots[col] = _mm256_add_epi32(dots[col], _mm256_mullo_epi32(run[col][x], scale));
                }
            }
        q6k_finish_block<C>(wb, acts, b, dots, acc);
    }
    for (int col = 0; col < C; ++col) _mm256_storeu_ps(out + std::size_t(col) * out_stride, acc[col]);
}

// Calls Columns<C>::run for the C = n_cols (1..kTileCols) columns of a GroupDotFn call.
template <template <int> class Columns>
inline void by_column_count(std::int64_t n, const std::uint8_t* group, const std::uint8_t* acts, std::size_t act_stride,
                            int n_cols, float* out, std::size_t out_stride) {
    const auto column = [&](int c) { return reinterpret_cast<const BlockQ8K*>(acts + std::size_t(c) * act_stride); };
    switch (n_cols) {
        case 1: {
            const BlockQ8K* const columns[1] = {column(0)};
            return Columns<1>::run(n, group, columns, out, out_stride);
        }
        case 2: {
            const BlockQ8K* const columns[2] = {column(0), column(1)};
            return Columns<2>::run(n, group, columns, out, out_stride);
        }
        case 3: {
            const BlockQ8K* const columns[3] = {column(0), column(1), column(2)};
            return Columns<3>::run(n, group, columns, out, out_stride);
        }
        case 4: {
            const BlockQ8K* const columns[4] = {column(0), column(1), column(2), column(3)};
            return Columns<4>::run(n, group, columns, out, out_stride);
        }
        default: return;  // n_cols <= kTileCols: the caller splits wider batches
    }
}

// The vpmaddubsw kernels (the AVX2 set's), as by_column_count's Columns.
template <int C>
struct Q4KColumns {
    static void run(std::int64_t n, const std::uint8_t* group, const BlockQ8K* const (&acts)[C], float* out,
                    std::size_t out_stride) {
        q4k_x8_columns<C>(n, reinterpret_cast<const BlockQ4Kx8*>(group), acts, out, out_stride);
    }
};
template <int C>
struct Q6KColumns {
    static void run(std::int64_t n, const std::uint8_t* group, const BlockQ8K* const (&acts)[C], float* out,
                    std::size_t out_stride) {
        q6k_x8_columns<C>(n, reinterpret_cast<const BlockQ6Kx8*>(group), acts, out, out_stride);
    }
};

// The VNNI kernels for a Dot, as by_column_count's Columns.
template <class Dot>
struct VnniColumns {
    template <int C>
    struct Q4K {
        SMOL_INLINE_INTO_SET static void run(std::int64_t n, const std::uint8_t* group,
                                             const BlockQ8K* const (&acts)[C], float* out, std::size_t out_stride) {
            q4k_x8_columns_vnni<Dot, C>(n, reinterpret_cast<const BlockQ4Kx8*>(group), acts, out, out_stride);
        }
    };
    template <int C>
    struct Q6K {
        SMOL_INLINE_INTO_SET static void run(std::int64_t n, const std::uint8_t* group,
                                             const BlockQ8K* const (&acts)[C], float* out, std::size_t out_stride) {
            q6k_x8_columns_vnni<Dot, C>(n, reinterpret_cast<const BlockQ6Kx8*>(group), acts, out, out_stride);
        }
    };
};

#undef SMOL_UNROLL_GROUPS

}  // namespace smol::row_group_tiles

#endif  // SMOL_HAVE_AVX2_KERNELS
