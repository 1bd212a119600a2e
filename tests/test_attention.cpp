// Attention over the KV cache in every cache type: each SIMD kernel set (AVX2, AVX-512, NEON) against
// the scalar references on random data, and attention() against a double-precision softmax over the values
// the cache holds, batched, one token at a time and on 1-3 threads, which must agree bit for bit
// (a token's output cannot depend on its batch or on the thread count).

#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "float_bits.hpp"
#include "smol/core/half.hpp"
#include "smol/ops/attention.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_attention {

using namespace smol;

namespace {

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

constexpr KvType kAllTypes[] = {KvType::f16, KvType::q8_0, KvType::q4_0};

// A cache layer owned by the test, [n_kv, capacity, row] keys and values, filled with 0xff bytes
// (a NaN scale or value) so that reading an unwritten position poisons the output.
struct TestLayer {
    int n_kv, capacity, head_dim;
    KvCacheTypes types;
    std::vector<std::byte> keys, values;
    TestLayer(int n_kv_, int capacity_, int head_dim_, KvCacheTypes types_)
        : n_kv(n_kv_), capacity(capacity_), head_dim(head_dim_), types(types_),
          keys(std::size_t(n_kv_) * capacity_ * kv_row_bytes(types_.keys, head_dim_), std::byte{0xff}),
          values(std::size_t(n_kv_) * capacity_ * kv_row_bytes(types_.values, head_dim_), std::byte{0xff}) {}
    KvLayer view() {
        return KvLayer{keys.data(), values.data(), std::size_t(capacity) * kv_row_bytes(types.keys, head_dim),
                       std::size_t(capacity) * kv_row_bytes(types.values, head_dim), types.keys, types.values, n_kv,
                       head_dim};
    }
};

using smol_test::same_bits;

}  // namespace

