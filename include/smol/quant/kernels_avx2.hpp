#pragma once
// AVX2 + FMA + F16C kernel set (the x86-64-v3 baseline smol is compiled for).
// Integer products use maddubs (u8 x i8 -> i16 pairs) then madd with the sub-block scale
// (i16 x i16 -> i32), so every integer sum is exact and equals the reference's.
// Tiles always compute kTileRows rows: missing rows and columns repeat the last valid one
// and their results are dropped, which keeps trip counts fixed so accumulators stay in registers.

#include "smol/core/simd_targets.hpp"

#if SMOL_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include <cstddef>
#include <bit>
#include <cstdint>
#include <cstring>

#include "smol/core/float_vectors.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/dpbusd.hpp"
#include "smol/quant/float_tiles.hpp"
#include "smol/quant/kernel_api.hpp"
#include "smol/quant/reference.hpp"

namespace smol::kernels_avx2 {

namespace detail {

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline float half_to_float(std::uint16_t h) { return _cvtsh_ss(h); }

// ---------------------------------------------------------------------------------------------
// Q4_K x Q8_K

// A Q4_K block's packed 6-bit scales and mins unpacked the way q4k_unpack_scales_mins() does it,
// all in one register: `header` is the block's first 16 bytes (d, dmin, then the 12 scale bytes
// as words w0 w1 w2); the result is [8 scales, 8 mins] as u8.
inline __m128i q4k_unpack_header(__m128i header) {
    const __m128i w0_w2_w1_w2 = _mm_shuffle_epi32(header, _MM_SHUFFLE(3, 2, 3, 1));
    const __m128i w0_w0_w1_w1 = _mm_shuffle_epi32(header, _MM_SHUFFLE(2, 2, 1, 1));
    const __m128i low = _mm_and_si128(_mm_srlv_epi32(w0_w2_w1_w2, _mm_setr_epi32(0, 0, 0, 4)),
                                      _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m128i top = _mm_and_si128(_mm_srlv_epi32(w0_w0_w1_w1, _mm_setr_epi32(0, 2, 0, 2)),
                                      _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(low, top);
}

// Picks byte `index` of each 128-bit lane, zero-extended, into all 8 i16 words of that lane.
inline __m256i byte_to_words(int index) { return _mm256_set1_epi16(short(0x8000 | index)); }

// A Q8_K block's 16 bsums (sums of 16 quants each), as i16.
inline __m256i q8k_bsums(const BlockQ8K& ab) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums)); }

// The 8 sub-block sums of a Q8_K block (its 16 bsums added pairwise), as i16.
inline __m128i q8k_sub_block_sums(const BlockQ8K& ab) {
    const __m256i bsums = q8k_bsums(ab);
    return _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
}

// A Q4_K block's min term before scaling: its 8 mins (bytes 8-15 of `unpacked`) times the
// activation's 8 sub-block sums, as 4 i32 partial sums.
inline __m128i q4k_min_dots(__m128i unpacked, __m128i sub_sums) {
    const __m128i mins_to_words = _mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1);
    return _mm_madd_epi16(_mm_shuffle_epi8(unpacked, mins_to_words), sub_sums);
}

// Lane i: the total of v_i's lanes (exact), for four vectors at once.
inline __m128i hsum_x4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i pairs = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
}
inline __m128i hsum_x4(__m128i v0, __m128i v1, __m128i v2, __m128i v3) {
    return _mm_hadd_epi32(_mm_hadd_epi32(v0, v1), _mm_hadd_epi32(v2, v3));
}

// One block's step for four (row, column) accumulators, lane by lane exactly the reference's
// q4k_accumulate_block / q6k_accumulate_block: every kernel set and tile shape gives the same bits.
inline __m128 q4k_accumulate(__m128 acc, __m128 d, __m128 dmin, __m128 ad, __m128i dots, __m128i mins) {
    acc = _mm_fmadd_ps(_mm_mul_ps(d, ad), _mm_cvtepi32_ps(dots), acc);
    return _mm_fnmadd_ps(_mm_mul_ps(dmin, ad), _mm_cvtepi32_ps(mins), acc);
}
inline __m128 q6k_accumulate(__m128 acc, __m128 d, __m128 ad, __m128i dots) {
    return _mm_fmadd_ps(_mm_mul_ps(d, ad), _mm_cvtepi32_ps(dots), acc);
}

// ---------------------------------------------------------------------------------------------
// Q6_K x Q8_K: the 6-bit quants are used unsigned (0..63) and the -32 offset is taken out once
// per block as 32 * sum_j scale_j * bsum_j.

