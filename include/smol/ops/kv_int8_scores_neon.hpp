#pragma once
// The NEON integer scores over Q4_0 keys (kv_int8_scores.hpp says the float step every set
// takes): one key at a time against every query row. A key's blocks become signed bytes once
// for all the rows, and each block's dot is exact in Armv8.0's widening multiply-adds
// (WideningDot), so this one build serves the neon set and, down the fallback chain, dotprod's
// and i8mm's.

#include "smol/core/half.hpp"
#include "smol/core/simd_targets.hpp"
#include "smol/ops/kv_int8_scores.hpp"
#include "smol/quant/neon_dot.hpp"

#if SMOL_HAVE_NEON_KERNELS

#include <arm_neon.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace smol::kv_kernels::neon {

// One key block's values (nibble - 8) as signed bytes: values 0..15 in `low`, 16..31 in `high`.
struct KeyBlock {
    int8x16_t low, high;
};

inline KeyBlock key_block(const BlockQ4_0& block) {
    const uint8x16_t packed = vld1q_u8(block.qs);
    const int8x16_t eight = vdupq_n_s8(8);
    return {vsubq_s8(vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0f))), eight),
            vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), eight)};
}

// Up to four floats from `values` into the lanes, missing ones 0.
inline float32x4_t load_group(const float* values, int count) {
    if (count == 4) return vld1q_f32(values);
    float lanes[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < count; ++i) lanes[i] = values[i];
    return vld1q_f32(lanes);
}

// The group value (p_0 + p_1) + (p_2 + p_3) of one query row against one key's group of four
// blocks: the four exact block dots gathered into lanes, then the reference's float step.
inline float group_value(const KeyBlock (&key)[4], float32x4_t key_scales, const std::int8_t* query, int in_group,
                         float32x4_t query_scales) {
    using Dot = kernels_neon::detail::WideningDot;
    int32x4_t dots[4];
    SMOL_UNROLL
    for (int i = 0; i < 4; ++i) {  // a missing block's key is zero, and so its dot
        const std::int8_t* block = query + (i < in_group ? i : 0) * kQueryBlock;
        dots[i] = Dot::dot(Dot::dot(vdupq_n_s32(0), key[i].low, vld1q_s8(block)), key[i].high, vld1q_s8(block + 16));
    }
    const int32x4_t totals = vpaddq_s32(vpaddq_s32(dots[0], dots[1]), vpaddq_s32(dots[2], dots[3]));  // lane i: block i
    const float32x4_t p = vmulq_f32(vcvtq_f32_s32(totals), vmulq_f32(query_scales, key_scales));
    const float32x4_t pairs = vpaddq_f32(p, p);  // [p0 + p1, p2 + p3, ...]
    return vpadds_f32(vget_low_f32(pairs));
}

inline void scores_q4_0(QueryBlocks q, int n_rows, const std::byte* keys, int n_keys, int head_dim, float scale,
                        float* scores, int score_stride) {
    const int n_blocks = head_dim / kQueryBlock;
    const std::size_t row_bytes = kv_row_bytes(KvType::q4_0, head_dim);
    for (int j = 0; j < n_keys; ++j) {
        const auto* row = reinterpret_cast<const BlockQ4_0*>(keys + std::size_t(j) * row_bytes);
        for (int g = 0; g < n_blocks; g += 4) {
            const int in_group = std::min(4, n_blocks - g);
            KeyBlock key[4];
            float key_scale[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int i = 0; i < 4; ++i) {
                key[i] = i < in_group ? key_block(row[g + i]) : KeyBlock{vdupq_n_s8(0), vdupq_n_s8(0)};
                if (i < in_group) key_scale[i] = fp16_to_f32(row[g + i].d);
            }
            const float32x4_t key_scales = vld1q_f32(key_scale);
            for (int r = 0; r < n_rows; ++r) {
                const std::int8_t* query = q.qs + std::size_t(r) * head_dim + std::size_t(g) * kQueryBlock;
                const float32x4_t query_scales = load_group(q.d + std::size_t(r) * n_blocks + g, in_group);
                const float group = group_value(key, key_scales, query, in_group, query_scales);
                float& out = scores[std::size_t(r) * score_stride + j];
                out = g == 0 ? group : out + group;
            }
        }
        for (int r = 0; r < n_rows; ++r) scores[std::size_t(r) * score_stride + j] *= scale;
    }
}

}  // namespace smol::kv_kernels::neon

#endif  // SMOL_HAVE_NEON_KERNELS
