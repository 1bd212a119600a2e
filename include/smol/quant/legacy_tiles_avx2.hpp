#pragma once
// AVX2 tiles for the block-of-32 weight formats (Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL) against Q8_0 activations,
// and the tile driver that the AVX-512 set instantiates with its own integer products
// (legacy_tiles_avx512.hpp). Every tile gives the reference's bits (reference.hpp,
// dot_q4_0_q8_0 and its siblings): per block the exact integer dot, then the reference's float
// step into the partial sum of its block index mod 8, which here is a vector lane.
//
// The quants are used unsigned (Q4_0's q, whose value is q - 8; Q5_0's, q - 16; IQ4_NL's table
// value + 128), so maddubs
// (u8 x i8) or vpdpbusd multiply them with the activation quants, and the offset comes out per
// block as offset * (sum of the activation block's quants), exact. Q4_1's and Q5_1's min meets the same
// sums in its own float step.
//
// Blocks go eight at a time, as four pairs (k, k + 4): a pair fills two vectors, `lo` = [block
// k's weights 0-15 | block k + 4's weights 0-15] and `hi` (weights 16-31), so one 16-byte load
// of each block's nibbles feeds both, and three hadds of the four pairs' products leave the
// eight block totals in block order, one per lane of the row's float accumulator. The
// activations are arranged in those pairs once per tile and shared by its rows.

#include "smol/quant/kernels_avx2.hpp"  // its hsum and prefetch

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/quant/blocks.hpp"
#include "smol/quant/dpbusd.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"

namespace smol::kernels_avx2 {

namespace legacy {

using detail::hsum;

inline constexpr int kGroup = kBlock32Lanes;  // blocks per step: one per lane
static_assert(kGroup == 8, "pairs (k, k + 4) of 32-byte vectors");

// The activations of eight blocks, arranged as the weight pairs are.
struct ActGroup {
    __m256i lo[4], hi[4];  // pair k: quants 0-15 (lo) and 16-31 (hi) of blocks k and k + 4
    __m256i sums;          // [block]: the exact sum of its quants
    __m256 scales;         // [block]: d_a
};

// Block k of a group, k < 8: past a row's last block, the group repeats it (last is its index in
// the group), and those lanes' results are dropped.
template <bool Partial>
inline int member(int k, int last) { return Partial ? std::min(k, last) : k; }

// The totals of four pairs' products (vector k: [block k, 4 lanes | block k + 4, 4 lanes]) as
// [block 0 .. block 7].
inline __m256i group_totals(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
}

// 16 bytes from `first` in the low 128 bits, 16 from `second` in the high.
inline __m256i load_pair(const void* first, const void* second) {
    return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(second), reinterpret_cast<const __m128i*>(first));
}

template <bool Partial>
__attribute__((always_inline)) inline void prepare_group(const BlockQ8_0* a, int last, ActGroup& g) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256i sums[4];
    for (int k = 0; k < 4; ++k) {
        const BlockQ8_0& x = a[member<Partial>(k, last)];
        const BlockQ8_0& y = a[member<Partial>(k + 4, last)];
        g.lo[k] = load_pair(x.qs, y.qs);
        g.hi[k] = load_pair(x.qs + 16, y.qs + 16);
        sums[k] = _mm256_madd_epi16(
            _mm256_add_epi16(_mm256_maddubs_epi16(ones8, g.lo[k]), _mm256_maddubs_epi16(ones8, g.hi[k])), ones16);
    }
    g.sums = group_totals(sums[0], sums[1], sums[2], sums[3]);
    const auto d = [&](int k) { return short(a[member<Partial>(k, last)].d); };
    g.scales = _mm256_cvtph_ps(_mm_setr_epi16(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7)));
}

