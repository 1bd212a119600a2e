#pragma once
// Row groups: a weight matrix's rows regrouped kGroupRows at a time so that decode reads one
// vector holding a few bytes of each of 8 rows. A GGUF row keeps a block's quants together, so a
// one-token dot product multiplies one row at a time and reduces every sub-block on its own
// (scale shuffles, multiply-adds, a horizontal sum per row); with 8 rows side by side one
// broadcast of 4 activation bytes and one maddubs serve 8 rows, a sub-block's products stay in
// i16 lanes per row, and a block's float step runs for 8 rows at once. Decode on the 3B shape is
// compute-bound on one core without it (kernel_api.hpp, and docs/performance.md, "AVX2 only").
//
// The copy is made once at load (model/weights.hpp) and replaces the mapped rows for every
// matmul: decode reads it, and so do the x86 prompt GEMMs but AMX's (GroupGemmFn); the others
// read rows restored from it (deinterleave, exact bytes).
// Only the layout changes: the integer totals and float steps are the reference's, so the
// logits keep their bits.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/half.hpp"
#include "smol/core/simd_targets.hpp"
#if SMOL_HAVE_AVX2_KERNELS
#include <immintrin.h>
#endif
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"
#include "smol/quant/transpose_avx2.hpp"

namespace smol {

inline constexpr int kGroupRows = 8;

// One Q4_K block (256 weights) of 8 rows, 1184 bytes (8 x 148 against 8 x 144 as stored: the
// 6-bit scales and mins are unpacked to bytes).
struct BlockQ4Kx8 {
    std::uint16_t d[kGroupRows];             // fp16 [row]
    std::uint16_t dmin[kGroupRows];          // fp16 [row]
    std::uint8_t scales[8][kGroupRows];      // [sub-block j][row], 0..63
    std::uint8_t mins[4][kGroupRows][2];     // [sub-block pair p][row][j - 2p], 0..63
    std::uint8_t qs[4][8][kGroupRows][4];    // [chunk c][group k][row][byte]: the row's qs[32c + 4k ..+ 4]
};
static_assert(sizeof(BlockQ4Kx8) == 1184);

// One Q6_K block of 8 rows, 1680 bytes: exactly the 8 x 210 of the rows as stored. The three
// vectors one step of the kernel reads lie side by side, so a group is read front to back (ql and
// qh apart made three interleaved streams, and decode from DRAM ran at well under half the
// speed).
struct BlockQ6Kx8 {
    std::uint16_t d[kGroupRows];             // fp16 [row]
    std::int8_t scales[8][kGroupRows][2];    // [sub-block pair p][row][j - 2p]
    // [half h][group k][part][row][byte]: part 0 the row's ql[64h + 4k ..+ 4], part 1 its
    // ql[64h + 32 + 4k ..+ 4], part 2 its qh[32h + 4k ..+ 4].
    std::uint8_t q[2][8][3][kGroupRows][4];
};
static_assert(sizeof(BlockQ6Kx8) == 8 * sizeof(BlockQ6K));

// A kernel over a row group: out[c * out_stride + r] = dot(row r of the group, column c) for
// r < kGroupRows and c < n_cols <= kTileCols. group: the group's first block (row_groups.hpp
// layout), acts: Q8_K blocks, column c at acts + c * act_stride bytes.
using GroupDotFn = void (*)(std::int64_t n, const std::uint8_t* group, const std::uint8_t* acts, std::size_t act_stride,
                            int n_cols, float* out, std::size_t out_stride);

// A prompt GEMM over a row group: as a GemmTileFn (kernel_api.hpp) for the group's rows first_row
// .. first_row + kTileRows - 1 (first_row: 0 or kTileRows), read from the group as it is.
using GroupGemmFn = void (*)(std::int64_t n, const std::uint8_t* group, int first_row, const BlockQ8Kx16* acts,
                             int n_tokens, float* out, std::size_t out_stride);
static_assert(kGroupRows == 2 * kTileRows, "a group GEMM call takes half a group's rows");

// A type's row-group layout: the bytes of one group block, the two exact conversions, and its
// kernel in every kernel set (all nullptr where the type has no layout; the table's row says).
//   interleave:   kGroupRows rows (row r at rows + r * row_bytes) of `blocks` blocks -> group
//   deinterleave: the inverse, byte for byte
using InterleaveFn = void (*)(const std::uint8_t* rows, std::size_t row_bytes, std::int64_t blocks, std::uint8_t* group);
using DeinterleaveFn = void (*)(const std::uint8_t* group, std::int64_t blocks, std::uint8_t* rows,
                                std::size_t row_bytes);

namespace row_group_detail {

// An 8 x 8 transpose of `Bytes`-byte elements, to[j][Bytes * i ..] = from[i][Bytes * j ..]: the
// reference of the two vector transposes below (the conversions' test oracle).
template <std::size_t Bytes>
inline void transpose_reference(const std::uint8_t* const (&from)[8], std::uint8_t* const (&to)[8]) {
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) std::memcpy(to[j] + Bytes * i, from[i] + Bytes * j, Bytes);
}

// The two transposes, run both ways (loading matrices, and restoring rows for prompts):
//   transpose_quads: the quant bytes of chunk c, group[k][r] (4 bytes) = row r's qs[32c + 4k ..],
//                    an 8 x 8 transpose of 4-byte elements (`to` and `from`: 8 x 32 bytes);
//   transpose_pairs: Q6_K's scales, 8 x 8 two-byte elements (a sub-block pair of each row, or
//                    the pairs of one row; 8 x 16 bytes).
#if SMOL_HAVE_AVX2_KERNELS
inline void transpose_quads(const std::uint8_t* const (&from)[8], std::uint8_t* const (&to)[8]) {
    __m256i v[8];
    for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from[i]));
    avx2_transpose::transpose_8x8_epi32(v);
    for (int j = 0; j < 8; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(to[j]), v[j]);
}

