#pragma once
// The one shape every matmul kernel has: an R x C tile of dot products between R weight rows
// and C activation columns. Rows are streamed together (decode is DRAM-bound, several streams
// with prefetch keep the memory system busy) and each weight block is reused across the
// columns while it is in L1 (prompt processing is compute-bound).

#include <cstddef>
#include <cstdint>

#include "smol/core/simd_targets.hpp"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace smol {

inline constexpr int kTileRows = 4;  // weight rows per kernel call, at most
inline constexpr int kTileCols = 4;  // activation columns (tokens) per kernel call, at most

// How far ahead of the block being read each row stream prefetches. Decode reads a thread's
// rows (one contiguous run) one after the other, so the weights are one sequential stream: a
// long row prefetches further along itself, a row shorter than that (a 2048-wide matrix has
// 1152-byte Q4_K rows) the same spot kTileRows rows on. On the 3B shape 4096 bytes beat 768, and
// with whole rows read in turn 8192 beat 4096 on one thread (level on two); 16384 was no better
// than 8192 (figures: docs/performance.md, "Design measurements behind the kernels").
inline constexpr std::size_t kPrefetchBytes = 8192;

inline std::size_t prefetch_distance(std::size_t row_bytes) {
    return row_bytes >= kPrefetchBytes ? kPrefetchBytes : kTileRows * row_bytes;
}

// Which cache a prefetch fills: L1 (prefetcht0) for the column kernels, L2 (prefetcht1) for the
// row-group kernels (row_group_tiles.hpp says why). The values are __builtin_prefetch's locality.
enum class PrefetchInto : int { l1 = 3, l2 = 2 };

