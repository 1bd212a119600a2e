#pragma once
// AVX-512 (F, BW, VL, DQ) + VNNI tiles for Q5_K, Q3_K and Q2_K weights against Q8_K activations,
// built as kernels_avx512.hpp builds Q4_K and Q6_K decode: per 64 weights one vpdpbusd forms 16
// sums of 4 products, vpackssdw narrows two such vectors to words (at most 4 * 31 * 128 in
// magnitude here, so nothing saturates) and one vpmaddwd applies the sub-block scales. The
// exact block totals then take the AVX2 tiles' float step (kquant_tiles_avx2.hpp), so the bits
// are the scalar reference's. Every function carries SMOL_TARGET_AVX512 and runs only where
// dispatch.hpp found the CPU able to.

#include "smol/quant/kernels_avx512.hpp"
#include "smol/quant/kquant_tiles_avx2.hpp"

#if SMOL_HAVE_AVX512_KERNELS

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"

// As in kernels_avx512.hpp: GCC 12 reports the masked intrinsics' undefined seeds (bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#define SMOL_KQUANT_AVX512_GCC_DIAGNOSTICS 1
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace smol::kernels_avx512 {

namespace kquant_detail {

namespace avx2 = kernels_avx2::detail;
namespace avx2_kquant = kernels_avx2::kquant_detail;
using avx2::kDecodeChunk;

// Per byte, in the lower 256 bits `low`, in the upper 256 bits `high`.
SMOL_TARGET_AVX512 inline __m512i halves_epi8(int low, int high) {
    return _mm512_inserti64x4(_mm512_set1_epi8(char(low)), _mm256_set1_epi8(char(high)), 1);
}

// Decode of one activation column, as kernels_avx512.hpp's q4k_column: the rows are read one after
// the other, each whole, and Kernel::sums gives each block's exact totals (Kernel::Sums as in
// kquant_tiles_avx2.hpp); the four rows meet in the AVX2 tiles' float step.
template <class Kernel>
SMOL_TARGET_AVX512 inline void kquant_column(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes,
                                             int n_rows, const std::uint8_t* acts, std::size_t act_stride, int n_cols,
                                             float* out, std::size_t out_stride) {
    using Weight = typename Kernel::Weight;
    const kernel_detail::TileOperands<Weight, BlockQ8K, 1> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    const Kernel kernel;  // its constants, built once per call
    __m128 acc = _mm_setzero_ps();  // [row]
    const std::int64_t blocks = n / QK_K;
    for (std::int64_t b0 = 0; b0 < blocks; b0 += kDecodeChunk) {
        const int chunk = int(std::min<std::int64_t>(kDecodeChunk, blocks - b0));
        typename Kernel::Sums sums[kTileRows][kDecodeChunk];
        for (int r = 0; r < kTileRows; ++r)
            for (int i = 0; i < chunk; ++i) {
                const Weight& wb = t.w[r][b0 + i];
                detail::prefetch_ahead(&wb, sizeof(Weight), ahead);
                sums[r][i] = kernel.sums(wb, t.a[0][b0 + i]);
            }
        acc = avx2_kquant::accumulate_run(acc, t.w, t.a[0], b0, chunk, sums);
    }
    avx2::store_column(acc, n_rows, n_cols, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// Q5_K: Q4_K's chunks (kernels_avx512.hpp, q4k_block_dot) with the fifth bits added: for chunk c
// bit 2c of qh[l] in the lower half (weights 64c + l) and bit 2c + 1 in the upper half.

struct Q5KDecode {
    using Weight = BlockQ5K;
    using Sums = avx2_kquant::ScaleMinSums4;
    detail::Q4KScalePickers pickers;
    SMOL_TARGET_AVX512 Q5KDecode() {}

    SMOL_TARGET_AVX512 static __m512i chunk_quants(const BlockQ5K& wb, int c, __m512i high) {
        const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * c)));
        const __m512i low = _mm512_and_si512(_mm512_mask_srli_epi16(bits, 0xffff0000u, bits, 4), _mm512_set1_epi8(0x0f));
        const __mmask64 fifth = _mm512_test_epi8_mask(high, halves_epi8(1 << (2 * c), 1 << (2 * c + 1)));
        return _mm512_mask_add_epi8(low, fifth, low, _mm512_set1_epi8(16));
    }

    SMOL_TARGET_AVX512 Sums sums(const BlockQ5K& wb, const BlockQ8K& ab) const {
        const __m128i unpacked = avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb)));
        const __m512i scales = _mm512_broadcast_i32x4(unpacked);
        const __m512i high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh)));
        __m512i sumi = _mm512_setzero_si512();
        for (int p = 0; p < 2; ++p) {
            __m512i dots[2];
            for (int k = 0; k < 2; ++k) {
                const int c = 2 * p + k;
                dots[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), chunk_quants(wb, c, high),
                                              _mm512_loadu_si512(ab.qs + 64 * c));
            }
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_packs_epi32(dots[0], dots[1]),
                                                            _mm512_shuffle_epi8(scales, pickers.pair[p])));
        }
        return {detail::fold_to_256(sumi), avx2::q4k_min_dots(unpacked, avx2::q8k_sub_block_sums(ab))};
    }
};