// The integer products of one instruction set: AVX2's maddubs then madd. Pair (lo, hi) of
// unsigned quants <= 31 against the activations' pair, as [first block, 4 partial sums | second
// block, 4]. A maddubs i16 is at most 2 * 31 * 128 = 7936 in magnitude, lo's plus hi's at most
// 15872: no saturation, no wrap.
struct Avx2Ops {
    // dot_pair's products for quants up to 255 (IQ4_NL's table values + 128), where two products in a
    // maddubs i16 would saturate (2 * 241 * 128 > 32767): even and odd bytes each go through their
    // own maddubs (one product per i16) and madd, dpbusd.hpp's MaddubsDot.
    // wide_dot: one vector of such quants against 32 activations, as 8 i32 sums of 4 products.
    static __m256i wide_dot(__m256i q, __m256i a) { return MaddubsDot::dpbusd(_mm256_setzero_si256(), q, a); }
    static __m256i wide_dot_pair(__m256i lo, __m256i hi, __m256i act_lo, __m256i act_hi) {
        return _mm256_add_epi32(wide_dot(lo, act_lo), wide_dot(hi, act_hi));
    }
    static __m256i dot_pair(__m256i lo, __m256i hi, __m256i act_lo, __m256i act_hi) {
        return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, act_lo), _mm256_maddubs_epi16(hi, act_hi)),
                                 _mm256_set1_epi16(1));
    }

    // Adds 16 to the quants of a pair (lo, hi) whose bit is set in their block's word (bit l:
    // weight l): lo takes bits 0-15 of the first block's word (low 128 bits) and the second's,
    // hi bits 16-31. Byte i of a lane picks the word's byte i / 8, keeps bit i % 8, compares.
    static void add_high_bits(std::uint32_t first, std::uint32_t second, __m256i& lo, __m256i& hi) {
        const __m256i words = _mm256_set_m128i(_mm_cvtsi32_si128(int(second)), _mm_cvtsi32_si128(int(first)));
        const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);  // byte i: bit i % 8
        const __m256i sixteen = _mm256_set1_epi8(16);
        const auto spread = [&](long long byte) {  // byte i of a lane: the word's byte `byte` + i / 8
            const long long ones = 0x0101010101010101, first_half = byte * ones, second_half = (byte + 1) * ones;
            const __m256i picked =
                _mm256_shuffle_epi8(words, _mm256_setr_epi64x(first_half, second_half, first_half, second_half));
            return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(picked, bit), bit), sixteen);
        };
        lo = _mm256_or_si256(lo, spread(0));
        hi = _mm256_or_si256(hi, spread(2));
    }
};

// The same products with two vpdpbusd per pair (exact in i32) in place of two maddubs, an add and
// a madd; Dot supplies the instruction (dpbusd.hpp). The AVX-VNNI set runs VnniOps<VexDot>
// (legacy_tiles_avx_vnni.hpp), the AVX-512 set takes its dot_pair with EvexDot
// (legacy_tiles_avx512.hpp, which keeps its own high-bit step), and the tests run it with the
// instruction emulated.
template <class Dot>
struct VnniOps : Avx2Ops {
    SMOL_INLINE_INTO_SET static __m256i dot_pair(__m256i lo, __m256i hi, __m256i act_lo, __m256i act_hi) {
        return Dot::dpbusd(Dot::dpbusd(_mm256_setzero_si256(), lo, act_lo), hi, act_hi);
    }
    // vpdpbusd adds its four products in i32: quants up to 255 are exact as they are.
    SMOL_INLINE_INTO_SET static __m256i wide_dot(__m256i q, __m256i a) { return Dot::dpbusd(_mm256_setzero_si256(), q, a); }
    SMOL_INLINE_INTO_SET static __m256i wide_dot_pair(__m256i lo, __m256i hi, __m256i act_lo, __m256i act_hi) {
        return dot_pair(lo, hi, act_lo, act_hi);
    }
};

// A pair of Q4_0 blocks' nibbles: byte l's low nibble is weight l, its high nibble weight l + 16.
inline void nibble_pair(const std::uint8_t* first, const std::uint8_t* second, __m256i& lo, __m256i& hi) {
    const __m256i bits = load_pair(first, second);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    lo = _mm256_and_si256(bits, low4);
    hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
}

// kIq4nlValues + 128 (1..241), twice: a pshufb table for each 128-bit lane.
struct Iq4nlShiftedTable {
    alignas(32) std::uint8_t bytes[32];
};
inline constexpr Iq4nlShiftedTable kIq4nlShifted = [] {
    Iq4nlShiftedTable t{};
    for (int i = 0; i < 32; ++i) t.bytes[i] = std::uint8_t(kIq4nlValues[i % 16] + 128);
    return t;
}();

// How a format's quants come from its nibbles: as they are (Q4_0, Q4_1), with a fifth bit from
// the block's qh word (Q5_0, Q5_1), or looked up in IQ4_NL's table, shifted by 128 to be unsigned
// (pshufb), whose values up to 241 need the products that do not saturate (Ops::wide_dot_pair).
enum class Quants { nibbles, fifth_bit, table };