// Chunk kk (32 weights) of a Q6_K half as unsigned quants (0..63), from the half's ql bytes
// (bits1: 0-31, bits2: 32-63) and qh bytes: chunks 0 and 1 take the low nibbles of bits1 and
// bits2, chunks 2 and 3 the high nibbles, and chunk kk the qh bit pair 2kk, 2kk+1, moved to bits
// 4-5 with one shift and mask (16-bit shifts are fine: the mask drops what crosses bytes).
template <int kk>
inline __m256i q6k_chunk_quants(__m256i bits1, __m256i bits2, __m256i high) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i mask = _mm256_set1_epi8(0x30);
    const __m256i bits = kk % 2 == 0 ? bits1 : bits2;
    const __m256i low = _mm256_and_si256(kk < 2 ? bits : _mm256_srli_epi16(bits, 4), low4);
    __m256i top;
    if constexpr (kk == 0) top = _mm256_and_si256(_mm256_slli_epi16(high, 4), mask);
    if constexpr (kk == 1) top = _mm256_and_si256(_mm256_slli_epi16(high, 2), mask);
    if constexpr (kk == 2) top = _mm256_and_si256(high, mask);
    if constexpr (kk == 3) top = _mm256_and_si256(_mm256_srli_epi16(high, 2), mask);
    return _mm256_or_si256(low, top);
}

// A Q6_K block's 16 sub-block scales as i16.
inline __m256i q6k_scales16(const BlockQ6K& wb) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales)));
}

// The quants are used unsigned (0..63); the -32 offset they leave out is 32 * sum_j scale_j *
// bsum_j, as 8 i32 partial sums. bsums: the activation block's 16 bsums.
inline __m256i q6k_offset(__m256i scales16, __m256i bsums) {
    return _mm256_slli_epi32(_mm256_madd_epi16(scales16, bsums), 5);
}

// For chunk kk of a half, picks i16 scale 2kk into lanes 0-15 and 2kk+1 into lanes 16-31 from
// the half's eight scales held in both 128-bit lanes.
inline __m256i q6k_scale_picker(int kk) {
    return _mm256_set_m128i(_mm_set1_epi16(short(((4 * kk + 3) << 8) | (4 * kk + 2))),
                            _mm_set1_epi16(short(((4 * kk + 1) << 8) | (4 * kk))));
}

// ---------------------------------------------------------------------------------------------
// Decode (one activation column): the weights stream from DRAM once, so per block and row every
// instruction of bookkeeping counts. The k-quants' block dots and the decode driver they share
// are in kquant_tiles_avx2.hpp.

// Decode reads a tile's rows one after the other, each whole (up to this many blocks at a time,
// 16384 weights), so the weights arrive as one sequential stream, and reduces the four rows'
// block totals together afterwards. Reading the four rows block by block (four interleaved
// streams) was slower on 1 and 2 threads, and runs of 8 blocks fell in between (figures:
// docs/performance.md).
inline constexpr int kDecodeChunk = 64;

// Stores acc's lanes (rows) as a one-column tile.
inline void store_column(__m128 acc, int n_rows, int n_cols, float* out, std::size_t out_stride) {
    float result[kTileRows][1];
    for (int r = 0; r < kTileRows; ++r) result[r][0] = acc[r];
    kernel_detail::store_tile<1>(result, n_rows, n_cols, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// The k-quant prompt GEMMs' pieces (the driver, kquant_gemm, is kquant_tiles_avx2.hpp's) and
// Q4_K's and Q6_K's unpackers. Vector lanes are 8 tokens of a packed group of 16 (packing.hpp): a
// weight row's 4-byte group is broadcast, maddubs multiplies it with 8 tokens' matching groups
// (pairs of products fit i16: at most 2 * 63 * 128), a few groups' pairs are summed in i16, and
// madd with the sub-block scale turns them into scale * products in each token's i32 lane. No
// horizontal sums; each lane ends a block with the exact integer totals and takes the
// reference's float step, so the results are the bits of the decode kernels.

// A weight block's quants as unsigned bytes in activation order (weights 0..255).
// (64-byte aligned: the AVX-512 GEMMs read the same unpacked rows.)
struct UnpackedQuants {
    alignas(64) std::uint8_t q[QK_K];
};

inline void q4k_unpack(const BlockQ4K& wb, UnpackedQuants& u) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int chunk = 0; chunk < 4; ++chunk) {  // weights 64 chunk.. (low nibbles), 64 chunk + 32.. (high)
        const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs + 32 * chunk));
        _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 64 * chunk), _mm256_and_si256(bits, low4));
        _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 64 * chunk + 32),
                           _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4));
    }
}

