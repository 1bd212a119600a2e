#pragma once
// AVX-512 (F, BW, VL, DQ) + VNNI kernel set. The program is not compiled with -mavx512*, so
// every function here carries SMOL_TARGET_AVX512 and may run only after cpu_features() said
// has_avx512_kernels() (dispatch.hpp guarantees that). Same tile contract as the AVX2 set, on
// 64-byte vectors with VNNI. The k-quant tiles built from the pieces here are in
// kquant_tiles_avx512.hpp, and give the AVX2 set's bits.

#include "smol/quant/kernels_avx2.hpp"  // its block-header and float-step helpers, shared for the same bits

#if SMOL_HAVE_AVX512_KERNELS

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/intrinsic_warnings.hpp"
#include "smol/core/float_vectors.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/dpbusd.hpp"
#include "smol/quant/float_tiles.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"

// GCC 12 reports the masked intrinsics' undefined seeds (core/intrinsic_warnings.hpp).
SMOL_INTRINSIC_WARNINGS_OFF

namespace smol::kernels_avx512 {

namespace detail {

SMOL_TARGET_AVX512 inline float half_to_float(std::uint16_t h) { return _cvtsh_ss(h); }

// ---------------------------------------------------------------------------------------------
// The k-quant prompt GEMMs' pieces (the driver, kquant_gemm, is kquant_tiles_avx512.hpp's), and
// Q4_K's and Q6_K's quants unpacked in registers (for the decode kernels and the AMX set). Vector lanes are 16 tokens (activations packed by
// packing.hpp), so a weight row's 4-byte group is broadcast and one vpdpbusd multiplies it with
// the matching group of 16 tokens: no horizontal sums, and each unpacked weight byte serves
// kGemmTokensAvx512 tokens.

namespace avx2 = kernels_avx2::detail;

// A weight block's quants as unsigned bytes in activation order (weights 0..255), as the
// k-quants' Gemm kernels unpack them (kquant_tiles_avx2.hpp) for both sets.
using UnpackedQuants = avx2::UnpackedQuants;

// Q4_K weights 64c..64c+63 in order, unsigned: chunk c holds the low nibbles of qs[32c..32c+31]
// (sub-block 2c) then their high nibbles (sub-block 2c+1). One broadcast load and a shift of the
// upper half give both without a shuffle.
SMOL_TARGET_AVX512 inline __m512i q4k_chunk_quants(const BlockQ4K& wb, int c) {
    const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * c)));
    return _mm512_and_si512(_mm512_mask_srli_epi16(bits, 0xffff0000u, bits, 4), _mm512_set1_epi8(0x0f));
}

// Q6_K as unsigned 0..63 (the -32 offset is taken out through the bsums): half h gives weights
// 128h..128h+63 (`first`) from the low nibbles of ql[64h..64h+63] with qh bit pairs 0-1 (bytes
// 0-31) and 2-3 (bytes 32-63), and weights 128h+64..128h+127 (`second`) from the high nibbles
// with pairs 4-5 and 6-7.
SMOL_TARGET_AVX512 inline void q6k_half_quants(const BlockQ6K& wb, int h, __m512i& first, __m512i& second) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i top2 = _mm512_set1_epi8(0x30);
    const __m512i left = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);     // 4 | 2
    const __m512i right = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);  // 0 | 2
    const __m512i ql = _mm512_loadu_si512(wb.ql + 64 * h);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh + 32 * h)));
    first = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_sllv_epi16(qh, left), top2));
    second = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                             _mm512_and_si512(_mm512_srlv_epi16(qh, right), top2));
}

// Four quants of an unpacked row as one i32, in all 16 lanes.
SMOL_TARGET_AVX512 inline __m512i broadcast_group(const UnpackedQuants& u, int group) {
    std::int32_t four;
    std::memcpy(&four, u.q + 4 * group, 4);
    return _mm512_set1_epi32(four);
}

