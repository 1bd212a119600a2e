#pragma once
// The kernels attention runs over a KV cache: a row written in the cache type (fp16, Q8_0,
// Q4_0) and read back as floats, query-key scores for several query rows at once, the softmax
// weights, and the weighted sum of value rows. Each has a scalar reference (the `_scalar`
// functions) that the AVX2 and AVX-512 versions are tested against; AttentionKernels gathers
// one instruction set's versions, and attention_kernels() is the set this CPU runs. The SIMD
// sets also score and accumulate straight from the cache rows (`scores_cache`,
// `accumulate_cache`), converting each block in registers: decoding, whose 4 query rows per KV
// head share too little to pay for a float copy of every row, runs those, and they give the
// bits of the copy-first kernels. Q4_0 keys are scored in integers against quantized query rows
// instead (kv_int8_scores.hpp), by prompts and decoding alike.
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

#if defined(__F16C__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SMOL_HAVE_KV_AVX2 1
#endif

#include "smol/core/cpu.hpp"
#include "smol/core/half.hpp"
#include "smol/ops/kv_int8_scores.hpp"
#include "smol/ops/kv_layout.hpp"
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

// exp(x) for x <= 0 as the SIMD sets compute it (Cephes' expf): k = round(x log2 e), Cody-Waite
// reduction r = x - k ln 2 in two parts, exp(r) by a degree-6 polynomial on [-ln2/2, ln2/2], and
// 2^k put into the exponent field. Within 2 ulp of std::exp; below kMin the result is 0.
namespace exp_poly {
inline constexpr float kMin = -87.33654f;  // ln of the smallest normal float
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
inline constexpr float kCoefficients[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                           4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace exp_poly

// f(std::integral_constant<KvType, T>{}) for the cache type known only at run time: how each
// SIMD set's scores_cache / accumulate_cache picks its CacheRows<T> instantiation.
template <class F>
inline void with_kv_type(KvType type, F&& f) {
    switch (type) {
        case KvType::f16: return f(std::integral_constant<KvType, KvType::f16>{});
        case KvType::q8_0: return f(std::integral_constant<KvType, KvType::q8_0>{});
        case KvType::q4_0: return f(std::integral_constant<KvType, KvType::q4_0>{});
    }
}

// ---- AVX2 + FMA + F16C ------------------------------------------------------------------------
#ifdef SMOL_HAVE_KV_AVX2
// The register tiles below are arrays of vectors indexed by constant loops; unrolled, they live
// in registers. GCC unrolls them by itself only at -O3, and at -O2 (RelWithDebInfo) spilled
// them to the stack, 2.6x slower, hence the pragma.
#define SMOL_KV_UNROLL _Pragma("GCC unroll 16")
namespace avx2 {

// Eight sums of eight accumulators, each summed by the same tree ((0+1)+(2+3))+((4+5)+(6+7)),
// so a score's value does not depend on the slot it was computed in.
inline __m256 sum8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6, __m256 a7) {
    const __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
    const __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    // u0 = [a0 a1 a2 a3 (low halves) | a0 a1 a2 a3 (high halves)], u1 likewise for a4..a7
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

inline void store_row_f16(const float* x, std::uint16_t* out, int n) {  // n: multiple of 8
    for (int i = 0; i < n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
}

inline void load_row(KvType type, const std::byte* row, float* out, int head_dim) {  // head_dim: multiple of 32
    switch (type) {
        case KvType::f16: {
            const auto* h = reinterpret_cast<const std::uint16_t*>(row);
            for (int i = 0; i < head_dim; i += 8)
                _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
            return;
        }
        case KvType::q8_0: {
            const auto* b = reinterpret_cast<const BlockQ8_0*>(row);
            for (int k = 0; k < head_dim / QK8_0; ++k, out += QK8_0) {
                const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[k].d));
                for (int i = 0; i < QK8_0; i += 8) {
                    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[k].qs + i)));
                    _mm256_storeu_ps(out + i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
                }
            }
            return;
        }
        case KvType::q4_0: {
            const auto* b = reinterpret_cast<const BlockQ4_0*>(row);
            const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
            for (int k = 0; k < head_dim / QK4_0; ++k, out += QK4_0) {
                const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[k].d));
                const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[k].qs));
                const __m128i lo = _mm_sub_epi8(_mm_and_si128(packed, low4), eight);                      // values 0..15
                const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), low4), eight);  // values 16..31
                const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
                for (int p = 0; p < 4; ++p)
                    _mm256_storeu_ps(out + 8 * p, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[p]))));
            }
            return;
        }
    }
}

