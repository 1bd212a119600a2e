#pragma once
// Query-key scores over keys cached as Q4_0 blocks, in integers. The query rows are quantized
// once per attention call to 8 bits per block of 32 (as llama.cpp does for quantized keys: its
// Q becomes Q8_0), so each block's dot product is an exact integer (vpdpbusd on AVX-512 VNNI,
// maddubs on AVX2) and only the per-block scales are float. Every kernel set takes the same
// float step from those integers for a (query row, key) pair:
//
//   p_b   = float(dot_b) * (d_query_b * d_key_b)
//   group = (p_0 + p_1) + (p_2 + p_3)        blocks in groups of four, missing blocks 0
//   score = (group_0 + group_1 + ...) * scale
//
// so a score depends only on its row and key, never on the tile it was computed in, and
// prompts and decoding (which both run these) give a token the same bits.
//
// Only Q4_0 keys take this path. Against the float fixture's reference logits (test_reference)
// the quantized queries move q4_0's worst / mean row NMSE from 0.195 / 0.0509 to 0.204 / 0.0512,
// inside llama.cpp's 0.24 / 0.0514, where the 4-bit keys' own error dominates; with Q8_0 keys
// they took the worst row from 7.1e-4 to 2.6e-3, past llama.cpp's 1.8e-3, so Q8_0 keys are
// scored in floats.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "smol/core/half.hpp"
#include "smol/core/intrinsic_warnings.hpp"
#include "smol/ops/kv_layout.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernels_avx2.hpp"  // its exact integer reductions

#if SMOL_HAVE_AVX2_KERNELS
#include <immintrin.h>
#endif

namespace smol::kv_kernels {

inline constexpr int kQueryBlock = QK4_0;  // query values per scale: the key blocks' size

// n_rows quantized query rows, each head_dim int8 values with one float scale and the sum of
// its values per block of 32 (the kernels use the keys' nibbles unsigned, value + 8, and take
// 8 * that sum back out).
struct QueryBlocks {
    const std::int8_t* qs;     // [n_rows, head_dim]
    const float* d;            // [n_rows, head_dim / 32]
    const std::int32_t* sums;  // [n_rows, head_dim / 32]
    QueryBlocks from_row(std::size_t first, int head_dim) const {
        return {qs + first * head_dim, d + first * (head_dim / kQueryBlock), sums + first * (head_dim / kQueryBlock)};
    }
};

// Q8_0's rounding with a float scale: d = amax / 127, q = nearbyint(x * (1 / d)) (the block's
// largest magnitude maps to +-127). q: [n_rows, head_dim]; head_dim a multiple of 32.
inline void quantize_queries(const float* q, int n_rows, int head_dim, std::int8_t* qs, float* d, std::int32_t* sums) {
    const int n_blocks = head_dim / kQueryBlock;
    for (int r = 0; r < n_rows; ++r)
        for (int b = 0; b < n_blocks; ++b) {
            const float* x = q + std::size_t(r) * head_dim + b * kQueryBlock;
            float amax = 0.0f;
            for (int i = 0; i < kQueryBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
            const float scale = amax / 127.0f, inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
            std::int8_t* out = qs + std::size_t(r) * head_dim + b * kQueryBlock;
            std::int32_t sum = 0;
            for (int i = 0; i < kQueryBlock; ++i) {
                // fmin/fmax also turn a NaN into a bound instead of an undefined conversion
                const float v = std::fmin(std::fmax(std::nearbyint(x[i] * inverse), -127.0f), 127.0f);
                out[i] = std::int8_t(v);
                sum += out[i];
            }
            d[std::size_t(r) * n_blocks + b] = scale;
            sums[std::size_t(r) * n_blocks + b] = sum;
        }
}

// Owns quantized query rows, grown on demand and kept between calls.
struct QueryBuffer {
    std::vector<std::int8_t> qs;
    std::vector<float> d;
    std::vector<std::int32_t> sums;
    // Quantizes n_rows rows of q: [n_rows, head_dim] into the buffer.
    void quantize(const float* q, int n_rows, int head_dim) {
        const std::size_t rows = std::size_t(n_rows), nb = std::size_t(head_dim / kQueryBlock);
        if (qs.size() < rows * head_dim) qs.resize(rows * head_dim);
        if (d.size() < rows * nb) {
            d.resize(rows * nb);
            sums.resize(rows * nb);
        }
        quantize_queries(q, n_rows, head_dim, qs.data(), d.data(), sums.data());
    }
    QueryBlocks view() const { return {qs.data(), d.data(), sums.data()}; }
};

// The scalar reference: scores[r * score_stride + j] = score(query row r, key j), keys being
// n_keys consecutive Q4_0 cache rows.
inline void scores_q4_0_scalar(QueryBlocks q, int n_rows, const std::byte* keys, int n_keys, int head_dim, float scale,
                               float* scores, int score_stride) {
    const int n_blocks = head_dim / kQueryBlock;
    const std::size_t row_bytes = kv_row_bytes(KvType::q4_0, head_dim);
    for (int r = 0; r < n_rows; ++r)
        for (int j = 0; j < n_keys; ++j) {
            const auto* row = reinterpret_cast<const BlockQ4_0*>(keys + std::size_t(j) * row_bytes);
            const std::int8_t* qr = q.qs + std::size_t(r) * head_dim;
            float total = 0.0f;
            for (int g = 0; g < n_blocks; g += 4) {
                float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (int b = g; b < std::min(g + 4, n_blocks); ++b) {
                    const std::int8_t* qb = qr + b * kQueryBlock;
                    std::int32_t dot = 0;
                    for (int i = 0; i < QK4_0 / 2; ++i)
                        dot += std::int32_t(qb[i]) * ((row[b].qs[i] & 0x0f) - 8) +
                               std::int32_t(qb[i + QK4_0 / 2]) * ((row[b].qs[i] >> 4) - 8);
                    p[b - g] = float(dot) * (q.d[std::size_t(r) * n_blocks + b] * fp16_to_f32(row[b].d));
                }
                const float group = (p[0] + p[1]) + (p[2] + p[3]);
                total = g == 0 ? group : total + group;
            }
            scores[std::size_t(r) * score_stride + j] = total * scale;
        }
}

#if SMOL_HAVE_AVX2_KERNELS
namespace avx2 {

#define SMOL_INT8_AVX2_UNROLL _Pragma("GCC unroll 16")

// One key block's nibbles (0..15, in value order) for maddubs against signed query bytes, and
// its scale.
inline __m256i key_block(const BlockQ4_0& kb, float& d) {
    d = _cvtsh_ss(kb.d);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kb.qs));
    const __m128i low4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), low4), _mm_and_si128(packed, low4));
}