// Asks for the `bytes` bytes `distance` past `block`, a 64-byte line at a time.
template <PrefetchInto cache = PrefetchInto::l1>
SMOL_INLINE_INTO_SET inline void prefetch_ahead(const void* block, std::size_t bytes, std::size_t distance) {
    const char* ahead = static_cast<const char*>(block) + distance;
    for (std::size_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch(ahead + offset, 0, int(cache));
}

// out[c * out_stride + r] = dot(weight row r, activation column c), r < n_rows, c < n_cols,
// with 0 <= n_rows <= kTileRows and 0 <= n_cols <= kTileCols (callers loop over larger shapes).
//   n:          weights per row (a whole number of blocks)
//   weights:    row 0 of the tile; row r starts at weights + r * row_bytes
//   acts:       column 0; column c starts at acts + c * act_stride bytes. Q8_K blocks for
//               Q4_K/Q6_K weights, Q8_0 blocks for Q8_0 weights, floats for F32/F16/BF16.
using DotTileFn = void (*)(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                           const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                           std::size_t out_stride);

// Prompt kernels whose vector lanes are tokens: out[t * out_stride + r] = dot(weight row r,
// token t) for r < n_rows <= kTileRows and t < n_tokens <= the set's GemmShape::tokens
// (type_table.hpp).
//   acts: the first group of these tokens, packed 16 to a BlockQ8Kx16 (packing.hpp); group g
//         starts at acts + g * (n / QK_K).
// Each weight block is unpacked once and used for all the tokens, and no horizontal sums are
// needed: results come out in lanes.
inline constexpr int kGemmTokens = 32;  // the ARM GEMMs (whole groups of 16, one after another)
// AVX-512: six groups of 16, in passes of three (12 chains of vpdpbusd hide its latency), so each
// unpacked weight block serves 96 tokens; the float sums wait in L1 (kquant_tiles_avx512.hpp).
inline constexpr int kGemmTokensAvx512 = 96;
// AVX2: its float sums wait in L1, so more tokens spread the unpacking thinner; 64 tokens ran
// faster than 32 for both Q4_K and Q6_K.
inline constexpr int kGemmTokensAvx2 = 64;
struct BlockQ8Kx16;
using GemmTileFn = void (*)(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                            const BlockQ8Kx16* acts, int n_tokens, float* out, std::size_t out_stride);

namespace kernel_detail {

// Pointers to a tile's kTileRows weight rows; missing rows repeat the last one (kernels keep
// fixed trip counts and drop those results).
template <class Weight>
inline void tile_rows(const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const Weight* (&w)[kTileRows]) {
    for (int r = 0; r < kTileRows; ++r)
        w[r] = reinterpret_cast<const Weight*>(weights + std::size_t(r < n_rows ? r : n_rows - 1) * row_bytes);
}

// Pointers to the kTileRows rows and C columns of a tile, the missing ones clamped.
template <class Weight, class Act, int C>
struct TileOperands {
    const Weight* w[kTileRows];
    const Act* a[C];
    TileOperands(const std::uint8_t* weights, std::size_t row_bytes, int n_rows, const std::uint8_t* acts,
                 std::size_t act_stride, int n_cols) {
        tile_rows(weights, row_bytes, n_rows, w);
        for (int c = 0; c < C; ++c)
            a[c] = reinterpret_cast<const Act*>(acts + std::size_t(c < n_cols ? c : n_cols - 1) * act_stride);
    }
};

// out[t * out_stride + r] = rows[r * row_stride + t] for r < n_rows, t < n_tokens, except the
// corner r < done_rows, t < done_tokens that a caller has already written.
inline void store_token_major_floats(const float* rows, std::size_t row_stride, int n_rows, int n_tokens, float* out,
                                     std::size_t out_stride, int done_rows = 0, int done_tokens = 0) {
    for (int r = 0; r < n_rows; ++r)
        for (int t = r < done_rows ? done_tokens : 0; t < n_tokens; ++t)
            out[std::size_t(t) * out_stride + std::size_t(r)] = rows[std::size_t(r) * row_stride + std::size_t(t)];
}

// A GEMM call's results, held row by row (rows[r * row_stride + t]), written to the caller's
// token-major output (out[t * out_stride + r]). On x86 whole 4 x 4 blocks go through transposes
// of SSE registers (baseline x86-64) and only the edges a float at a time: written wholly a float
// at a time, the write-back of a GEMM call (4 rows x 48 tokens, read back from just-stored 512-bit
// sums) was a sizeable share of a call over a 2048-weight row (docs/performance.md).
inline void store_token_major(const float* rows, std::size_t row_stride, int n_rows, int n_tokens, float* out,
                              std::size_t out_stride) {
    int done_rows = 0, done_tokens = 0;
#if defined(__SSE__)
    done_rows = n_rows / 4 * 4;
    done_tokens = n_tokens / 4 * 4;
    for (int r = 0; r < done_rows; r += 4) {
        const float* row = rows + std::size_t(r) * row_stride;
        float* to = out + std::size_t(r);
        for (int t = 0; t < done_tokens; t += 4) {
            __m128 t0 = _mm_loadu_ps(row + t), t1 = _mm_loadu_ps(row + row_stride + t);
            __m128 t2 = _mm_loadu_ps(row + 2 * row_stride + t), t3 = _mm_loadu_ps(row + 3 * row_stride + t);
            _MM_TRANSPOSE4_PS(t0, t1, t2, t3);  // now token t + k's four rows in tk
            _mm_storeu_ps(to + std::size_t(t) * out_stride, t0);
            _mm_storeu_ps(to + std::size_t(t + 1) * out_stride, t1);
            _mm_storeu_ps(to + std::size_t(t + 2) * out_stride, t2);
            _mm_storeu_ps(to + std::size_t(t + 3) * out_stride, t3);
        }
    }
#endif
    store_token_major_floats(rows, row_stride, n_rows, n_tokens, out, out_stride, done_rows, done_tokens);
}

// A decode tile's results: its few columns never fill a transpose, and with C = 1 GCC warns
// (-Warray-bounds) on the transposes' loads it cannot see are dead.
template <int C>
inline void store_tile(const float (&result)[kTileRows][C], int n_rows, int n_cols, float* out,
                       std::size_t out_stride) {
    store_token_major_floats(&result[0][0], C, n_rows, n_cols, out, out_stride);
}

// Decode (one column) and prompt tiles are separate instantiations; nothing else is.
template <void (*One)(std::int64_t, const std::uint8_t*, std::size_t, int, const std::uint8_t*, std::size_t, int,
                      float*, std::size_t),
          void (*Many)(std::int64_t, const std::uint8_t*, std::size_t, int, const std::uint8_t*, std::size_t, int,
                       float*, std::size_t)>
inline void by_columns(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                       const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                       std::size_t out_stride) {
    if (n_rows <= 0 || n_cols <= 0) return;  // the tiles clamp to the last row/column, so none must exist
    (n_cols == 1 ? One : Many)(n, weights, row_bytes, n_rows, acts, act_stride, n_cols, out, out_stride);
}

// A tile of any width from a one-column kernel, column by column.
template <void (*One)(std::int64_t, const std::uint8_t*, std::size_t, int, const std::uint8_t*, std::size_t, int,
                      float*, std::size_t)>
inline void column_by_column(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                             const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                             std::size_t out_stride) {
    if (n_rows <= 0) return;
    for (int c = 0; c < n_cols; ++c)
        One(n, weights, row_bytes, n_rows, acts + std::size_t(c) * act_stride, act_stride, 1, out + std::size_t(c) * out_stride,
            out_stride);
}

}  // namespace kernel_detail

}  // namespace smol