// exp_poly on 8 lanes; -inf and anything below exp_poly::kMin give exactly 0.
inline __m256 exp_nonpositive(__m256 x) {
    using namespace exp_poly;
    const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(kMin), _CMP_LT_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(kMin));
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Lo), _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Hi), x));
    __m256 p = _mm256_set1_ps(kCoefficients[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kCoefficients[i]));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // 2^k for k in [-126, 0]: the exponent field built directly
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

// Eight lanes summed j by j, then the lanes by a fixed tree; n is padded to a multiple of 8 with
// zero weights, which add nothing.
inline float softmax_weights(float* s, int n, float max) {
    const __m256 m = _mm256_set1_ps(max);
    __m256 sum = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 p = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
        _mm256_storeu_ps(s + j, p);
        sum = _mm256_add_ps(sum, p);
    }
    if (j < n) {
        alignas(32) float tail[8];
        for (int i = 0; i < 8; ++i) tail[i] = j + i < n ? s[j + i] : -INFINITY;
        const __m256 p = exp_nonpositive(_mm256_sub_ps(_mm256_load_ps(tail), m));
        _mm256_store_ps(tail, p);
        for (int i = 0; j + i < n; ++i) s[j + i] = tail[i];
        sum = _mm256_add_ps(sum, p);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

// Where a tile's key or value rows come from: a buffer of floats (a step of rows load_row
// converted, which a prompt's many query rows share) or the cache rows themselves, each 16 values
// turned into the same floats in registers (decoding). The tiles below are templates over both,
// so both give the same bits by construction.
struct FloatRows {
    const float* first;
    int head_dim;
    const float* row(int j) const { return first + std::size_t(j) * head_dim; }
    static void half16(const float* row, int half, __m256& v0, __m256& v1) {
        v0 = _mm256_loadu_ps(row + 16 * half);
        v1 = _mm256_loadu_ps(row + 16 * half + 8);
    }
};

template <KvType T>
struct CacheRows {
    const std::byte* first;
    std::size_t row_bytes;
    const std::byte* row(int j) const { return first + std::size_t(j) * row_bytes; }
    // Values 16 * half .. 16 * half + 15 as floats: the same bits load_row writes there.
    static void half16(const std::byte* row, int half, __m256& v0, __m256& v1) {
        if constexpr (T == KvType::f16) {
            const auto* h = reinterpret_cast<const std::uint16_t*>(row) + 16 * half;
            v0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
            v1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 8)));
        } else if constexpr (T == KvType::q8_0) {
            const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[half / 2];
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(b.d));
            const std::int8_t* qs = b.qs + 16 * (half % 2);
            v0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs)))));
            v1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8)))));
        } else {
            const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(row)[half / 2];
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(b.d));
            const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
            const __m128i nibbles = half % 2 ? _mm_srli_epi16(packed, 4) : packed;  // low nibbles: values 0..15
            const __m128i x = _mm_sub_epi8(_mm_and_si128(nibbles, _mm_set1_epi8(0x0f)), _mm_set1_epi8(8));
            v0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x)));
            v1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(x, 8))));
        }
    }
};

// 4 query rows x 2 keys: eight dot products over head_dim (a multiple of 16), each accumulated
// in one register in order of i and summed by sum8's fixed tree.
template <class Rows, class Row>
inline void scores_4x2(const float* const q[4], Row k0, Row k1, int head_dim, float scale, float out[8]) {
    __m256 a[8];
    SMOL_KV_UNROLL
    for (__m256& x : a) x = _mm256_setzero_ps();
    for (int h = 0; h < head_dim / 16; ++h) {
        __m256 x0[2], x1[2];
        Rows::half16(k0, h, x0[0], x0[1]);
        Rows::half16(k1, h, x1[0], x1[1]);
        SMOL_KV_UNROLL
        for (int part = 0; part < 2; ++part)
            SMOL_KV_UNROLL
            for (int r = 0; r < 4; ++r) {
                const __m256 qr = _mm256_loadu_ps(q[r] + 16 * h + 8 * part);
                a[2 * r] = _mm256_fmadd_ps(qr, x0[part], a[2 * r]);
                a[2 * r + 1] = _mm256_fmadd_ps(qr, x1[part], a[2 * r + 1]);
            }
    }
    _mm256_storeu_ps(out, _mm256_mul_ps(sum8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]), _mm256_set1_ps(scale)));
}

