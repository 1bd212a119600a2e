#pragma once
// AVX-512 (F, BW, VL, DQ) + VNNI tiles for the k-quants against Q8_K activations: the AVX2 set's
// two drivers (kquant_tiles_avx2.hpp) with this set's Decode kernels and its GEMM core, and the
// set's entry points to the Q4_K and Q6_K row-group decode kernels (row_group_tiles.hpp).
//
// Decode: per 64 weights one vpdpbusd forms 16 sums of 4 products, vpackssdw narrows two such
// vectors to words (at most 4 * 63 * 128 in magnitude, so nothing saturates) and one vpmaddwd
// applies the sub-block scales; the exact block totals take the AVX2 driver's float step.
// GEMM: the k-quants' Gemm kernels (kquant_tiles_avx2.hpp) unpack each weight block once (Q4_K's
// row groups are read in place, Q4KGroupNibbles); 16 tokens per vector, one vpdpbusd per 4-byte
// group (kernels_avx512.hpp, scaled_block_dots).
// Either way the bits are the scalar reference's.
//
// The drivers are compiled for the baseline, and GCC and clang refuse to inline a function of a
// wider target into them; so the entry points below carry the AVX-512 target and `flatten`,
// which inlines the driver into them and then, inside an AVX-512 function, this set's kernels
// too (as legacy_tiles_avx512.hpp does). Every function runs only where dispatch.hpp found the
// CPU able to.

#include "smol/core/intrinsic_warnings.hpp"
#include "smol/quant/kernels_avx512.hpp"
#include "smol/quant/kquant_tiles_avx2.hpp"
#include "smol/quant/legacy_tiles_avx512.hpp"  // IQ4_XS: the block-of-32 products
#include "smol/quant/row_group_tiles.hpp"       // the Q4_K and Q6_K row-group decode kernels

#if SMOL_HAVE_AVX512_KERNELS

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"

// GCC 12 reports the masked intrinsics' undefined seeds (core/intrinsic_warnings.hpp).
SMOL_INTRINSIC_WARNINGS_OFF

namespace smol::kernels_avx512 {

namespace kquant_detail {

namespace avx2 = kernels_avx2::detail;
namespace avx2_kquant = kernels_avx2::kquant_detail;

// Per byte, in the lower 256 bits `low`, in the upper 256 bits `high`.
SMOL_TARGET_AVX512 inline __m512i halves_epi8(int low, int high) {
    return _mm512_inserti64x4(_mm512_set1_epi8(char(low)), _mm256_set1_epi8(char(high)), 1);
}

// Decode of one activation column: the AVX2 driver with this set's Decode kernel.
template <class Kernel>
SMOL_TARGET_AVX512 __attribute__((flatten)) inline void kquant_column(std::int64_t n, const std::uint8_t* weights,
                                                                      std::size_t row_bytes, int n_rows,
                                                                      const std::uint8_t* acts, std::size_t act_stride,
                                                                      int n_cols, float* out, std::size_t out_stride) {
    avx2_kquant::kquant_column<Kernel>(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// Decode kernels. Q4_K and Q5_K have Q4_K's shape (kernels_avx512.hpp, eight_scale_dots: chunk c
// = weights 64c..64c+63); Q6_K, Q3_K and Q2_K Q6_K's (sixteen_scale_dots: halves of 128). Each
// gives its unsigned quants to the shape's dots; the offsets of the signed ones come out through
// the bsums as in the AVX2 set. (Quants are functors, not lambdas: a lambda's call operator
// would lack SMOL_TARGET_AVX512.)

struct Q4KDecode {
    using Weight = BlockQ4K;
    using Sums = avx2_kquant::ScaleMinSums4;
    detail::Q4KScalePickers pickers;
    SMOL_TARGET_AVX512 Q4KDecode() {}

    struct ChunkQuants {
        const BlockQ4K& wb;
        SMOL_TARGET_AVX512 __m512i operator()(int c) const { return detail::q4k_chunk_quants(wb, c); }
    };

    SMOL_TARGET_AVX512 Sums sums(const BlockQ4K& wb, const BlockQ8K& ab) const {
        const __m128i unpacked = avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb)));
        return {detail::eight_scale_dots(ab, _mm512_broadcast_i32x4(unpacked), pickers, ChunkQuants{wb}),
                avx2::q4k_min_dots(unpacked, avx2::q8k_sub_block_sums(ab))};
    }
};

// Q5_K: Q4_K's chunks with the fifth bits added: for chunk c bit 2c of qh[l] in the lower half
// (weights 64c + l) and bit 2c + 1 in the upper half.
struct Q5KDecode {
    using Weight = BlockQ5K;
    using Sums = avx2_kquant::ScaleMinSums4;
    detail::Q4KScalePickers pickers;
    SMOL_TARGET_AVX512 Q5KDecode() {}

