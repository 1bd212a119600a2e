#pragma once
// AVX-VNNI kernel set: AVX2 with the VEX form of vpdpbusd on 256-bit vectors (Intel Alder Lake
// and later cores, which have no AVX-512). It writes no kernel body of its own: each entry point
// runs a driver written once for the AVX2 set with vpdpbusd products through VexDot (dpbusd.hpp),
// compiled for the set's target with `flatten`, which inlines the baseline driver and its products
// into the one function (as the AVX-512 set's entry points do). Every function runs only after
// cpu_features() said the CPU has AVX-VNNI (dispatch.hpp guarantees that). The integer totals are
// the AVX2 set's, so the bits are the scalar reference's.
//
// The set's own kernels: the Q8_0 tile here, the block-of-32 tiles (legacy_tiles_avx_vnni.hpp),
// the k-quant prompt GEMMs and the Q4_K and Q6_K row-group decode kernels
// (kquant_tiles_avx_vnni.hpp); everything else (the float tiles, the k-quants' column decode,
// attention) is the AVX2 set's (type_table.hpp).

#include "smol/quant/kernels_avx2.hpp"

#if SMOL_HAVE_AVX_VNNI_KERNELS

#include <cstddef>
#include <cstdint>

#include "smol/quant/dpbusd.hpp"
#include "smol/quant/kernel_api.hpp"

namespace smol::kernels_avx_vnni {

namespace detail {

// Q8_0 x Q8_0 (kernels_avx2.hpp's tile): one VEX vpdpbusd per row, column and block.
template <int C>
SMOL_TARGET_AVX_VNNI __attribute__((flatten)) void q8_0_tile(std::int64_t n, const std::uint8_t* weights,
                                                             std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
                                                             std::size_t act_stride, int n_cols, float* out,
                                                             std::size_t out_stride) {
    kernels_avx2::detail::q8_0_tile<kernels_avx2::detail::DpbusdQuads<VexDot>, C>(n, weights, row_bytes, n_rows, acts,
                                                                                 act_stride, n_cols, out, out_stride);
}

}  // namespace detail

inline constexpr DotTileFn q8_0_q8_0 = kernel_detail::by_columns<detail::q8_0_tile<1>, detail::q8_0_tile<kTileCols>>;

}  // namespace smol::kernels_avx_vnni

#endif  // SMOL_HAVE_AVX_VNNI_KERNELS