// A block's weight groups as scaled_block_dots reads them: group(r, k), row r's 4-byte group k
// (weights 4k..4k+3) in all 16 lanes, as 2^quant_shift(j) times the quants of its sub-block j
// (the GEMM driver scales the other sub-blocks up to match and shifts the block totals back down
// by kDotsShift). Here rows unpacked to bytes, each group broadcast from them (any k-quant type);
// kquant_tiles_avx512.hpp reads Q4_K's row groups in place.
struct UnpackedGroups {
    const UnpackedQuants (&u)[kTileRows];
    static constexpr int kDotsShift = 0;
    static constexpr int quant_shift(int) { return 0; }
    SMOL_TARGET_AVX512 __m512i group(int r, int k) const { return detail::broadcast_group(u[r], k); }  // qualified: ADL finds AVX2's too
};

// sub[r][g] += the products of row r's 4-byte groups first..first+K-1 with token group g's,
// unrolled at compile time: as a loop, gcc copies every accumulator between registers on each
// trip (16 moves per 8 vpdpbusd, measured).
template <int K, int R, int G, class Groups>
SMOL_TARGET_AVX512 __attribute__((always_inline)) inline void dot_groups(__m512i (&sub)[R][G], const Groups& weights,
                                                                         const BlockQ8Kx16* const (&a)[G], int first) {
    if constexpr (K > 0) {
        __m512i x[G];
        SMOL_UNROLL
        for (int g = 0; g < G; ++g) x[g] = _mm512_load_si512(a[g]->qs[first]);
        SMOL_UNROLL
        for (int r = 0; r < R; ++r) {
            const __m512i w = weights.group(r, first);
            SMOL_UNROLL
            for (int g = 0; g < G; ++g) sub[r][g] = _mm512_dpbusd_epi32(sub[r][g], w, x[g]);
        }
        dot_groups<K - 1>(sub, weights, a, first + 1);
    }
}

// dots[r][g] = sum over the block's sub-blocks j of scale(r, j) * (run_start(j, g) + row r's
// quants of sub-block j . token group g's), exact: the shared core of the k-quant GEMMs.
// run_start(j, g): the i32 each row's run of sub-block j starts at for token group g's 16 tokens
// (zero, or minus the offset the unsigned quants add).
template <int SubBlocks, int R, int G, class Groups, class Scale, class RunStart>
SMOL_TARGET_AVX512 __attribute__((always_inline)) inline void scaled_block_dots(__m512i (&dots)[R][G],
                                                                                const Groups& weights,
                                                                                const BlockQ8Kx16* const (&a)[G],
                                                                                Scale scale, RunStart run_start) {
    constexpr int groups_per_sub_block = QK_K / 4 / SubBlocks;
    SMOL_UNROLL
    for (int r = 0; r < R; ++r)
        SMOL_UNROLL
        for (int g = 0; g < G; ++g) dots[r][g] = _mm512_setzero_si512();
    for (int j = 0; j < SubBlocks; ++j) {
        __m512i sub[R][G];
        SMOL_UNROLL
        for (int g = 0; g < G; ++g) {
            const __m512i start = run_start(j, g);
            SMOL_UNROLL
            for (int r = 0; r < R; ++r) sub[r][g] = start;
        }
        dot_groups<groups_per_sub_block>(sub, weights, a, groups_per_sub_block * j);
        SMOL_UNROLL
        for (int r = 0; r < R; ++r) {
            const __m512i factor = _mm512_set1_epi32(scale(r, j));
            SMOL_UNROLL
            for (int g = 0; g < G; ++g) dots[r][g] = _mm512_add_epi32(dots[r][g], _mm512_mullo_epi32(sub[r][g], factor));
        }
    }
}

// p, its target hidden from the compiler, so that a factor is read from memory where the GEMM's
// float step uses it. Without this gcc hoists the broadcasts of a block's row factors out of the
// token passes, forms each through a general register and spills it to the stack: set-up work
// each block that cost more than the loads it saved (docs/performance.md, 2026-12-06).
template <class T>
SMOL_TARGET_AVX512 inline const T* read_in_place(const T* p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}