    struct ChunkQuants {
        const BlockQ5K& wb;
        __m512i high;  // the qh bytes in both 256-bit halves
        SMOL_TARGET_AVX512 __m512i operator()(int c) const {
            const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * c)));
            const __m512i low = _mm512_and_si512(_mm512_mask_srli_epi16(bits, 0xffff0000u, bits, 4), _mm512_set1_epi8(0x0f));
            const __mmask64 fifth = _mm512_test_epi8_mask(high, halves_epi8(1 << (2 * c), 1 << (2 * c + 1)));
            return _mm512_mask_add_epi8(low, fifth, low, _mm512_set1_epi8(16));
        }
    };

    SMOL_TARGET_AVX512 Sums sums(const BlockQ5K& wb, const BlockQ8K& ab) const {
        const __m128i unpacked = avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb)));
        const ChunkQuants quants{wb, _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh)))};
        return {detail::eight_scale_dots(ab, _mm512_broadcast_i32x4(unpacked), pickers, quants),
                avx2::q4k_min_dots(unpacked, avx2::q8k_sub_block_sums(ab))};
    }
};

struct Q6KDecode {  // quants used unsigned, 0..63
    using Weight = BlockQ6K;
    using Sums = avx2_kquant::ScaleSums;
    detail::Q6KScalePickers pickers;
    SMOL_TARGET_AVX512 Q6KDecode() {}

    struct HalfQuants {
        const BlockQ6K& wb;
        SMOL_TARGET_AVX512 void operator()(int h, __m512i& first, __m512i& second) const {
            detail::q6k_half_quants(wb, h, first, second);
        }
    };

    SMOL_TARGET_AVX512 Sums sums(const BlockQ6K& wb, const BlockQ8K& ab) const {
        const __m128i scale_bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales));
        const __m256i dots = detail::sixteen_scale_dots(ab, scale_bytes, pickers, HalfQuants{wb});
        return {_mm256_sub_epi32(dots, avx2::q6k_offset(avx2::q6k_scales16(wb), avx2::q8k_bsums(ab)))};
    }
};

// Q3_K and Q2_K keep two low bits of each weight in qs: half h's 32 bytes hold those of weights
// 128h..128h+63 in bit pairs 0 and 1 and of weights 128h+64..128h+127 in pairs 2 and 3.

// The low two bits of the 64 weights from 128h + 64p: bit pairs 2p (lower 256 bits) and 2p + 1
// (upper) of `bits`, half h's qs bytes in both 256-bit halves.
SMOL_TARGET_AVX512 inline __m512i low_bit_pairs(__m512i bits, int p) {
    const __m512i shifts = _mm512_inserti64x4(_mm512_set1_epi16(short(4 * p)), _mm256_set1_epi16(short(4 * p + 2)), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(bits, shifts), _mm512_set1_epi8(0x03));
}

SMOL_TARGET_AVX512 inline __m512i half_qs(const std::uint8_t* qs, int h) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h)));
}

