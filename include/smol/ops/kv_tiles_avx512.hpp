#pragma once
// The AVX-512 attention kernels: kv_tiles_set.hpp compiled over Avx512Floats for AVX-512, with
// how a cache row's values become floats, 32 at a time (one Q8_0 or Q4_0 block). Scores go 4
// query rows x 4 keys, value sums 4 rows x 4 vectors (two steps): 16 accumulators each of
// AVX-512's 32 registers.

#include "smol/core/intrinsic_warnings.hpp"
#include "smol/ops/kv_tiles.hpp"

#if SMOL_HAVE_AVX512_KERNELS

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "smol/core/float_vectors.hpp"
#include "smol/ops/kv_layout.hpp"
#include "smol/quant/blocks.hpp"

SMOL_INTRINSIC_WARNINGS_OFF

namespace smol::kv_kernels::avx512 {

// Values 32 * step .. 32 * step + 31 of a cache row as floats (the same conversion and the same
// one multiply by the block's scale as the AVX2 set and the reference).
template <KvType T>
struct CacheRows {
    SMOL_TARGET_AVX512 static void load2(const std::byte* row, int step, __m512& lo, __m512& hi) {
        if constexpr (T == KvType::f16) {
            const auto* h = reinterpret_cast<const std::uint16_t*>(row) + 32 * step;
            lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
            hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + 16)));
        } else if constexpr (T == KvType::q8_0) {
            const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[step];
            const __m512 d = _mm512_set1_ps(_cvtsh_ss(b.d));
            lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)))));
            hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)))));
        } else {
            const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(row)[step];
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

using Floats = simd::Avx512Floats;
inline constexpr int kAccumulateSteps = 2;
inline constexpr int kScoreKeys = 4;

#define SMOL_SET_TARGET SMOL_TARGET_AVX512
#include "smol/ops/kv_tiles_set.hpp"
#undef SMOL_SET_TARGET

}  // namespace smol::kv_kernels::avx512

SMOL_INTRINSIC_WARNINGS_ON

#endif
