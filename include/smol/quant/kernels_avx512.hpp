#pragma once
// AVX-512 (F, BW, VL, DQ) + VNNI kernel set. The program is not compiled with -mavx512*, so
// every function here carries SMOL_TARGET_AVX512 and may run only after cpu_features() said
// has_avx512_kernels() (dispatch.hpp guarantees that). Same tile contract as the AVX2 set; for
// Q4_K and Q6_K the same bits too (see below), on 64-byte vectors with VNNI.

#include "smol/quant/kernels_avx2.hpp"  // the float accumulation both sets share

#if SMOL_HAVE_AVX2_KERNELS && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SMOL_HAVE_AVX512_KERNELS 1
#define SMOL_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"

// GCC 12's intrinsics seed masked forms with _mm512_undefined_*(), which its -Wuninitialized
// reports once inlined (GCC bug 105593); the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#define SMOL_AVX512_GCC_DIAGNOSTICS 1
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace smol::kernels_avx512 {

namespace detail {

SMOL_TARGET_AVX512 inline void prefetch_ahead(const void* block, std::size_t bytes, std::size_t distance) {
    const char* p = static_cast<const char*>(block) + distance;
    for (std::size_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

SMOL_TARGET_AVX512 inline float hsum128(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

SMOL_TARGET_AVX512 inline float half_to_float(std::uint16_t h) { return _cvtsh_ss(h); }

// ---------------------------------------------------------------------------------------------
// Q4_K and Q6_K x Q8_K. A weight block is unpacked into four vectors of 64 unsigned quants in the
// activations' own order. One vpdpbusd per chunk of 64 weights sums four u8 x i8 products into
// each i32 lane j (at most 4 * 63 * 127 = 32004, so it fits an i16 word); the words of two
// chunks are paired in one lane and one vpdpwssd multiplies both by their sub-block scales and
// adds: three multiply instructions per 128 weights where maddubs + madd take four.
// Folding the 16 lanes to 8 (lane j + lane j + 8) gives exactly the AVX2 set's partial sums:
// lane i holds weights 4i..4i+3 of every 32-weight piece, each times its scale. From there the
// float arithmetic is the AVX2 set's too (q4k_accumulate, q6k_accumulate), so both sets give the
// same bits, and a sequence's logits never depend on the kernel set or on its batch.

namespace avx2 = kernels_avx2::detail;

struct UnpackedBlock {
    __m512i q[4];      // [chunk]: 64 unsigned quants as bytes, in activation order
    __m512i scale[2];  // [chunk pair]: lane j = (scale of chunk 2p at j, scale of chunk 2p + 1 at j) as i16
};

// Two copies of a 32-bit pattern, as one 64-bit vector element.
constexpr long long two_dwords(std::uint32_t x) { return (long long)(std::uint64_t(x) | std::uint64_t(x) << 32); }

// Q4_K: chunk c holds the low nibbles of qs[32c..32c+31] (sub-block 2c) then their high nibbles
// (sub-block 2c+1): that is weights 64c..64c+63 in order, so the activations are read as they are.
// One broadcast load and one per-half variable shift give both halves without a shuffle.
SMOL_TARGET_AVX512 inline void q4k_unpack(const BlockQ4K& wb, __m128i unpacked, UnpackedBlock& u) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i halves = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);  // shift 0 | 4
    for (int c = 0; c < 4; ++c) {
        const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * c)));
        u.q[c] = _mm512_and_si512(_mm512_srlv_epi16(bits, halves), low4);
    }
    // Pair p, lanes 0-7: scales 4p and 4p + 2; lanes 8-15: 4p + 1 and 4p + 3; zero-extended from
    // the unpacked u8 scales (0x80 zeroes a byte).
    const __m512i scales = _mm512_broadcast_i32x4(unpacked);  // [8 scales, 8 mins] u8 in every 128-bit lane
    for (int p = 0; p < 2; ++p) {
        const auto pick = [](int a, int b) { return two_dwords(0x80008000u | std::uint32_t(b) << 16 | std::uint32_t(a)); };
        const long long lo = pick(4 * p, 4 * p + 2), hi = pick(4 * p + 1, 4 * p + 3);
        u.scale[p] = _mm512_shuffle_epi8(scales, _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo));
    }
}

