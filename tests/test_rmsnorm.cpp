// RMSNorm: rows normalized side by side give each row's bits as the one-row definition does (one
// chain of double additions in index order), for every count of rows around the interleaving,
// in place and apart, on one thread and on two.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "float_bits.hpp"
#include "smol/ops/rmsnorm.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_rmsnorm {

namespace {

// The definition, one row at a time.
std::vector<float> rmsnorm_by_definition(const std::vector<float>& x, const std::vector<float>& weight, int dim,
                                         float eps) {
    std::vector<float> y(x.size());
    for (std::size_t r = 0; r < x.size() / std::size_t(dim); ++r) {
        const float* xr = x.data() + r * std::size_t(dim);
        double sum_squares = 0.0;
        for (int i = 0; i < dim; ++i) sum_squares += double(xr[i]) * double(xr[i]);
        const float scale = float(1.0 / std::sqrt(sum_squares / dim + double(eps)));
        for (int i = 0; i < dim; ++i) y[r * std::size_t(dim) + std::size_t(i)] = xr[i] * scale * weight[std::size_t(i)];
    }
    return y;
}

using smol_test::same_bits;

}  // namespace

TEST_CASE("rmsnorm gives the one-row definition's bits for any number of rows, in place or not") {
    std::mt19937 gen(11);
    // Wide-ranging magnitudes, so that the order of the double additions shows in the bits.
    std::lognormal_distribution<float> magnitude(0.0f, 3.0f);
    std::bernoulli_distribution negative(0.5);
    const float eps = 1e-6f;
    for (int dim : {32, 2048}) {
        std::vector<float> weight(static_cast<std::size_t>(dim));
        for (float& w : weight) w = magnitude(gen) * (negative(gen) ? -1.0f : 1.0f);
        for (std::int64_t n_rows : {1, 2, 7, 8, 9, 15, 16, 17, 37}) {
            std::vector<float> x(static_cast<std::size_t>(n_rows * dim));
            for (float& v : x) v = magnitude(gen) * (negative(gen) ? -1.0f : 1.0f);
            const std::vector<float> expected = rmsnorm_by_definition(x, weight, dim, eps);
            for (int threads : {1, 2}) {
                CAPTURE(dim);
                CAPTURE(n_rows);
                CAPTURE(threads);
                std::vector<float> y(x.size(), -1.0f);
                smol::rmsnorm(x.data(), weight.data(), y.data(), n_rows, dim, eps, threads);
                CHECK(same_bits(y, expected));
                std::vector<float> in_place = x;
                smol::rmsnorm(in_place.data(), weight.data(), in_place.data(), n_rows, dim, eps, threads);
                CHECK(same_bits(in_place, expected));
            }
        }
    }
}

}  // namespace test_rmsnorm
