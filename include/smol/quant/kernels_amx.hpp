#pragma once
// AMX int8 prompt GEMMs for Q4_K and Q6_K weights (Intel since Sapphire Rapids). One TDPBUSD
// multiplies a 16 x 64 tile of unsigned weight bytes with 64 quants of 16 tokens: 16K products,
// where the AVX-512 GEMM's vpdpbusd forms 64. Decode and every other weight type stay on the
// AVX-512 set (type_table.hpp's amx column names those kernels); functions here carry
// SMOL_TARGET_AMX and run only after cpu_features() said has_amx_kernels(), which includes the
// OS's permission for tile state (core/cpu.hpp).
//
// Same bits as every other set. A tile sums over 64 weights, across sub-block boundaries, so the
// sub-block scale is multiplied into the weight before the tile sees it: p = scale * quant fits
// 16 bits, and its low byte (unsigned) and high byte go through two tiles whose sums are put
// back together as lo + 256 * hi. Q4_K's mins are a third tile (each weight replaced by its
// sub-block's min, so the tile sums min_j * bsum_j). The block totals are then the exact
// integers the reference forms, and each (row, token) takes the reference's float step
// (reference.hpp, q4k_accumulate_block / q6k_accumulate_block).
//
// Tile kernels are templates over the tile unit: HardwareTiles runs the AMX instructions, and
// a test gives them an emulation of the same instructions, so that the data layout and the
// arithmetic are checked on any AVX-512 machine and the hardware only adds the instructions.

#include "smol/quant/kernels_avx512.hpp"  // the AVX-512 unpackers, and the set this one builds on

#if SMOL_HAVE_AMX_KERNELS

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "smol/core/intrinsic_warnings.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"

SMOL_INTRINSIC_WARNINGS_OFF

namespace smol::kernels_amx {

inline constexpr int kRows = 16;        // weight rows per call: one tile's rows
inline constexpr int kTokens = 64;      // tokens per call: four groups of kPackedTokens
inline constexpr int kMinTokens = 16;   // below one tile's worth of tokens the AVX-512 GEMM is faster
inline constexpr int kTileBytes = 64;   // bytes per tile row: 64 weights, or 4 quants of 16 tokens
inline constexpr int kChunks = QK_K / kTileBytes;  // tiles per block along K

// LDTILECFG's 64-byte operand (palette 1): each tile's rows and bytes per row.
struct alignas(64) TileConfig {
    std::uint8_t palette = 1;
    std::uint8_t start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t bytes_per_row[16] = {};
    std::uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Tile registers the kernels use, all 16 rows of 64 bytes: A tiles hold weights (u8 or i8, a
// row per weight row), B the activations as packed.hpp lays them out (a row per 4 quants, 16
// tokens of 4 bytes), C the i32 sums (a row per weight row, a column per token).
enum TileReg : int { kALow = 0, kAHigh = 1, kAMin = 2, kB = 3, kCLow = 4, kCHigh = 5, kCMin = 6 };
inline constexpr int kTilesUsed = 7;

inline TileConfig kernel_tile_config() {
    TileConfig config;
    for (int t = 0; t < kTilesUsed; ++t) {
        config.rows[t] = kRows;
        config.bytes_per_row[t] = kTileBytes;
    }
    return config;
}

// The instructions, with a memory clobber on every load and store (GCC's own tile macros have
// none, so a vector load of a just-stored tile could be moved before the store). Tile numbers
// are immediates, hence the templates.
struct HardwareTiles {
    SMOL_TARGET_AMX void configure(const TileConfig& config) {
        __asm__ volatile("ldtilecfg %0" ::"m"(config));
    }
    SMOL_TARGET_AMX void release() { __asm__ volatile("tilerelease" ::: "memory"); }
    template <int T>
    SMOL_TARGET_AMX void zero() {
        __asm__ volatile("tilezero %%tmm%c0" ::"i"(T));
    }
    template <int T>
    SMOL_TARGET_AMX void load(const void* base, std::size_t stride) {
        __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride), "i"(T) : "memory");
    }
    template <int T>
    SMOL_TARGET_AMX void store(void* base, std::size_t stride) {
        __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(stride), "i"(T) : "memory");
    }
    // C += A (unsigned bytes) . B (signed bytes), and the same with signed A.
    template <int C, int A, int B>
    SMOL_TARGET_AMX void dot_unsigned_signed() {
        __asm__ volatile("tdpbusd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(C), "i"(A), "i"(B));
    }
    template <int C, int A, int B>
    SMOL_TARGET_AMX void dot_signed_signed() {
        __asm__ volatile("tdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(C), "i"(A), "i"(B));
    }
};

namespace detail {

namespace avx512 = kernels_avx512::detail;
namespace avx2 = kernels_avx2::detail;

// One block of 16 weight rows ready for the tiles: per row its 256 weights times their sub-block
// scale, split into the low byte and the high byte, and for Q4_K each weight's sub-block min.
struct PreparedBlock {
    alignas(64) std::uint8_t low[kRows][QK_K];
    alignas(64) std::uint8_t high[kRows][QK_K];  // u8 for Q4_K (0..3), i8 for Q6_K (-16..16)
    alignas(64) std::uint8_t min[kRows][QK_K];   // Q4_K only
    float d[kRows];
    float dmin[kRows];  // Q4_K only
};

// p = scale * quant for 32 weights (words), stored as the low and high byte of each.
SMOL_TARGET_AMX inline void store_split(__m512i products, std::uint8_t* low, std::uint8_t* high) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(low), _mm512_cvtepi16_epi8(products));
    _mm256_store_si256(reinterpret_cast<__m256i*>(high), _mm512_cvtepi16_epi8(_mm512_srai_epi16(products, 8)));
}

// Q4_K: p = scale_j * q (0..945), so both bytes are unsigned; min bytes are min_j 32 times.
SMOL_TARGET_AMX inline void prepare_q4k_row(const BlockQ4K& wb, PreparedBlock& out, int r) {
    alignas(16) std::uint8_t scales_mins[16];  // 8 scales, 8 mins
    _mm_store_si128(reinterpret_cast<__m128i*>(scales_mins),
                    avx2::q4k_unpack_header(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb))));
    for (int c = 0; c < 4; ++c) {  // chunk c: sub-blocks 2c and 2c + 1
        const __m512i quants = avx512::q4k_chunk_quants(wb, c);
        for (int half = 0; half < 2; ++half) {
            const int j = 2 * c + half;
            const __m256i q = half ? _mm512_extracti64x4_epi64(quants, 1) : _mm512_castsi512_si256(quants);
            const __m512i p = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(q), _mm512_set1_epi16(scales_mins[j]));
            store_split(p, out.low[r] + 32 * j, out.high[r] + 32 * j);
            _mm256_store_si256(reinterpret_cast<__m256i*>(out.min[r] + 32 * j), _mm256_set1_epi8(char(scales_mins[8 + j])));
        }
    }
    out.d[r] = avx512::half_to_float(wb.d);
    out.dmin[r] = avx512::half_to_float(wb.dmin);
}