template <class Rows>
inline void scores_tiles(const float* q, int n_rows, Rows keys, int n_keys, int head_dim, float scale, float* scores,
                         int score_stride) {
    float out[8];
    for (int j = 0; j < n_keys; j += 2) {
        const auto k0 = keys.row(j), k1 = keys.row(j + 1 < n_keys ? j + 1 : j);  // an odd last key is computed twice
        for (int r = 0; r < n_rows; r += 4) {
            const float* rows[4];
            for (int i = 0; i < 4; ++i) rows[i] = q + std::size_t(std::min(r + i, n_rows - 1)) * head_dim;
            scores_4x2<Rows>(rows, k0, k1, head_dim, scale, out);
            for (int i = 0; i < 4 && r + i < n_rows; ++i) {
                float* s = scores + std::size_t(r + i) * score_stride + j;
                s[0] = out[2 * i];
                if (j + 1 < n_keys) s[1] = out[2 * i + 1];
            }
        }
    }
}

// acc rows += p . values for 4 rows (a dummy row repeats the last) and 16 columns at a time,
// the 8 accumulators held in registers over every value row.
template <class Rows>
inline void accumulate_tiles(const float* p, int p_stride, int n_rows, Rows values, int n_values, int head_dim,
                             float* acc) {
    for (int r = 0; r < n_rows; r += 4) {
        const float* pr[4];
        float* ar[4];
        const float dummy[16] = {};  // a dummy row's accumulators: computed, never stored
        SMOL_KV_UNROLL
        for (int i = 0; i < 4; ++i) {
            pr[i] = p + std::size_t(std::min(r + i, n_rows - 1)) * p_stride;
            ar[i] = r + i < n_rows ? acc + std::size_t(r + i) * head_dim : nullptr;
        }
        for (int c = 0; c < head_dim; c += 16) {
            __m256 a[8];
            SMOL_KV_UNROLL
            for (int i = 0; i < 4; ++i) {
                const float* src = ar[i] ? ar[i] + c : dummy;
                a[2 * i] = _mm256_loadu_ps(src);
                a[2 * i + 1] = _mm256_loadu_ps(src + 8);
            }
            for (int j = 0; j < n_values; ++j) {
                __m256 v0, v1;
                Rows::half16(values.row(j), c / 16, v0, v1);
                SMOL_KV_UNROLL
                for (int i = 0; i < 4; ++i) {
                    const __m256 w = _mm256_broadcast_ss(pr[i] + j);
                    a[2 * i] = _mm256_fmadd_ps(w, v0, a[2 * i]);
                    a[2 * i + 1] = _mm256_fmadd_ps(w, v1, a[2 * i + 1]);
                }
            }
            SMOL_KV_UNROLL
            for (int i = 0; i < 4; ++i)
                if (ar[i]) {
                    _mm256_storeu_ps(ar[i] + c, a[2 * i]);
                    _mm256_storeu_ps(ar[i] + c + 8, a[2 * i + 1]);
                }
        }
    }
}

inline void scores(const float* q, int n_rows, const float* keys, int n_keys, int head_dim, float scale, float* scores,
                   int score_stride) {
    scores_tiles(q, n_rows, FloatRows{keys, head_dim}, n_keys, head_dim, scale, scores, score_stride);
}

inline void accumulate(const float* p, int p_stride, int n_rows, const float* values, int n_values, int head_dim,
                       float* acc) {
    accumulate_tiles(p, p_stride, n_rows, FloatRows{values, head_dim}, n_values, head_dim, acc);
}

inline void scores_cache(KvType type, const float* q, int n_rows, const std::byte* keys, int n_keys, int head_dim,
                         float scale, float* scores, int score_stride) {
    with_kv_type(type, [&](auto t) {
        if constexpr (t == KvType::q4_0) fail("scores_cache: Q4_0 keys are scored in integers (scores_q4_0)");
        else scores_tiles(q, n_rows, CacheRows<t>{keys, kv_row_bytes(type, head_dim)}, n_keys, head_dim, scale, scores, score_stride);
    });
}

inline void accumulate_cache(KvType type, const float* p, int p_stride, int n_rows, const std::byte* values,
                             int n_values, int head_dim, float* acc) {
    with_kv_type(type, [&](auto t) {
        accumulate_tiles(p, p_stride, n_rows, CacheRows<t>{values, kv_row_bytes(type, head_dim)}, n_values, head_dim, acc);
    });
}

}  // namespace avx2
#endif

