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

// The same sums from AVX2 instructions, exact for any bytes: the even and odd bytes of the
// unsigned operand go through vpmaddubsw apart (one product per i16, at most 255 * 128 in
// magnitude: never saturating) and vpmaddwd against ones adds each lane's pairs in i32. The AVX2
// set runs it where quants exceed 127 (IQ4_NL's and IQ4_XS's table values + 128), where two
// products in one vpmaddubsw i16 could saturate; the tests run the VNNI kernels with it on CPUs
// without VNNI.
struct MaddubsDot {
    static __m256i dpbusd(__m256i acc, __m256i unsigned_bytes, __m256i signed_bytes) {
        const __m256i even = _mm256_set1_epi16(0x00ff), ones16 = _mm256_set1_epi16(1);
        const __m256i even_products = _mm256_maddubs_epi16(_mm256_and_si256(unsigned_bytes, even), signed_bytes);
        const __m256i odd_products = _mm256_maddubs_epi16(_mm256_andnot_si256(even, unsigned_bytes), signed_bytes);
        return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(even_products, ones16),
                                                      _mm256_madd_epi16(odd_products, ones16)));
    }
};

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
