#pragma once
// What the float-weight tiles (F32, F16, BF16 against float activations) of every set share: the
// weight types' one-at-a-time conversions, and the headers float_tile_set.hpp (the tile, written
// once and included by kernels_avx2.hpp, kernels_avx512.hpp and float_tiles_xsimd.hpp per set)
// uses.

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_AVX2_KERNELS || SMOL_HAVE_NEON_KERNELS

#include <cstddef>
#include <cstdint>

#include "smol/core/float_vectors.hpp"  // for float_tile_set.hpp
#include "smol/core/half.hpp"
#include "smol/quant/kernel_api.hpp"  // for float_tile_set.hpp

namespace smol::float_tiles {

// The weight element types and their one-at-a-time conversion (the tail past the last vector),
// which every set shares; a set's loader adds `load`, a vector of them as floats.
struct F32Weights {
    using Weight = float;
    static float scalar(const float* p) { return *p; }
};
struct F16Weights {
    using Weight = std::uint16_t;
    static float scalar(const std::uint16_t* p) { return fp16_to_f32(*p); }
};
struct BF16Weights {
    using Weight = std::uint16_t;
    static float scalar(const std::uint16_t* p) { return bf16_to_f32(*p); }
};

}  // namespace smol::float_tiles

#endif