// Q3_K: chunk k = 4h + 2p (lower 256 bits) and k + 1 (upper) take bit k, k + 1 of the hmask bytes
// as their third bit, adding 4 (quants 0..7; the AVX2 tiles' q3k_offset takes the -4 out).
struct Q3KDecode {
    using Weight = BlockQ3K;
    using Sums = avx2_kquant::ScaleSums;
    detail::Q6KScalePickers pickers;
    SMOL_TARGET_AVX512 Q3KDecode() {}

    struct HalfQuants {
        const BlockQ3K& wb;
        __m512i high;  // the hmask bytes in both 256-bit halves
        SMOL_TARGET_AVX512 __m512i quants(__m512i bits, int h, int p) const {
            const __m512i low = low_bit_pairs(bits, p);
            const int k = 4 * h + 2 * p;
            const __mmask64 third = _mm512_test_epi8_mask(high, halves_epi8(1 << k, 1 << (k + 1)));
            return _mm512_mask_add_epi8(low, third, low, _mm512_set1_epi8(4));
        }
        SMOL_TARGET_AVX512 void operator()(int h, __m512i& first, __m512i& second) const {
            const __m512i bits = half_qs(wb.qs, h);
            first = quants(bits, h, 0);
            second = quants(bits, h, 1);
        }
    };

    SMOL_TARGET_AVX512 Sums sums(const BlockQ3K& wb, const BlockQ8K& ab) const {
        const __m128i scale_bytes = avx2_kquant::q3k_scales(wb);
        const HalfQuants quants{wb, _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.hmask)))};
        const __m256i dots = detail::sixteen_scale_dots(ab, scale_bytes, pickers, quants);
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

    struct HalfQuants {
        const BlockQ2K& wb;
        SMOL_TARGET_AVX512 void operator()(int h, __m512i& first, __m512i& second) const {
            const __m512i bits = half_qs(wb.qs, h);
            first = low_bit_pairs(bits, 0);
            second = low_bit_pairs(bits, 1);
        }
    };

    SMOL_TARGET_AVX512 Sums sums(const BlockQ2K& wb, const BlockQ8K& ab) const {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales));  // [j]: scale | min << 4
        const __m128i low4 = _mm_set1_epi8(0x0f);
        const __m256i dots = detail::sixteen_scale_dots(ab, _mm_and_si128(packed, low4), pickers, HalfQuants{wb});
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
        return {dots, _mm256_madd_epi16(mins16, avx2::q8k_bsums(ab))};
    }
};

// ---------------------------------------------------------------------------------------------
// Prompt GEMMs: vector lanes are 16 tokens of a packed group, each 4-byte group of an unpacked
// weight row is broadcast and one vpdpbusd multiplies it with the group's tokens
// (scaled_block_dots), so each unpacked byte serves every group of the call. Each (row, token)
// lane ends a block with the exact integer totals and takes the reference's float step, as the
// AVX2 driver's gemm_accumulate: the decode tiles' bits. Kernel: a Gemm kernel of
// kquant_tiles_avx2.hpp. Rows: where the rows come from (kquant_tiles_avx2.hpp's StoredRows or
// GroupRows).

// The registers hold the integer sums of three token groups at a time (R * G chains of vpdpbusd
// and as many block totals), so a call's groups (kGemmTokensAvx512 / 16) go through each
// unpacked block in passes of up to three; the float sums, touched once a block, wait in L1.
inline constexpr int kGroupsPerPass = 3;
inline constexpr int kMaxGroups = kGemmTokensAvx512 / kPackedTokens;
static_assert(kMaxGroups % kGroupsPerPass == 0, "full passes, and a short one only for a call's last tokens");

using GroupSums = float[kTileRows][kMaxGroups][kPackedTokens];  // [row][token group][token]