// ---------------------------------------------------------------------------------------------
// Q3_K and Q2_K: Q6_K's halves (kernels_avx512.hpp, q6k_block_dot) with quants used unsigned.
// Half h's 32 qs bytes hold the two low bits of weights 128h..128h+63 in bit pairs 0 and 1 and
// of weights 128h+64..128h+127 in pairs 2 and 3.

// The low two bits of the 64 weights from 128h + 64p: bit pairs 2p (lower 256 bits) and 2p + 1
// (upper) of `bits`, half h's qs bytes in both 256-bit halves.
SMOL_TARGET_AVX512 inline __m512i low_bit_pairs(__m512i bits, int p) {
    const __m512i shifts = _mm512_inserti64x4(_mm512_set1_epi16(short(4 * p)), _mm256_set1_epi16(short(4 * p + 2)), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(bits, shifts), _mm512_set1_epi8(0x03));
}

// Sum over the 16 sub-blocks of scale_j * (u . a) for unsigned quants u, as 8 i32 partial sums:
// quants(bits, h, p) gives the 64 quants from 128h + 64p; scale_bytes: the 16 signed scales.
template <class Quants>
SMOL_TARGET_AVX512 inline __m256i sixteen_scale_dots(const std::uint8_t* qs, const BlockQ8K& ab, __m128i scale_bytes,
                                                     const detail::Q6KScalePickers& pickers, const Quants& quants) {
    const __m512i scales_x4 = _mm512_broadcast_i32x4(scale_bytes);
    __m512i sumi = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
        const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h)));
        const __m512i dots0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), quants(bits, h, 0), _mm512_loadu_si512(ab.qs + 128 * h));
        const __m512i dots1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), quants(bits, h, 1), _mm512_loadu_si512(ab.qs + 128 * h + 64));
        const __m512i scales = _mm512_srai_epi16(_mm512_shuffle_epi8(scales_x4, pickers.half[h]), 8);
        sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_packs_epi32(dots0, dots1), scales));
    }
    return detail::fold_to_256(sumi);
}

// Q3_K: chunk k = 4h + 2p (lower 256 bits) and k + 1 (upper) take bit k, k + 1 of the hmask bytes
// as their third bit, adding 4 (quants 0..7; the AVX2 tiles' q3k_offset takes the -4 out).
struct Q3KDecode {
    using Weight = BlockQ3K;
    using Sums = avx2_kquant::ScaleSums;
    detail::Q6KScalePickers pickers;
    SMOL_TARGET_AVX512 Q3KDecode() {}

    // (Functors, not lambdas: a lambda's call operator would lack SMOL_TARGET_AVX512.)
    struct Quants {
        __m512i high;  // the hmask bytes in both 256-bit halves
        SMOL_TARGET_AVX512 __m512i operator()(__m512i bits, int h, int p) const {
            const __m512i low = low_bit_pairs(bits, p);
            const int k = 4 * h + 2 * p;
            const __mmask64 third = _mm512_test_epi8_mask(high, halves_epi8(1 << k, 1 << (k + 1)));
            return _mm512_mask_add_epi8(low, third, low, _mm512_set1_epi8(4));
        }
    };

    SMOL_TARGET_AVX512 Sums sums(const BlockQ3K& wb, const BlockQ8K& ab) const {
        const __m128i scale_bytes = avx2_kquant::q3k_scales(wb);
        const Quants quants{_mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.hmask)))};
        const __m256i dots = sixteen_scale_dots(wb.qs, ab, scale_bytes, pickers, quants);
        const __m256i offset = avx2_kquant::q3k_offset(_mm256_cvtepi8_epi16(scale_bytes), avx2::q8k_bsums(ab));
        return {_mm256_sub_epi32(dots, offset)};
    }
};

