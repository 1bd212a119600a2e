#pragma once
// The AVX2 integer scores over Q4_0 keys (kv_int8_scores.hpp says the float step every set
// takes): one key at a time against every query row, maddubs for each block's exact dot.

#include "smol/ops/kv_int8_scores.hpp"
#include "smol/quant/kernels_avx2.hpp"  // its exact integer reductions

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace smol::kv_kernels {

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

}  // namespace smol::kv_kernels

#endif  // SMOL_HAVE_AVX2_KERNELS
