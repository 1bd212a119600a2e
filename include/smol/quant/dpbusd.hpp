#pragma once
// vpdpbusd (4 unsigned bytes times 4 signed bytes, the 4 products added into each i32 lane) in its
// two encodings on 256-bit vectors, as types: a kernel written once over `Dot` (the row-group
// decode kernels, the AVX2 prompt GEMM) runs as the AVX-512 set's with EvexDot (AVX-512 VL + VNNI,
// 32 registers) and as the AVX-VNNI set's with VexDot (Alder Lake and later Intel cores, which
// have no AVX-512: AVX2's 16 registers). The same integers either way, so the same bits.

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

namespace smol {

#if SMOL_HAVE_AVX512_KERNELS
struct EvexDot {
    SMOL_TARGET_AVX512 static __m256i dpbusd(__m256i acc, __m256i unsigned_bytes, __m256i signed_bytes) {
        return _mm256_dpbusd_epi32(acc, unsigned_bytes, signed_bytes);
    }
};
#endif

#if SMOL_HAVE_AVX_VNNI_KERNELS
struct VexDot {
    SMOL_TARGET_AVX_VNNI static __m256i dpbusd(__m256i acc, __m256i unsigned_bytes, __m256i signed_bytes) {
        return _mm256_dpbusd_avx_epi32(acc, unsigned_bytes, signed_bytes);
    }
};
#endif

}  // namespace smol

#endif  // SMOL_HAVE_AVX2_KERNELS
