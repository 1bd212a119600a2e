#pragma once
// Causal grouped-query attention of new tokens over a sequence's fp16 KV cache.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__F16C__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SMOL_HAVE_F16C_KERNELS 1
#endif

#include "smol/core/half.hpp"
#include "smol/ops/kv_layout.hpp"

namespace smol {

// fp16 vector helpers: the scalar versions are the reference the F16C versions are tested against.
namespace kv_kernels {

inline float dot_f32_f16_scalar(const float* q, const std::uint16_t* k, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += q[i] * fp16_to_f32(k[i]);
    return sum;
}
inline void axpy_f16_scalar(float a, const std::uint16_t* v, float* acc, int n) {
    for (int i = 0; i < n; ++i) acc[i] += a * fp16_to_f32(v[i]);
}
inline void store_f16_scalar(const float* x, std::uint16_t* out, int n) {
    for (int i = 0; i < n; ++i) out[i] = f32_to_fp16(x[i]);
}

#ifdef SMOL_HAVE_F16C_KERNELS
// n must be a multiple of 8.
inline float dot_f32_f16_f16c(const float* q, const std::uint16_t* k, int n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(k + i))), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(k + i + 8))), acc1);
    }
    for (; i < n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(k + i))), acc0);
    const __m256 acc = _mm256_add_ps(acc0, acc1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
inline void axpy_f16_f16c(float a, const std::uint16_t* v, float* acc, int n) {
    const __m256 va = _mm256_set1_ps(a);
    for (int i = 0; i < n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(va, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(v + i))),
                                                  _mm256_loadu_ps(acc + i)));
}
inline void store_f16_f16c(const float* x, std::uint16_t* out, int n) {
    for (int i = 0; i < n; i += 8)
        _mm_storeu_si128((__m128i*)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
}
#endif

inline float dot_f32_f16(const float* q, const std::uint16_t* k, int n) {
#ifdef SMOL_HAVE_F16C_KERNELS
    if (n % 8 == 0) return dot_f32_f16_f16c(q, k, n);
#endif
    return dot_f32_f16_scalar(q, k, n);
}
inline void axpy_f16(float a, const std::uint16_t* v, float* acc, int n) {
#ifdef SMOL_HAVE_F16C_KERNELS
    if (n % 8 == 0) return axpy_f16_f16c(a, v, acc, n);
#endif
    axpy_f16_scalar(a, v, acc, n);
}
inline void store_f16(const float* x, std::uint16_t* out, int n) {
#ifdef SMOL_HAVE_F16C_KERNELS
    if (n % 8 == 0) return store_f16_f16c(x, out, n);
#endif
    store_f16_scalar(x, out, n);
}

}  // namespace kv_kernels

// Writes the keys and values of `n_tokens` new tokens at positions first..first+n-1.
// k, v: [n_tokens, n_kv_heads * head_dim]
inline void kv_store(const KvLayer& cache, int first, const float* k, const float* v, std::int64_t n_tokens) {
    const int n_kv = cache.n_kv_heads, hd = cache.head_dim;
    std::uint16_t* keys = cache.keys;
    std::uint16_t* values = cache.values;
#pragma omp parallel for collapse(2) schedule(static) if (n_tokens > 1)
    for (std::int64_t t = 0; t < n_tokens; ++t)
        for (int g = 0; g < n_kv; ++g) {
            const std::size_t at = std::size_t(g) * cache.head_stride + std::size_t(first + t) * hd;
            kv_kernels::store_f16(k + (t * n_kv + g) * hd, keys + at, hd);
            kv_kernels::store_f16(v + (t * n_kv + g) * hd, values + at, hd);
        }
}

// out[t, h] = softmax_j(q[t, h] . K[g, j] * scale) . V[g, j] for j <= first + t, g = h / (n_heads / n_kv_heads).
// q, out: [n_tokens, n_heads * head_dim]. The new tokens' keys and values must already be stored.
inline void attention(const KvLayer& cache, int first, const float* q, float* out, std::int64_t n_tokens,
                      int n_heads) {
    const int n_kv = cache.n_kv_heads, hd = cache.head_dim;
    const int group = n_heads / n_kv;
    const float scale = 1.0f / std::sqrt(float(hd));
    const std::uint16_t* keys = cache.keys;
    const std::uint16_t* values = cache.values;
#pragma omp parallel
    {
        thread_local std::vector<float> scores;  // [context] reused across calls
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (std::int64_t t = 0; t < n_tokens; ++t)
            for (int h = 0; h < n_heads; ++h) {
                const int n_ctx = first + int(t) + 1;
                if (scores.size() < std::size_t(n_ctx)) scores.resize(std::size_t(n_ctx));
                const float* qh = q + (t * n_heads + h) * hd;
                const std::uint16_t* kh = keys + std::size_t(h / group) * cache.head_stride;
                const std::uint16_t* vh = values + std::size_t(h / group) * cache.head_stride;
                float max_score = -INFINITY;
                for (int j = 0; j < n_ctx; ++j) {
                    scores[j] = kv_kernels::dot_f32_f16(qh, kh + std::size_t(j) * hd, hd) * scale;
                    max_score = std::max(max_score, scores[j]);
                }
                float sum = 0.0f;
                for (int j = 0; j < n_ctx; ++j) {
                    scores[j] = std::exp(scores[j] - max_score);
                    sum += scores[j];
                }
                float* oh = out + (t * n_heads + h) * hd;
                std::fill(oh, oh + hd, 0.0f);
                const float inv_sum = 1.0f / sum;
                for (int j = 0; j < n_ctx; ++j)
                    kv_kernels::axpy_f16(scores[j] * inv_sum, vh + std::size_t(j) * hd, oh, hd);
            }
    }
}

}  // namespace smol
