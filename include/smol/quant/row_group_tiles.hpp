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
// Written once with AVX2 intrinsics; the AVX-512 set runs the same code compiled for its target
// (EVEX encodings, 32 registers), through an entry point with `flatten` as kquant_tiles_avx512.hpp
// does.
//
// One thread of a Zen 5 (2 cores of an EPYC), Q4_K rows of 2048, one token, GB/s of weights:
// from L2 the column kernel 21.7, a group 42.3; from DRAM (151 MB) 16.1 against 21.3; two tokens
// per call cost from DRAM what one does (21.4 GB/s of weights for both).

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/row_groups.hpp"

namespace smol::row_group_tiles {

// C columns (tokens) of a Q4_K group, all 8 rows. i16 runs are chained through an empty asm:
// left alone, gcc reassociates the 8 adds of a run into a tree and spills (as in the prompt GEMMs).
template <int C>
inline void q4k_x8_columns(std::int64_t n, const BlockQ4Kx8* group, const BlockQ8K* const (&acts)[C], float* out,
                           std::size_t out_stride) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    // Bytes 0-3 (lane 0) or 4-7 (lane 1) of a broadcast 8-byte scale row, each as the word pair
    // (s, s): vpmaddwd then scales both pair sums of a row by its own scale.
    const __m256i scale_words = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1,  //
                                                 4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    __m256 acc[C];  // [row] per column
    for (int col = 0; col < C; ++col) acc[col] = _mm256_setzero_ps();
    for (std::int64_t b = 0; b < n / QK_K; ++b) {
        const BlockQ4Kx8& wb = group[b];
        __m256i dots[C];  // [row] i32: sum_j scale_j * (sub-block j's products)
        for (int col = 0; col < C; ++col) dots[col] = _mm256_setzero_si256();
        for (int chunk = 0; chunk < 4; ++chunk) {
            __m256i low_run[C], high_run[C];  // [row][pair] i16: sub-blocks 2 chunk and 2 chunk + 1
            for (int k = 0; k < 8; ++k) {
                const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs[chunk][k]));
                const __m256i low = _mm256_and_si256(bits, low4);
                const __m256i high = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
                for (int col = 0; col < C; ++col) {
                    std::int32_t low_acts, high_acts;
                    std::memcpy(&low_acts, acts[col][b].qs + 64 * chunk + 4 * k, 4);
                    std::memcpy(&high_acts, acts[col][b].qs + 64 * chunk + 32 + 4 * k, 4);
                    const __m256i low_pairs = _mm256_maddubs_epi16(low, _mm256_set1_epi32(low_acts));
                    const __m256i high_pairs = _mm256_maddubs_epi16(high, _mm256_set1_epi32(high_acts));
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
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d)));
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.dmin)));
        for (int col = 0; col < C; ++col) {
            const BlockQ8K& a = acts[col][b];
            // The activation's 8 sub-block sums (bsums added pairwise, at most 32 * 128: i16).
            const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
            const __m256i sub_sums = _mm256_castsi128_si256(
                _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1)));
            __m256i mins = _mm256_setzero_si256();  // [row] i32: sum_j min_j * sub-block sum j
            for (int pair = 0; pair < 4; ++pair) {
                const __m256i min_words =
                    _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.mins[pair])));
                const __m256i sums_pair = _mm256_permutevar8x32_epi32(sub_sums, _mm256_set1_epi32(pair));
                mins = _mm256_add_epi32(mins, _mm256_madd_epi16(min_words, sums_pair));
            }
            const __m256 ad = _mm256_set1_ps(a.d);
            acc[col] = _mm256_fmadd_ps(_mm256_mul_ps(d, ad), _mm256_cvtepi32_ps(dots[col]), acc[col]);
            acc[col] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, ad), _mm256_cvtepi32_ps(mins), acc[col]);
        }
    }
    for (int col = 0; col < C; ++col) _mm256_storeu_ps(out + std::size_t(col) * out_stride, acc[col]);
}

// The GroupDotFn: all columns in one pass over the weights. Four columns spill a few of AVX2's
// 16 registers and still beat two passes of two (one Zen 5 thread, weights from DRAM: 13.1
// against 9.1 GB/s of weights).
inline void q4k_x8_q8k_body(std::int64_t n, const std::uint8_t* group, const std::uint8_t* acts,
                            std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    const auto* g = reinterpret_cast<const BlockQ4Kx8*>(group);
    const auto column = [&](int c) { return reinterpret_cast<const BlockQ8K*>(acts + std::size_t(c) * act_stride); };
    switch (n_cols) {
        case 1: {
            const BlockQ8K* const columns[1] = {column(0)};
            return q4k_x8_columns<1>(n, g, columns, out, out_stride);
        }
        case 2: {
            const BlockQ8K* const columns[2] = {column(0), column(1)};
            return q4k_x8_columns<2>(n, g, columns, out, out_stride);
        }
        case 3: {
            const BlockQ8K* const columns[3] = {column(0), column(1), column(2)};
            return q4k_x8_columns<3>(n, g, columns, out, out_stride);
        }
        case 4: {
            const BlockQ8K* const columns[4] = {column(0), column(1), column(2), column(3)};
            return q4k_x8_columns<4>(n, g, columns, out, out_stride);
        }
        default: return;  // n_cols <= kTileCols: the caller splits wider batches
    }
}

inline void q4k_x8_q8k_avx2(std::int64_t n, const std::uint8_t* group, const std::uint8_t* acts, std::size_t act_stride,
                            int n_cols, float* out, std::size_t out_stride) {
    q4k_x8_q8k_body(n, group, acts, act_stride, n_cols, out, out_stride);
}

#if SMOL_HAVE_AVX512_KERNELS
SMOL_TARGET_AVX512 __attribute__((flatten)) inline void q4k_x8_q8k_avx512(std::int64_t n, const std::uint8_t* group,
                                                                          const std::uint8_t* acts, std::size_t act_stride,
                                                                          int n_cols, float* out, std::size_t out_stride) {
    q4k_x8_q8k_body(n, group, acts, act_stride, n_cols, out, out_stride);
}
#endif

}  // namespace smol::row_group_tiles

#endif  // SMOL_HAVE_AVX2_KERNELS