// ---- AVX-512 (F, BW, VL, DQ), compiled per function and run only where the CPU has it ------
#if defined(SMOL_HAVE_KV_AVX2) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SMOL_HAVE_KV_AVX512 1
#define SMOL_KV_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
// GCC 12's intrinsics seed masked forms with _mm512_undefined_*(), which its -Wuninitialized
// reports once inlined (GCC bug 105593); the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace avx512 {

SMOL_KV_TARGET_AVX512 inline __m256 halves(__m512 a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}

SMOL_KV_TARGET_AVX512 inline void load_row(KvType type, const std::byte* row, float* out, int head_dim) {
    switch (type) {
        case KvType::f16: {
            const auto* h = reinterpret_cast<const std::uint16_t*>(row);
            for (int i = 0; i < head_dim; i += 16)
                _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
            return;
        }
        case KvType::q8_0: {
            const auto* b = reinterpret_cast<const BlockQ8_0*>(row);
            for (int k = 0; k < head_dim / QK8_0; ++k, out += QK8_0) {
                const __m512 d = _mm512_set1_ps(_cvtsh_ss(b[k].d));
                for (int i = 0; i < QK8_0; i += 16) {
                    const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[k].qs + i)));
                    _mm512_storeu_ps(out + i, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q)));
                }
            }
            return;
        }
        case KvType::q4_0: {
            const auto* b = reinterpret_cast<const BlockQ4_0*>(row);
            const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
            for (int k = 0; k < head_dim / QK4_0; ++k, out += QK4_0) {
                const __m512 d = _mm512_set1_ps(_cvtsh_ss(b[k].d));
                const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[k].qs));
                const __m128i lo = _mm_sub_epi8(_mm_and_si128(packed, low4), eight);
                const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), low4), eight);
                _mm512_storeu_ps(out, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo))));
                _mm512_storeu_ps(out + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi))));
            }
            return;
        }
    }
}

// exp_poly on 16 lanes, as avx2::exp_nonpositive.
SMOL_KV_TARGET_AVX512 inline __m512 exp_nonpositive(__m512 x) {
    using namespace exp_poly;
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kMin), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(kMin));
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Lo), _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Hi), x));
    __m512 p = _mm512_set1_ps(kCoefficients[0]);
    for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kCoefficients[i]));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(keep, p, _mm512_castsi512_ps(bits));
}

SMOL_KV_TARGET_AVX512 inline float softmax_weights(float* s, int n, float max) {
    const __m512 m = _mm512_set1_ps(max);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        const __mmask16 lanes = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
        const __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), lanes, s + j);
        const __m512 p = exp_nonpositive(_mm512_sub_ps(x, m));
        _mm512_mask_storeu_ps(s + j, lanes, p);
        sum = _mm512_add_ps(sum, p);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(halves(sum)), _mm256_extractf128_ps(halves(sum), 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

// Where a tile's rows come from, as avx2::FloatRows and avx2::CacheRows, a block of 32 values
// at a time.
struct FloatRows {
    const float* first;
    int head_dim;
    const float* row(int j) const { return first + std::size_t(j) * head_dim; }
    SMOL_KV_TARGET_AVX512 static void block32(const float* row, int block, __m512& lo, __m512& hi) {
        lo = _mm512_loadu_ps(row + 32 * block);
        hi = _mm512_loadu_ps(row + 32 * block + 16);
    }
};

template <KvType T>
struct CacheRows {
    const std::byte* first;
    std::size_t row_bytes;
    const std::byte* row(int j) const { return first + std::size_t(j) * row_bytes; }
    // Values 32 * block .. 32 * block + 31 as floats: the same bits load_row writes there (the
    // same conversion and the same one multiply by the block's scale).
    SMOL_KV_TARGET_AVX512 static void block32(const std::byte* row, int block, __m512& lo, __m512& hi) {
        if constexpr (T == KvType::f16) {
            const auto* h = reinterpret_cast<const std::uint16_t*>(row) + 32 * block;
            lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
            hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + 16)));
        } else if constexpr (T == KvType::q8_0) {
            const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[block];
            const __m512 d = _mm512_set1_ps(_cvtsh_ss(b.d));
            lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)))));
            hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)))));
        } else {
            const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(row)[block];
            const __m512 d = _mm512_set1_ps(_cvtsh_ss(b.d));
            const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
            const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
            const __m128i l = _mm_sub_epi8(_mm_and_si128(packed, low4), eight);
            const __m128i h = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), low4), eight);
            lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(l)));
            hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(h)));
        }
    }
};

