#pragma once
// What the SIMD attention kernels of every set share: the exp polynomial's constants, the
// dispatch on the cache type, the unroll pragma, and the headers kv_tiles_set.hpp (the kernels,
// written once and included by kv_tiles_avx2.hpp, kv_tiles_avx512.hpp and kv_tiles_xsimd.hpp per
// set) uses.

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_AVX2_KERNELS || SMOL_HAVE_NEON_KERNELS

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/error.hpp"
#include "smol/core/float_vectors.hpp"
#include "smol/ops/kv_layout.hpp"

// The register tiles below are arrays of vectors indexed by constant loops; unrolled, they live
// in registers. GCC unrolls them by itself only at -O3, and at -O2 (RelWithDebInfo) spilled
// them to the stack, much slower (docs/performance.md), hence the pragma.
#define SMOL_KV_UNROLL _Pragma("GCC unroll 16")


namespace smol::kv_kernels {

// exp(x) for x <= 0 as the SIMD sets compute it (Cephes' expf): k = round(x log2 e), Cody-Waite
// reduction r = x - k ln 2 in two parts, exp(r) by a degree-6 polynomial on [-ln2/2, ln2/2], and
// 2^k put into the exponent field. Within 2 ulp of std::exp; below kMin the result is 0.
namespace exp_poly {
inline constexpr float kMin = -87.33654f;  // ln of the smallest normal float
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
inline constexpr float kCoefficients[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                           4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace exp_poly

// f(std::integral_constant<KvType, T>{}) for the cache type known only at run time: how each
// SIMD set's scores_cache / accumulate_cache picks its CacheRows<T> instantiation.
template <class F>
inline void with_kv_type(KvType type, F&& f) {
    switch (type) {
        case KvType::f16: return f(std::integral_constant<KvType, KvType::f16>{});
        case KvType::q8_0: return f(std::integral_constant<KvType, KvType::q8_0>{});
        case KvType::q4_0: return f(std::integral_constant<KvType, KvType::q4_0>{});
    }
}

// with_kv_type for the key types scores_cache takes: Q4_0 keys are scored in integers.
template <class F>
inline void with_float_key_type(KvType type, F&& f) {
    if (type == KvType::q4_0) fail("scores_cache: Q4_0 keys are scored in integers (scores_q4_0)");
    with_kv_type(type, [&](auto t) {
        if constexpr (t != KvType::q4_0) f(t);
    });
}

}  // namespace smol::kv_kernels

#endif
