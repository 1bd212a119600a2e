#pragma once
// AVX-512 VNNI tiles for the block-of-32 weight formats (Q4_0, Q5_0, Q4_1, Q5_1,
// IQ4_NL) against Q8_0
// activations: the AVX2 set's tile driver (legacy_tiles_avx2.hpp) with two vpdpbusd per pair of
// blocks in place of two maddubs, an add and a madd. Same bits as the reference and the AVX2 set.
//
// The driver is compiled for the baseline, and GCC and clang refuse to inline a function of a
// wider target into them; so the entry points below carry the AVX-512 target and `flatten`,
// which inlines the driver into them and then, inside an AVX-512 function, the AVX-512 integer
// products too (without it they would be calls, four per group of blocks and row).

#include "smol/core/intrinsic_warnings.hpp"
#include "smol/quant/kernels_avx512.hpp"
#include "smol/quant/legacy_tiles_avx2.hpp"

#if SMOL_HAVE_AVX512_KERNELS

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "smol/quant/kernel_api.hpp"

SMOL_INTRINSIC_WARNINGS_OFF

namespace smol::kernels_avx512 {

namespace legacy {

namespace base = kernels_avx2::legacy;

// dot_pair: a pair of unsigned quant vectors against the activations' pair, as [first block, 4
// partial sums | second block, 4], exact: base::VnniOps's two vpdpbusd, in their EVEX form.
struct Avx512Ops : base::VnniOps<EvexDot> {
    // Q5_0's bit 4 (legacy_tiles_avx2.hpp, Avx2Ops::add_high_bits) through byte masks.
    SMOL_TARGET_AVX512 static void add_high_bits(std::uint32_t first, std::uint32_t second, __m256i& lo, __m256i& hi) {
        const __m256i sixteen = _mm256_set1_epi8(16);
        lo = _mm256_mask_add_epi8(lo, __mmask32((first & 0xffffu) | (second << 16)), lo, sixteen);
        hi = _mm256_mask_add_epi8(hi, __mmask32((first >> 16) | (second & 0xffff0000u)), hi, sixteen);
    }
};

template <class Kind, int C>
SMOL_TARGET_AVX512 __attribute__((flatten)) inline void tile(std::int64_t n, const std::uint8_t* weights,
                                                             std::size_t row_bytes, int n_rows,
                                                             const std::uint8_t* acts, std::size_t act_stride,
                                                             int n_cols, float* out, std::size_t out_stride) {
    base::tile<Kind, Avx512Ops, C>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}

}  // namespace legacy

template <class Kind>
inline constexpr DotTileFn legacy_tile =
    kernel_detail::by_columns<legacy::tile<Kind, 1>, legacy::tile<Kind, kTileCols>>;
inline constexpr DotTileFn q4_0_q8_0 = legacy_tile<legacy::base::Q4_0Kind>;
inline constexpr DotTileFn q5_0_q8_0 = legacy_tile<legacy::base::Q5_0Kind>;
inline constexpr DotTileFn q4_1_q8_0 = legacy_tile<legacy::base::Q4_1Kind>;
inline constexpr DotTileFn q5_1_q8_0 = legacy_tile<legacy::base::Q5_1Kind>;
inline constexpr DotTileFn iq4_nl_q8_0 = legacy_tile<legacy::base::IQ4NLKind>;

}  // namespace smol::kernels_avx512

SMOL_INTRINSIC_WARNINGS_ON

#endif