inline void transpose_pairs(const std::uint8_t* const (&from)[8], std::uint8_t* const (&to)[8]) {
    __m128i v[8], two[8], four[8];
    for (int i = 0; i < 8; ++i) v[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from[i]));
    for (int i = 0; i < 8; i += 2) {  // two[i]: elements 0-3 of from[i], from[i + 1] interleaved; two[i + 1]: 4-7
        two[i] = _mm_unpacklo_epi16(v[i], v[i + 1]);
        two[i + 1] = _mm_unpackhi_epi16(v[i], v[i + 1]);
    }
    for (int q = 0; q < 8; q += 4)  // four[q + k]: elements 2k and 2k + 1 of from[q] .. from[q + 3]
        for (int h = 0; h < 2; ++h) {
            four[q + 2 * h] = _mm_unpacklo_epi32(two[q + h], two[q + 2 + h]);
            four[q + 2 * h + 1] = _mm_unpackhi_epi32(two[q + h], two[q + 2 + h]);
        }
    for (int k = 0; k < 4; ++k) {  // to[2k], to[2k + 1]: from 0-3 in four[k], 4-7 in four[4 + k]
        _mm_storeu_si128(reinterpret_cast<__m128i*>(to[2 * k]), _mm_unpacklo_epi64(four[k], four[4 + k]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(to[2 * k + 1]), _mm_unpackhi_epi64(four[k], four[4 + k]));
    }
}
#else
inline void transpose_quads(const std::uint8_t* const (&from)[8], std::uint8_t* const (&to)[8]) {
    transpose_reference<4>(from, to);
}
inline void transpose_pairs(const std::uint8_t* const (&from)[8], std::uint8_t* const (&to)[8]) {
    transpose_reference<2>(from, to);
}
#endif

// One run of 8 quant vectors between the rows and their group: row r's 32 bytes `at` bytes into
// its block w[r], and the group's vectors k = 0..7, 32 bytes each, `stride` bytes apart from `run`.
template <class Block>
inline void rows_to_group_run(const Block* const (&w)[kGroupRows], std::size_t at, std::uint8_t* run, std::size_t stride) {
    const std::uint8_t* from[kGroupRows];
    std::uint8_t* to[kGroupRows];
    for (int i = 0; i < kGroupRows; ++i) {
        from[i] = reinterpret_cast<const std::uint8_t*>(w[i]) + at;
        to[i] = run + std::size_t(i) * stride;
    }
    transpose_quads(from, to);
}
template <class Block>
inline void group_run_to_rows(const std::uint8_t* run, std::size_t stride, Block* const (&w)[kGroupRows], std::size_t at) {
    const std::uint8_t* from[kGroupRows];
    std::uint8_t* to[kGroupRows];
    for (int i = 0; i < kGroupRows; ++i) {
        from[i] = run + std::size_t(i) * stride;
        to[i] = reinterpret_cast<std::uint8_t*>(w[i]) + at;
    }
    transpose_quads(from, to);
}

