// The SIMD attention kernels, written once and compiled per instruction set: kv_tiles_avx2.hpp,
// kv_tiles_avx512.hpp and kv_tiles_xsimd.hpp each include this file inside their namespace,
// after defining
//   SMOL_SET_TARGET  the set's target attribute (nothing for AVX2 and NEON, the baselines)
//   Floats           the set's float vector (core/float_vectors.hpp)
//   kScoreKeys       keys per score tile: 4 query rows x kScoreKeys keys are 4 * kScoreKeys
//                    accumulators, 8 of AVX2's 16 registers, 16 of AVX-512's or NEON's 32,
//                    leaving room for the key and query vectors
//   kAccumulateSteps steps of value columns per pass of the value sums: 4 rows x 2 vectors a
//                    step, 8 accumulators, or 16 over two steps (AVX-512)
//   CacheRows<T>     for a cache type T, load2(row, step, v0, v1): row values
//                    [2 * kLanes * step, 2 * kLanes * (step + 1)) as two vectors of floats
// and it defines the set's entry points (load_row, softmax_weights, scores, accumulate,
// scores_cache, accumulate_cache). Every step of a row is two vectors (8 values on NEON, 16 on
// AVX2, 32 on AVX-512: a quarter, a half or one block of Q8_0 or Q4_0); in a dot product, lane
// l accumulates the elements i = l mod kLanes in order of i, and the lanes are summed by
// Floats::sum_each8, the same order for every score. No instruction of a set is spelled here: only Floats and
// CacheRows know the set.
//
// Why an include per set and not one template over the set: a function that takes or returns a
// __m512 must itself be compiled for AVX-512 (clang rejects the call otherwise, GCC warns of
// the ABI), and a template cannot take its target attribute from a parameter. The std and smol
// headers this uses are included by kv_tiles.hpp, which the set files include first.
//
// No include guard: included once per set namespace, never on its own.

inline constexpr int kStep = 2 * Floats::kLanes;  // row values per step: two vectors

// A cache row (or a run of consecutive rows) back as floats: the bits CacheRows gives the tiles,
// so scores over load_row's copies and scores_cache agree. values: a multiple of 32.
template <KvType T>
SMOL_SET_TARGET inline void load_row_of(const std::byte* row, float* out, int values) {
    for (int s = 0; s < values / kStep; ++s) {
        Floats::V v0, v1;
        CacheRows<T>::load2(row, s, v0, v1);
        Floats::store(out + kStep * s, v0);
        Floats::store(out + kStep * s + Floats::kLanes, v1);
    }
}

inline void load_row(KvType type, const std::byte* row, float* out, int values) {
    with_kv_type(type, [&](auto t) { load_row_of<t>(row, out, values); });
}

// exp_poly on a vector; -inf and anything below exp_poly::kMin give exactly 0.
SMOL_SET_TARGET inline Floats::V exp_nonpositive(Floats::V x) {
    using namespace exp_poly;
    using F = Floats;
    const F::V clamped = F::max(x, F::set1(kMin));
    const F::V k = F::round_nearest(F::mul(clamped, F::set1(kLog2e)));
    const F::V r = F::fnma(k, F::set1(kLn2Lo), F::fnma(k, F::set1(kLn2Hi), clamped));
    F::V p = F::set1(kCoefficients[0]);
    for (int i = 1; i < 6; ++i) p = F::fma(p, r, F::set1(kCoefficients[i]));
    p = F::fma(p, F::mul(r, r), F::add(r, F::set1(1.0f)));
    return F::zero_below(F::mul(p, F::exp2_integral(k)), x, kMin);  // 2^k for k in [-126, 0]
}

// kLanes lanes summed j by j, then summed by the set's fixed order (Floats::sum_folded); a last
// partial vector is padded with -inf, whose weights are 0 and add nothing.
SMOL_SET_TARGET inline float softmax_weights(float* s, int n, float max) {
    using F = Floats;
    const F::V m = F::set1(max);
    F::V sum = F::zero();
    int j = 0;
    for (; j + F::kLanes <= n; j += F::kLanes) {
        const F::V p = exp_nonpositive(F::sub(F::load(s + j), m));
        F::store(s + j, p);
        sum = F::add(sum, p);
    }
    if (j < n) {
        const F::V p = exp_nonpositive(F::sub(F::load_first(s + j, n - j, -INFINITY), m));
        F::store_first(s + j, n - j, p);
        sum = F::add(sum, p);
    }
    return F::sum_folded(sum);
}