// Where scaled_block_dots' runs start: at zero, or at minus 2^Shift times the activation sum
// each i32 lane will meet (sub-block j's bsum per token: word j % 2 of BlockQ8Kx16::bsums[j / 2],
// sign-extended and scaled by shifts, then negated), operations that leave the multiply pipes to
// vpdpbusd, where a vpmaddwd of the two lane sums (as AVX-VNNI's DpbusdProducts takes them) took
// one of its slots.
struct ZeroRunStart {
    SMOL_TARGET_AVX512 __m512i operator()(int, int) const { return _mm512_setzero_si512(); }
};
template <int G, int Shift>
struct OffsetRunStart {
    const BlockQ8Kx16* const (&a)[G];
    SMOL_TARGET_AVX512 __m512i operator()(int j, int g) const {
        const __m512i pairs = _mm512_load_si512(a[g]->bsums[j / 2][0]);
        const __m512i scaled = j % 2 == 0 ? _mm512_srai_epi32(_mm512_slli_epi32(pairs, 16), 16 - Shift)
                                          : _mm512_slli_epi32(_mm512_srai_epi32(pairs, 16), Shift);
        return _mm512_sub_epi32(_mm512_setzero_si512(), scaled);
    }
};

// Token groups g0..g0+G-1 (acts + g * blocks: group g's blocks) against block b's rows (their
// weight groups and factors): their exact totals and the float step into sums[r][g].
template <class Kernel, int G, class Groups>
SMOL_TARGET_AVX512 __attribute__((always_inline)) inline void block_pass(
    const Groups& weights, const avx2_kquant::GemmFactors (&factors)[kTileRows],
    const std::int32_t (&scales32)[kTileRows][16], const BlockQ8Kx16* acts, std::int64_t blocks, std::int64_t b, int g0,
    GroupSums& sums) {
    constexpr int R = kTileRows;
    const BlockQ8Kx16* a[G];
    SMOL_UNROLL
    for (int g = 0; g < G; ++g) a[g] = acts + (g0 + g) * blocks + b;
    // As the AVX2 MaddubsProducts, the types with an offset and sub-blocks of 16 start each run at
    // minus the offset their unsigned quants add (one vpmaddwd per sub-block and token group,
    // where the float step's bsum term took 8 vpdpwssd per row and group).
    constexpr bool offset_in_runs = avx2_kquant::kOffsetInRuns<Kernel>;
    const auto scale = [&](int r, int j) { return scales32[r][j]; };
    __m512i dots[R][G];
    if constexpr (offset_in_runs)
        detail::scaled_block_dots<Kernel::kSubBlocks>(dots, weights, a, scale, OffsetRunStart<G, Kernel::kOffsetShift>{a});
    else
        detail::scaled_block_dots<Kernel::kSubBlocks>(dots, weights, a, scale, ZeroRunStart{});
    if constexpr (Groups::kDotsShift > 0) {  // exact: every total is a multiple of 2^kDotsShift
        SMOL_UNROLL
        for (int r = 0; r < R; ++r)
            SMOL_UNROLL
            for (int g = 0; g < G; ++g) dots[r][g] = _mm512_srai_epi32(dots[r][g], Groups::kDotsShift);
    }
    SMOL_UNROLL
    for (int r = 0; r < R; ++r) {
        const avx2_kquant::GemmFactors& f = factors[r];
        SMOL_UNROLL
        for (int g = 0; g < G; ++g) {
            const __m512 ad = _mm512_load_ps(a[g]->d);
            float* group_sums = sums[r][g0 + g];
            __m512 acc = _mm512_load_ps(group_sums);
            const __m512 d_ad = _mm512_mul_ps(_mm512_set1_ps(*detail::read_in_place(&f.d)), ad);
            if constexpr (offset_in_runs) {
                acc = _mm512_fmadd_ps(d_ad, _mm512_cvtepi32_ps(dots[r][g]), acc);
            } else {
                __m512i bsum_term = _mm512_setzero_si512();  // sum_k factor_k * sum_k (bsum_dots')
                SMOL_UNROLL
                for (int p = 0; p < avx2_kquant::kBsumPairs<Kernel>; ++p)
                    bsum_term = _mm512_dpwssd_epi32(bsum_term,
                                                    _mm512_load_si512(avx2_kquant::bsum_pair<Kernel>(*a[g], p)),
                                                    detail::word_pair(f.bsum_factors + 2 * p));
                if constexpr (Kernel::kOffsetShift == 0) {
                    acc = _mm512_fmadd_ps(d_ad, _mm512_cvtepi32_ps(dots[r][g]), acc);
                    const __m512 dmin_ad = _mm512_mul_ps(_mm512_set1_ps(*detail::read_in_place(&f.dmin)), ad);
                    acc = _mm512_fnmadd_ps(dmin_ad, _mm512_cvtepi32_ps(bsum_term), acc);
                } else {
                    const __m512i total = _mm512_sub_epi32(dots[r][g], _mm512_slli_epi32(bsum_term, Kernel::kOffsetShift));
                    acc = _mm512_fmadd_ps(d_ad, _mm512_cvtepi32_ps(total), acc);
                }
            }
            _mm512_store_ps(group_sums, acc);
        }
    }
}