inline void interleave_q4k(const std::uint8_t* rows, std::size_t row_bytes, std::int64_t blocks, std::uint8_t* group) {
    auto* out = reinterpret_cast<BlockQ4Kx8*>(group);
    for (std::int64_t b = 0; b < blocks; ++b) {
        BlockQ4Kx8& o = out[b];
        const BlockQ4K* w[kGroupRows];
        for (int r = 0; r < kGroupRows; ++r) {
            w[r] = reinterpret_cast<const BlockQ4K*>(rows + std::size_t(r) * row_bytes) + b;
            o.d[r] = w[r]->d;
            o.dmin[r] = w[r]->dmin;
            std::uint8_t scales_mins[16];
            q4k_unpack_scales_mins(w[r]->scales, scales_mins);
            for (int j = 0; j < 8; ++j) {
                o.scales[j][r] = scales_mins[j];
                o.mins[j / 2][r][j % 2] = scales_mins[8 + j];
            }
        }
        for (int c = 0; c < 4; ++c)
            rows_to_group_run(w, offsetof(BlockQ4K, qs) + 32 * std::size_t(c), o.qs[c][0][0], sizeof o.qs[c][0]);
    }
}

// The first 16 bytes of each of a Q4_K group block's 8 rows (d, dmin and the 12 bytes that pack
// the 6-bit scales and mins), rebuilt from the group's unpacked scales and mins.
inline void restore_q4k_heads_reference(const BlockQ4Kx8& g, BlockQ4K* const (&w)[kGroupRows]) {
    for (int r = 0; r < kGroupRows; ++r) {
        w[r]->d = g.d[r];
        w[r]->dmin = g.dmin[r];
        // The 12 bytes q4k_unpack_scales_mins reads: scales and mins 0-3 with the top two bits of
        // 4-7, then the low nibbles of scales and mins 4-7.
        for (int j = 0; j < 4; ++j) {
            const int scale_hi = g.scales[j + 4][r], min_hi = g.mins[(j + 4) / 2][r][j % 2];
            w[r]->scales[j] = std::uint8_t(g.scales[j][r] | (scale_hi >> 4) << 6);
            w[r]->scales[j + 4] = std::uint8_t(g.mins[j / 2][r][j % 2] | (min_hi >> 4) << 6);
            w[r]->scales[j + 8] = std::uint8_t((scale_hi & 0x0f) | (min_hi & 0x0f) << 4);
        }
    }
}