// Where a tile's key or value rows come from: a buffer of floats (a step of rows load_row
// converted, which a prompt's many query rows share) or the cache rows themselves, converted a
// step at a time in registers by CacheRows<T> (decoding). The tiles are templates over both, so
// both give the same bits by construction.
struct FloatRows {
    const float* first;
    int head_dim;
    const float* row(int j) const { return first + std::size_t(j) * head_dim; }
    SMOL_SET_TARGET static void load2(const float* row, int step, Floats::V& v0, Floats::V& v1) {
        v0 = Floats::load(row + kStep * step);
        v1 = Floats::load(row + kStep * step + Floats::kLanes);
    }
};

template <KvType T>
struct CacheRowsAt {
    const std::byte* first;
    std::size_t row_bytes;
    const std::byte* row(int j) const { return first + std::size_t(j) * row_bytes; }
    SMOL_SET_TARGET static void load2(const std::byte* row, int step, Floats::V& v0, Floats::V& v1) {
        CacheRows<T>::load2(row, step, v0, v1);
    }
};

// 4 query rows x kScoreKeys keys: 4 * kScoreKeys dot products over head_dim (a multiple of
// kStep), each accumulated in one register in order of i and summed by Floats::sum_each8, the
// same order in every slot, so no score depends on its slot. out[kScoreKeys * r + j]: row r, key j.
// Inlined into its caller's loop, where a call per tile cost a deep prompt measurably more.
template <class Rows, class Row>
SMOL_SET_TARGET __attribute__((always_inline)) inline void score_tile(const float* const q[4], const Row (&k)[kScoreKeys],
                                                                      int head_dim, float scale, float* out) {
    using F = Floats;
    static_assert(kScoreKeys % 2 == 0, "scores are summed 8 (2 keys x 4 rows) at a time");
    F::V a[4 * kScoreKeys];
    SMOL_KV_UNROLL
    for (F::V& x : a) x = F::zero();
    for (int s = 0; s < head_dim / kStep; ++s) {
        F::V x[2][kScoreKeys];  // [vector of the step][key]
        SMOL_KV_UNROLL
        for (int j = 0; j < kScoreKeys; ++j) Rows::load2(k[j], s, x[0][j], x[1][j]);
        SMOL_KV_UNROLL
        for (int part = 0; part < 2; ++part)
            SMOL_KV_UNROLL
            for (int r = 0; r < 4; ++r) {
                const F::V qr = F::load(q[r] + kStep * s + F::kLanes * part);
                SMOL_KV_UNROLL
                for (int j = 0; j < kScoreKeys; ++j) a[kScoreKeys * r + j] = F::fma(qr, x[part][j], a[kScoreKeys * r + j]);
            }
    }
    SMOL_KV_UNROLL
    for (int g = 0; g < kScoreKeys / 2; ++g) F::sum_each8(a + 8 * g, scale, out + 8 * g);  // rows 2g, 2g + 1
}

// scores[r * score_stride + j] = scale * (q_r . key j); a last partial tile repeats the last key
// and query row, whose results are dropped.
template <class Rows>
SMOL_SET_TARGET inline void scores_tiles(const float* q, int n_rows, Rows keys, int n_keys, int head_dim, float scale,
                                         float* scores, int score_stride) {
    float out[4 * kScoreKeys];
    for (int j = 0; j < n_keys; j += kScoreKeys) {
        decltype(keys.row(0)) k[kScoreKeys];
        for (int i = 0; i < kScoreKeys; ++i) k[i] = keys.row(std::min(j + i, n_keys - 1));
        const int keys_here = std::min(kScoreKeys, n_keys - j);
        for (int r = 0; r < n_rows; r += 4) {
            const float* rows[4];
            for (int i = 0; i < 4; ++i) rows[i] = q + std::size_t(std::min(r + i, n_rows - 1)) * head_dim;
            score_tile<Rows>(rows, k, head_dim, scale, out);
            for (int i = 0; i < 4 && r + i < n_rows; ++i) {
                const float* from = out + kScoreKeys * i;
                float* to = scores + std::size_t(r + i) * score_stride + j;
                if (keys_here == kScoreKeys) std::memcpy(to, from, sizeof(float) * kScoreKeys);  // constant size: one move
                else std::copy_n(from, keys_here, to);
            }
        }
    }
}

