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
//
// This file holds the query quantizer and the scalar reference; each instruction set's version
// is in its own file: kv_int8_scores_avx2.hpp, kv_int8_scores_avx512.hpp, kv_int8_scores_neon.hpp.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "smol/core/half.hpp"
#include "smol/ops/kv_layout.hpp"
#include "smol/quant/blocks.hpp"

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

}  // namespace smol::kv_kernels
