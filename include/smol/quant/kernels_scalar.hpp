#pragma once
// The portable kernel set: the reference dot products, one (row, column) pair at a time.

#include <cstddef>
#include <cstdint>

#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"

namespace smol::kernels_scalar {

template <class Weight, class Act, float (*Dot)(std::int64_t, const Weight*, const Act*)>
void dot_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
              const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    for (int r = 0; r < n_rows; ++r) {
        const auto* w = reinterpret_cast<const Weight*>(weights + std::size_t(r) * row_bytes);
        for (int c = 0; c < n_cols; ++c)
            out[std::size_t(c) * out_stride + std::size_t(r)] =
                Dot(n, w, reinterpret_cast<const Act*>(acts + std::size_t(c) * act_stride));
    }
}

inline constexpr DotTileFn q2k_q8k = dot_tile<BlockQ2K, BlockQ8K, dot_q2k_q8k>;
inline constexpr DotTileFn q3k_q8k = dot_tile<BlockQ3K, BlockQ8K, dot_q3k_q8k>;
inline constexpr DotTileFn q4k_q8k = dot_tile<BlockQ4K, BlockQ8K, dot_q4k_q8k>;
inline constexpr DotTileFn q5k_q8k = dot_tile<BlockQ5K, BlockQ8K, dot_q5k_q8k>;
inline constexpr DotTileFn q6k_q8k = dot_tile<BlockQ6K, BlockQ8K, dot_q6k_q8k>;
inline constexpr DotTileFn q8_0_q8_0 = dot_tile<BlockQ8_0, BlockQ8_0, dot_q8_0_q8_0>;
inline constexpr DotTileFn q4_0_q8_0 = dot_tile<BlockQ4_0, BlockQ8_0, dot_q4_0_q8_0>;
inline constexpr DotTileFn q5_0_q8_0 = dot_tile<BlockQ5_0, BlockQ8_0, dot_q5_0_q8_0>;
inline constexpr DotTileFn q4_1_q8_0 = dot_tile<BlockQ4_1, BlockQ8_0, dot_q4_1_q8_0>;
inline constexpr DotTileFn q5_1_q8_0 = dot_tile<BlockQ5_1, BlockQ8_0, dot_q5_1_q8_0>;
inline constexpr DotTileFn iq4_nl_q8_0 = dot_tile<BlockIQ4NL, BlockQ8_0, dot_iq4_nl_q8_0>;
inline constexpr DotTileFn iq4xs_q8k = dot_tile<BlockIQ4XS, BlockQ8K, dot_iq4xs_q8k>;
inline constexpr DotTileFn f32 = dot_tile<float, float, dot_f32>;
inline constexpr DotTileFn f16 = dot_tile<std::uint16_t, float, dot_f16>;
inline constexpr DotTileFn bf16 = dot_tile<std::uint16_t, float, dot_bf16>;

}  // namespace smol::kernels_scalar
