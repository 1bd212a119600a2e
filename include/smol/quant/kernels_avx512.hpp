#pragma once
// AVX-512 (F, BW, VL, DQ) + VNNI kernel set. The program is not compiled with -mavx512*, so
// every function here carries SMOL_TARGET_AVX512 and may run only after cpu_features() said
// has_avx512_kernels() (dispatch.hpp guarantees that). Same tile contract and the same exact
// integer sums as the AVX2 set, on 64-byte vectors: one Q4_K chunk of 64 weights (two
// sub-blocks) per maddubs, and the scale multiply fused into the accumulate (vpdpwssd).

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SMOL_HAVE_AVX512_KERNELS 1
#define SMOL_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"

// GCC 12's intrinsics seed masked forms with _mm512_undefined_*(), which its -Wuninitialized
// reports once inlined (GCC bug 105593); the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#define SMOL_AVX512_GCC_DIAGNOSTICS 1
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace smol::kernels_avx512 {

namespace detail {

SMOL_TARGET_AVX512 inline void prefetch_ahead(const void* block, std::size_t bytes, std::size_t distance) {
    const char* p = static_cast<const char*>(block) + distance;
    for (std::size_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

SMOL_TARGET_AVX512 inline float hsum128(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

SMOL_TARGET_AVX512 inline float half_to_float(std::uint16_t h) { return _cvtsh_ss(h); }

// Two 256-bit halves as one 512-bit vector: lo in lanes 0..255, hi in 256..511.
SMOL_TARGET_AVX512 inline __m512i join(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// ---------------------------------------------------------------------------------------------
// Q4_K x Q8_K

template <int C>
SMOL_TARGET_AVX512 void q4k_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                 const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                 std::size_t out_stride) {
    const kernel_detail::TileOperands<BlockQ4K, BlockQ8K, C> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    __m512 acc[kTileRows][C];
    __m128 acc_min[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) {
            acc[r][c] = _mm512_setzero_ps();
            acc_min[r][c] = _mm_setzero_ps();
        }
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const std::int64_t blocks = n / QK_K;
    for (std::int64_t b = 0; b < blocks; ++b) {
        for (int r = 0; r < kTileRows; ++r) {
            const BlockQ4K& wb = t.w[r][b];
            prefetch_ahead(&wb, sizeof(BlockQ4K), ahead);
            alignas(16) std::uint8_t scales_mins[16];  // 8 scales, then 8 mins
            q4k_unpack_scales_mins(wb.scales, scales_mins);
            const std::uint8_t* sc = scales_mins;
            __m512i q[4], scale[4];  // [chunk of 64 weights]: nibbles as bytes; scales of its two sub-blocks
            for (int chunk = 0; chunk < 4; ++chunk) {
                const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * chunk));
                q[chunk] = join(_mm256_and_si256(bits, low4), _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4));
                scale[chunk] = join(_mm256_set1_epi16(sc[2 * chunk]), _mm256_set1_epi16(sc[2 * chunk + 1]));
            }
            const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales_mins + 8)));
            const float d = half_to_float(wb.d);
            const float dmin = half_to_float(wb.dmin);
            for (int c = 0; c < C; ++c) {
                const BlockQ8K& ab = t.a[c][b];
                __m512i sumi = _mm512_setzero_si512();
                for (int chunk = 0; chunk < 4; ++chunk) {
                    const __m512i q8 = _mm512_loadu_si512(ab.qs + 64 * chunk);
                    sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[chunk], q8), scale[chunk]);
                }
                const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));
                const __m128i sub_sums =
                    _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
                const __m128i min_prod = _mm_madd_epi16(mins, sub_sums);
                acc[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(d * ab.d), _mm512_cvtepi32_ps(sumi), acc[r][c]);
                acc_min[r][c] = _mm_fmadd_ps(_mm_set1_ps(dmin * ab.d), _mm_cvtepi32_ps(min_prod), acc_min[r][c]);
            }
        }
    }
    float result[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) result[r][c] = _mm512_reduce_add_ps(acc[r][c]) - hsum128(acc_min[r][c]);
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// Q6_K x Q8_K (unsigned quants, the -32 offset removed through the bsums as in the AVX2 set)

template <int C>
SMOL_TARGET_AVX512 void q6k_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                 const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                 std::size_t out_stride) {
    const kernel_detail::TileOperands<BlockQ6K, BlockQ8K, C> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    __m512 acc[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i low2 = _mm256_set1_epi8(0x03);
    const std::int64_t blocks = n / QK_K;
    for (std::int64_t b = 0; b < blocks; ++b) {
        for (int r = 0; r < kTileRows; ++r) {
            const BlockQ6K& wb = t.w[r][b];
            prefetch_ahead(&wb, sizeof(BlockQ6K), ahead);
            __m512i q[4], scale[4];  // [64 weights]: unsigned quants; 4 scales of 16 weights each
            for (int half = 0; half < 2; ++half) {
                const __m256i bits1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.ql + 64 * half));
                const __m256i bits2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.ql + 64 * half + 32));
                const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh + 32 * half));
                const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(high, low2), 4);
                const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2), low2), 4);
                const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 4), low2), 4);
                const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 6), low2), 4);
                q[2 * half] = join(_mm256_or_si256(_mm256_and_si256(bits1, low4), h0),
                                   _mm256_or_si256(_mm256_and_si256(bits2, low4), h1));
                q[2 * half + 1] = join(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits1, 4), low4), h2),
                                       _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits2, 4), low4), h3));
            }
            for (int p = 0; p < 4; ++p) {
                const std::int8_t* s = wb.scales + 4 * p;
                scale[p] = join(_mm256_set_m128i(_mm_set1_epi16(s[1]), _mm_set1_epi16(s[0])),
                                _mm256_set_m128i(_mm_set1_epi16(s[3]), _mm_set1_epi16(s[2])));
            }
            const __m256i scales16 =
                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales)));
            const float d = half_to_float(wb.d);
            for (int c = 0; c < C; ++c) {
                const BlockQ8K& ab = t.a[c][b];
                __m512i sumi = _mm512_setzero_si512();
                for (int p = 0; p < 4; ++p) {
                    const __m512i q8 = _mm512_loadu_si512(ab.qs + 64 * p);
                    sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[p], q8), scale[p]);
                }
                const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums));
                const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(scales16, bsums), 5);
                sumi = _mm512_sub_epi32(sumi, _mm512_inserti64x4(_mm512_setzero_si512(), offset, 0));
                acc[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(d * ab.d), _mm512_cvtepi32_ps(sumi), acc[r][c]);
            }
        }
    }
    float result[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) result[r][c] = _mm512_reduce_add_ps(acc[r][c]);
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// Q8_0 x Q8_0: |w| as unsigned times a with w's sign, accumulated by vpdpbusd (no saturation).

