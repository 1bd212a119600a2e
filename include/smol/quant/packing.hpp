#pragma once
// Q8_K activations regrouped 16 tokens to a block (BlockQ8Kx16), for prompt kernels whose vector
// lanes are tokens. Done once per matmul, so every row of the weight matrix reuses it.

#include <cstdint>
#include <cstring>

#include "smol/core/threads.hpp"
#include "smol/quant/blocks.hpp"

namespace smol {

// rows: [n_tokens][blocks] Q8_K; out: [ceil(n_tokens / 16)][blocks]. Tokens past n_tokens in the
// last group are zero, so they contribute nothing and their lanes are never stored.
// `threads`: the work's thread count (thread_team).
inline void pack_q8k_x16(const BlockQ8K* rows, std::int64_t n_tokens, std::int64_t blocks, BlockQ8Kx16* out,
                         int threads = 0) {
    const std::int64_t groups = (n_tokens + kPackedTokens - 1) / kPackedTokens;
#pragma omp parallel for schedule(static) num_threads(thread_team(threads)) if (groups * blocks >= 32)
    for (std::int64_t i = 0; i < groups * blocks; ++i) {
        const std::int64_t group = i / blocks, b = i % blocks;
        BlockQ8Kx16& packed = out[i];
        for (int t = 0; t < kPackedTokens; ++t) {
            const std::int64_t token = group * kPackedTokens + t;
            if (token >= n_tokens) {
                for (int k = 0; k < QK_K / 4; ++k) std::memset(packed.qs[k][t], 0, 4);
                for (int j = 0; j < QK_K / 32; ++j) packed.bsums[j][t][0] = packed.bsums[j][t][1] = 0;
                for (int j = 0; j < QK_K / 64; ++j) packed.sums32[j][t][0] = packed.sums32[j][t][1] = 0;
                for (int j = 0; j < QK_K / 16; ++j) packed.lane_sums16[j][t][0] = packed.lane_sums16[j][t][1] = 0;
                packed.d[t] = 0.0f;
                continue;
            }
            const BlockQ8K& block = rows[token * blocks + b];
            for (int k = 0; k < QK_K / 4; ++k) std::memcpy(packed.qs[k][t], block.qs + 4 * k, 4);
            for (int j = 0; j < QK_K / 32; ++j) {
                packed.bsums[j][t][0] = block.bsums[2 * j];
                packed.bsums[j][t][1] = block.bsums[2 * j + 1];
            }
            for (int j = 0; j < QK_K / 64; ++j)  // |sum| <= 32 * 128: an i16
                for (int k = 0; k < 2; ++k)
                    packed.sums32[j][t][k] = std::int16_t(block.bsums[4 * j + 2 * k] + block.bsums[4 * j + 2 * k + 1]);
            for (int j = 0; j < QK_K / 16; ++j) {  // the even lane's quants; the odd lane has the rest of bsum j
                const std::int8_t* q = block.qs + 16 * j;
                const int even = q[0] + q[1] + q[4] + q[5] + q[8] + q[9] + q[12] + q[13];
                packed.lane_sums16[j][t][0] = std::int16_t(even);
                packed.lane_sums16[j][t][1] = std::int16_t(block.bsums[j] - even);
            }
            packed.d[t] = block.d;
        }
    }
}

}  // namespace smol
