#pragma once
// The AVX2 attention kernels: kv_tiles_set.hpp compiled over Avx2Floats, with what only this set
// has: the fp16 row writer and how a cache row's values become floats, 16 at a time (half a
// Q8_0 or Q4_0 block). Scores go 4 query rows x 2 keys: 8 accumulators of AVX2's 16 registers.

#include "smol/ops/kv_tiles.hpp"

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "smol/core/float_vectors.hpp"
#include "smol/ops/kv_layout.hpp"
#include "smol/quant/blocks.hpp"

namespace smol::kv_kernels::avx2 {

inline void store_row_f16(const float* x, std::uint16_t* out, int n) {  // n: multiple of 8
    for (int i = 0; i < n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
}

// Values 16 * step .. 16 * step + 15 of a cache row as floats (d * q for the block types: the
// values the row holds).
template <KvType T>
struct CacheRows {
    static void load2(const std::byte* row, int step, __m256& v0, __m256& v1) {
        if constexpr (T == KvType::f16) {
            const auto* h = reinterpret_cast<const std::uint16_t*>(row) + 16 * step;
            v0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
            v1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 8)));
        } else if constexpr (T == KvType::q8_0) {
            const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[step / 2];
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(b.d));
            const std::int8_t* qs = b.qs + 16 * (step % 2);
            v0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs)))));
            v1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8)))));
        } else {
            const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(row)[step / 2];
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(b.d));
            const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
            const __m128i nibbles = step % 2 ? _mm_srli_epi16(packed, 4) : packed;  // low nibbles: values 0..15
            const __m128i x = _mm_sub_epi8(_mm_and_si128(nibbles, _mm_set1_epi8(0x0f)), _mm_set1_epi8(8));
            v0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x)));
            v1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(x, 8))));
        }
    }
};

using Floats = simd::Avx2Floats;
inline constexpr int kAccumulateSteps = 1;
inline constexpr int kScoreKeys = 2;

#define SMOL_SET_TARGET
#include "smol/ops/kv_tiles_set.hpp"
#undef SMOL_SET_TARGET

}  // namespace smol::kv_kernels::avx2

#endif