// 4 query rows x 4 keys: sixteen dot products, each in one register in order of i, folded to
// 8 lanes and summed by avx2::sum8's tree, so no score depends on its slot.
template <class Rows, class Row>
SMOL_KV_TARGET_AVX512 inline void scores_4x4(const float* const q[4], const Row (&k)[4], int head_dim, float scale,
                                             float out[16]) {
    __m512 a[16];
    SMOL_KV_UNROLL
    for (__m512& x : a) x = _mm512_setzero_ps();
    for (int b = 0; b < head_dim / 32; ++b) {
        __m512 lo[4], hi[4];
        SMOL_KV_UNROLL
        for (int j = 0; j < 4; ++j) Rows::block32(k[j], b, lo[j], hi[j]);
        SMOL_KV_UNROLL
        for (int r = 0; r < 4; ++r) {
            const __m512 qr = _mm512_loadu_ps(q[r] + 32 * b);
            SMOL_KV_UNROLL
            for (int j = 0; j < 4; ++j) a[4 * r + j] = _mm512_fmadd_ps(qr, lo[j], a[4 * r + j]);
        }
        SMOL_KV_UNROLL
        for (int r = 0; r < 4; ++r) {
            const __m512 qr = _mm512_loadu_ps(q[r] + 32 * b + 16);
            SMOL_KV_UNROLL
            for (int j = 0; j < 4; ++j) a[4 * r + j] = _mm512_fmadd_ps(qr, hi[j], a[4 * r + j]);
        }
    }
    const __m256 s = _mm256_set1_ps(scale);
    SMOL_KV_UNROLL
    for (int h = 0; h < 2; ++h) {  // slots 8h .. 8h + 7: rows 2h, 2h + 1
        const __m512* b = a + 8 * h;
        _mm256_storeu_ps(out + 8 * h, _mm256_mul_ps(avx2::sum8(halves(b[0]), halves(b[1]), halves(b[2]), halves(b[3]),
                                                               halves(b[4]), halves(b[5]), halves(b[6]), halves(b[7])),
                                                    s));
    }
}

template <class Rows>
SMOL_KV_TARGET_AVX512 inline void scores_tiles(const float* q, int n_rows, Rows keys, int n_keys, int head_dim,
                                               float scale, float* scores, int score_stride) {
    float out[16];
    for (int j = 0; j < n_keys; j += 4) {
        decltype(keys.row(0)) k[4];
        for (int i = 0; i < 4; ++i) k[i] = keys.row(std::min(j + i, n_keys - 1));
        for (int r = 0; r < n_rows; r += 4) {
            const float* rows[4];
            for (int i = 0; i < 4; ++i) rows[i] = q + std::size_t(std::min(r + i, n_rows - 1)) * head_dim;
            scores_4x4<Rows>(rows, k, head_dim, scale, out);
            for (int i = 0; i < 4 && r + i < n_rows; ++i)
                for (int c = 0; c < 4 && j + c < n_keys; ++c) scores[std::size_t(r + i) * score_stride + j + c] = out[4 * i + c];
        }
    }
}

// acc rows += p . values for 4 rows and 32 columns (one block) at a time (8 accumulators in
// registers).
template <class Rows>
SMOL_KV_TARGET_AVX512 inline void accumulate_tiles(const float* p, int p_stride, int n_rows, Rows values, int n_values,
                                                   int head_dim, float* acc) {
    for (int r = 0; r < n_rows; r += 4) {
        const float* pr[4];
        float* ar[4];
        const float dummy[32] = {};  // a dummy row's accumulators: computed, never stored
        SMOL_KV_UNROLL
        for (int i = 0; i < 4; ++i) {
            pr[i] = p + std::size_t(std::min(r + i, n_rows - 1)) * p_stride;
            ar[i] = r + i < n_rows ? acc + std::size_t(r + i) * head_dim : nullptr;
        }
        for (int c = 0; c < head_dim; c += 32) {
            __m512 a[8];
            SMOL_KV_UNROLL
            for (int i = 0; i < 4; ++i) {
                const float* src = ar[i] ? ar[i] + c : dummy;
                a[2 * i] = _mm512_loadu_ps(src);
                a[2 * i + 1] = _mm512_loadu_ps(src + 16);
            }
            for (int j = 0; j < n_values; ++j) {
                __m512 v0, v1;
                Rows::block32(values.row(j), c / 32, v0, v1);
                SMOL_KV_UNROLL
                for (int i = 0; i < 4; ++i) {
                    const __m512 w = _mm512_set1_ps(pr[i][j]);
                    a[2 * i] = _mm512_fmadd_ps(w, v0, a[2 * i]);
                    a[2 * i + 1] = _mm512_fmadd_ps(w, v1, a[2 * i + 1]);
                }
            }
            SMOL_KV_UNROLL
            for (int i = 0; i < 4; ++i)
                if (ar[i]) {
                    _mm512_storeu_ps(ar[i] + c, a[2 * i]);
                    _mm512_storeu_ps(ar[i] + c + 16, a[2 * i + 1]);
                }
        }
    }
}

