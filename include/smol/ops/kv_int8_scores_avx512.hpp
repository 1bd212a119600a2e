#pragma once
// The AVX-512 VNNI integer scores over Q4_0 keys (kv_int8_scores.hpp says the float step every
// set takes): tiles of 4 query rows x 4 keys, vpdpbusd for the blocks' exact dots.

#include "smol/core/intrinsic_warnings.hpp"
#include "smol/core/simd_targets.hpp"
#include "smol/ops/kv_int8_scores.hpp"

#if SMOL_HAVE_AVX512_KERNELS

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace smol::kv_kernels {

SMOL_INTRINSIC_WARNINGS_OFF
namespace avx512 {

// The tiles below are arrays of vectors indexed by constant loops: unrolled, they live in
// registers (GCC unrolls them by itself only at -O3).
#define SMOL_INT8_UNROLL _Pragma("GCC unroll 16")

// A group of up to four blocks of a query row or key row is laid out so that 128-bit lane L
// holds block L: `low` its values 0..15 and `high` its values 16..31, as bytes. Then vpdpbusd of
// a key's low and high against a query's leaves each block's dot in its lane's four i32.

// A query row's group, once per call: its bytes, its blocks' offsets (8 * block sum, in every
// i32 of the lane) and its block scales (in every float of the lane); missing blocks 0.
struct QueryGroup {
    __m512i low, high, offset;
    __m512 d;
};

SMOL_TARGET_AVX512 inline QueryGroup query_group(QueryBlocks q, int row, int head_dim, int g) {
    const int n_blocks = head_dim / kQueryBlock, in_group = std::min(4, n_blocks - g);
    const std::int8_t* qs = q.qs + std::size_t(row) * head_dim + std::size_t(g) * kQueryBlock;
    // Qwords of the two 64-byte halves: block L's low 16 bytes are qwords 4L, 4L + 1.
    const __mmask8 first = __mmask8((1u << std::min(8, 4 * in_group)) - 1);
    const __mmask8 second = __mmask8(in_group > 2 ? (1u << (4 * (in_group - 2))) - 1 : 0);
    const __m512i a = _mm512_maskz_loadu_epi64(first, qs), b = _mm512_maskz_loadu_epi64(second, qs + 64);
    const __mmask8 lanes = __mmask8((1u << (2 * in_group)) - 1);
    QueryGroup out;
    out.low = _mm512_maskz_permutex2var_epi64(lanes, a, _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13), b);
    out.high = _mm512_maskz_permutex2var_epi64(lanes, a, _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15), b);
    const __mmask16 blocks = __mmask16((1u << in_group) - 1);
    const std::size_t at = std::size_t(row) * n_blocks + g;
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __mmask16 in_lanes = __mmask16((1u << (4 * in_group)) - 1);
    out.offset = _mm512_slli_epi32(_mm512_maskz_permutexvar_epi32(in_lanes, spread, _mm512_maskz_loadu_epi32(blocks, q.sums + at)), 3);
    out.d = _mm512_maskz_permutexvar_ps(in_lanes, spread, _mm512_maskz_loadu_ps(blocks, q.d + at));
    return out;
}

// A key group is gathered from its cache row by 16-bit word: block L is 9 words (a 2-byte scale,
// then 16 bytes of nibbles), so its scale is word 9 L and its quants words 9 L + 1 .. 9 L + 8.
inline constexpr int kBlockWords = int(sizeof(BlockQ4_0)) / 2;

// The word permutations of a key group, the same for every group and key: made once per call.
struct KeyIndices {
    __m512i quants, scale;
    SMOL_TARGET_AVX512 KeyIndices() {
        alignas(64) std::int16_t q[32], sc[32];
        for (int lane = 0; lane < 4; ++lane)
            for (int w = 0; w < 8; ++w) q[8 * lane + w] = std::int16_t(kBlockWords * lane + 1 + w);
        for (int i = 0; i < 32; ++i) sc[i] = std::int16_t(kBlockWords * ((i / 4) % 4));  // word 4 L + j: block L's scale
        quants = _mm512_load_si512(q);
        scale = _mm512_load_si512(sc);
    }
};

// The mask of the first n words of a 32-word load.
inline __mmask32 first_words(int n) {
    return n <= 0 ? __mmask32(0) : n >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << n) - 1);
}

// Key j's group of in_group blocks as its nibbles (value + 8), `low` and `high` in lane layout,
// and its block scales, as fp16 words, put into words 4 L + j of `scales`. Nothing past the
// group is read.
SMOL_TARGET_AVX512 inline void key_group(const std::byte* group, int in_group, const KeyIndices& k, int j,
                                          __m512i& low, __m512i& high, __m512i& scales) {
    const int words = kBlockWords * in_group;
    const __m512i first = _mm512_maskz_loadu_epi16(first_words(words), group);
    const __m512i second = _mm512_maskz_loadu_epi16(first_words(words - 32), group + 64);
    const __m512i packed = _mm512_permutex2var_epi16(first, k.quants, second);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    low = _mm512_and_si512(packed, low4);
    high = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low4);
    scales = _mm512_mask_permutexvar_epi16(scales, __mmask32(0x1111u << j), k.scale, first);
}