// Q2_K: quants 0..3 as they are; unsigned 4-bit scales (picked and sign-extended as Q6_K's, which
// leaves them unchanged) and mins, which meet the bsums in the AVX2 way.
struct Q2KDecode {
    using Weight = BlockQ2K;
    using Sums = avx2_kquant::ScaleMinSums8;
    detail::Q6KScalePickers pickers;
    SMOL_TARGET_AVX512 Q2KDecode() {}

    struct Quants {
        SMOL_TARGET_AVX512 __m512i operator()(__m512i bits, int, int p) const { return low_bit_pairs(bits, p); }
    };

    SMOL_TARGET_AVX512 Sums sums(const BlockQ2K& wb, const BlockQ8K& ab) const {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales));  // [j]: scale | min << 4
        const __m128i low4 = _mm_set1_epi8(0x0f);
        const __m256i dots = sixteen_scale_dots(wb.qs, ab, _mm_and_si128(packed, low4), pickers, Quants{});
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
        return {dots, _mm256_madd_epi16(mins16, avx2::q8k_bsums(ab))};
    }
};

// ---------------------------------------------------------------------------------------------
// Prompt GEMMs, as kernels_avx512.hpp's q4k_gemm and q6k_gemm: vector lanes are 16 tokens of a
// packed group, each 4-byte group of an unpacked weight row is broadcast and one vpdpbusd
// multiplies it with the group's tokens (scaled_block_dots), so each unpacked byte serves
// kGemmTokens tokens. Each (row, token) lane ends a block with the exact integer totals and takes
// the reference's float step: the decode tiles' bits.

// What a row's block contributes besides its unpacked quants.
struct GemmFactors {
    std::int32_t scales[16];       // [sub-block]: the scale vpmulld applies
    std::int16_t bsum_factors[16]; // [bsum of 16 weights]: its min (types with mins) or its scale (Q3_K)
    float d, dmin;
};

// Kernel: Weight, SubBlocks, kMins (mins against bsums; else Q3_K's offset: quants stored + 4),
// and unpack(weight block, UnpackedQuants&, GemmFactors&).
template <class Kernel>
SMOL_TARGET_AVX512 inline void kquant_gemm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes,
                                           int n_rows, const BlockQ8Kx16* acts, int n_tokens, float* out,
                                           std::size_t out_stride) {
    using Weight = typename Kernel::Weight;
    constexpr int R = kTileRows, G = kGemmTokens / kPackedTokens;
    if (n_rows <= 0 || n_tokens <= 0) return;
    const Weight* w[R];
    kernel_detail::tile_rows(weights, row_bytes, n_rows, w);
    const std::int64_t blocks = n / QK_K;
    const int groups = (n_tokens + kPackedTokens - 1) / kPackedTokens;
    const Kernel kernel;
    __m512 acc[R][G];
    for (int r = 0; r < R; ++r)
        for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
    detail::UnpackedQuants u[R];
    GemmFactors factors[R];
    for (std::int64_t b = 0; b < blocks; ++b) {
        for (int r = 0; r < R; ++r) kernel.unpack(w[r][b], u[r], factors[r]);
        const BlockQ8Kx16* a[G];
        for (int g = 0; g < G; ++g) a[g] = acts + std::min(g, groups - 1) * blocks + b;
        __m512i dots[R][G];
        detail::scaled_block_dots<Kernel::kSubBlocks>(dots, u, a, [&](int r, int j) { return factors[r].scales[j]; });
        for (int r = 0; r < R; ++r) {
            const GemmFactors& f = factors[r];
            for (int g = 0; g < G; ++g) {
                __m512i bsum_term = _mm512_setzero_si512();
                for (int p = 0; p < 8; ++p)
                    bsum_term = _mm512_dpwssd_epi32(bsum_term, _mm512_load_si512(a[g]->bsums[p]),
                                                    detail::word_pair(f.bsum_factors[2 * p], f.bsum_factors[2 * p + 1]));
                const __m512 ad = _mm512_load_ps(a[g]->d);
                if constexpr (Kernel::kMins) {
                    acc[r][g] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(f.d), ad), _mm512_cvtepi32_ps(dots[r][g]), acc[r][g]);
                    acc[r][g] = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_set1_ps(f.dmin), ad), _mm512_cvtepi32_ps(bsum_term), acc[r][g]);
                } else {
                    const __m512i total = _mm512_sub_epi32(dots[r][g], _mm512_slli_epi32(bsum_term, 2));
                    acc[r][g] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(f.d), ad), _mm512_cvtepi32_ps(total), acc[r][g]);
                }
            }
        }
    }
    for (int r = 0; r < n_rows; ++r) detail::store_token_lanes<G>(acc[r], r, n_tokens, out, out_stride);
}