// Q6_K: p = scale_j * (q - 32), -4096..4096 over 16-weight sub-blocks: low byte unsigned, high
// byte signed (-16..16).
SMOL_TARGET_AMX inline void prepare_q6k_row(const BlockQ6K& wb, PreparedBlock& out, int r) {
    const __m512i offset = _mm512_set1_epi16(32);
    for (int h = 0; h < 2; ++h) {
        __m512i quarters[2];  // weights 128h..128h+63, then 128h+64..128h+127
        avx512::q6k_half_quants(wb, h, quarters[0], quarters[1]);
        for (int part = 0; part < 4; ++part) {  // 32 weights: sub-blocks j and j + 1
            const int first = 128 * h + 32 * part, j = first / 16;
            const __m512i bytes = quarters[part / 2];
            const __m256i q = part % 2 ? _mm512_extracti64x4_epi64(bytes, 1) : _mm512_castsi512_si256(bytes);
            const __m512i scales = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(wb.scales[j])),
                                                      _mm256_set1_epi16(wb.scales[j + 1]), 1);
            const __m512i p = _mm512_mullo_epi16(_mm512_sub_epi16(_mm512_cvtepu8_epi16(q), offset), scales);
            store_split(p, out.low[r] + first, out.high[r] + first);
        }
    }
    out.d[r] = avx512::half_to_float(wb.d);
}

// Float accumulators of one call, [row][token], and the tiles' i32 sums of one token group.
struct Accumulators {
    alignas(64) float acc[kRows][kTokens];
};
struct GroupSums {
    alignas(64) std::int32_t low[kRows][kPackedTokens];
    alignas(64) std::int32_t high[kRows][kPackedTokens];
    alignas(64) std::int32_t min[kRows][kPackedTokens];
};