// Where a call's weight groups come from (see kernels_avx512.hpp's UnpackedGroups). Rows
// (kquant_tiles_avx2.hpp's StoredRows or GroupRows) unpack each block to bytes once per call:
template <class Rows>
struct UnpackedBlocks {
    const Rows& rows;
    detail::UnpackedQuants u[kTileRows];  // block b's rows, written by block(b)
    explicit UnpackedBlocks(const Rows& from) : rows(from) {}
    using Groups = detail::UnpackedGroups;
    SMOL_TARGET_AVX512 Groups block(std::int64_t b, avx2_kquant::GemmFactors (&factors)[kTileRows]) {
        rows.unpack(b, u, factors);
        return {u};
    }
};

// Q4_K's row groups (row_groups.hpp) read in place, nothing unpacked: group k of sub-block j is
// the 4 bytes qs[j / 2][k % 8][row] of the group block, the low nibbles for even j, the high ones
// for odd j. Masking the broadcast bytes (one vpandd with the broadcast from memory) leaves the
// high nibbles as 16 times their quants, so the even sub-blocks' scales take a factor 16 too and
// the block totals are shifted down by 4 (16 * 8 * 63 * 32 * 15 * 128 stays below 2^31).
struct Q4KGroupNibbles {
    avx2_kquant::GroupRows<avx2_kquant::Q4KGemm> rows;  // rows first..first + 3 of a row group
    struct Groups {
        const BlockQ4Kx8& block;
        int first;
        static constexpr int kDotsShift = 4;
        static constexpr int quant_shift(int j) { return j % 2 == 0 ? 0 : 4; }
        SMOL_TARGET_AVX512 __m512i group(int r, int k) const {
            const int j = k / 8;
            std::int32_t four;
            std::memcpy(&four, block.qs[j / 2][k % 8][first + r], 4);
            return _mm512_and_si512(_mm512_set1_epi32(four), _mm512_set1_epi8(char(j % 2 == 0 ? 0x0f : 0xf0)));
        }
    };
    SMOL_TARGET_AVX512 Groups block(std::int64_t b, avx2_kquant::GemmFactors (&factors)[kTileRows]) const {
        rows.prefetch(b);
        avx2_kquant::Q4KGemm::group_factors(rows.group[b], rows.first, factors);
        return {rows.group[b], rows.first};
    }
};