inline void q6k_unpack(const BlockQ6K& wb, UnpackedQuants& u) {  // unsigned 0..63
    for (int half = 0; half < 2; ++half) {
        const __m256i bits1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.ql + 64 * half));
        const __m256i bits2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.ql + 64 * half + 32));
        const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qh + 32 * half));
        auto* out = reinterpret_cast<__m256i*>(u.q + 128 * half);
        _mm256_store_si256(out + 0, q6k_chunk_quants<0>(bits1, bits2, high));
        _mm256_store_si256(out + 1, q6k_chunk_quants<1>(bits1, bits2, high));
        _mm256_store_si256(out + 2, q6k_chunk_quants<2>(bits1, bits2, high));
        _mm256_store_si256(out + 3, q6k_chunk_quants<3>(bits1, bits2, high));
    }
}

// Four quants of an unpacked row as one i32, in all 8 lanes.
inline __m256i broadcast_group(const UnpackedQuants& u, int group) {
    std::int32_t four;
    std::memcpy(&four, u.q + 4 * group, 4);
    return _mm256_set1_epi32(four);
}

// The scales a run meets, one i16 per row, each read from memory into every word where its row's
// sums meet it: a vpbroadcastw from memory takes no vector pipe, where stored vectors of each
// row's scales cost a shuffle and a store per row and sub-block every block (figures in
// docs/performance.md). The pointer is hidden from the compiler, which would otherwise hoist the
// broadcasts out of the token passes and spill them.
struct RunScales {
    const std::int16_t* rows[kTileRows];
    __m256i row(int r) const {
        const std::int16_t* scale = rows[r];
        __asm__ volatile("" : "+r"(scale));
        return _mm256_set1_epi16(*scale);
    }
};

// One run: row r's maddubs products with the tokens of halves h..h+H-1 over the 4-byte groups
// first..first+K-1, summed in i16 into sums[r][half - h] (which `Start` sets rather than adds to;
// the caller bounds K so that nothing wraps), then dots[r][half - h] += scale.row(r) * those sums,
// unrolled at compile time: as a loop, gcc copies every accumulator between registers on each
// trip. Two halves (H = 2) take each broadcast weight group to 16 tokens: 6 memory reads per 8
// products where one half made 5 per 4. The last group's products meet the scale row by row, so
// each row's sums are done with before the next row's are complete: applied after the whole
// run, with all of them held at once, gcc spilled sums to memory and read them straight back at
// every run's end (the speed-up is in docs/performance.md). A run's complete sums stay locals,
// never written back to `sums`: written there, gcc kept one dead store per row and half at
// every run's end.
template <int K, bool Start, int H>
__attribute__((always_inline)) inline void scaled_run(__m256i (&dots)[kTileRows][H], __m256i (&sums)[kTileRows][H],
                                                      const UnpackedQuants (&u)[kTileRows], const BlockQ8Kx16& a, int h,
                                                      int first, const RunScales& scale) {
    static_assert(K > 0, "a run holds at least one group");
    __m256i x[H];
    SMOL_UNROLL
    for (int i = 0; i < H; ++i) x[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(a.qs[first][8 * (h + i)]));
    SMOL_UNROLL
    for (int r = 0; r < kTileRows; ++r) {
        const __m256i weights = broadcast_group(u[r], first);
        __m256i row_scale;
        if constexpr (K == 1) row_scale = scale.row(r);  // one broadcast for the row's H halves
        SMOL_UNROLL
        for (int i = 0; i < H; ++i) {
            const __m256i products = _mm256_maddubs_epi16(weights, x[i]);
            __m256i sum = Start ? products : _mm256_add_epi16(sums[r][i], products);
            asm("" : "+x"(sum));  // keeps the running sum: gcc would otherwise reassociate the adds
                                  // into a tree, holding all the products at once and spilling them
            if constexpr (K == 1) dots[r][i] = _mm256_add_epi32(dots[r][i], _mm256_madd_epi16(sum, row_scale));
            else sums[r][i] = sum;
        }
    }
    if constexpr (K > 1) scaled_run<K - 1, false, H>(dots, sums, u, a, h, first + 1, scale);
}

