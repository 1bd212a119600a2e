#pragma once
// Block layouts of the quantized formats, byte for byte as ggml stores them.

#include <cstdint>

namespace smol {

inline constexpr int QK_K = 256;  // weights per super-block of the k-quants
inline constexpr int QK8_0 = 32;

// 2.625 bits per weight: sixteen sub-blocks of 16, each with a 4-bit scale and a 4-bit min;
// quants 0..3, weight 32k + l of chunk k = 0..7 in bit pair 2 (k % 4) of qs[32 (k / 4) + l].
struct BlockQ2K {
    std::uint8_t scales[QK_K / 16];  // [sub-block]: scale in the low nibble, min in the high one
    std::uint8_t qs[QK_K / 4];
    std::uint16_t d;     // fp16 super-block scale for the scales
    std::uint16_t dmin;  // fp16 super-block scale for the mins
};
static_assert(sizeof(BlockQ2K) == 84);

// 3.4375 bits per weight: sixteen sub-blocks of 16 with signed 6-bit scales. A quant (-4..3) is
// two low bits in qs and a third bit in hmask that, clear, subtracts 4: weight 32k + l of chunk
// k = 0..7 has bit pair 2 (k % 4) of qs[32 (k / 4) + l] and bit k of hmask[l].
struct BlockQ3K {
    std::uint8_t hmask[QK_K / 8];  // third bits
    std::uint8_t qs[QK_K / 4];     // low two bits
    std::uint8_t scales[12];       // 6-bit scales stored + 32, packed (q3k_unpack_scales)
    std::uint16_t d;               // fp16 super-block scale
};
static_assert(sizeof(BlockQ3K) == 110);

// 4.5 bits per weight: eight sub-blocks of 32 with 6-bit scales and mins.
struct BlockQ4K {
    std::uint16_t d;      // fp16 super-block scale for the scales
    std::uint16_t dmin;   // fp16 super-block scale for the mins
    std::uint8_t scales[12];  // 6-bit scales and mins, packed
    std::uint8_t qs[QK_K / 2];  // 4-bit quants
};
static_assert(sizeof(BlockQ4K) == 144);

// 5.5 bits per weight: Q4_K's layout (eight sub-blocks of 32, 6-bit scales and mins) with a fifth
// bit per weight. Byte l of qh holds that bit for weight 64c + l in bit 2c and for weight
// 64c + 32 + l in bit 2c + 1 (chunk c = 0..3 of 64 weights, as in qs).
struct BlockQ5K {
    std::uint16_t d;      // fp16 super-block scale for the scales
    std::uint16_t dmin;   // fp16 super-block scale for the mins
    std::uint8_t scales[12];    // 6-bit scales and mins, packed as in Q4_K
    std::uint8_t qh[QK_K / 8];  // fifth bits
    std::uint8_t qs[QK_K / 2];  // low 4 bits, as Q4_K's quants
};
static_assert(sizeof(BlockQ5K) == 176);

// 6.5625 bits per weight: sixteen sub-blocks of 16 with 8-bit scales.
struct BlockQ6K {
    std::uint8_t ql[QK_K / 2];  // low 4 bits
    std::uint8_t qh[QK_K / 4];  // high 2 bits
    std::int8_t scales[QK_K / 16];
    std::uint16_t d;  // fp16 super-block scale
};
static_assert(sizeof(BlockQ6K) == 210);

// Activations: int8 with one float scale and the sums of each 16 quants.
struct BlockQ8K {
    float d;
    std::int8_t qs[QK_K];
    std::int16_t bsums[QK_K / 16];
};
static_assert(sizeof(BlockQ8K) == 292);

// One Q8_K block of 16 tokens regrouped so that a vector's lanes are tokens: each token's 4-byte
// groups side by side, then each token's bsums in pairs, and the sums of 32 quants in pairs (the
// types whose mins or offsets go by sub-blocks of 32 read those: one multiply-add per two
// sub-blocks instead of two), and each sub-block of 16's sums by vpmaddubsw lane (a group's
// quants 0-1 meet a token's even i16 lane, 2-3 its odd one): the GEMMs of the types whose unsigned
// quants carry an offset start each run at minus the offset times these (AVX-512's at minus the
// offset times the bsums), so the runs end with the signed quants' products
// (kquant_tiles_avx2.hpp, kOffsetInRuns). Kernels that broadcast 4
// weight bytes against 16 tokens read it; packing.hpp writes it.
inline constexpr int kPackedTokens = 16;
// Packed blocks of 16 tokens that n tokens fill, the last one perhaps in part.
constexpr std::int64_t packed_groups(std::int64_t n_tokens) { return (n_tokens + kPackedTokens - 1) / kPackedTokens; }
struct alignas(64) BlockQ8Kx16 {  // 64-byte aligned: kernels load whole vectors
    std::int8_t qs[QK_K / 4][kPackedTokens][4];                // [group of 4 quants][token][quant]
    std::int16_t bsums[QK_K / 32][kPackedTokens][2];           // [pair j][token]: bsums 2j and 2j + 1
    std::int16_t sums32[QK_K / 64][kPackedTokens][2];          // [pair j][token]: sums of quants 64j.. and 64j + 32..
    float d[kPackedTokens];                                     // [token]
    std::int16_t lane_sums16[QK_K / 16][kPackedTokens][2];     // [sub-block j][token][lane l]: sum over its groups g
                                                                // of quants 16j + 4g + 2l and 16j + 4g + 2l + 1
};
static_assert(sizeof(BlockQ8Kx16) == 5952 && sizeof(BlockQ8Kx16) % 64 == 0);

struct BlockQ8_0 {
    std::uint16_t d;  // fp16
    std::int8_t qs[QK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

// 4.5 bits per value: 32 values with one fp16 scale, quants 0..15 stored offset by 8. Byte l
// holds value l in its low nibble and value l + 16 in its high nibble (ggml's layout).
inline constexpr int QK4_0 = 32;
struct BlockQ4_0 {
    std::uint16_t d;  // fp16
    std::uint8_t qs[QK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// 5 bits per value: 32 values with one fp16 scale and one fp16 min, unsigned quants 0..15:
// value = d * q + m. Nibbles as in Q4_0.
inline constexpr int QK4_1 = 32;
struct BlockQ4_1 {
    std::uint16_t d;  // fp16 scale
    std::uint16_t m;  // fp16 min
    std::uint8_t qs[QK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// 5.5 bits per value: 32 values with one fp16 scale, quants 0..31 stored offset by 16. The low
// four bits are nibbles as in Q4_0; bit l of the little-endian word qh is bit 4 of value l.
inline constexpr int QK5_0 = 32;
struct BlockQ5_0 {
    std::uint16_t d;  // fp16
    std::uint8_t qh[4];
    std::uint8_t qs[QK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// 6 bits per value: Q5_0's quants without the offset (unsigned 0..31) and Q4_1's min:
// value = d * q + m. Low nibbles as in Q4_0, bit l of the little-endian word qh is bit 4 of value l.
inline constexpr int QK5_1 = 32;
struct BlockQ5_1 {
    std::uint16_t d;  // fp16 scale
    std::uint16_t m;  // fp16 min
    std::uint8_t qh[4];
    std::uint8_t qs[QK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// The 16 values a non-linear 4-bit quant indexes (IQ4_NL and IQ4_XS): ggml's kvalues_iq4nl,
// denser near zero, where most weights are. A weight is d * kIq4nlValues[q].
inline constexpr std::int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

// 4.5 bits per value: 32 values with one fp16 scale, 4-bit indices into kIq4nlValues, nibbles as
// in Q4_0 (byte l: value l low, value l + 16 high).
inline constexpr int QK4_NL = 32;
struct BlockIQ4NL {
    std::uint16_t d;  // fp16
    std::uint8_t qs[QK4_NL / 2];
};
static_assert(sizeof(BlockIQ4NL) == 18);

// 4.25 bits per value: a super-block of 256 as eight sub-blocks of 32, each with a 6-bit scale
// stored + 32 (low 4 bits in a nibble of scales_l, sub-block j in byte j / 2, high nibble for odd
// j; high 2 bits in bits 2j, 2j + 1 of scales_h) and IQ4_NL's nibbles, sub-block j in qs[16 j ..]:
// weight l of sub-block j is d * (scale_j - 32) * kIq4nlValues[q].
struct BlockIQ4XS {
    std::uint16_t d;  // fp16 super-block scale
    std::uint16_t scales_h;
    std::uint8_t scales_l[QK_K / 64];
    std::uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockIQ4XS) == 136);

}  // namespace smol