// Two adjacent i16 factors (two[0] the low word, two[1] the high) in every lane, for vpdpwssd
// against bsum pairs: read as one i32, so the broadcast comes from memory.
SMOL_TARGET_AVX512 inline __m512i word_pair(const std::int16_t* two) {
    std::int32_t pair;
    std::memcpy(&pair, read_in_place(two), 4);
    return _mm512_set1_epi32(pair);
}

// ---------------------------------------------------------------------------------------------
// The k-quants' decode block dots, in Q4_K's shape and Q6_K's (the driver is
// kquant_tiles_avx2.hpp's kquant_column, run by kquant_tiles_avx512.hpp). Per 64 weights one vpdpbusd forms 16 sums of 4 products;
// vpackssdw narrows two such vectors to words (a sum of 4 products is at most 4 * 63 * 128 in
// magnitude, so nothing saturates) and one vpmaddwd applies the sub-block scales to 128 weights
// at once.

// A vpshufb control that spreads bytes of each 128-bit lane into its eight words: in lane L,
// words 0-3 take byte low[L] and words 4-7 byte high[L]. Zero-extended, or, with `upper`, moved
// into the upper byte so that a shift right by 8 sign-extends them.
SMOL_TARGET_AVX512 inline __m512i bytes_to_words(const int (&low)[4], const int (&high)[4], bool upper) {
    alignas(64) std::uint8_t control[64];
    for (int lane = 0; lane < 4; ++lane)
        for (int word = 0; word < 8; ++word) {
            const auto byte = std::uint8_t(word < 4 ? low[lane] : high[lane]);
            control[16 * lane + 2 * word] = upper ? 0x80 : byte;  // 0x80: vpshufb writes zero
            control[16 * lane + 2 * word + 1] = upper ? byte : 0x80;
        }
    return _mm512_load_si512(control);
}

// (lanes 0-7 + lanes 8-15) of a 16 x i32 vector: the 8 partial sums avx2::hsum_x4 reduces.
SMOL_TARGET_AVX512 inline __m256i fold_to_256(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// Chunk c's vpdpbusd has sub-block 2c in i32 lanes 0-7 and 2c+1 in lanes 8-15; after vpackssdw of
// chunks 2p and 2p+1, 128-bit lane L holds sub-blocks 4p + L/2 (words 0-3) and 4p + 2 + L/2
// (words 4-7). These pick the matching scale bytes, for p = 0 and 1.
struct Q4KScalePickers {
    __m512i pair[2];
    SMOL_TARGET_AVX512 Q4KScalePickers()
        : pair{bytes_to_words({0, 0, 1, 1}, {2, 2, 3, 3}, false), bytes_to_words({4, 4, 5, 5}, {6, 6, 7, 7}, false)} {}
};

// Sum over a block of 8 sub-blocks of 32 (Q4_K's shape) of scale_j * (u_j . a_j) for unsigned
// quants u, as 8 i32 partial sums: chunk_quants(c) gives weights 64c..64c+63 (sub-blocks 2c and
// 2c+1); scales: the block's 8 scales as u8 (bytes 0-7) in every 128-bit lane.
template <class ChunkQuants>
SMOL_TARGET_AVX512 inline __m256i eight_scale_dots(const BlockQ8K& ab, __m512i scales, const Q4KScalePickers& pickers,
                                                   const ChunkQuants& chunk_quants) {
    __m512i sumi = _mm512_setzero_si512();
    for (int p = 0; p < 2; ++p) {
        __m512i dots[2];
        for (int k = 0; k < 2; ++k) {
            const int c = 2 * p + k;
            dots[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), chunk_quants(c), _mm512_loadu_si512(ab.qs + 64 * c));
        }
        sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_packs_epi32(dots[0], dots[1]),
                                                        _mm512_shuffle_epi8(scales, pickers.pair[p])));
    }
    return fold_to_256(sumi);
}