// dots[r][half - h] += scale.row(r) * (row r's groups first..first+Runs*K-1 . the half's tokens'
// groups), for halves h..h+H-1: one vpmaddwd per row and half for each run of K groups' i16 sums.
// With run_starts (one run: Runs == 1), each row's run of half h + i starts at run_starts[i]
// rather than at zero.
template <int K, int Runs, int H>
__attribute__((always_inline)) inline void dot_group_run(__m256i (&dots)[kTileRows][H], const UnpackedQuants (&u)[kTileRows],
                                                         const BlockQ8Kx16& a, int h, int first,
                                                         const RunScales& scale,
                                                         const __m256i* run_starts = nullptr) {
    if constexpr (Runs > 0) {
        __m256i sums[kTileRows][H];
        if (run_starts != nullptr) {
            SMOL_UNROLL
            for (int r = 0; r < kTileRows; ++r) {
                SMOL_UNROLL
                for (int i = 0; i < H; ++i) sums[r][i] = run_starts[i];
            }
            scaled_run<K, false, H>(dots, sums, u, a, h, first, scale);
        } else {
            scaled_run<K, true, H>(dots, sums, u, a, h, first, scale);
        }
        dot_group_run<K, Runs - 1, H>(dots, u, a, h, first + K, scale);
    }
}

// ---------------------------------------------------------------------------------------------
// Q8_0 x Q8_0: |w| (unsigned) times a with w's sign, so the products are u8 x i8: maddubs then
// madd (AVX2; a pair is at most 2 * 127 * 128, no saturation) or one vpdpbusd (the AVX-VNNI and
// AVX-512 sets, compiled into their entry points). Either gives each lane's sum of 4 products.

struct MaddubsQuads {
    static __m256i dot(__m256i unsigned_bytes, __m256i signed_bytes) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(unsigned_bytes, signed_bytes), _mm256_set1_epi16(1));
    }
};
template <class Dot>
struct DpbusdQuads {
    SMOL_INLINE_INTO_SET static __m256i dot(__m256i unsigned_bytes, __m256i signed_bytes) {
        return Dot::dpbusd(_mm256_setzero_si256(), unsigned_bytes, signed_bytes);
    }
};

template <class Quads, int C>
SMOL_INLINE_INTO_SET inline void q8_0_tile(std::int64_t n, const std::uint8_t* weights, std::size_t row_bytes,
                                           int n_rows, const std::uint8_t* acts, std::size_t act_stride, int n_cols,
                                           float* out, std::size_t out_stride) {
    const kernel_detail::TileOperands<BlockQ8_0, BlockQ8_0, C> t(weights, row_bytes, n_rows, acts, act_stride, n_cols);
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
            const __m256i abs_x = _mm256_sign_epi8(x, x);
            const float dx = half_to_float(wb.d);
            for (int c = 0; c < C; ++c) {
                const BlockQ8_0& ab = t.a[c][b];
                const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
                const __m256i dot = Quads::dot(abs_x, _mm256_sign_epi8(y, x));
                acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * half_to_float(ab.d)), _mm256_cvtepi32_ps(dot),
                                            acc[r][c]);
            }
        }
    }
    float result[kTileRows][C];
    for (int r = 0; r < kTileRows; ++r)
        for (int c = 0; c < C; ++c) result[r][c] = hsum(acc[r][c]);
    kernel_detail::store_tile<C>(result, n_rows, n_cols, out, out_stride);
}

// ---------------------------------------------------------------------------------------------
// Float weights (F32, F16, BF16) against float activations: float_tile_set.hpp's tile on 8 lanes,
// with this set's weight loads.

