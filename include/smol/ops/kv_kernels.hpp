#pragma once
// The kernels attention runs over a KV cache: a row written in the cache type (fp16, Q8_0,
// Q4_0) and read back as floats, query-key scores for several query rows at once, the softmax
// weights, and the weighted sum of value rows. Each has a scalar reference (the `_scalar`
// functions) that the AVX2, AVX-512 and NEON versions are tested against (those are written once,
// in kv_tiles_set.hpp, and compiled per set by kv_tiles_avx2.hpp, kv_tiles_avx512.hpp and
// kv_tiles_xsimd.hpp); AttentionKernels
// gathers one instruction set's versions, and attention_kernels() is the set this CPU runs. The SIMD
// sets also score and accumulate straight from the cache rows (`scores_cache`,
// `accumulate_cache`), converting each block in registers: decoding, whose 4 query rows per KV
// head share too little to pay for a float copy of every row, runs those, and they give the
// bits of the copy-first kernels. Q4_0 keys are scored in integers against quantized query rows
// instead (kv_int8_scores.hpp, a file per set beside it), by prompts and decoding alike.
//
// Every result a kernel writes for one query row depends only on that row and the cache rows,
// never on which other rows or how many shared the call: that is what keeps attention's output
// for a token the same whatever its batch.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/cpu.hpp"
#include "smol/core/half.hpp"
#include "smol/core/simd_targets.hpp"
#include "smol/ops/kv_int8_scores.hpp"
#include "smol/ops/kv_int8_scores_avx2.hpp"
#include "smol/ops/kv_int8_scores_avx512.hpp"
#include "smol/ops/kv_int8_scores_neon.hpp"
#include "smol/ops/kv_layout.hpp"
#include "smol/ops/kv_tiles_avx2.hpp"
#include "smol/ops/kv_tiles_avx512.hpp"
#include "smol/ops/kv_tiles_xsimd.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/type_table.hpp"

namespace smol::kv_kernels {

// ---- scalar references ------------------------------------------------------------------------

// One position's head_dim values written in the cache type (round to nearest even for fp16,
// ggml's reference quantizers for Q8_0 and Q4_0).
inline void store_row_scalar(KvType type, const float* x, std::byte* row, int head_dim) {
    quantize_row(kv_tensor_type(type), x, row, head_dim);
}

// The row back as floats: exactly the values the cache holds (d * q for the block types).
inline void load_row_scalar(KvType type, const std::byte* row, float* out, int head_dim) {
    dequantize_row(kv_tensor_type(type), row, out, head_dim);
}

// scores[r * score_stride + j] = scale * (q_r . k_j) for r < n_rows, j < n_keys.
// q: [n_rows, head_dim], keys: [n_keys, head_dim] floats.
inline void scores_scalar(const float* q, int n_rows, const float* keys, int n_keys, int head_dim, float scale,
                          float* scores, int score_stride) {
    for (int r = 0; r < n_rows; ++r)
        for (int j = 0; j < n_keys; ++j) {
            float dot = 0.0f;
            for (int i = 0; i < head_dim; ++i) dot += q[std::size_t(r) * head_dim + i] * keys[std::size_t(j) * head_dim + i];
            scores[std::size_t(r) * score_stride + j] = dot * scale;
        }
}

// p[j] = exp(s[j] - max) for j < n, returns the sum of the p[j] (s[j] may be -inf: p[j] = 0).
inline float softmax_weights_scalar(float* s, int n, float max) {
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - max));
    return sum;
}

// acc[r, :] += sum_j p[r * p_stride + j] * values[j, :] for r < n_rows, j < n_values, in order of j.
inline void accumulate_scalar(const float* p, int p_stride, int n_rows, const float* values, int n_values,
                              int head_dim, float* acc) {
    for (int r = 0; r < n_rows; ++r)
        for (int j = 0; j < n_values; ++j) {
            const float w = p[std::size_t(r) * p_stride + j];
            for (int i = 0; i < head_dim; ++i)
                acc[std::size_t(r) * head_dim + i] += w * values[std::size_t(j) * head_dim + i];
        }
}