#if SMOL_HAVE_AVX2_KERNELS
// The same for all 8 rows at once (restoring rows for prompts runs this once per block; the
// byte-by-byte form above was most of the restore's time). Bytes are indexed [j][r] (sub-block j,
// row r) until the end, where each row's 16 bytes are gathered by transposes and stored whole.
inline void restore_q4k_heads(const BlockQ4Kx8& g, BlockQ4K* const (&w)[kGroupRows]) {
    const auto load = [](const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); };
    const __m256i low_nibbles = _mm256_set1_epi8(0x0f), bits_4_5 = _mm256_set1_epi8(0x30);
    // The mins are stored [pair p][r][j - 2p]; in each lane (one pair) [r][jj] -> [jj][r].
    const __m256i pair_to_j_major = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                                     0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i scales_lo = load(g.scales[0]), scales_hi = load(g.scales[4]);  // [j][r]: j 0-3, 4-7
    const __m256i mins_lo = _mm256_shuffle_epi8(load(g.mins[0]), pair_to_j_major);
    const __m256i mins_hi = _mm256_shuffle_epi8(load(g.mins[2]), pair_to_j_major);
    // The packed bytes 0-3, 4-7 and 8-11 of every row ((v >> 4) << 6 of a byte is (v & 0x30) << 2;
    // the 16-bit shifts move no bit across a byte).
    const __m256i packed[3] = {
        _mm256_or_si256(scales_lo, _mm256_slli_epi16(_mm256_and_si256(scales_hi, bits_4_5), 2)),
        _mm256_or_si256(mins_lo, _mm256_slli_epi16(_mm256_and_si256(mins_hi, bits_4_5), 2)),
        _mm256_or_si256(_mm256_and_si256(scales_hi, low_nibbles),
                        _mm256_slli_epi16(_mm256_and_si256(mins_hi, low_nibbles), 4)),
    };
    // [j][r] -> one dword per row (its bytes j = 0..3): in each lane [jj][r] -> [r][jj] words, then
    // the lanes' words interleaved. quads[i][h] holds rows 4h..4h+3.
    const __m256i j_to_row_major = _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,
                                                    0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    __m128i quads[4][2];
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.d));
    const __m128i dmin = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.dmin));
    quads[0][0] = _mm_unpacklo_epi16(d, dmin);  // [d, dmin] of rows 0-3
    quads[0][1] = _mm_unpackhi_epi16(d, dmin);
    for (int i = 0; i < 3; ++i) {
        const __m256i words = _mm256_shuffle_epi8(packed[i], j_to_row_major);
        const __m128i j01 = _mm256_castsi256_si128(words), j23 = _mm256_extracti128_si256(words, 1);
        quads[i + 1][0] = _mm_unpacklo_epi16(j01, j23);
        quads[i + 1][1] = _mm_unpackhi_epi16(j01, j23);
    }
    for (int h = 0; h < 2; ++h) {  // a 4 x 4 transpose of dwords: row r's [d dmin | 0-3 | 4-7 | 8-11]
        const __m128i a = _mm_unpacklo_epi32(quads[0][h], quads[1][h]), b = _mm_unpacklo_epi32(quads[2][h], quads[3][h]);
        const __m128i c = _mm_unpackhi_epi32(quads[0][h], quads[1][h]), e = _mm_unpackhi_epi32(quads[2][h], quads[3][h]);
        const __m128i rows[4] = {_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b), _mm_unpacklo_epi64(c, e),
                                 _mm_unpackhi_epi64(c, e)};
        for (int i = 0; i < 4; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(w[4 * h + i]), rows[i]);
    }
}
#else
inline void restore_q4k_heads(const BlockQ4Kx8& g, BlockQ4K* const (&w)[kGroupRows]) { restore_q4k_heads_reference(g, w); }
#endif

inline void deinterleave_q4k(const std::uint8_t* group, std::int64_t blocks, std::uint8_t* rows, std::size_t row_bytes) {
    const auto* in = reinterpret_cast<const BlockQ4Kx8*>(group);
    for (std::int64_t b = 0; b < blocks; ++b) {
        const BlockQ4Kx8& g = in[b];
        BlockQ4K* w[kGroupRows];
        for (int r = 0; r < kGroupRows; ++r) w[r] = reinterpret_cast<BlockQ4K*>(rows + std::size_t(r) * row_bytes) + b;
        restore_q4k_heads(g, w);
        for (int c = 0; c < 4; ++c)
            group_run_to_rows(g.qs[c][0][0], sizeof g.qs[c][0], w, offsetof(BlockQ4K, qs) + 32 * std::size_t(c));
    }
}

// Q6_K: per half h, ql's two runs of 32 bytes and qh's one (part 0, 1, 2), each one transpose.
// Where run (h, part) starts in a BlockQ6K.
inline std::size_t q6k_run_offset(int h, int part) {
    return part < 2 ? offsetof(BlockQ6K, ql) + std::size_t(64 * h + 32 * part) : offsetof(BlockQ6K, qh) + std::size_t(32 * h);
}
inline void interleave_q6k(const std::uint8_t* rows, std::size_t row_bytes, std::int64_t blocks, std::uint8_t* group) {
    auto* out = reinterpret_cast<BlockQ6Kx8*>(group);
    for (std::int64_t b = 0; b < blocks; ++b) {
        BlockQ6Kx8& o = out[b];
        const BlockQ6K* w[kGroupRows];
        const std::uint8_t* row_scales[kGroupRows];
        std::uint8_t* pair_scales[kGroupRows];
        for (int r = 0; r < kGroupRows; ++r) {
            w[r] = reinterpret_cast<const BlockQ6K*>(rows + std::size_t(r) * row_bytes) + b;
            o.d[r] = w[r]->d;
            row_scales[r] = reinterpret_cast<const std::uint8_t*>(w[r]->scales);
        }
        for (int p = 0; p < 8; ++p) pair_scales[p] = reinterpret_cast<std::uint8_t*>(o.scales[p]);
        transpose_pairs(row_scales, pair_scales);
        for (int h = 0; h < 2; ++h)
            for (int part = 0; part < 3; ++part)
                rows_to_group_run(w, q6k_run_offset(h, part), o.q[h][0][part][0], sizeof o.q[h][0]);
    }
}

