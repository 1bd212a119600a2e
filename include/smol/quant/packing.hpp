#pragma once
// Q8_K activations regrouped 16 tokens to a block (BlockQ8Kx16), for prompt kernels whose vector
// lanes are tokens. Done once per matmul, so every row of the weight matrix reuses it.

#include <cstdint>
#include <cstring>

#include "smol/core/simd_targets.hpp"
#include "smol/core/threads.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/transpose_avx2.hpp"

namespace smol {

namespace packing_detail {

// Token t of packed block (group, b): its Q8_K block, or past n_tokens a block of zeros (zero
// quants, sums and scale), so those lanes add nothing.
inline const BlockQ8K& token_block(const BlockQ8K* rows, std::int64_t n_tokens, std::int64_t blocks, std::int64_t group,
                                   std::int64_t b, int t) {
    static const BlockQ8K kNone{};
    const std::int64_t token = group * kPackedTokens + t;
    return token < n_tokens ? rows[token * blocks + b] : kNone;
}

// The reference: one packed block, field by field, a token at a time.
inline void pack_block_scalar(const BlockQ8K* rows, std::int64_t n_tokens, std::int64_t blocks, std::int64_t group,
                              std::int64_t b, BlockQ8Kx16& packed) {
    for (int t = 0; t < kPackedTokens; ++t) {
        const BlockQ8K* block = &token_block(rows, n_tokens, blocks, group, b, t);
        for (int k = 0; k < QK_K / 4; ++k) std::memcpy(packed.qs[k][t], block->qs + 4 * k, 4);
        for (int j = 0; j < QK_K / 32; ++j) {
            packed.bsums[j][t][0] = block->bsums[2 * j];
            packed.bsums[j][t][1] = block->bsums[2 * j + 1];
        }
        for (int j = 0; j < QK_K / 64; ++j)  // |sum| <= 32 * 128: an i16
            for (int k = 0; k < 2; ++k)
                packed.sums32[j][t][k] = std::int16_t(block->bsums[4 * j + 2 * k] + block->bsums[4 * j + 2 * k + 1]);
        for (int j = 0; j < QK_K / 16; ++j) {  // the even lane's quants; the odd lane has the rest of bsum j
            const std::int8_t* q = block->qs + 16 * j;
            const int even = q[0] + q[1] + q[4] + q[5] + q[8] + q[9] + q[12] + q[13];
            packed.lane_sums16[j][t][0] = std::int16_t(even);
            packed.lane_sums16[j][t][1] = std::int16_t(block->bsums[j] - even);
        }
        packed.d[t] = block->d;
    }
}

#if SMOL_HAVE_AVX2_KERNELS
// The same bytes with AVX2 (the x86 build's baseline), 8 tokens at a time: each 8 x 8 block of
// 4-byte groups is transposed in registers, and the sums come from the transposed groups
// (vpmaddubsw by ones gives each token's two lane sums of a group; bsums and the sums of 32 add
// those up), equal to the quantizer's bsums since both are exact sums of the same quants.
inline void pack_block_avx2(const BlockQ8K* rows, std::int64_t n_tokens, std::int64_t blocks, std::int64_t group,
                            std::int64_t b, BlockQ8Kx16& packed) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int t0 = 0; t0 < kPackedTokens; t0 += 8) {
        const BlockQ8K* from[8];
        for (int i = 0; i < 8; ++i) {
            from[i] = &token_block(rows, n_tokens, blocks, group, b, t0 + i);
            packed.d[t0 + i] = from[i]->d;
        }
        __m256i bsum[QK_K / 16];  // [j]: bsum j of the 8 tokens, as i32
        for (int k0 = 0; k0 < QK_K / 4; k0 += 8) {
            __m256i c[8];  // token i's groups k0..k0+7, then [g]: group k0 + g of the 8 tokens
            for (int i = 0; i < 8; ++i) c[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from[i]->qs + 4 * k0));
            avx2_transpose::transpose_8x8_epi32(c);
            for (int g = 0; g < 8; ++g) _mm256_storeu_si256(reinterpret_cast<__m256i*>(packed.qs[k0 + g][t0]), c[g]);
            for (int h = 0; h < 2; ++h) {  // sub-blocks of 16: groups k0 + 4h .. k0 + 4h + 3
                __m256i lanes = _mm256_maddubs_epi16(ones8, c[4 * h]);
                for (int g = 1; g < 4; ++g) lanes = _mm256_add_epi16(lanes, _mm256_maddubs_epi16(ones8, c[4 * h + g]));
                const int j = k0 / 4 + h;
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(packed.lane_sums16[j][t0]), lanes);
                bsum[j] = _mm256_madd_epi16(lanes, ones16);
            }
        }
        // Two i32 sums (each within i16) as one token's pair of words: the first low, the second high.
        const auto word_pairs = [](__m256i low, __m256i high) {
            return _mm256_blend_epi16(low, _mm256_slli_epi32(high, 16), 0xaa);
        };
        for (int j = 0; j < QK_K / 32; ++j)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(packed.bsums[j][t0]), word_pairs(bsum[2 * j], bsum[2 * j + 1]));
        for (int j = 0; j < QK_K / 64; ++j) {
            const __m256i first = _mm256_add_epi32(bsum[4 * j], bsum[4 * j + 1]);
            const __m256i second = _mm256_add_epi32(bsum[4 * j + 2], bsum[4 * j + 3]);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(packed.sums32[j][t0]), word_pairs(first, second));
        }
    }
}
#endif

}  // namespace packing_detail

// Packed block (group, b) of rows ([n_tokens][blocks] Q8_K) with this build's packer: AVX2 on
// x86, where it is the baseline; the scalar reference elsewhere.
inline void pack_block(const BlockQ8K* rows, std::int64_t n_tokens, std::int64_t blocks, std::int64_t group,
                       std::int64_t b, BlockQ8Kx16& packed) {
#if SMOL_HAVE_AVX2_KERNELS
    packing_detail::pack_block_avx2(rows, n_tokens, blocks, group, b, packed);
#else
    packing_detail::pack_block_scalar(rows, n_tokens, blocks, group, b, packed);
#endif
}

// rows: [n_tokens][blocks] Q8_K; out: [ceil(n_tokens / 16)][blocks]. Tokens past n_tokens in the
// last group are zero, so they contribute nothing and their lanes are never stored.
// `threads`: the work's thread count (thread_team).
inline void pack_q8k_x16(const BlockQ8K* rows, std::int64_t n_tokens, std::int64_t blocks, BlockQ8Kx16* out,
                         int threads = 0) {
    const std::int64_t groups = packed_groups(n_tokens);
#pragma omp parallel for schedule(static) num_threads(thread_team(threads)) if (groups * blocks >= 32)
    for (std::int64_t i = 0; i < groups * blocks; ++i) pack_block(rows, n_tokens, blocks, i / blocks, i % blocks, out[i]);
}

}  // namespace smol