// The tiles' sums of one block against one group of 16 tokens: sums.low/high (and min) for every
// row, exact. B is loaded once per 64 weights and serves every A tile.
template <bool Q4K, class Tiles>
SMOL_TARGET_AMX inline void block_group_sums(Tiles& tiles, const PreparedBlock& w, const BlockQ8Kx16& a,
                                             GroupSums& sums) {
    tiles.template zero<kCLow>();
    tiles.template zero<kCHigh>();
    if constexpr (Q4K) tiles.template zero<kCMin>();
    for (int c = 0; c < kChunks; ++c) {
        tiles.template load<kB>(a.qs[16 * c], kTileBytes);
        tiles.template load<kALow>(w.low[0] + kTileBytes * c, QK_K);
        tiles.template load<kAHigh>(w.high[0] + kTileBytes * c, QK_K);
        tiles.template dot_unsigned_signed<kCLow, kALow, kB>();
        if constexpr (Q4K) {
            tiles.template load<kAMin>(w.min[0] + kTileBytes * c, QK_K);
            tiles.template dot_unsigned_signed<kCHigh, kAHigh, kB>();
            tiles.template dot_unsigned_signed<kCMin, kAMin, kB>();
        } else {
            tiles.template dot_signed_signed<kCHigh, kAHigh, kB>();
        }
    }
    tiles.template store<kCLow>(sums.low, sizeof sums.low[0]);
    tiles.template store<kCHigh>(sums.high, sizeof sums.high[0]);
    if constexpr (Q4K) tiles.template store<kCMin>(sums.min, sizeof sums.min[0]);
}

// The reference's float step for every row of one token group.
template <bool Q4K>
SMOL_TARGET_AMX inline void accumulate_group(const PreparedBlock& w, const BlockQ8Kx16& a, const GroupSums& sums,
                                             Accumulators& out, int group) {
    const __m512 ad = _mm512_load_ps(a.d);
    for (int r = 0; r < kRows; ++r) {
        float* acc_row = out.acc[r] + kPackedTokens * group;
        __m512 acc = _mm512_load_ps(acc_row);
        const __m512i dot = _mm512_add_epi32(_mm512_load_si512(sums.low[r]), _mm512_slli_epi32(_mm512_load_si512(sums.high[r]), 8));
        acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(w.d[r]), ad), _mm512_cvtepi32_ps(dot), acc);
        if constexpr (Q4K)
            acc = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_set1_ps(w.dmin[r]), ad),
                                   _mm512_cvtepi32_ps(_mm512_load_si512(sums.min[r])), acc);
        _mm512_store_ps(acc_row, acc);
    }
}

// out[t * out_stride + r] = dot(weight row r, token t), r < n_rows <= kRows, t < n_tokens <=
// kTokens: the GemmTileFn contract with this set's larger tile. Missing rows repeat the last.
template <bool Q4K, class Tiles>
SMOL_TARGET_AMX void gemm(Tiles& tiles, std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                          const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    using Block = std::conditional_t<Q4K, BlockQ4K, BlockQ6K>;
    if (n_rows <= 0 || n_tokens <= 0) return;
    const std::int64_t blocks = n / QK_K;
    const int groups = int(packed_groups(n_tokens));
    const Block* rows[kRows];
    for (int r = 0; r < kRows; ++r)
        rows[r] = reinterpret_cast<const Block*>(weights + std::size_t(std::min(r, n_rows - 1)) * row_bytes);
    Accumulators acc;
    for (int r = 0; r < kRows; ++r)
        for (int g = 0; g < groups; ++g) _mm512_store_ps(acc.acc[r] + kPackedTokens * g, _mm512_setzero_ps());
    PreparedBlock prepared;
    GroupSums sums;
    tiles.configure(kernel_tile_config());
    for (std::int64_t b = 0; b < blocks; ++b) {
        for (int r = 0; r < kRows; ++r) {
            if constexpr (Q4K) prepare_q4k_row(rows[r][b], prepared, r);
            else prepare_q6k_row(rows[r][b], prepared, r);
        }
        for (int g = 0; g < groups; ++g) {
            const BlockQ8Kx16& a = acts[g * blocks + b];
            block_group_sums<Q4K>(tiles, prepared, a, sums);
            accumulate_group<Q4K>(prepared, a, sums, acc, g);
        }
    }
    tiles.release();
    kernel_detail::store_token_major(&acc.acc[0][0], kTokens, n_rows, n_tokens, out, out_stride);
}

SMOL_TARGET_AMX inline void q4k_gemm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                     const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    HardwareTiles tiles;
    gemm<true>(tiles, n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
}

SMOL_TARGET_AMX inline void q6k_gemm(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                     const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride) {
    HardwareTiles tiles;
    gemm<false>(tiles, n, weights, row_bytes, n_rows, acts, n_tokens, out, out_stride);
}

}  // namespace detail

inline constexpr GemmTileFn q4k_q8k_gemm = detail::q4k_gemm;
inline constexpr GemmTileFn q6k_q8k_gemm = detail::q6k_gemm;

}  // namespace smol::kernels_amx

SMOL_INTRINSIC_WARNINGS_ON

#endif