// After vpackssdw of half h's two vpdpbusd, 128-bit lane L holds sub-blocks 8h + L (words 0-3)
// and 8h + 4 + L (words 4-7). These pick the matching signed scale bytes into upper bytes.
struct Q6KScalePickers {
    __m512i half[2];
    SMOL_TARGET_AVX512 Q6KScalePickers()
        : half{bytes_to_words({0, 1, 2, 3}, {4, 5, 6, 7}, true), bytes_to_words({8, 9, 10, 11}, {12, 13, 14, 15}, true)} {}
};

// Sum over a block of 16 sub-blocks of 16 (Q6_K's shape) of scale_j * (u_j . a_j) for unsigned
// quants u, as 8 i32 partial sums: half_quants(h, first, second) gives weights 128h..128h+63
// (first) and 128h+64..128h+127 (second); scale_bytes: the 16 scales as i8.
template <class HalfQuants>
SMOL_TARGET_AVX512 inline __m256i sixteen_scale_dots(const BlockQ8K& ab, __m128i scale_bytes, const Q6KScalePickers& pickers,
                                                     const HalfQuants& half_quants) {
    const __m512i scales_x4 = _mm512_broadcast_i32x4(scale_bytes);
    __m512i sumi = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
        __m512i first, second;
        half_quants(h, first, second);
        const __m512i dots0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), first, _mm512_loadu_si512(ab.qs + 128 * h));
        const __m512i dots1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), second, _mm512_loadu_si512(ab.qs + 128 * h + 64));
        const __m512i scales = _mm512_srai_epi16(_mm512_shuffle_epi8(scales_x4, pickers.half[h]), 8);
        sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_packs_epi32(dots0, dots1), scales));
    }
    return fold_to_256(sumi);
}

// ---------------------------------------------------------------------------------------------
// Q8_0 x Q8_0: the AVX2 set's tile (kernels_avx2.hpp) with vpdpbusd in its EVEX form.

template <int C>
SMOL_TARGET_AVX512 __attribute__((flatten)) void q8_0_tile(std::int64_t n, const std::uint8_t* weights,
                                                           std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
                                                           std::size_t act_stride, int n_cols, float* out,
                                                           std::size_t out_stride) {
    avx2::q8_0_tile<avx2::DpbusdQuads<EvexDot>, C>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out,
                                                   out_stride);
}

// ---------------------------------------------------------------------------------------------
// Float weights (F32, F16, BF16) against float activations: float_tile_set.hpp's tile on 16
// lanes, with this set's weight loads.

struct LoadF32 : float_tiles::F32Weights {
    SMOL_TARGET_AVX512 static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
};
struct LoadF16 : float_tiles::F16Weights {
    SMOL_TARGET_AVX512 static __m512 load(const std::uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
};
struct LoadBF16 : float_tiles::BF16Weights {
    SMOL_TARGET_AVX512 static __m512 load(const std::uint16_t* p) {
        const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    }
};

using Floats = simd::Avx512Floats;
#define SMOL_SET_TARGET SMOL_TARGET_AVX512
#include "smol/quant/float_tile_set.hpp"
#undef SMOL_SET_TARGET

}  // namespace detail

// The k-quant tiles, built from the pieces above, are in kquant_tiles_avx512.hpp.
inline constexpr DotTileFn q8_0_q8_0 =
    kernel_detail::by_columns<detail::q8_0_tile<1>, detail::q8_0_tile<kTileCols>>;
inline constexpr DotTileFn f32 =
    kernel_detail::by_columns<detail::float_tile<detail::LoadF32, 1>, detail::float_tile<detail::LoadF32, kTileCols>>;
inline constexpr DotTileFn f16 =
    kernel_detail::by_columns<detail::float_tile<detail::LoadF16, 1>, detail::float_tile<detail::LoadF16, kTileCols>>;
inline constexpr DotTileFn bf16 =
    kernel_detail::by_columns<detail::float_tile<detail::LoadBF16, 1>, detail::float_tile<detail::LoadBF16, kTileCols>>;

}  // namespace smol::kernels_avx512

SMOL_INTRINSIC_WARNINGS_ON

#endif