// Q6_K: half h (weights 128h..128h+127) gives chunk 2h from the low nibbles of ql[64h..64h+63]
// with qh bit pairs 0-1 (bytes 0-31) and 2-3 (bytes 32-63), and chunk 2h+1 from the high
// nibbles with bit pairs 4-5 and 6-7. Lane j of chunk c covers sub-block 4c + j / 4.
SMOL_TARGET_AVX512 inline void q6k_unpack(const BlockQ6K& wb, UnpackedBlock& u) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i top2 = _mm512_set1_epi8(0x30);
    const __m512i left = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);     // 4 | 2
    const __m512i right = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);  // 0 | 2
    for (int h = 0; h < 2; ++h) {
        const __m512i ql = _mm512_loadu_si512(wb.ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh + 32 * h)));
        u.q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_sllv_epi16(qh, left), top2));
        u.q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                         _mm512_and_si512(_mm512_srlv_epi16(qh, right), top2));
    }
    const __m512i scales16 =
        _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales))));
    for (int p = 0; p < 2; ++p) {
        long long idx[8];  // [pair of lanes 2k, 2k + 1]: sub-blocks 8p + k / 2 and 8p + 4 + k / 2
        for (int k = 0; k < 8; ++k) idx[k] = two_dwords(std::uint32_t(8 * p + 4 + k / 2) << 16 | std::uint32_t(8 * p + k / 2));
        u.scale[p] = _mm512_permutexvar_epi16(
            _mm512_set_epi64(idx[7], idx[6], idx[5], idx[4], idx[3], idx[2], idx[1], idx[0]), scales16);
    }
}

// sum over the block of scale(sub-block) * q * a, as the AVX2 set's 8 i32 partial sums (exact).
SMOL_TARGET_AVX512 inline __m256i block_dot(const UnpackedBlock& u, const BlockQ8K& ab) {
    __m512i sumi = _mm512_setzero_si512();
    for (int p = 0; p < 2; ++p) {
        const __m512i first = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.q[2 * p], _mm512_loadu_si512(ab.qs + 128 * p));
        const __m512i second =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.q[2 * p + 1], _mm512_loadu_si512(ab.qs + 128 * p + 64));
        // lane j: low word the first chunk's sum, high word the second's
        const __m512i paired = _mm512_mask_blend_epi16(0x55555555u, _mm512_slli_epi32(second, 16), first);
        sumi = _mm512_dpwssd_epi32(sumi, paired, u.scale[p]);
    }
    return _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
}

// Prompt tiles: one row at a time, a block unpacked once and used for all C columns.
template <int C>
SMOL_TARGET_AVX512 void q4k_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                 const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                 std::size_t out_stride) {
    const kernel_detail::TileOperands<BlockQ4K, BlockQ8K, C> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    const std::int64_t blocks = n / QK_K;
    float result[kTileRows][C] = {};
    for (int r = 0; r < n_rows; ++r) {
        __m256 acc[C];  // [column]: 8 partial sums of ad * (d * dots - dmin * min dots)
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (std::int64_t b = 0; b < blocks; ++b) {
            const BlockQ4K& wb = t.w[r][b];
            prefetch_ahead(&wb, sizeof(BlockQ4K), ahead);
            const __m128i header = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&wb));
            const __m128i unpacked = avx2::q4k_unpack_header(header);  // [8 scales, 8 mins] u8
            UnpackedBlock u;
            q4k_unpack(wb, unpacked, u);
            const __m128 d_dmin = _mm_cvtph_ps(header);
            for (int c = 0; c < C; ++c) {
                const BlockQ8K& ab = t.a[c][b];
                acc[c] = avx2::q4k_accumulate(acc[c], d_dmin, block_dot(u, ab),
                                              avx2::q4k_min_dots(unpacked, avx2::q8k_sub_block_sums(ab)), ab.d);
            }
        }
        for (int c = 0; c < C; ++c) result[r][c] = avx2::hsum(acc[c]);
    }
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