struct LoadF32 : float_tiles::F32Weights {
    static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
};
struct LoadF16 : float_tiles::F16Weights {
    static __m256 load(const std::uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
struct LoadBF16 : float_tiles::BF16Weights {
    static __m256 load(const std::uint16_t* p) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
};

using Floats = simd::Avx2Floats;
#define SMOL_SET_TARGET
#include "smol/quant/float_tile_set.hpp"
#undef SMOL_SET_TARGET

}  // namespace detail

// Q8_K activation quantizer, byte for byte equal to the reference one: the same float products
// rounded half to even (vcvtps2dq under the default mode, as nearbyint), the same maximum (the
// first element of largest magnitude) and bsums summed from the quants.
//
// The largest magnitude comes from the block's signed maximum and minimum, four chains of each,
// where one chain of |x| maxima waited out vmaxps's latency at every vector and a search for the
// element that set it (a branch of varying length, mispredicted at every block) had to follow:
// the sign is the larger side's, and only a tie (+a and -a both present) needs the search for
// the first. maxps and minps return their second operand for NaN, so NaNs are skipped as in the
// reference.
inline void quantize_row_q8_k(const float* x, BlockQ8K* out, std::int64_t n) {  // x: [n]
    if (n % QK_K != 0) fail("quantize_row_q8_k: row length must be a multiple of ", QK_K, ", got ", n);
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i limit = _mm256_set1_epi32(127);
    const __m256i byte_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (std::int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        BlockQ8K& block = out[b];
        __m256 top[4], bottom[4];  // [chain]: running maxima and minima, from 0
        for (int k = 0; k < 4; ++k) top[k] = bottom[k] = _mm256_setzero_ps();
        for (int i = 0; i < QK_K; i += 32)
            for (int k = 0; k < 4; ++k) {
                const __m256 v = _mm256_loadu_ps(x + i + 8 * k);
                top[k] = _mm256_max_ps(v, top[k]);
                bottom[k] = _mm256_min_ps(v, bottom[k]);
            }
        const __m256 t8 = _mm256_max_ps(_mm256_max_ps(top[0], top[1]), _mm256_max_ps(top[2], top[3]));
        const __m256 b8 = _mm256_min_ps(_mm256_min_ps(bottom[0], bottom[1]), _mm256_min_ps(bottom[2], bottom[3]));
        __m128 t = _mm_max_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
        t = _mm_max_ps(t, _mm_movehl_ps(t, t));
        t = _mm_max_ss(t, _mm_movehdup_ps(t));
        __m128 m = _mm_min_ps(_mm256_castps256_ps128(b8), _mm256_extractf128_ps(b8, 1));
        m = _mm_min_ps(m, _mm_movehl_ps(m, m));
        m = _mm_min_ss(m, _mm_movehdup_ps(m));
        const float largest = _mm_cvtss_f32(t), smallest = _mm_cvtss_f32(m);
        float max = largest > -smallest ? largest : smallest;  // the element of largest magnitude
        if (largest == -smallest) {
            if (largest == 0.0f) {
                std::memset(&block, 0, sizeof(block));
                continue;
            }
            const __m256 vamax = _mm256_set1_ps(largest);
            int first = 0;
            for (;; first += 8) {
                const __m256 hit = _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + first), abs_mask), vamax, _CMP_EQ_OQ);
                const int mask = _mm256_movemask_ps(hit);
                if (mask != 0) {
                    first += std::countr_zero(unsigned(mask));
                    break;
                }
            }
            max = x[first];
        }
        const float iscale = -127.0f / max;
        const __m256 vscale = _mm256_set1_ps(iscale);
        for (int i = 0; i < QK_K; i += 64) {
            __m256i q[8];  // 64 quants as int32
            for (int k = 0; k < 8; ++k)
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vscale, _mm256_loadu_ps(x + i + 8 * k))), limit);
            for (int k = 0; k < 8; k += 4) {  // 32 quants: pack to bytes, undo the per-lane interleave
                const __m256i words = _mm256_packs_epi32(q[k], q[k + 1]);
                const __m256i words2 = _mm256_packs_epi32(q[k + 2], q[k + 3]);
                const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(words, words2), byte_order);
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs + i + 8 * k), bytes);
            }
            // Four bsums (16 quants each): pairwise sums, then a hadd tree.
            const __m256i s0 = _mm256_add_epi32(q[0], q[1]), s1 = _mm256_add_epi32(q[2], q[3]);
            const __m256i s2 = _mm256_add_epi32(q[4], q[5]), s3 = _mm256_add_epi32(q[6], q[7]);
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
            const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(block.bsums + i / 16), _mm_packs_epi32(sums, sums));
        }
        block.d = 1.0f / iscale;
    }
}

// The k-quant tiles, built from the pieces above, are in kquant_tiles_avx2.hpp.
inline constexpr DotTileFn q8_0_q8_0 =
    kernel_detail::by_columns<detail::q8_0_tile<detail::MaddubsQuads, 1>, detail::q8_0_tile<detail::MaddubsQuads, kTileCols>>;
inline constexpr DotTileFn f32 =
    kernel_detail::by_columns<detail::float_tile<detail::LoadF32, 1>, detail::float_tile<detail::LoadF32, kTileCols>>;
inline constexpr DotTileFn f16 =
    kernel_detail::by_columns<detail::float_tile<detail::LoadF16, 1>, detail::float_tile<detail::LoadF16, kTileCols>>;
inline constexpr DotTileFn bf16 =
    kernel_detail::by_columns<detail::float_tile<detail::LoadBF16, 1>, detail::float_tile<detail::LoadBF16, kTileCols>>;

}  // namespace smol::kernels_avx2

#endif