// What a tile needs to know of one weight format.
//   Block:    its block struct;
//   kOffset:  what its unsigned quants exceed the signed values by (value = q - kOffset), or 0;
//   kHasMin:  whether its blocks carry a min m (value = d * q + m);
//   kQuants:  how its quants are formed (unpack_pair).
template <class BlockType, int Offset, bool HasMin, Quants Form>
struct Block32Kind {
    using Block = BlockType;
    static constexpr int kOffset = Offset;
    static constexpr bool kHasMin = HasMin;
    static constexpr Quants kQuants = Form;
};
using Q4_0Kind = Block32Kind<BlockQ4_0, 8, false, Quants::nibbles>;
using Q4_1Kind = Block32Kind<BlockQ4_1, 0, true, Quants::nibbles>;
using Q5_0Kind = Block32Kind<BlockQ5_0, 16, false, Quants::fifth_bit>;
using Q5_1Kind = Block32Kind<BlockQ5_1, 0, true, Quants::fifth_bit>;
using IQ4NLKind = Block32Kind<BlockIQ4NL, 128, false, Quants::table>;

template <class Block>
inline std::uint32_t high_bits(const Block& b) {
    std::uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof(qh));
    return qh;
}

// The unsigned quants of two blocks as (lo, hi): the nibbles of every format, then the fifth bits
// (with the instruction set's ops) or the table lookup where the format has them.
template <class Kind, class Ops>
__attribute__((always_inline)) inline void unpack_pair(const typename Kind::Block& first,
                                                       const typename Kind::Block& second, __m256i& lo, __m256i& hi) {
    nibble_pair(first.qs, second.qs, lo, hi);
    if constexpr (Kind::kQuants == Quants::fifth_bit) Ops::add_high_bits(high_bits(first), high_bits(second), lo, hi);
    if constexpr (Kind::kQuants == Quants::table) {
        const __m256i table = _mm256_load_si256(reinterpret_cast<const __m256i*>(kIq4nlShifted.bytes));
        lo = _mm256_shuffle_epi8(table, lo);
        hi = _mm256_shuffle_epi8(table, hi);
    }
}

// The products of a pair for a Kind: wide where its quants exceed 31 (the table's).
template <class Kind, class Ops>
__attribute__((always_inline)) inline __m256i kind_dot_pair(__m256i lo, __m256i hi, __m256i act_lo, __m256i act_hi) {
    if constexpr (Kind::kQuants == Quants::table) return Ops::wide_dot_pair(lo, hi, act_lo, act_hi);
    else return Ops::dot_pair(lo, hi, act_lo, act_hi);
}

// The fp16 scales of eight blocks as floats and, for formats with a min, their mins (which
// follow the scale: Q4_1's first 4 bytes are d, m). Each block's first 4 bytes go to a 32-bit
// lane; the words are then sorted into [8 scales | 8 mins] and widened.
template <class Kind, bool Partial>
inline void block_scales(const typename Kind::Block* w, int last, __m256& d, __m256& m) {
    const auto head = [&](int k) {
        std::int32_t bytes;
        std::memcpy(&bytes, &w[member<Partial>(k, last)], sizeof(bytes));
        return bytes;
    };
    if constexpr (Kind::kHasMin) {
        static_assert(offsetof(typename Kind::Block, m) == 2, "d and m are the block's first 4 bytes");
        const __m256i heads = _mm256_setr_epi32(head(0), head(1), head(2), head(3), head(4), head(5), head(6), head(7));
        const __m256i split = _mm256_shuffle_epi8(  // per 128 bits: [d d d d m m m m]
            heads, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                    0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
        const __m256i sorted = _mm256_permute4x64_epi64(split, _MM_SHUFFLE(3, 1, 2, 0));  // [8 d | 8 m]
        d = _mm256_cvtph_ps(_mm256_castsi256_si128(sorted));
        m = _mm256_cvtph_ps(_mm256_extracti128_si256(sorted, 1));
    } else {
        const auto half = [&](int k) { return short(w[member<Partial>(k, last)].d); };
        d = _mm256_cvtph_ps(_mm_setr_epi16(half(0), half(1), half(2), half(3), half(4), half(5), half(6), half(7)));
        m = _mm256_setzero_ps();
    }
}

// One row's step over a group of eight blocks, for each of C columns: acc[c] lane k gets block
// k's float steps (reference.hpp, block32_accumulate). Lanes past a row's end keep their sums.
template <class Kind, class Ops, int C, bool Partial>
__attribute__((always_inline)) inline void row_group(const typename Kind::Block* w, int last,
                                                     const ActGroup* const (&acts)[C], __m256 (&acc)[C]) {
    __m256i lo[4], hi[4];
    for (int k = 0; k < 4; ++k)
        unpack_pair<Kind, Ops>(w[member<Partial>(k, last)], w[member<Partial>(k + 4, last)], lo[k], hi[k]);
    __m256 d, m;
    block_scales<Kind, Partial>(w, last, d, m);
    for (int c = 0; c < C; ++c) {
        const ActGroup& g = *acts[c];
        const auto dot = [&](int k) { return kind_dot_pair<Kind, Ops>(lo[k], hi[k], g.lo[k], g.hi[k]); };
        const __m256i totals = group_totals(dot(0), dot(1), dot(2), dot(3));
        __m256i dots = totals;
        if constexpr (Kind::kOffset != 0) {
            static_assert(std::has_single_bit(unsigned(Kind::kOffset)), "the offset is applied as a shift");
            dots = _mm256_sub_epi32(totals, _mm256_slli_epi32(g.sums, std::countr_zero(unsigned(Kind::kOffset))));
        }
        __m256 next = _mm256_fmadd_ps(_mm256_mul_ps(d, g.scales), _mm256_cvtepi32_ps(dots), acc[c]);
        if constexpr (Kind::kHasMin)
            next = _mm256_fmadd_ps(_mm256_mul_ps(m, g.scales), _mm256_cvtepi32_ps(g.sums), next);
        if constexpr (Partial) {
            const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            const __m256i valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(last + 1), lanes);
            acc[c] = _mm256_blendv_ps(acc[c], next, _mm256_castsi256_ps(valid));
        } else {
            acc[c] = next;
        }
    }
}