// ---- the set attention runs -------------------------------------------------------------------

// One instruction set's attention kernels. The SIMD sets need head_dim to be a multiple of 32;
// attention falls back to the scalar set otherwise.
struct AttentionKernels {
    Isa isa;
    // `values` floats from a cache row, or from a run of consecutive rows (a multiple of 32 values)
    void (*load_row)(KvType type, const std::byte* row, float* out, int values);
    void (*scores)(const float* q, int n_rows, const float* keys, int n_keys, int head_dim, float scale, float* out,
                   int score_stride);
    float (*softmax_weights)(float* s, int n, float max);
    void (*accumulate)(const float* p, int p_stride, int n_rows, const float* values, int n_values, int head_dim,
                       float* acc);
    // scores and accumulate reading n consecutive cache rows in place, for calls with too few
    // query rows to share a float copy of them (decoding). The same tiles as scores / accumulate
    // over rows load_row converted, so the same bits; nullptr where the set has none (attention
    // then copies). scores_cache takes f16 and Q8_0 keys (Q4_0 keys go to scores_q4_0).
    void (*scores_cache)(KvType type, const float* q, int n_rows, const std::byte* keys, int n_keys, int head_dim,
                         float scale, float* out, int score_stride);
    void (*accumulate_cache)(KvType type, const float* p, int p_stride, int n_rows, const std::byte* values,
                             int n_values, int head_dim, float* acc);
    // Scores of quantized query rows against Q4_0 keys in place, in integers
    // (kv_int8_scores.hpp); the same float step in every set.
    void (*scores_q4_0)(QueryBlocks q, int n_rows, const std::byte* keys, int n_keys, int head_dim, float scale,
                        float* out, int score_stride);
};

// The set for `isa`, or nullptr where this build has none.
inline const AttentionKernels* attention_kernels_for(Isa isa) {
    static constexpr AttentionKernels scalar{Isa::scalar,  load_row_scalar, scores_scalar, softmax_weights_scalar,
                                             accumulate_scalar, nullptr,         nullptr,       scores_q4_0_scalar};
    switch (isa) {
        case Isa::scalar: return &scalar;
#if SMOL_HAVE_AVX2_KERNELS
        case Isa::avx2: {
            static constexpr AttentionKernels set{Isa::avx2,           avx2::load_row,   avx2::scores,
                                                  avx2::softmax_weights, avx2::accumulate, avx2::scores_cache,
                                                  avx2::accumulate_cache, avx2::scores_q4_0};
            return &set;
        }
#endif
#if SMOL_HAVE_AVX512_KERNELS
        case Isa::avx512: {
            static constexpr AttentionKernels set{Isa::avx512,           avx512::load_row,   avx512::scores,
                                                  avx512::softmax_weights, avx512::accumulate, avx512::scores_cache,
                                                  avx512::accumulate_cache, avx512::scores_q4_0};
            return &set;
        }
#endif
#if SMOL_HAVE_NEON_KERNELS
        case Isa::neon: {
            static constexpr AttentionKernels set{Isa::neon,           neon::load_row,   neon::scores,
                                                  neon::softmax_weights, neon::accumulate, neon::scores_cache,
                                                  neon::accumulate_cache, neon::scores_q4_0};
            return &set;
        }
#endif
        default: return nullptr;
    }
}

// The set this process runs: the one of the quantized matmuls (selected_isa(): the best the CPU
// has, or SMOL_ISA's), or the first down its fallback chain this build has attention kernels for.
inline const AttentionKernels& attention_kernels() {
    static const AttentionKernels* chosen = kernels_down_fallback_chain(attention_kernels_for);
    return *chosen;
}

inline void store_row(KvType type, const float* x, std::byte* row, int head_dim) {
#if SMOL_HAVE_AVX2_KERNELS
    if (type == KvType::f16 && head_dim % 8 == 0)
        return avx2::store_row_f16(x, reinterpret_cast<std::uint16_t*>(row), head_dim);
#endif
    store_row_scalar(type, x, row, head_dim);
}

}  // namespace smol::kv_kernels
