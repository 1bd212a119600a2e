#pragma once
// The AArch64 sets' tiles for float weights (F32, F16, BF16) against float activations:
// float_tile_set.hpp's tile over XsimdFloats (xsimd::batch<float>, NEON's 4 lanes), with the
// weight loads XsimdFloats provides. NEON is every AArch64 core's baseline, so one build serves
// the neon set and, down the fallback chain, dotprod and i8mm (type_table.hpp's
// SMOL_FLOAT_TILES). The lanes are summed in xsimd's order ((0+1)+(2+3)), so results differ from
// the x86 sets' in the last bits; tests/test_quant_kernels.cpp holds them to the reference.

#include "smol/quant/float_tiles.hpp"

#if SMOL_HAVE_NEON_KERNELS

#include <cstdint>

#include "smol/core/float_vectors.hpp"

namespace smol::kernels_xsimd {

namespace detail {

using Floats = simd::XsimdFloats;

struct LoadF32 : float_tiles::F32Weights {
    static Floats::V load(const float* p) { return Floats::load(p); }
};
struct LoadF16 : float_tiles::F16Weights {
    static Floats::V load(const std::uint16_t* p) { return Floats::load_fp16(p); }
};
struct LoadBF16 : float_tiles::BF16Weights {
    static Floats::V load(const std::uint16_t* p) { return Floats::load_bf16(p); }
};

#define SMOL_SET_TARGET
#include "smol/quant/float_tile_set.hpp"
#undef SMOL_SET_TARGET

}  // namespace detail

inline constexpr DotTileFn f32 =
    kernel_detail::by_columns<detail::float_tile<detail::LoadF32, 1>, detail::float_tile<detail::LoadF32, kTileCols>>;
inline constexpr DotTileFn f16 =
    kernel_detail::by_columns<detail::float_tile<detail::LoadF16, 1>, detail::float_tile<detail::LoadF16, kTileCols>>;
inline constexpr DotTileFn bf16 =
    kernel_detail::by_columns<detail::float_tile<detail::LoadBF16, 1>, detail::float_tile<detail::LoadBF16, kTileCols>>;

}  // namespace smol::kernels_xsimd

#endif
