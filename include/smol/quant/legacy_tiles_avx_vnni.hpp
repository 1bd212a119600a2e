#pragma once
// AVX-VNNI tiles for the block-of-32 weight formats (Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL) against Q8_0
// activations: the AVX2 set's tile driver (legacy_tiles_avx2.hpp) with VnniOps<VexDot>, two VEX
// vpdpbusd per pair of blocks. Entry points as kernels_avx_vnni.hpp describes; the AVX2 set's bits.

#include "smol/quant/kernels_avx_vnni.hpp"
#include "smol/quant/legacy_tiles_avx2.hpp"

#if SMOL_HAVE_AVX_VNNI_KERNELS

#include <cstddef>
#include <cstdint>

#include "smol/quant/dpbusd.hpp"
#include "smol/quant/kernel_api.hpp"

namespace smol::kernels_avx_vnni {

namespace legacy {

namespace base = kernels_avx2::legacy;

template <class Kind, int C>
SMOL_TARGET_AVX_VNNI __attribute__((flatten)) inline void tile(std::int64_t n, const std::uint8_t* weights,
                                                               std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
                                                               std::size_t act_stride, int n_cols, float* out,
                                                               std::size_t out_stride) {
    base::tile<Kind, base::VnniOps<VexDot>, C>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}

}  // namespace legacy

template <class Kind>
inline constexpr DotTileFn legacy_tile = kernel_detail::by_columns<legacy::tile<Kind, 1>, legacy::tile<Kind, kTileCols>>;
inline constexpr DotTileFn q4_0_q8_0 = legacy_tile<legacy::base::Q4_0Kind>;
inline constexpr DotTileFn q5_0_q8_0 = legacy_tile<legacy::base::Q5_0Kind>;
inline constexpr DotTileFn q4_1_q8_0 = legacy_tile<legacy::base::Q4_1Kind>;
inline constexpr DotTileFn q5_1_q8_0 = legacy_tile<legacy::base::Q5_1Kind>;
inline constexpr DotTileFn iq4_nl_q8_0 = legacy_tile<legacy::base::IQ4NLKind>;

}  // namespace smol::kernels_avx_vnni

#endif  // SMOL_HAVE_AVX_VNNI_KERNELS