inline void deinterleave_q6k(const std::uint8_t* group, std::int64_t blocks, std::uint8_t* rows, std::size_t row_bytes) {
    const auto* in = reinterpret_cast<const BlockQ6Kx8*>(group);
    for (std::int64_t b = 0; b < blocks; ++b) {
        const BlockQ6Kx8& g = in[b];
        BlockQ6K* w[kGroupRows];
        const std::uint8_t* pair_scales[kGroupRows];
        std::uint8_t* row_scales[kGroupRows];
        for (int r = 0; r < kGroupRows; ++r) {
            w[r] = reinterpret_cast<BlockQ6K*>(rows + std::size_t(r) * row_bytes) + b;
            w[r]->d = g.d[r];
            row_scales[r] = reinterpret_cast<std::uint8_t*>(w[r]->scales);
        }
        for (int p = 0; p < 8; ++p) pair_scales[p] = reinterpret_cast<const std::uint8_t*>(g.scales[p]);
        transpose_pairs(pair_scales, row_scales);
        for (int h = 0; h < 2; ++h)
            for (int part = 0; part < 3; ++part)
                group_run_to_rows(g.q[h][0][part][0], sizeof g.q[h][0], w, q6k_run_offset(h, part));
    }
}

// The reference over a Q6_K group: each block's 8 rows restored (deinterleave, checked byte for
// byte by its test), then the reference's integer total and float step per row.
inline void q6k_x8_q8k(std::int64_t n, const std::uint8_t* group, const std::uint8_t* acts, std::size_t act_stride,
                       int n_cols, float* out, std::size_t out_stride) {
    const auto* g = reinterpret_cast<const BlockQ6Kx8*>(group);
    for (int c = 0; c < n_cols; ++c) {
        const auto* a = reinterpret_cast<const BlockQ8K*>(acts + std::size_t(c) * act_stride);
        float sum[kGroupRows] = {};
        for (std::int64_t b = 0; b < n / QK_K; ++b) {
            BlockQ6K rows[kGroupRows];
            deinterleave_q6k(reinterpret_cast<const std::uint8_t*>(g + b), 1, reinterpret_cast<std::uint8_t*>(rows),
                             sizeof(BlockQ6K));
            for (int r = 0; r < kGroupRows; ++r)
                sum[r] = q6k_accumulate_block(sum[r], fp16_to_f32(rows[r].d), a[b].d, q6k_q8k_block_sum(rows[r], a[b]));
        }
        for (int r = 0; r < kGroupRows; ++r) out[std::size_t(c) * out_stride + std::size_t(r)] = sum[r];
    }
}

// The reference over a group: per row and block the reference's integer sums and float step.
inline void q4k_x8_q8k(std::int64_t n, const std::uint8_t* group, const std::uint8_t* acts, std::size_t act_stride,
                       int n_cols, float* out, std::size_t out_stride) {
    const auto* g = reinterpret_cast<const BlockQ4Kx8*>(group);
    for (int c = 0; c < n_cols; ++c) {
        const auto* a = reinterpret_cast<const BlockQ8K*>(acts + std::size_t(c) * act_stride);
        for (int r = 0; r < kGroupRows; ++r) {
            float sum = 0.0f;
            for (std::int64_t b = 0; b < n / QK_K; ++b) {
                std::uint8_t q[QK_K], scales[8], mins[8];
                for (int chunk = 0; chunk < 4; ++chunk)
                    for (int k = 0; k < 8; ++k)
                        for (int i = 0; i < 4; ++i) {
                            const std::uint8_t byte = g[b].qs[chunk][k][r][i];
                            q[64 * chunk + 4 * k + i] = byte & 0x0f;
                            q[64 * chunk + 32 + 4 * k + i] = byte >> 4;
                        }
                for (int j = 0; j < 8; ++j) {
                    scales[j] = g[b].scales[j][r];
                    mins[j] = g[b].mins[j / 2][r][j % 2];
                }
                const Q4KBlockSums s = scale_min_block_sums<8>(q, scales, mins, a[b]);
                sum = q4k_accumulate_block(sum, fp16_to_f32(g[b].d[r]), fp16_to_f32(g[b].dmin[r]), a[b].d, s.dot, s.mins);
            }
            out[std::size_t(c) * out_stride + std::size_t(r)] = sum;
        }
    }
}

}  // namespace row_group_detail

}  // namespace smol