// A call's tokens (up to kGemmTokensAvx512) against the tile's rows, each weight block unpacked
// (where it is) once for all of them: full passes of three groups, then the groups left (a short
// batch: a speculative verify step, a prompt's tail) in one pass of as many as they fill rather
// than a group computed for nothing. Blocks: UnpackedBlocks or Q4KGroupNibbles.
template <class Kernel, class Blocks>
SMOL_TARGET_AVX512 __attribute__((flatten)) inline void kquant_gemm_blocks(std::int64_t n, Blocks& blocks_of_rows,
                                                                           int n_rows, const BlockQ8Kx16* acts,
                                                                           int n_tokens, float* out, std::size_t out_stride) {
    constexpr int R = kTileRows;
    if (n_rows <= 0 || n_tokens <= 0) return;
    n_tokens = std::min(n_tokens, kGemmTokensAvx512);
    const std::int64_t blocks = n / QK_K;
    const int groups = int(packed_groups(n_tokens));
    const int full = groups - groups % kGroupsPerPass;
    alignas(64) GroupSums sums = {};
    avx2_kquant::GemmFactors factors[R];
    // factors[r].scales widened, each times 2^(kDotsShift - quant_shift(j)): vpmulld broadcasts
    // them from memory.
    alignas(64) std::int32_t scales32[R][16];
    for (std::int64_t b = 0; b < blocks; ++b) {
        const auto weights = blocks_of_rows.block(b, factors);
        using Groups = std::remove_const_t<decltype(weights)>;
        // Read in the 128-bit halves the unpacking stored, only those the type fills: a wider load
        // of two fresh stores cannot take its data from the store buffer and waits for L1.
        SMOL_UNROLL
        for (int r = 0; r < R; ++r)
            SMOL_UNROLL
            for (int k = 0; k < avx2_kquant::kFilledHalves<Kernel::kSubBlocks>; ++k) {
                __m256i scales = _mm256_cvtepi16_epi32(avx2_kquant::load_128(factors[r].scales + 8 * k));
                if constexpr (Groups::kDotsShift > 0) {
                    const auto shift = [k](int i) { return Groups::kDotsShift - Groups::quant_shift(8 * k + i); };
                    const __m256i shifts = _mm256_setr_epi32(shift(0), shift(1), shift(2), shift(3), shift(4), shift(5),
                                                             shift(6), shift(7));
                    scales = _mm256_sllv_epi32(scales, shifts);
                }
                _mm256_store_si256(reinterpret_cast<__m256i*>(scales32[r] + 8 * k), scales);
            }
        for (int g0 = 0; g0 < full; g0 += kGroupsPerPass)
            block_pass<Kernel, kGroupsPerPass>(weights, factors, scales32, acts, blocks, b, g0, sums);
        if (groups - full == 1) block_pass<Kernel, 1>(weights, factors, scales32, acts, blocks, b, full, sums);
        if (groups - full == 2) block_pass<Kernel, 2>(weights, factors, scales32, acts, blocks, b, full, sums);
    }
    kernel_detail::store_token_major(&sums[0][0][0], kMaxGroups * kPackedTokens, n_rows, n_tokens, out, out_stride);
}

template <class Kernel, class Rows>
SMOL_TARGET_AVX512 inline void kquant_gemm_rows(std::int64_t n, const Rows& rows, int n_rows, const BlockQ8Kx16* acts,
                                                int n_tokens, float* out, std::size_t out_stride) {
    UnpackedBlocks<Rows> blocks(rows);
    kquant_gemm_blocks<Kernel>(n, blocks, n_rows, acts, n_tokens, out, out_stride);
}

// The two entry points: a GemmTileFn over rows as stored, a GroupGemmFn over a row group's rows
// (Q4_K's read in place, Q6_K's unpacked).
template <class Kernel>
SMOL_TARGET_AVX512 inline void kquant_gemm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                           const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    kquant_gemm_rows<Kernel>(n, avx2_kquant::StoredRows<Kernel>(weights, row_bytes, n_rows), n_rows, acts, n_tokens, out,
                             out_stride);
}
template <class Kernel>
SMOL_TARGET_AVX512 inline void kquant_group_gemm(std::int64_t n, const std::uint8_t* group, int first_row,
                                                 const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    const auto* blocks = reinterpret_cast<const typename Kernel::Group*>(group);
    if constexpr (std::is_same_v<Kernel, avx2_kquant::Q4KGemm>) {
        Q4KGroupNibbles nibbles{{blocks, first_row}};
        kquant_gemm_blocks<Kernel>(n, nibbles, kTileRows, acts, n_tokens, out, out_stride);
    } else {
        kquant_gemm_rows<Kernel>(n, avx2_kquant::GroupRows<Kernel>{blocks, first_row}, kTileRows, acts, n_tokens, out,
                                 out_stride);
    }
}

}  // namespace kquant_detail