TEST_CASE("cache rows: every type stores and loads back within its rounding, SIMD equal to scalar") {
    const int head_dim = 128;
    for (KvType type : kAllTypes) {
        const std::string type_name = kv_type_name(type);
        CAPTURE(type_name);
        std::vector<float> x = random_floats(head_dim, 3, 2.0f);
        x[5] = 0.0f;
        x[40] = -7.5f;  // the block's largest magnitude, negative: Q4_0 maps it to -8 exactly
        std::vector<std::byte> fast(kv_row_bytes(type, head_dim)), ref(fast.size());
        kv_kernels::store_row(type, x.data(), fast.data(), head_dim);
        kv_kernels::store_row_scalar(type, x.data(), ref.data(), head_dim);
        CHECK(fast == ref);
        std::vector<float> back(head_dim);
        kv_kernels::load_row_scalar(type, fast.data(), back.data(), head_dim);
        for (int b = 0; b < head_dim / 32; ++b) {
            float amax = 0.0f;
            for (int i = 32 * b; i < 32 * b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
            // fp16: half an ulp; Q8_0: half a step of amax/127; Q4_0: one step of amax/8 (the
            // positive end is clamped to 7 steps)
            for (int i = 32 * b; i < 32 * b + 32; ++i) {
                const double bound = type == KvType::f16 ? std::fabs(x[i]) * 4.9e-4 + 6e-8
                                     : type == KvType::q8_0 ? amax / 127.0 * 0.5 * 1.002 + 1e-6
                                                            : amax / 8.0 * 1.002 + 1e-6;
                CHECK_MESSAGE(std::fabs(double(back[i]) - x[i]) <= bound, "value ", i, ": ", x[i], " came back as ", back[i]);
            }
        }
    }
    // fp16 rounds to nearest even in both, also at the edges of the format.
    std::vector<float> edges = {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, 6.1e-5f, 5.96e-8f, 2.9e-8f,
                                1e-10f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
    edges.resize(16, 1.0f);
    std::vector<std::byte> fast(32), ref(32);
    kv_kernels::store_row(KvType::f16, edges.data(), fast.data(), 16);
    kv_kernels::store_row_scalar(KvType::f16, edges.data(), ref.data(), 16);
    CHECK(fast == ref);
}

// The SIMD kernel sets of this build that this CPU runs; the others are named as skipped.
std::vector<const kv_kernels::AttentionKernels*> runnable_simd_sets() {
    std::vector<const kv_kernels::AttentionKernels*> sets;
    for (Isa isa : {Isa::avx2, Isa::avx512, Isa::neon}) {
        const kv_kernels::AttentionKernels* k = kv_kernels::attention_kernels_for(isa);
        if (!k) MESSAGE("skipped: this build has no ", std::string(isa_name(isa)), " attention kernels");
        else if (!cpu_features().supports(isa)) MESSAGE("skipped: this CPU cannot run ", std::string(isa_name(isa)));
        else sets.push_back(k);
    }
    return sets;
}

TEST_CASE("SIMD score, softmax, row and accumulate kernels match their scalar references") {
    for (const kv_kernels::AttentionKernels* set : runnable_simd_sets()) {
        const std::string isa(isa_name(set->isa));
        CAPTURE(isa);
        const int head_dim = 64, n_keys = 37;
        for (KvType type : kAllTypes) {  // rows back to floats: exactly the scalar values
            const std::vector<float> x = random_floats(head_dim, 5, 3.0f);
            std::vector<std::byte> row(kv_row_bytes(type, head_dim));
            kv_kernels::store_row_scalar(type, x.data(), row.data(), head_dim);
            std::vector<float> fast(head_dim), ref(head_dim);
            set->load_row(type, row.data(), fast.data(), head_dim);
            kv_kernels::load_row_scalar(type, row.data(), ref.data(), head_dim);
            CHECK(same_bits(fast, ref));
        }
        for (int n_rows : {1, 3, 4, 6, 9}) {
            CAPTURE(n_rows);
            const std::vector<float> q = random_floats(std::size_t(n_rows) * head_dim, 10u + n_rows);
            const std::vector<float> k = random_floats(std::size_t(n_keys) * head_dim, 20u + n_rows);
            const int stride = 40;
            std::vector<float> fast(std::size_t(n_rows) * stride, -1.0f), ref(fast.size(), -1.0f);
            set->scores(q.data(), n_rows, k.data(), n_keys, head_dim, 0.125f, fast.data(), stride);
            kv_kernels::scores_scalar(q.data(), n_rows, k.data(), n_keys, head_dim, 0.125f, ref.data(), stride);
            for (int r = 0; r < n_rows; ++r)
                for (int j = 0; j < stride; ++j) {
                    const std::size_t i = std::size_t(r) * stride + j;
                    if (j >= n_keys) {
                        CHECK(fast[i] == -1.0f);  // nothing past n_keys is written
                        continue;
                    }
                    double magnitude = 0.0;
                    for (int d = 0; d < head_dim; ++d) magnitude += std::fabs(double(q[r * head_dim + d]) * k[j * head_dim + d]);
                    CHECK(std::fabs(double(fast[i]) - ref[i]) <= 1e-6 * 0.125 * magnitude);
                }
            // A row's scores do not depend on the rows or keys computed beside it.
            std::vector<float> alone(stride, -1.0f);
            set->scores(q.data() + std::size_t(n_rows - 1) * head_dim, 1, k.data() + 5 * head_dim, n_keys - 5, head_dim,
                        0.125f, alone.data(), stride);
            CHECK(std::memcmp(alone.data(), fast.data() + std::size_t(n_rows - 1) * stride + 5,
                              (n_keys - 5) * sizeof(float)) == 0);

            // Accumulate: acc += p . V per row, the same FMA chain per element as the reference.
            const std::vector<float> p = random_floats(std::size_t(n_rows) * stride, 40u + n_rows);
            const std::vector<float> v = random_floats(std::size_t(n_keys) * head_dim, 50u + n_rows);
            std::vector<float> acc = random_floats(std::size_t(n_rows) * head_dim, 60u + n_rows), acc_ref = acc;
            set->accumulate(p.data(), stride, n_rows, v.data(), n_keys, head_dim, acc.data());
            kv_kernels::accumulate_scalar(p.data(), stride, n_rows, v.data(), n_keys, head_dim, acc_ref.data());
            for (std::size_t i = 0; i < acc.size(); ++i) CHECK(acc[i] == doctest::Approx(acc_ref[i]).epsilon(1e-5));
        }
        // Softmax weights: the vector exp against std::exp, -inf giving exactly 0.
        for (int n : {1, 7, 8, 16, 37}) {
            std::vector<float> s = random_floats(std::size_t(n), 30u + n, 20.0f), s_ref;
            if (n > 3) s[2] = -INFINITY;
            s.push_back(-200.0f);
            s_ref = s;
            const float max = 25.0f;
            const float sum = set->softmax_weights(s.data(), n + 1, max);
            const float sum_ref = kv_kernels::softmax_weights_scalar(s_ref.data(), n + 1, max);
            // (std::exp goes on into subnormals below -87.3, where the kernels give 0)
            for (int j = 0; j <= n; ++j) CHECK(std::fabs(s[j] - s_ref[j]) <= 3e-7f * s_ref[j] + 1e-37f);
            if (n > 3) CHECK(s[2] == 0.0f);
            CHECK(s[n] == 0.0f);
            CHECK(sum == doctest::Approx(sum_ref).epsilon(1e-6));
        }
        // exp over its whole range (weights exp(x - 0)), and exactly 0 below it.
        std::vector<float> x;
        for (float v = -87.3f; v <= 0.0f; v += 0.0137f) x.push_back(v);
        std::vector<float> e = x;
        set->softmax_weights(e.data(), int(e.size()), 0.0f);
        for (std::size_t i = 0; i < x.size(); ++i)
            CHECK_MESSAGE(std::fabs(e[i] - std::exp(double(x[i]))) <= 3e-7 * std::exp(double(x[i])), "exp(", x[i], ") = ", e[i]);
        std::vector<float> below = {-87.34f, -88.0f, -100.0f, -1e30f, -INFINITY, -200.0f, -90.0f};
        set->softmax_weights(below.data(), int(below.size()), 0.0f);
        for (float b : below) CHECK(b == 0.0f);
    }
}

TEST_CASE("SIMD accumulate is, for every element, one FMA chain over the value rows in order") {
    // The definition the sets' bits rest on, whatever the column passes they take: 96 is a wide
    // pass and a narrow one on AVX-512 (kAccumulateSteps), 32 a narrow one only.
    for (const kv_kernels::AttentionKernels* set : runnable_simd_sets()) {
        const std::string isa(isa_name(set->isa));
        CAPTURE(isa);
        for (int head_dim : {32, 64, 96, 128})
            for (int n_rows : {1, 3, 4, 6, 9}) {
                CAPTURE(head_dim);
                CAPTURE(n_rows);
                const int n_values = 37, stride = 40;
                const std::vector<float> p = random_floats(std::size_t(n_rows) * stride, 70u + n_rows);
                const std::vector<float> v = random_floats(std::size_t(n_values) * head_dim, 80u + head_dim);
                std::vector<float> acc = random_floats(std::size_t(n_rows) * head_dim, 90u + n_rows), chain = acc;
                set->accumulate(p.data(), stride, n_rows, v.data(), n_values, head_dim, acc.data());
                for (int r = 0; r < n_rows; ++r)
                    for (int i = 0; i < head_dim; ++i) {
                        float& a = chain[std::size_t(r) * head_dim + i];
                        for (int j = 0; j < n_values; ++j)
                            a = std::fma(p[std::size_t(r) * stride + j], v[std::size_t(j) * head_dim + i], a);
                    }
                CHECK(same_bits(acc, chain));
            }
    }
}

namespace {

// A score's lane sums added in the set's fixed order (float_vectors.hpp's sum_each8): NEON's
// pairs (0+1)+(2+3); AVX2's ((0+1)+(2+3))+((4+5)+(6+7)); AVX-512 first adds lane l + 8 to lane
// l, then sums the 8 as AVX2 does.
float lanes_summed(Isa isa, std::vector<float> lanes) {
    if (isa == Isa::neon) return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    if (isa == Isa::avx512)
        for (int l = 0; l < 8; ++l) lanes[l] = lanes[l] + lanes[l + 8];
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

int float_lanes(Isa isa) { return isa == Isa::avx512 ? 16 : isa == Isa::avx2 ? 8 : 4; }

}  // namespace

TEST_CASE("SIMD scores are, for every score, one FMA chain per lane summed in the set's fixed order") {
    // The definition a score's bits rest on, whatever the tile's slot: lane l chains the
    // products of elements l, l + lanes, ... in order, then the lanes are summed (lanes_summed)
    // and scaled. Rows and keys not multiples of the tile's leave partial tiles.
    for (const kv_kernels::AttentionKernels* set : runnable_simd_sets()) {
        const std::string isa(isa_name(set->isa));
        CAPTURE(isa);
        const int lanes = float_lanes(set->isa);
        const float scale = 0.0883883f;
        for (int head_dim : {32, 64, 128})
            for (int n_rows : {1, 4, 6, 9}) {
                CAPTURE(head_dim);
                CAPTURE(n_rows);
                const int n_keys = 37, stride = 40;
                const std::vector<float> q = random_floats(std::size_t(n_rows) * head_dim, 100u + n_rows);
                const std::vector<float> k = random_floats(std::size_t(n_keys) * head_dim, 110u + head_dim);
                std::vector<float> scores(std::size_t(n_rows) * stride, -1.0f), expected = scores;
                set->scores(q.data(), n_rows, k.data(), n_keys, head_dim, scale, scores.data(), stride);
                for (int r = 0; r < n_rows; ++r)
                    for (int j = 0; j < n_keys; ++j) {
                        std::vector<float> chains(std::size_t(lanes), 0.0f);
                        for (int i = 0; i < head_dim; ++i) {
                            float& chain = chains[std::size_t(i % lanes)];
                            chain = std::fma(q[std::size_t(r) * head_dim + i], k[std::size_t(j) * head_dim + i], chain);
                        }
                        expected[std::size_t(r) * stride + j] = lanes_summed(set->isa, chains) * scale;
                    }
                CHECK(same_bits(scores, expected));
            }
    }
}

TEST_CASE("integer Q4_0 key scores: the scalar reference is the exact block dots, every set gives its numbers") {
    const KvType type = KvType::q4_0;
    std::vector<const kv_kernels::AttentionKernels*> sets = runnable_simd_sets();
    for (int head_dim : {32, 64, 96, 128, 256}) {  // 96 and 256: a partial group and two groups of four blocks
        CAPTURE(head_dim);
        const int n_blocks = head_dim / 32;
        // Queries: each value within half a step of its block's scale, the largest at +-127.
        const int max_rows = 9;
        std::vector<float> q = random_floats(std::size_t(max_rows) * head_dim, 110u + head_dim);
        q[3] = 0.0f;
        std::fill(q.begin() + 32, q.begin() + 64, 0.0f);  // a block of zeros has scale 0
        kv_kernels::QueryBuffer quantized;
        quantized.quantize(q.data(), max_rows, head_dim);
        for (int r = 0; r < max_rows; ++r)
            for (int b = 0; b < n_blocks; ++b) {
                const float d = quantized.d[std::size_t(r) * n_blocks + b];
                int sum = 0, largest = 0;
                for (int i = 32 * b; i < 32 * b + 32; ++i) {
                    const int v = quantized.qs[std::size_t(r) * head_dim + i];
                    sum += v;
                    largest = std::max(largest, std::abs(v));
                    CHECK(std::fabs(double(d) * v - q[std::size_t(r) * head_dim + i]) <= 0.5001 * d);
                }
                CHECK(sum == quantized.sums[std::size_t(r) * n_blocks + b]);
                CHECK(largest == (d == 0.0f ? 0 : 127));
            }
        const int n_keys = 37, stride = 40;
        const std::size_t row_bytes = kv_row_bytes(type, head_dim);
        const std::vector<float> x = random_floats(std::size_t(n_keys) * head_dim, 120u + head_dim, 2.0f);
        std::vector<std::byte> keys(row_bytes * n_keys);
        std::vector<float> held(x.size());  // the key values the cache holds
        for (int j = 0; j < n_keys; ++j) {
            kv_kernels::store_row_scalar(type, x.data() + std::size_t(j) * head_dim, keys.data() + j * row_bytes, head_dim);
            kv_kernels::load_row_scalar(type, keys.data() + j * row_bytes, held.data() + std::size_t(j) * head_dim, head_dim);
        }
        for (int n_rows : {1, 3, 4, 6, 9}) {
            CAPTURE(n_rows);
            const float scale = 0.09f;
            std::vector<float> ref(std::size_t(n_rows) * stride, -1.0f);
            std::vector<double> bound(ref.size());  // how far rounding may move a score
            kv_kernels::scores_q4_0_scalar(quantized.view(), n_rows, keys.data(), n_keys, head_dim, scale, ref.data(), stride);
            for (int r = 0; r < n_rows; ++r)
                for (int j = 0; j < n_keys; ++j) {  // the dequantized query and key, in double
                    double exact = 0.0, magnitude = 0.0;
                    for (int i = 0; i < head_dim; ++i) {
                        const double term = double(quantized.d[std::size_t(r) * n_blocks + i / 32]) *
                                            quantized.qs[std::size_t(r) * head_dim + i] * held[std::size_t(j) * head_dim + i];
                        exact += term;
                        magnitude += std::fabs(term);
                    }
                    bound[std::size_t(r) * stride + j] = 1e-6 * scale * magnitude;
                    CHECK(std::fabs(ref[std::size_t(r) * stride + j] - scale * exact) <= bound[std::size_t(r) * stride + j]);
                }
            for (const kv_kernels::AttentionKernels* set : sets) {
                const std::string isa(isa_name(set->isa));
                CAPTURE(isa);
                std::vector<float> fast(ref.size(), -1.0f);
                set->scores_q4_0(quantized.view(), n_rows, keys.data(), n_keys, head_dim, scale, fast.data(), stride);
                for (int r = 0; r < n_rows; ++r)
                    for (int j = 0; j < stride; ++j) {
                        const std::size_t i = std::size_t(r) * stride + j;
                        if (j >= n_keys) CHECK(fast[i] == -1.0f);  // nothing past n_keys is written
                        else CHECK(std::fabs(double(fast[i]) - ref[i]) <= bound[i]);
                    }
                // A row's scores do not depend on the rows or keys computed beside it.
                std::vector<float> alone(stride, -1.0f);
                set->scores_q4_0(quantized.view().from_row(std::size_t(n_rows - 1), head_dim), 1,
                                 keys.data() + 5 * row_bytes, n_keys - 5, head_dim, scale, alone.data(), stride);
                CHECK(std::memcmp(alone.data(), fast.data() + std::size_t(n_rows - 1) * stride + 5,
                                  (n_keys - 5) * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("a chunk's largest score is std::max_element's at every length") {
    for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 200, 256}) {
        CAPTURE(n);
        for (unsigned seed = 0; seed < 8; ++seed) {
            std::vector<float> s = random_floats(std::size_t(n), 300u + seed, 4.0f);
            s[seed % std::size_t(n)] = -INFINITY;  // masked scores may be -inf
            CHECK(attention_detail::largest(s.data(), n) == *std::max_element(s.begin(), s.end()));
            s[std::size_t(n) - 1] = 1e9f;  // the largest last, in the tail past the eight running maxima
            CHECK(attention_detail::largest(s.data(), n) == 1e9f);
        }
    }
}

TEST_CASE("in-place score and accumulate kernels give the bits of rows loaded first") {
    // Decode reads cache rows in place and prompts copy them to floats first; a token's output
    // is the same either way only if these agree to the bit.
    for (const kv_kernels::AttentionKernels* set : runnable_simd_sets()) {
        if (!set->scores_cache) continue;
        const std::string isa(isa_name(set->isa));
        CAPTURE(isa);
        for (int head_dim : {64, 128}) {
            CAPTURE(head_dim);
            for (KvType type : kAllTypes) {
                CAPTURE(kv_type_name(type));
                const int n_keys = 37, stride = 40;
                const std::size_t row_bytes = kv_row_bytes(type, head_dim);
                const std::vector<float> x = random_floats(std::size_t(n_keys) * head_dim, 70u + head_dim, 2.0f);
                std::vector<std::byte> rows(row_bytes * n_keys);
                std::vector<float> loaded(x.size());
                for (int j = 0; j < n_keys; ++j) {
                    kv_kernels::store_row_scalar(type, x.data() + std::size_t(j) * head_dim, rows.data() + j * row_bytes, head_dim);
                    set->load_row(type, rows.data() + j * row_bytes, loaded.data() + std::size_t(j) * head_dim, head_dim);
                }
                std::vector<float> run(x.size());  // prompts convert a run of a head's rows in one call
                set->load_row(type, rows.data(), run.data(), n_keys * head_dim);
                CHECK(same_bits(run, loaded));
                for (int n_rows : {1, 3, 4, 6, 9}) {
                    CAPTURE(n_rows);
                    const std::vector<float> q = random_floats(std::size_t(n_rows) * head_dim, 80u + n_rows);
                    std::vector<float> in_place(std::size_t(n_rows) * stride, -1.0f), copied = in_place;
                    if (type != KvType::q4_0) {  // Q4_0 keys are scored in integers, by prompts too
                        set->scores_cache(type, q.data(), n_rows, rows.data(), n_keys, head_dim, 0.09f, in_place.data(), stride);
                        set->scores(q.data(), n_rows, loaded.data(), n_keys, head_dim, 0.09f, copied.data(), stride);
                        CHECK(same_bits(in_place, copied));  // also: nothing past n_keys written by either
                    } else CHECK_THROWS_WITH(set->scores_cache(type, q.data(), n_rows, rows.data(), n_keys, head_dim, 0.09f,
                                                               in_place.data(), stride),
                                             doctest::Contains("scored in integers"));

                    const std::vector<float> p = random_floats(std::size_t(n_rows) * stride, 90u + n_rows);
                    std::vector<float> acc = random_floats(std::size_t(n_rows) * head_dim, 100u + n_rows), acc_copied = acc;
                    set->accumulate_cache(type, p.data(), stride, n_rows, rows.data(), n_keys, head_dim, acc.data());
                    set->accumulate(p.data(), stride, n_rows, loaded.data(), n_keys, head_dim, acc_copied.data());
                    CHECK(same_bits(acc, acc_copied));
                }
            }
        }
    }
}

TEST_CASE("attention matches a double-precision softmax in every cache type and does not depend on batch or threads") {
    struct Shape {
        int head_dim, n_kv, n_heads, prefix, batch;
    };
    // 530 positions span three chunks of 256, and 3 query heads per KV head leave a dummy row in
    // every 4-row kernel call; head_dim 12 runs the scalar kernels whatever the set (f16 only: the
    // block types need whole blocks of 32).
    const Shape shapes[] = {{64, 1, 3, 270, 260}, {128, 1, 4, 5, 19}, {12, 2, 6, 5, 9}};
    std::vector<const kv_kernels::AttentionKernels*> sets = runnable_simd_sets();
    sets.push_back(kv_kernels::attention_kernels_for(Isa::scalar));
    for (const Shape& sh : shapes)
        for (KvType key_type : kAllTypes)
            for (KvType value_type : kAllTypes) {
                if (sh.head_dim % 32 != 0 && (key_type != KvType::f16 || value_type != KvType::f16)) continue;
                CAPTURE(sh.head_dim);
                const std::string key_name = kv_type_name(key_type), value_name = kv_type_name(value_type);
                CAPTURE(key_name);
                CAPTURE(value_name);
                const KvCacheTypes types{key_type, value_type};
                const int hd = sh.head_dim, n_kv = sh.n_kv, n_heads = sh.n_heads;
                const int n_tokens = sh.prefix + sh.batch, capacity = n_tokens + 3;
                const std::vector<float> k = random_floats(std::size_t(n_tokens) * n_kv * hd, 11);
                const std::vector<float> v = random_floats(std::size_t(n_tokens) * n_kv * hd, 12);
                const std::vector<float> q = random_floats(std::size_t(n_tokens) * n_heads * hd, 13, 0.5f);
                const std::size_t q_row = std::size_t(n_heads) * hd, kv_row = std::size_t(n_kv) * hd;

                // The reference: causal softmax in double over the values the cache holds.
                std::vector<float> k_held(k.size()), v_held(v.size());
                std::vector<std::byte> row(kv_row_bytes(KvType::f16, hd));
                for (std::size_t r = 0; r < k.size() / hd; ++r) {
                    kv_kernels::store_row_scalar(key_type, k.data() + r * hd, row.data(), hd);
                    kv_kernels::load_row_scalar(key_type, row.data(), k_held.data() + r * hd, hd);
                    kv_kernels::store_row_scalar(value_type, v.data() + r * hd, row.data(), hd);
                    kv_kernels::load_row_scalar(value_type, row.data(), v_held.data() + r * hd, hd);
                }
                // Q4_0 keys meet the queries quantized (kv_int8_scores.hpp): the reference takes
                // the values those hold too.
                std::vector<float> q_held = q;
                if (key_type == KvType::q4_0) {
                    kv_kernels::QueryBuffer quantized;
                    quantized.quantize(q.data(), n_tokens * n_heads, hd);
                    for (std::size_t i = 0; i < q_held.size(); ++i) q_held[i] = quantized.d[i / 32] * float(quantized.qs[i]);
                }
                std::vector<double> expected(std::size_t(n_tokens) * q_row);
                for (int t = 0; t < n_tokens; ++t)
                    for (int h = 0; h < n_heads; ++h) {
                        const int g = h / (n_heads / n_kv);
                        std::vector<double> scores(std::size_t(t) + 1);
                        double max_score = -INFINITY;
                        for (int j = 0; j <= t; ++j) {
                            double dot = 0.0;
                            for (int i = 0; i < hd; ++i) dot += double(q_held[t * q_row + h * hd + i]) * k_held[j * kv_row + g * hd + i];
                            scores[j] = dot / std::sqrt(double(hd));
                            max_score = std::max(max_score, scores[j]);
                        }
                        double sum = 0.0;
                        for (double& x : scores) sum += (x = std::exp(x - max_score));
                        for (int j = 0; j <= t; ++j)
                            for (int i = 0; i < hd; ++i)
                                expected[t * q_row + h * hd + i] += scores[j] / sum * v_held[j * kv_row + g * hd + i];
                    }

                for (const kv_kernels::AttentionKernels* set : sets) {
                    const std::string isa(isa_name(set->isa));
                    CAPTURE(isa);
                    // The prefix, then the rest in one batch, on 2 threads.
                    omp_set_num_threads(2);
                    TestLayer batched(n_kv, capacity, hd, types);
                    std::vector<float> out_batched(std::size_t(n_tokens) * q_row);
                    kv_store(batched.view(), 0, k.data(), v.data(), sh.prefix);
                    attention(batched.view(), 0, q.data(), out_batched.data(), sh.prefix, n_heads, *set);
                    kv_store(batched.view(), sh.prefix, k.data() + sh.prefix * kv_row, v.data() + sh.prefix * kv_row, sh.batch);
                    attention(batched.view(), sh.prefix, q.data() + sh.prefix * q_row, out_batched.data() + sh.prefix * q_row,
                              sh.batch, n_heads, *set);
                    double worst = 0.0;
                    for (std::size_t i = 0; i < expected.size(); ++i)
                        worst = std::max(worst, std::fabs(expected[i] - out_batched[i]));
                    CHECK(worst < 2e-5);
                    // Positions beyond the filled ones were never written.
                    CHECK(batched.keys[std::size_t(n_tokens) * kv_row_bytes(key_type, hd)] == std::byte{0xff});

                    // Every token alone, as decoding runs it, on 1 and on 3 threads: the same bits.
                    for (int threads : {1, 3}) {
                        CAPTURE(threads);
                        omp_set_num_threads(threads);
                        TestLayer single(n_kv, capacity, hd, types);
                        std::vector<float> out_single(out_batched.size());
                        for (int t = 0; t < n_tokens; ++t) {
                            kv_store(single.view(), t, k.data() + t * kv_row, v.data() + t * kv_row, 1);
                            attention(single.view(), t, q.data() + t * q_row, out_single.data() + t * q_row, 1, n_heads, *set);
                        }
                        CHECK(single.keys == batched.keys);
                        CHECK(single.values == batched.values);
                        CHECK(same_bits(out_single, out_batched));
                    }
                    // Steps of 2, 3 and 7 tokens, as speculative verify steps run (under
                    // kAttentionTokenBlock: decoding's path, the step's tokens in one item): the same bits.
                    for (int step : {2, 3, 7}) {
                        CAPTURE(step);
                        TestLayer stepped(n_kv, capacity, hd, types);
                        std::vector<float> out_stepped(out_batched.size());
                        for (int t = 0; t < n_tokens; t += step) {
                            const int n = std::min(step, n_tokens - t);
                            kv_store(stepped.view(), t, k.data() + t * kv_row, v.data() + t * kv_row, n);
                            attention(stepped.view(), t, q.data() + t * q_row, out_stepped.data() + t * q_row, n, n_heads, *set);
                        }
                        CHECK(same_bits(out_stepped, out_batched));
                    }
                    omp_set_num_threads(2);
                }
            }
}

}  // namespace test_attention