// A tile of C columns (1: decode, kTileCols: prompts). Rows are read one after the other, each
// whole up to a run of blocks (9 KB of Q4_0 weights in decode, as Q4_K's decode run), so the
// weights arrive as one sequential stream; the run's activations are arranged once for the rows.
template <class Kind, class Ops, int C>
inline void tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                 const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out, std::size_t out_stride) {
    using Block = typename Kind::Block;
    constexpr int kRunGroups = 64 / C;  // 20 KB of arranged activations, for all C columns
    const kernel_detail::TileOperands<Block, BlockQ8_0, C> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    const std::int64_t blocks = n / QK8_0;
    __m256 acc[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (std::int64_t b0 = 0; b0 < blocks; b0 += kRunGroups * kGroup) {
        const int run = int(std::min<std::int64_t>(kRunGroups * kGroup, blocks - b0));
        const int full = run / kGroup, last = run % kGroup - 1;  // whole groups; the cut one's last block
        ActGroup groups[C][kRunGroups];
        for (int c = 0; c < C; ++c) {
            const BlockQ8_0* a = t.a[c] + b0;
            for (int g = 0; g < full; ++g) prepare_group<false>(a + kGroup * g, 0, groups[c][g]);
            if (last >= 0) prepare_group<true>(a + kGroup * full, last, groups[c][full]);
        }
        for (int r = 0; r < kTileRows; ++r) {
            const Block* w = t.w[r] + b0;
            __m256 row_acc[C];
            for (int c = 0; c < C; ++c) row_acc[c] = acc[r][c];
            for (int g = 0; g < full; ++g) {
                prefetch_ahead(w + kGroup * g, kGroup * sizeof(Block), ahead);
                const ActGroup* group_acts[C];
                for (int c = 0; c < C; ++c) group_acts[c] = &groups[c][g];
                row_group<Kind, Ops, C, false>(w + kGroup * g, 0, group_acts, row_acc);
            }
            if (last >= 0) {
                const ActGroup* group_acts[C];
                for (int c = 0; c < C; ++c) group_acts[c] = &groups[c][full];
                row_group<Kind, Ops, C, true>(w + kGroup * full, last, group_acts, row_acc);
            }
            for (int c = 0; c < C; ++c) acc[r][c] = row_acc[c];
        }
    }
    float result[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) result[r][c] = hsum(acc[r][c]);  // reference.hpp, block32_reduce
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

}  // namespace legacy

template <class Kind>
inline constexpr DotTileFn legacy_tile = kernel_detail::by_columns<legacy::tile<Kind, legacy::Avx2Ops, 1>,
                                                                   legacy::tile<Kind, legacy::Avx2Ops, kTileCols>>;
inline constexpr DotTileFn q4_0_q8_0 = legacy_tile<legacy::Q4_0Kind>;
inline constexpr DotTileFn q5_0_q8_0 = legacy_tile<legacy::Q5_0Kind>;
inline constexpr DotTileFn q4_1_q8_0 = legacy_tile<legacy::Q4_1Kind>;
inline constexpr DotTileFn q5_1_q8_0 = legacy_tile<legacy::Q5_1Kind>;
inline constexpr DotTileFn iq4_nl_q8_0 = legacy_tile<legacy::IQ4NLKind>;

}  // namespace smol::kernels_avx2

#endif