// Decode takes the 512-bit column kernels, prompts the GEMMs; a tile of a few columns (a batch
// of fewer than kMinGemmTokens tokens: a speculative verify step) goes column by column. All
// give the reference's bits.
template <class Decode>
inline constexpr DotTileFn kquant_tile = kernel_detail::column_by_column<kquant_detail::kquant_column<Decode>>;
inline constexpr DotTileFn q2k_q8k = kquant_tile<kquant_detail::Q2KDecode>;
inline constexpr DotTileFn q3k_q8k = kquant_tile<kquant_detail::Q3KDecode>;
inline constexpr DotTileFn q4k_q8k = kquant_tile<kquant_detail::Q4KDecode>;
inline constexpr DotTileFn q5k_q8k = kquant_tile<kquant_detail::Q5KDecode>;
inline constexpr DotTileFn q6k_q8k = kquant_tile<kquant_detail::Q6KDecode>;
// IQ4_XS: the AVX2 kernel with vpdpbusd products (exact for its unsigned values up to 241).
inline constexpr DotTileFn iq4xs_q8k = kquant_tile<kernels_avx2::kquant_detail::IQ4XSDecode<legacy::Avx512Ops>>;
inline constexpr GemmTileFn q2k_q8k_gemm = kquant_detail::kquant_gemm<kernels_avx2::kquant_detail::Q2KGemm>;
inline constexpr GemmTileFn q3k_q8k_gemm = kquant_detail::kquant_gemm<kernels_avx2::kquant_detail::Q3KGemm>;
inline constexpr GemmTileFn q4k_q8k_gemm = kquant_detail::kquant_gemm<kernels_avx2::kquant_detail::Q4KGemm>;
inline constexpr GemmTileFn q5k_q8k_gemm = kquant_detail::kquant_gemm<kernels_avx2::kquant_detail::Q5KGemm>;
inline constexpr GemmTileFn q6k_q8k_gemm = kquant_detail::kquant_gemm<kernels_avx2::kquant_detail::Q6KGemm>;
inline constexpr GemmTileFn iq4xs_q8k_gemm = kquant_detail::kquant_gemm<kernels_avx2::kquant_detail::IQ4XSGemm>;
inline constexpr GroupGemmFn q4k_x8_q8k_gemm = kquant_detail::kquant_group_gemm<kernels_avx2::kquant_detail::Q4KGemm>;
inline constexpr GroupGemmFn q6k_x8_q8k_gemm = kquant_detail::kquant_group_gemm<kernels_avx2::kquant_detail::Q6KGemm>;

// The row-group decode kernels (row_group_tiles.hpp) as GroupDotFns, in their VNNI form with EVEX
// vpdpbusd.
SMOL_TARGET_AVX512 __attribute__((flatten)) inline void q4k_x8_q8k(std::int64_t n, const std::uint8_t* group,
                                                                   const std::uint8_t* acts, std::size_t act_stride,
                                                                   int n_cols, float* out, std::size_t out_stride) {
    row_group_tiles::by_column_count<row_group_tiles::VnniColumns<EvexDot>::Q4K>(n, group, acts, act_stride, n_cols, out,
                                                                                 out_stride);
}
SMOL_TARGET_AVX512 __attribute__((flatten)) inline void q6k_x8_q8k(std::int64_t n, const std::uint8_t* group,
                                                                   const std::uint8_t* acts, std::size_t act_stride,
                                                                   int n_cols, float* out, std::size_t out_stride) {
    row_group_tiles::by_column_count<row_group_tiles::VnniColumns<EvexDot>::Q6K>(n, group, acts, act_stride, n_cols, out,
                                                                                 out_stride);
}

}  // namespace smol::kernels_avx512

SMOL_INTRINSIC_WARNINGS_ON

#endif
