#pragma once
// AVX-VNNI kernels for the k-quants and IQ4_XS against Q8_K activations: the prompt GEMMs (the
// AVX2 set's GEMM driver, kquant_tiles_avx2.hpp, with DpbusdProducts<VexDot>) and the Q4_K and Q6_K
// row-group decode kernels (row_group_tiles.hpp's VNNI form with VEX vpdpbusd). Entry points as
// kernels_avx_vnni.hpp describes; the AVX2 set's bits. The k-quants' column decode and small
// batches take the AVX2 tiles (memory-bound: vpdpbusd would not read the weights faster).

#include "smol/quant/kernels_avx_vnni.hpp"
#include "smol/quant/kquant_tiles_avx2.hpp"
#include "smol/quant/row_group_tiles.hpp"

#if SMOL_HAVE_AVX_VNNI_KERNELS

#include <cstddef>
#include <cstdint>

#include "smol/quant/blocks.hpp"
#include "smol/quant/dpbusd.hpp"
#include "smol/quant/kernel_api.hpp"

namespace smol::kernels_avx_vnni {

namespace kquant_detail {

namespace base = kernels_avx2::kquant_detail;

template <class Gemm>
SMOL_TARGET_AVX_VNNI __attribute__((flatten)) inline void kquant_gemm(std::int64_t n, const std::uint8_t* weights,
                                                                      std::size_t row_bytes, int n_rows,
                                                                      const BlockQ8Kx16* acts, int n_tokens, float* out,
                                                                      std::size_t out_stride) {
    base::kquant_gemm<Gemm, base::DpbusdProducts<VexDot>>(n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
}

template <class Gemm>
SMOL_TARGET_AVX_VNNI __attribute__((flatten)) inline void kquant_group_gemm(std::int64_t n, const std::uint8_t* group,
                                                                            int first_row, const BlockQ8Kx16* acts,
                                                                            int n_tokens, float* out, std::size_t out_stride) {
    base::kquant_group_gemm<Gemm, base::DpbusdProducts<VexDot>>(n, group, first_row, acts, n_tokens, out, out_stride);
}

}  // namespace kquant_detail

inline constexpr GemmTileFn q2k_q8k_gemm = kquant_detail::kquant_gemm<kquant_detail::base::Q2KGemm>;
inline constexpr GemmTileFn q3k_q8k_gemm = kquant_detail::kquant_gemm<kquant_detail::base::Q3KGemm>;
inline constexpr GemmTileFn q4k_q8k_gemm = kquant_detail::kquant_gemm<kquant_detail::base::Q4KGemm>;
inline constexpr GemmTileFn q5k_q8k_gemm = kquant_detail::kquant_gemm<kquant_detail::base::Q5KGemm>;
inline constexpr GemmTileFn q6k_q8k_gemm = kquant_detail::kquant_gemm<kquant_detail::base::Q6KGemm>;
inline constexpr GemmTileFn iq4xs_q8k_gemm = kquant_detail::kquant_gemm<kquant_detail::base::IQ4XSGemm>;
inline constexpr GroupGemmFn q4k_x8_q8k_gemm = kquant_detail::kquant_group_gemm<kquant_detail::base::Q4KGemm>;
inline constexpr GroupGemmFn q6k_x8_q8k_gemm = kquant_detail::kquant_group_gemm<kquant_detail::base::Q6KGemm>;

// The row-group decode kernels as GroupDotFns, with AVX2's 16 registers (Q6_K's four columns keep
// 16 runs, spilling some, as its vpmaddubsw form does).
SMOL_TARGET_AVX_VNNI __attribute__((flatten)) inline void q4k_x8_q8k(std::int64_t n, const std::uint8_t* group,
                                                                     const std::uint8_t* acts, std::size_t act_stride,
                                                                     int n_cols, float* out, std::size_t out_stride) {
    row_group_tiles::by_column_count<row_group_tiles::VnniColumns<VexDot>::Q4K>(n, group, acts, act_stride, n_cols, out,
                                                                                out_stride);
}
SMOL_TARGET_AVX_VNNI __attribute__((flatten)) inline void q6k_x8_q8k(std::int64_t n, const std::uint8_t* group,
                                                                     const std::uint8_t* acts, std::size_t act_stride,
                                                                     int n_cols, float* out, std::size_t out_stride) {
    row_group_tiles::by_column_count<row_group_tiles::VnniColumns<VexDot>::Q6K>(n, group, acts, act_stride, n_cols, out,
                                                                                out_stride);
}

}  // namespace smol::kernels_avx_vnni

#endif  // SMOL_HAVE_AVX_VNNI_KERNELS