// The exact dot of one query block with one key block's nibbles as 8 i32 partial sums (without
// the -8 offset, which the caller takes out through the query's block sum). A pair of products
// stays within i16: 2 * 15 * 127.
inline __m256i block_dot(__m256i key, const std::int8_t* query) {
    const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(query));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(key, qv), _mm256_set1_epi16(1));
}

using kernels_avx2::detail::hsum_x4;  // lane i: the total of v_i's lanes, exact

// A query row's group of up to four blocks: 8 * its block sums and its block scales, in the
// four lanes (missing blocks 0).
struct QueryGroup {
    __m128i offset;
    __m128 d;
};

inline QueryGroup query_group(QueryBlocks q, int row, int head_dim, int g) {
    const int n_blocks = head_dim / kQueryBlock, in_group = std::min(4, n_blocks - g);
    alignas(16) std::int32_t offset[4] = {0, 0, 0, 0};
    alignas(16) float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < in_group; ++i) {
        offset[i] = 8 * q.sums[std::size_t(row) * n_blocks + g + i];
        d[i] = q.d[std::size_t(row) * n_blocks + g + i];
    }
    return {_mm_load_si128(reinterpret_cast<const __m128i*>(offset)), _mm_load_ps(d)};
}

// One key at a time against every row: per (row, key) four exact block dots, reduced to the
// four lanes of one vector, then the float step.
inline void scores_q4_0(QueryBlocks q, int n_rows, const std::byte* keys, int n_keys, int head_dim, float scale,
                        float* scores, int score_stride) {
    const int n_blocks = head_dim / kQueryBlock, n_groups = (n_blocks + 3) / 4;
    const std::size_t row_bytes = kv_row_bytes(KvType::q4_0, head_dim);
    thread_local std::vector<QueryGroup> prepared;  // [row][group], made once per call
    if (prepared.size() < std::size_t(n_rows) * n_groups) prepared.resize(std::size_t(n_rows) * n_groups);
    for (int r = 0; r < n_rows; ++r)
        for (int g = 0; g < n_groups; ++g)
            prepared[std::size_t(r) * n_groups + g] = query_group(q, r, head_dim, 4 * g);
    for (int j = 0; j < n_keys; ++j) {
        const auto* row = reinterpret_cast<const BlockQ4_0*>(keys + std::size_t(j) * row_bytes);
        for (int g = 0; g < n_groups; ++g) {
            const int in_group = std::min(4, n_blocks - 4 * g);
            __m256i key[4];
            alignas(16) float dk[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int i = 0; i < 4; ++i)
                key[i] = i < in_group ? key_block(row[4 * g + i], dk[i]) : _mm256_setzero_si256();
            const __m128 key_scales = _mm_load_ps(dk);
            for (int r = 0; r < n_rows; ++r) {
                const std::int8_t* qr = q.qs + std::size_t(r) * head_dim + std::size_t(4 * g) * kQueryBlock;
                const QueryGroup& qg = prepared[std::size_t(r) * n_groups + g];
                __m256i dots[4];
                SMOL_INT8_AVX2_UNROLL
                for (int i = 0; i < 4; ++i)  // a missing block's key is zero, and so its dot
                    dots[i] = block_dot(key[i], qr + (i < in_group ? i : 0) * kQueryBlock);
                const __m128i dot = _mm_sub_epi32(hsum_x4(dots[0], dots[1], dots[2], dots[3]), qg.offset);
                const __m128 p = _mm_mul_ps(_mm_cvtepi32_ps(dot), _mm_mul_ps(qg.d, key_scales));
                const __m128 pairs = _mm_hadd_ps(p, p);  // [p0 + p1, p2 + p3, ...]
                const float group = _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
                float& out = scores[std::size_t(r) * score_stride + j];
                out = g == 0 ? group : out + group;
            }
        }
        for (int r = 0; r < n_rows; ++r) scores[std::size_t(r) * score_stride + j] *= scale;
    }
}

#undef SMOL_INT8_AVX2_UNROLL
}  // namespace avx2

// ---- AVX-512 with VNNI ----------------------------------------------------------------------
#if SMOL_HAVE_AVX512_KERNELS
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
#endif
#endif

}  // namespace smol::kv_kernels