template <int C>
SMOL_TARGET_AVX512 void q8_0_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                  const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                  std::size_t out_stride) {
    const kernel_detail::TileOperands<BlockQ8_0, BlockQ8_0, C> t(weights, row_bytes, n_rows, acts, act_stride,
                                                                 n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    __m256 acc[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    const std::int64_t blocks = n / QK8_0;
    for (std::int64_t b = 0; b < blocks; ++b) {
        for (int r = 0; r < kTileRows; ++r) {
            const BlockQ8_0& wb = t.w[r][b];
            prefetch_ahead(&wb, sizeof(BlockQ8_0), ahead);
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs));
            const __m256i abs_x = _mm256_abs_epi8(x);
            const float dx = half_to_float(wb.d);
            for (int c = 0; c < C; ++c) {
                const BlockQ8_0& ab = t.a[c][b];
                const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
                const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_x, _mm256_sign_epi8(y, x));
                acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * half_to_float(ab.d)), _mm256_cvtepi32_ps(dot),
                                            acc[r][c]);
            }
        }
    }
    float result[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) {
            const __m256 v = acc[r][c];
            result[r][c] = hsum128(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
        }
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// Float weights against float activations, 16 lanes.

struct LoadF32 {
    SMOL_TARGET_AVX512 static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
    static float scalar(const float* p) { return *p; }
};
struct LoadF16 {
    SMOL_TARGET_AVX512 static __m512 load(const std::uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static float scalar(const std::uint16_t* p) { return fp16_to_f32(*p); }
};
struct LoadBF16 {
    SMOL_TARGET_AVX512 static __m512 load(const std::uint16_t* p) {
        const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    }
    static float scalar(const std::uint16_t* p) { return bf16_to_f32(*p); }
};

template <class Weight, class Load, int C>
SMOL_TARGET_AVX512 void float_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                   const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                   std::size_t out_stride) {
    const kernel_detail::TileOperands<Weight, float, C> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    __m512 acc[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    constexpr std::int64_t lanes = 16;
    const std::int64_t body = n - n % lanes;
    for (std::int64_t i = 0; i < body; i += lanes) {
        __m512 w[kTileRows];
        const bool new_line = (std::size_t(i) * sizeof(Weight)) % 64 < lanes * sizeof(Weight);  // once per 64 bytes
        for (int r = 0; r < kTileRows; ++r) {
            if (new_line) prefetch_ahead(t.w[r] + i, 64, ahead);
            w[r] = Load::load(t.w[r] + i);
        }
        for (int c = 0; c < C; ++c) {
            const __m512 x = _mm512_loadu_ps(t.a[c] + i);
            for (int r = 0; r < kTileRows; ++r) acc[r][c] = _mm512_fmadd_ps(w[r], x, acc[r][c]);
        }
    }
    float result[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) {
            float sum = _mm512_reduce_add_ps(acc[r][c]);
            for (std::int64_t i = body; i < n; ++i) sum += Load::scalar(t.w[r] + i) * t.a[c][i];
            result[r][c] = sum;
        }
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

}  // namespace detail

inline constexpr DotTileFn q4k_q8k = kernel_detail::by_columns<detail::q4k_tile<1>, detail::q4k_tile<kTileCols>>;
inline constexpr DotTileFn q6k_q8k = kernel_detail::by_columns<detail::q6k_tile<1>, detail::q6k_tile<kTileCols>>;
inline constexpr DotTileFn q8_0_q8_0 =
    kernel_detail::by_columns<detail::q8_0_tile<1>, detail::q8_0_tile<kTileCols>>;
inline constexpr DotTileFn f32 = kernel_detail::by_columns<detail::float_tile<float, detail::LoadF32, 1>,
                                                           detail::float_tile<float, detail::LoadF32, kTileCols>>;
inline constexpr DotTileFn f16 =
    kernel_detail::by_columns<detail::float_tile<std::uint16_t, detail::LoadF16, 1>,
                              detail::float_tile<std::uint16_t, detail::LoadF16, kTileCols>>;
inline constexpr DotTileFn bf16 =
    kernel_detail::by_columns<detail::float_tile<std::uint16_t, detail::LoadBF16, 1>,
                              detail::float_tile<std::uint16_t, detail::LoadBF16, kTileCols>>;

}  // namespace smol::kernels_avx512

#if SMOL_AVX512_GCC_DIAGNOSTICS
#pragma GCC diagnostic pop
#undef SMOL_AVX512_GCC_DIAGNOSTICS
#endif

#endif