// For one query row: the four keys' block dots a[j] (lane L: block L, four partial sums) to
// their group value (p_0 + p_1) + (p_2 + p_3), one float per key.
SMOL_TARGET_AVX512 inline __m128 group_values(const __m512i (&a)[4], const QueryGroup& q, __m512 key_scales) {
    const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]), _mm512_unpackhi_epi32(a[0], a[1]));
    const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]), _mm512_unpackhi_epi32(a[2], a[3]));
    // lane L: [dot of key 0, key 1, key 2, key 3] for block L
    const __m512i dots = _mm512_sub_epi32(_mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1)), q.offset);
    const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(dots), _mm512_mul_ps(q.d, key_scales));
    const __m512 pairs = _mm512_add_ps(p, _mm512_shuffle_f32x4(p, p, _MM_SHUFFLE(2, 3, 0, 1)));  // lane 0: p0 + p1
    return _mm512_castps512_ps128(_mm512_add_ps(pairs, _mm512_shuffle_f32x4(pairs, pairs, _MM_SHUFFLE(1, 0, 3, 2))));
}

// Tiles of 4 query rows x 4 keys; a missing row or key repeats the last one and is not stored.
SMOL_TARGET_AVX512 inline void scores_q4_0(QueryBlocks q, int n_rows, const std::byte* keys, int n_keys, int head_dim,
                                            float scale, float* scores, int score_stride) {
    const int n_blocks = head_dim / kQueryBlock, n_groups = (n_blocks + 3) / 4;
    const std::size_t row_bytes = kv_row_bytes(KvType::q4_0, head_dim), group_bytes = 4 * sizeof(BlockQ4_0);
    // The query rows in lane layout, made once per call: [row][group]
    thread_local std::vector<float> buffer;
    const std::size_t floats = std::size_t(n_rows) * n_groups * (sizeof(QueryGroup) / sizeof(float)) + 16;
    if (buffer.size() < floats) buffer.resize(floats);
    auto* prepared = reinterpret_cast<QueryGroup*>((reinterpret_cast<std::uintptr_t>(buffer.data()) + 63) & ~std::uintptr_t(63));
    for (int r = 0; r < n_rows; ++r)
        for (int g = 0; g < n_groups; ++g) prepared[r * n_groups + g] = query_group(q, r, head_dim, 4 * g);
    const KeyIndices indices;

    for (int j = 0; j < n_keys; j += 4) {
        const std::byte* k[4];
        for (int i = 0; i < 4; ++i) k[i] = keys + std::size_t(std::min(j + i, n_keys - 1)) * row_bytes;
        const __mmask8 keys_present = __mmask8((1u << std::min(4, n_keys - j)) - 1);
        for (int g = 0; g < n_groups; ++g) {
            // The four keys' group is gathered once for all the rows; the group values of
            // several groups add up in `scores`, scaled after the last.
            const int in_group = std::min(4, n_blocks - 4 * g);
            __m512i low[4], high[4], key_scale_words = _mm512_setzero_si512();
            SMOL_INT8_UNROLL
            for (int i = 0; i < 4; ++i) key_group(k[i] + g * group_bytes, in_group, indices, i, low[i], high[i], key_scale_words);
            const __m512 key_scales = _mm512_cvtph_ps(_mm512_castsi512_si256(key_scale_words));
            for (int r = 0; r < n_rows; r += 4) {
                __m128 v[4];
                SMOL_INT8_UNROLL
                for (int i = 0; i < 4; ++i) {
                    const QueryGroup& qg = prepared[std::min(r + i, n_rows - 1) * n_groups + g];
                    __m512i a[4];
                    SMOL_INT8_UNROLL
                    for (int c = 0; c < 4; ++c)
                        a[c] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), low[c], qg.low), high[c], qg.high);
                    v[i] = group_values(a, qg, key_scales);
                }
                for (int i = 0; i < 4 && r + i < n_rows; ++i) {
                    float* out = scores + std::size_t(r + i) * score_stride + j;
                    __m128 total = g == 0 ? v[i] : _mm_add_ps(_mm_maskz_loadu_ps(keys_present, out), v[i]);
                    if (g == n_groups - 1) total = _mm_mul_ps(total, _mm_set1_ps(scale));
                    _mm_mask_storeu_ps(out, keys_present, total);
                }
            }
        }
    }
}

#undef SMOL_INT8_UNROLL
}  // namespace avx512
SMOL_INTRINSIC_WARNINGS_ON

}  // namespace smol::kv_kernels

#endif  // SMOL_HAVE_AVX512_KERNELS