struct Q5KGemm {
    using Weight = BlockQ5K;
    static constexpr int kSubBlocks = 8;
    static constexpr bool kMins = true;
    SMOL_TARGET_AVX512 void unpack(const BlockQ5K& wb, detail::UnpackedQuants& u, GemmFactors& f) const {
        alignas(16) std::uint8_t scales_mins[16];  // 8 scales, 8 mins
        _mm_store_si128(reinterpret_cast<__m128i*>(scales_mins),
                        avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb))));
        for (int j = 0; j < 8; ++j) f.scales[j] = scales_mins[j];
        for (int k = 0; k < 16; ++k) f.bsum_factors[k] = scales_mins[8 + k / 2];  // a sub-block of 32 has two bsums
        f.d = detail::half_to_float(wb.d);
        f.dmin = detail::half_to_float(wb.dmin);
        const __m512i high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh)));
        for (int c = 0; c < 4; ++c) _mm512_store_si512(u.q + 64 * c, Q5KDecode::chunk_quants(wb, c, high));
    }
};

struct Q3KGemm {
    using Weight = BlockQ3K;
    static constexpr int kSubBlocks = 16;
    static constexpr bool kMins = false;
    SMOL_TARGET_AVX512 void unpack(const BlockQ3K& wb, detail::UnpackedQuants& u, GemmFactors& f) const {
        alignas(16) std::int8_t scales[16];
        _mm_store_si128(reinterpret_cast<__m128i*>(scales), avx2_kquant::q3k_scales(wb));
        for (int j = 0; j < 16; ++j) f.scales[j] = f.bsum_factors[j] = scales[j];
        f.d = detail::half_to_float(wb.d);
        f.dmin = 0.0f;
        const Q3KDecode::Quants quants{_mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.hmask)))};
        for (int h = 0; h < 2; ++h) {
            const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * h)));
            for (int p = 0; p < 2; ++p) _mm512_store_si512(u.q + 128 * h + 64 * p, quants(bits, h, p));
        }
    }
};

struct Q2KGemm {
    using Weight = BlockQ2K;
    static constexpr int kSubBlocks = 16;
    static constexpr bool kMins = true;
    SMOL_TARGET_AVX512 void unpack(const BlockQ2K& wb, detail::UnpackedQuants& u, GemmFactors& f) const {
        for (int j = 0; j < 16; ++j) {
            f.scales[j] = wb.scales[j] & 0x0f;
            f.bsum_factors[j] = std::int16_t(wb.scales[j] >> 4);
        }
        f.d = detail::half_to_float(wb.d);
        f.dmin = detail::half_to_float(wb.dmin);
        for (int h = 0; h < 2; ++h) {
            const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * h)));
            for (int p = 0; p < 2; ++p) _mm512_store_si512(u.q + 128 * h + 64 * p, low_bit_pairs(bits, p));
        }
    }
};

}  // namespace kquant_detail

// Decode takes the 512-bit column kernels, prompts the GEMMs; a tile of a few columns (smol's
// matmul never asks for one) goes column by column. All give the reference's bits.
inline constexpr DotTileFn q2k_q8k = kernel_detail::column_by_column<kquant_detail::kquant_column<kquant_detail::Q2KDecode>>;
inline constexpr DotTileFn q3k_q8k = kernel_detail::column_by_column<kquant_detail::kquant_column<kquant_detail::Q3KDecode>>;
inline constexpr DotTileFn q5k_q8k = kernel_detail::column_by_column<kquant_detail::kquant_column<kquant_detail::Q5KDecode>>;
inline constexpr GemmTileFn q2k_q8k_gemm = kquant_detail::kquant_gemm<kquant_detail::Q2KGemm>;
inline constexpr GemmTileFn q3k_q8k_gemm = kquant_detail::kquant_gemm<kquant_detail::Q3KGemm>;
inline constexpr GemmTileFn q5k_q8k_gemm = kquant_detail::kquant_gemm<kquant_detail::Q5KGemm>;

}  // namespace smol::kernels_avx512

#if SMOL_KQUANT_AVX512_GCC_DIAGNOSTICS
#pragma GCC diagnostic pop
#undef SMOL_KQUANT_AVX512_GCC_DIAGNOSTICS
#endif

#endif