// acc rows += p . values for 4 rows (a dummy row repeats the last) over S steps of columns at a
// time, the 8 * S accumulators held in registers over every value row. Each element's products
// are added in order of the value rows whatever S is, so S changes no bit; AVX-512 takes two
// steps a pass (kAccumulateSteps), whose 16 chains kept its FMAs busier at depth.
template <int S, class Rows>
SMOL_SET_TARGET inline void accumulate_steps(const float* const (&pr)[4], float* const (&ar)[4], Rows values,
                                             int n_values, int c) {
    using F = Floats;
    const float dummy[S * kStep] = {};  // a dummy row's accumulators: computed, never stored
    F::V a[4][2 * S];
    SMOL_KV_UNROLL
    for (int i = 0; i < 4; ++i) {
        const float* src = ar[i] ? ar[i] + c : dummy;
        SMOL_KV_UNROLL
        for (int k = 0; k < 2 * S; ++k) a[i][k] = F::load(src + F::kLanes * k);
    }
    for (int j = 0; j < n_values; ++j) {
        F::V v[2 * S];
        SMOL_KV_UNROLL
        for (int k = 0; k < S; ++k) Rows::load2(values.row(j), c / kStep + k, v[2 * k], v[2 * k + 1]);
        SMOL_KV_UNROLL
        for (int i = 0; i < 4; ++i) {
            const F::V w = F::broadcast(pr[i] + j);
            SMOL_KV_UNROLL
            for (int k = 0; k < 2 * S; ++k) a[i][k] = F::fma(w, v[k], a[i][k]);
        }
    }
    SMOL_KV_UNROLL
    for (int i = 0; i < 4; ++i)
        if (ar[i]) {
            SMOL_KV_UNROLL
            for (int k = 0; k < 2 * S; ++k) F::store(ar[i] + c + F::kLanes * k, a[i][k]);
        }
}

template <class Rows>
SMOL_SET_TARGET inline void accumulate_tiles(const float* p, int p_stride, int n_rows, Rows values, int n_values,
                                             int head_dim, float* acc) {
    for (int r = 0; r < n_rows; r += 4) {
        const float* pr[4];
        float* ar[4];
        SMOL_KV_UNROLL
        for (int i = 0; i < 4; ++i) {
            pr[i] = p + std::size_t(std::min(r + i, n_rows - 1)) * p_stride;
            ar[i] = r + i < n_rows ? acc + std::size_t(r + i) * head_dim : nullptr;
        }
        int c = 0;
        for (; c + kAccumulateSteps * kStep <= head_dim; c += kAccumulateSteps * kStep)
            accumulate_steps<kAccumulateSteps>(pr, ar, values, n_values, c);
        for (; c < head_dim; c += kStep) accumulate_steps<1>(pr, ar, values, n_values, c);
    }
}

SMOL_SET_TARGET inline void scores(const float* q, int n_rows, const float* keys, int n_keys, int head_dim, float scale,
                                   float* scores, int score_stride) {
    scores_tiles(q, n_rows, FloatRows{keys, head_dim}, n_keys, head_dim, scale, scores, score_stride);
}

SMOL_SET_TARGET inline void accumulate(const float* p, int p_stride, int n_rows, const float* values, int n_values,
                                       int head_dim, float* acc) {
    accumulate_tiles(p, p_stride, n_rows, FloatRows{values, head_dim}, n_values, head_dim, acc);
}

// The lambdas carry no target attribute, so on AVX-512 they call the tiles rather than inline
// them: one call per chunk of rows.
SMOL_SET_TARGET inline void scores_cache(KvType type, const float* q, int n_rows, const std::byte* keys, int n_keys,
                                         int head_dim, float scale, float* scores, int score_stride) {
    with_float_key_type(type, [&](auto t) {
        scores_tiles(q, n_rows, CacheRowsAt<t>{keys, kv_row_bytes(type, head_dim)}, n_keys, head_dim, scale, scores,
                     score_stride);
    });
}

SMOL_SET_TARGET inline void accumulate_cache(KvType type, const float* p, int p_stride, int n_rows,
                                             const std::byte* values, int n_values, int head_dim, float* acc) {
    with_kv_type(type, [&](auto t) {
        accumulate_tiles(p, p_stride, n_rows, CacheRowsAt<t>{values, kv_row_bytes(type, head_dim)}, n_values, head_dim,
                         acc);
    });
}
