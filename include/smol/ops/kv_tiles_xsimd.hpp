#pragma once
// The AArch64 attention kernels: kv_tiles_set.hpp compiled over XsimdFloats (xsimd::batch<float>,
// NEON's 4 lanes), with how a cache row's values become floats, 8 at a time (a quarter of a Q8_0
// or Q4_0 block). Scores go 4 query rows x 4 keys: 16 accumulators of NEON's 32 registers. NEON
// is every AArch64 core's baseline, so this one build is the neon set's and, down the fallback
// chain, dotprod's and i8mm's (kv_kernels.hpp).

#include "smol/ops/kv_tiles.hpp"

#if SMOL_HAVE_NEON_KERNELS

#include <cstddef>
#include <cstdint>

#include "smol/core/float_vectors.hpp"
#include "smol/core/half.hpp"
#include "smol/ops/kv_layout.hpp"
#include "smol/quant/blocks.hpp"

namespace smol::kv_kernels::neon {

using Floats = simd::XsimdFloats;
inline constexpr int kAccumulateSteps = 1;
inline constexpr int kScoreKeys = 4;

// Values 8 * step .. 8 * step + 7 of a cache row as floats: the exact conversion, then the same
// one multiply by the block's scale as the reference (d * q).
template <KvType T>
struct CacheRows {
    static constexpr int kLanes = Floats::kLanes;
    static constexpr int kStepsPerBlock = 32 / (2 * kLanes);
    static void load2(const std::byte* row, int step, Floats::V& v0, Floats::V& v1) {
        if constexpr (T == KvType::f16) {
            const auto* h = reinterpret_cast<const std::uint16_t*>(row) + 2 * kLanes * step;
            v0 = Floats::load_fp16(h);
            v1 = Floats::load_fp16(h + kLanes);
        } else if constexpr (T == KvType::q8_0) {
            const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[step / kStepsPerBlock];
            const Floats::V d = Floats::set1(fp16_to_f32(b.d));
            const std::int8_t* qs = b.qs + 2 * kLanes * (step % kStepsPerBlock);
            v0 = Floats::mul(d, Floats::load_int8(qs));
            v1 = Floats::mul(d, Floats::load_int8(qs + kLanes));
        } else {
            // Values 0..15 of a block are the low nibbles of qs[0..15], 16..31 the high ones.
            const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(row)[step / kStepsPerBlock];
            const Floats::V d = Floats::set1(fp16_to_f32(b.d));
            const int first = 2 * kLanes * (step % kStepsPerBlock);  // the block's value index
            const std::uint8_t* qs = b.qs + first % 16;
            const int shift = first < 16 ? 0 : 4;
            std::int8_t x[2 * kLanes];
            for (int i = 0; i < 2 * kLanes; ++i) x[i] = std::int8_t(((qs[i] >> shift) & 0x0f) - 8);
            v0 = Floats::mul(d, Floats::load_int8(x));
            v1 = Floats::mul(d, Floats::load_int8(x + kLanes));
        }
    }
};

#define SMOL_SET_TARGET
#include "smol/ops/kv_tiles_set.hpp"
#undef SMOL_SET_TARGET

}  // namespace smol::kv_kernels::neon

#endif