SMOL_KV_TARGET_AVX512 inline void scores(const float* q, int n_rows, const float* keys, int n_keys, int head_dim,
                                         float scale, float* scores, int score_stride) {
    scores_tiles(q, n_rows, FloatRows{keys, head_dim}, n_keys, head_dim, scale, scores, score_stride);
}

SMOL_KV_TARGET_AVX512 inline void accumulate(const float* p, int p_stride, int n_rows, const float* values, int n_values,
                                             int head_dim, float* acc) {
    accumulate_tiles(p, p_stride, n_rows, FloatRows{values, head_dim}, n_values, head_dim, acc);
}

// The lambdas carry no target attribute, so they call the AVX-512 tiles rather than inline them:
// one call per chunk of keys.
SMOL_KV_TARGET_AVX512 inline void scores_cache(KvType type, const float* q, int n_rows, const std::byte* keys, int n_keys,
                                               int head_dim, float scale, float* scores, int score_stride) {
    with_kv_type(type, [&](auto t) {
        if constexpr (t == KvType::q4_0) fail("scores_cache: Q4_0 keys are scored in integers (scores_q4_0)");
        else scores_tiles(q, n_rows, CacheRows<t>{keys, kv_row_bytes(type, head_dim)}, n_keys, head_dim, scale, scores, score_stride);
    });
}

SMOL_KV_TARGET_AVX512 inline void accumulate_cache(KvType type, const float* p, int p_stride, int n_rows,
                                                   const std::byte* values, int n_values, int head_dim, float* acc) {
    with_kv_type(type, [&](auto t) {
        accumulate_tiles(p, p_stride, n_rows, CacheRows<t>{values, kv_row_bytes(type, head_dim)}, n_values, head_dim, acc);
    });
}

}  // namespace avx512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

// ---- the set attention runs -------------------------------------------------------------------

// One instruction set's attention kernels. The SIMD sets need head_dim to be a multiple of 32;
// attention falls back to the scalar set otherwise.
struct AttentionKernels {
    Isa isa;
    void (*load_row)(KvType type, const std::byte* row, float* out, int head_dim);
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
#ifdef SMOL_HAVE_KV_AVX2
        case Isa::avx2: {
            static constexpr AttentionKernels set{Isa::avx2,           avx2::load_row,   avx2::scores,
                                                  avx2::softmax_weights, avx2::accumulate, avx2::scores_cache,
                                                  avx2::accumulate_cache, avx2::scores_q4_0};
            return &set;
        }
#endif
#ifdef SMOL_HAVE_KV_AVX512
        case Isa::avx512: {
            static constexpr AttentionKernels set{Isa::avx512,           avx512::load_row,   avx512::scores,
                                                  avx512::softmax_weights, avx512::accumulate, avx512::scores_cache,
                                                  avx512::accumulate_cache, avx512::scores_q4_0};
            return &set;
        }
#endif
        default: return nullptr;
    }
}

// The set this process runs: the one of the quantized matmuls (selected_isa(): the best the CPU
// has, or SMOL_ISA's), falling back to narrower ones this build lacks.
inline const AttentionKernels& attention_kernels() {
    static const AttentionKernels* chosen = [] {
        for (int isa = int(selected_isa()); isa > 0; --isa)
            if (const AttentionKernels* k = attention_kernels_for(Isa(isa))) return k;
        return attention_kernels_for(Isa::scalar);
    }();
    return *chosen;
}

inline void store_row(KvType type, const float* x, std::byte* row, int head_dim) {
#ifdef SMOL_HAVE_KV_AVX2
    if (type == KvType::f16 && head_dim % 8 == 0)
        return avx2::store_row_f16(x, reinterpret_cast<std::uint16_t*>(row), head_dim);
#endif
    store_row_scalar(type, x, row, head_dim);
}

}  // namespace smol::kv_kernels
