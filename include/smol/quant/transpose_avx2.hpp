#pragma once
// An 8 x 8 transpose of 4-byte elements in AVX2 registers, shared by the row groups' quant
// transposes (row_groups.hpp) and the activations' packing (packing.hpp).

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

namespace smol::avx2_transpose {

// v[i] holds elements 0..7 of row i; afterwards v[j] holds element j of rows 0..7.
inline void transpose_8x8_epi32(__m256i (&v)[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int j = 0; j < 4; ++j) {
        v[j] = _mm256_permute2x128_si256(u[j], u[j + 4], 0x20);
        v[j + 4] = _mm256_permute2x128_si256(u[j], u[j + 4], 0x31);
    }
}

}  // namespace smol::avx2_transpose

#endif