template <int C>
SMOL_TARGET_AVX512 void q6k_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                 const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                 std::size_t out_stride) {
    const kernel_detail::TileOperands<BlockQ6K, BlockQ8K, C> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    const std::int64_t blocks = n / QK_K;
    float result[kTileRows][C] = {};
    for (int r = 0; r < n_rows; ++r) {
        __m256 acc[C];  // [column]: 8 partial sums of ad * d * dots
        for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
        for (std::int64_t b = 0; b < blocks; ++b) {
            const BlockQ6K& wb = t.w[r][b];
            prefetch_ahead(&wb, sizeof(BlockQ6K), ahead);
            UnpackedBlock u;
            q6k_unpack(wb, u);
            const __m256i scales16 = avx2::q6k_scales16(wb);
            const float d = half_to_float(wb.d);
            for (int c = 0; c < C; ++c) {
                const BlockQ8K& ab = t.a[c][b];
                acc[c] = avx2::q6k_accumulate(acc[c], d, _mm256_sub_epi32(block_dot(u, ab), avx2::q6k_offset(scales16, avx2::q8k_bsums(ab))), ab.d);
            }
        }
        for (int c = 0; c < C; ++c) result[r][c] = avx2::hsum(acc[c]);
    }
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// Q8_0 x Q8_0: |w| as unsigned times a with w's sign, accumulated by vpdpbusd (no saturation).

template <int C>
SMOL_TARGET_AVX512 void q8_0_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                  const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                  std::size_t out_stride) {
    const kernel_detail::TileOperands<BlockQ8_0, BlockQ8_0, C> t(weights, row_bytes, n_rows, acts, act_stride,
                                                                 n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    __m256 acc[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    const std::int64_t blocks = n / QK8_0;
    for (std::int64_t b = 0; b < blocks; ++b) {
        for (int r = 0; r < kTileRows; ++r) {
            const BlockQ8_0& wb = t.w[r][b];
            prefetch_ahead(&wb, sizeof(BlockQ8_0), ahead);
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs));
            const __m256i abs_x = _mm256_abs_epi8(x);
            const float dx = half_to_float(wb.d);
            for (int c = 0; c < C; ++c) {
                const BlockQ8_0& ab = t.a[c][b];
                const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
                const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_x, _mm256_sign_epi8(y, x));
                acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * half_to_float(ab.d)), _mm256_cvtepi32_ps(dot),
                                            acc[r][c]);
            }
        }
    }
    float result[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) {
            const __m256 v = acc[r][c];
            result[r][c] = hsum128(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
        }
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// Float weights against float activations, 16 lanes.

struct LoadF32 {
    SMOL_TARGET_AVX512 static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
    static float scalar(const float* p) { return *p; }
};
struct LoadF16 {
    SMOL_TARGET_AVX512 static __m512 load(const std::uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static float scalar(const std::uint16_t* p) { return fp16_to_f32(*p); }
};
struct LoadBF16 {
    SMOL_TARGET_AVX512 static __m512 load(const std::uint16_t* p) {
        const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    }
    static float scalar(const std::uint16_t* p) { return bf16_to_f32(*p); }
};

template <class Weight, class Load, int C>
SMOL_TARGET_AVX512 void float_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes, int n_rows,
                                   const std::uint8_t* acts, std::size_t act_stride, int n_cols, float* out,
                                   std::size_t out_stride) {
    const kernel_detail::TileOperands<Weight, float, C> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
    const std::size_t ahead = prefetch_distance(row_bytes);
    __m512 acc[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    constexpr std::int64_t lanes = 16;
    const std::int64_t body = n - n % lanes;
    for (std::int64_t i = 0; i < body; i += lanes) {
        __m512 w[kTileRows];
        const bool new_line = (std::size_t(i) * sizeof(Weight)) % 64 < lanes * sizeof(Weight);  // once per 64 bytes
        for (int r = 0; r < kTileRows; ++r) {
            if (new_line) prefetch_ahead(t.w[r] + i, 64, ahead);
            w[r] = Load::load(t.w[r] + i);
        }
        for (int c = 0; c < C; ++c) {
            const __m512 x = _mm512_loadu_ps(t.a[c] + i);
            for (int r = 0; r < kTileRows; ++r) acc[r][c] = _mm512_fmadd_ps(w[r], x, acc[r][c]);
        }
    }
    float result[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) {
            float sum = _mm512_reduce_add_ps(acc[r][c]);
            for (std::int64_t i = body; i < n; ++i) sum += Load::scalar(t.w[r] + i) * t.a[c][i];
            result[r][c] = sum;
        }
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

}  // namespace detail

// Decode streams every weight from memory once; there the AVX2 column kernels are faster than any
// 512-bit version measured (AMD Zen 4 runs 512-bit operations as two 256-bit halves, and the
// unpacking per row and block cannot be shared across columns): 1 thread 6.0-6.1 tokens/s
// against 5.8, 2 threads 11.2-11.3 against 10.4-10.8, same run. Their results are the same bits
// as these tiles', so decode and prompt still agree exactly.
inline constexpr DotTileFn q4k_q8k =
    kernel_detail::by_columns<kernels_avx2::detail::q4k_column, detail::q4k_tile<kTileCols>>;
inline constexpr DotTileFn q6k_q8k =
    kernel_detail::by_columns<kernels_avx2::detail::q6k_column, detail::q6k_tile<kTileCols>>;
inline constexpr DotTileFn q8_0_q8_0 =
    kernel_detail::by_columns<detail::q8_0_tile<1>, detail::q8_0_tile<kTileCols>>;
inline constexpr DotTileFn f32 = kernel_detail::by_columns<detail::float_tile<float, detail::LoadF32, 1>,
                                                           detail::float_tile<float, detail::LoadF32, kTileCols>>;
inline constexpr DotTileFn f16 =
    kernel_detail::by_columns<detail::float_tile<std::uint16_t, detail::LoadF16, 1>,
                              detail::float_tile<std::uint16_t, detail::LoadF16, kTileCols>>;
inline constexpr DotTileFn bf16 =
    kernel_detail::by_columns<detail::float_tile<std::uint16_t, detail::LoadBF16, 1>,
                              detail::float_tile<std::uint16_t, detail::LoadBF16, kTileCols>>;

}  // namespace smol::kernels_avx512

#if SMOL_AVX512_GCC_DIAGNOSTICS
#pragma GCC diagnostic pop
#undef SMOL_AVX512_GCC_DIAGNOSTICS
#endif

#endif
