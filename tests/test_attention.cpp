// Attention over the fp16 KV cache: the F16C helpers against their scalar references, and
// attention() against a double-precision softmax over the same fp16 keys and values, batched and
// one token at a time (which must agree bit for bit: a token's output cannot depend on its batch).

#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "smol/core/half.hpp"
#include "smol/ops/attention.hpp"

using namespace smol;

namespace {

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

std::vector<std::uint16_t> to_fp16(const std::vector<float>& x) {
    std::vector<std::uint16_t> h(x.size());
    kv_kernels::store_f16_scalar(x.data(), h.data(), int(x.size()));
    return h;
}

// A cache layer owned by the test: [n_kv, capacity, head_dim] keys and values.
struct TestLayer {
    int n_kv, capacity, head_dim;
    std::vector<std::uint16_t> keys, values;
    TestLayer(int n_kv_, int capacity_, int head_dim_)
        : n_kv(n_kv_), capacity(capacity_), head_dim(head_dim_),
          keys(std::size_t(n_kv_) * capacity_ * head_dim_, 0x7e00), values(keys.size(), 0x7e00) {}  // NaN: unwritten
    KvLayer view() {
        return KvLayer{keys.data(), values.data(), std::size_t(capacity) * head_dim, n_kv, head_dim};
    }
};

}  // namespace

TEST_CASE("F16C attention helpers match their scalar references") {
#ifndef SMOL_HAVE_F16C_KERNELS
    MESSAGE("skipped: this build has no F16C kernels (compiled without -mf16c -mavx2 -mfma)");
#else
    for (int n : {8, 16, 24, 64, 128, 136}) {
        CAPTURE(n);
        const std::vector<float> q = random_floats(std::size_t(n), 1u + n);
        const std::vector<std::uint16_t> k = to_fp16(random_floats(std::size_t(n), 100u + n));
        double magnitude = 0.0;
        for (int i = 0; i < n; ++i) magnitude += std::fabs(double(q[i]) * fp16_to_f32(k[i]));
        const float simd = kv_kernels::dot_f32_f16_f16c(q.data(), k.data(), n);
        const float scalar = kv_kernels::dot_f32_f16_scalar(q.data(), k.data(), n);
        CHECK(std::fabs(double(simd) - double(scalar)) <= 1e-6 * magnitude + 1e-30);

        std::vector<float> acc_simd = random_floats(std::size_t(n), 200u + n), acc_scalar = acc_simd;
        kv_kernels::axpy_f16_f16c(0.37f, k.data(), acc_simd.data(), n);
        kv_kernels::axpy_f16_scalar(0.37f, k.data(), acc_scalar.data(), n);
        for (int i = 0; i < n; ++i) CHECK(acc_simd[i] == doctest::Approx(acc_scalar[i]).epsilon(1e-6));
    }
    // Conversion to fp16 rounds to nearest even in both, also at the edges of the format.
    std::vector<float> x = random_floats(4096, 7, 1000.0f);
    for (float edge : {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, -70000.0f, 6.1e-5f, 5.96e-8f, 2.9e-8f, 1e-10f,
                       std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
        x.push_back(edge);
    while (x.size() % 8) x.push_back(1.0f);
    std::vector<std::uint16_t> simd(x.size()), scalar(x.size());
    kv_kernels::store_f16_f16c(x.data(), simd.data(), int(x.size()));
    kv_kernels::store_f16_scalar(x.data(), scalar.data(), int(x.size()));
    for (std::size_t i = 0; i < x.size(); ++i) {
        CAPTURE(x[i]);
        CHECK(simd[i] == scalar[i]);
    }
#endif
}

TEST_CASE("attention matches a double-precision softmax and does not depend on the batch") {
    for (const int head_dim : {64, 12}) {  // 12: not a multiple of 8, the scalar helpers
        for (const int threads : {1, 2}) {
            CAPTURE(head_dim);
            CAPTURE(threads);
            omp_set_num_threads(threads);
            const int n_kv = 2, n_heads = 6, capacity = 32, prefix = 5, batch = 9;
            const int n_tokens = prefix + batch;
            const std::vector<float> k = random_floats(std::size_t(n_tokens) * n_kv * head_dim, 11);
            const std::vector<float> v = random_floats(std::size_t(n_tokens) * n_kv * head_dim, 12);
            const std::vector<float> q = random_floats(std::size_t(n_tokens) * n_heads * head_dim, 13, 0.5f);
            const std::size_t q_row = std::size_t(n_heads) * head_dim, kv_row = std::size_t(n_kv) * head_dim;

            // The prefix, then the rest in one batch.
            TestLayer batched(n_kv, capacity, head_dim);
            std::vector<float> out_batched(std::size_t(n_tokens) * q_row);
            kv_store(batched.view(), 0, k.data(), v.data(), prefix);
            attention(batched.view(), 0, q.data(), out_batched.data(), prefix, n_heads);
            kv_store(batched.view(), prefix, k.data() + prefix * kv_row, v.data() + prefix * kv_row, batch);
            attention(batched.view(), prefix, q.data() + prefix * q_row, out_batched.data() + prefix * q_row, batch, n_heads);

            // Every token alone, as decoding runs it.
            TestLayer single(n_kv, capacity, head_dim);
            std::vector<float> out_single(out_batched.size());
            for (int t = 0; t < n_tokens; ++t) {
                kv_store(single.view(), t, k.data() + t * kv_row, v.data() + t * kv_row, 1);
                attention(single.view(), t, q.data() + t * q_row, out_single.data() + t * q_row, 1, n_heads);
            }
            CHECK(single.keys == batched.keys);
            CHECK(single.values == batched.values);
            CHECK(out_single == out_batched);

            // The reference: causal softmax over the fp16-rounded keys and values, in double.
            const std::vector<std::uint16_t> k16 = to_fp16(k), v16 = to_fp16(v);
            double worst = 0.0;
            for (int t = 0; t < n_tokens; ++t)
                for (int h = 0; h < n_heads; ++h) {
                    const int g = h / (n_heads / n_kv);
                    std::vector<double> scores(std::size_t(t) + 1);
                    double max_score = -INFINITY;
                    for (int j = 0; j <= t; ++j) {
                        double dot = 0.0;
                        for (int i = 0; i < head_dim; ++i)
                            dot += double(q[t * q_row + h * head_dim + i]) * fp16_to_f32(k16[j * kv_row + g * head_dim + i]);
                        scores[j] = dot / std::sqrt(double(head_dim));
                        max_score = std::max(max_score, scores[j]);
                    }
                    double sum = 0.0;
                    for (double& s : scores) sum += (s = std::exp(s - max_score));
                    for (int i = 0; i < head_dim; ++i) {
                        double expected = 0.0;
                        for (int j = 0; j <= t; ++j) expected += scores[j] / sum * fp16_to_f32(v16[j * kv_row + g * head_dim + i]);
                        worst = std::max(worst, std::fabs(expected - out_batched[t * q_row + h * head_dim + i]));
                    }
                }
            CHECK(worst < 2e-5);
            // Positions beyond the filled ones were never written.
            CHECK(batched.keys[std::size_t(n_tokens) * head_dim] == 0x7e00);
        }
    }
    omp_set_num_threads(2);
}
