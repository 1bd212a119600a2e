// SwiGLU: every SIMD kernel set this CPU runs gives the scalar loop's bits (silu with std::exp),
// on random gates, on glibc expf's special cases, on a sweep through all floats, in place and
// past a vector's end, and its exp those of std::exp on the inputs hardest to round; swiglu()
// over threads gives them too.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference_data.hpp"
#include "smol/ops/swiglu.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_swiglu {

using namespace smol;

namespace {

// The SIMD kernel sets of this build that this CPU runs; the others are named as skipped.
std::vector<const SwigluKernels*> runnable_simd_sets() {
    std::vector<const SwigluKernels*> sets;
    for (Isa isa : {Isa::avx2, Isa::avx512, Isa::neon}) {
        const SwigluKernels* k = swiglu_kernels_for(isa);
        if (!k) MESSAGE("skipped: this build has no ", std::string(isa_name(isa)), " SwiGLU kernels");
        else if (!cpu_features().supports(isa)) MESSAGE("skipped: this CPU cannot run ", std::string(isa_name(isa)));
        else sets.push_back(k);
    }
    return sets;
}

std::uint32_t bits_of(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}

float from_bits(std::uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}

// The first index where two results differ in their bits, or -1.
std::int64_t first_difference(const std::vector<float>& expected, const std::vector<float>& got) {
    for (std::size_t i = 0; i < expected.size(); ++i)
        if (bits_of(expected[i]) != bits_of(got[i])) return std::int64_t(i);
    return -1;
}

void check_same_bits(const SwigluKernels& k, const std::vector<float>& gate, const std::vector<float>& up) {
    const auto n = std::int64_t(gate.size());
    std::vector<float> expected(gate.size()), got(gate.size(), -1.0f);
    swiglu_scalar(gate.data(), up.data(), expected.data(), n);
    k.swiglu(gate.data(), up.data(), got.data(), n);
    const std::int64_t i = first_difference(expected, got);
    INFO(isa_name(k.isa), ": first difference at ", i, i >= 0 ? " (gate " + std::to_string(gate[std::size_t(i)]) + ")" : "");
    CHECK(i == -1);
}

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

}  // namespace

TEST_CASE("SwiGLU kernels give the scalar loop's bits on random gates of every scale and any length") {
    for (const SwigluKernels* k : runnable_simd_sets())
        for (float scale : {0.5f, 4.0f, 40.0f})
            for (std::size_t n : {std::size_t(1), std::size_t(15), std::size_t(16), std::size_t(33), std::size_t(4099)}) {
                CAPTURE(scale);
                CAPTURE(n);
                check_same_bits(*k, random_floats(n, 7, scale), random_floats(n, 8, 2.0f));
            }
}

TEST_CASE("SwiGLU kernels give the scalar loop's bits at glibc expf's special cases and in a sweep of all floats") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    // Around |x| = 88 (where glibc leaves its main path), overflow (88.72), underflow (103.97,
    // 103.28), the infinities, NaN, zeros and subnormals, each beside ordinary gates so that the
    // vector holding it takes the other path too.
    std::vector<float> special = {88.0f, -88.0f, std::nextafter(88.0f, 0.0f), std::nextafter(-88.0f, 0.0f),
                                  88.72283935546875f, -88.72283935546875f, 88.7229f, -88.7229f, 103.28f, -103.28f,
                                  103.98f, -103.98f, 1e30f, -1e30f, inf, -inf, nan, -nan, 0.0f, -0.0f,
                                  1e-40f, -1e-40f, 1e-45f, std::numeric_limits<float>::max(),
                                  std::numeric_limits<float>::lowest()};
    std::vector<float> gate, up;
    for (float s : special)
        for (int position = 0; position < 16; ++position) {
            std::vector<float> block = random_floats(16, std::uint32_t(position), 3.0f);
            block[std::size_t(position)] = s;
            gate.insert(gate.end(), block.begin(), block.end());
        }
    up = random_floats(gate.size(), 3, 1.0f);
    // Every 4099th bit pattern: all exponents, signs and NaN payloads, about a million floats.
    std::vector<float> sweep;
    for (std::uint64_t u = 0; u < (std::uint64_t(1) << 32); u += 4099) sweep.push_back(from_bits(std::uint32_t(u)));
    const std::vector<float> sweep_up = random_floats(sweep.size(), 4, 1.0f);
    for (const SwigluKernels* k : runnable_simd_sets()) {
        check_same_bits(*k, gate, up);
        check_same_bits(*k, sweep, sweep_up);
        // In a tail shorter than a vector (the values after the last whole vector), alone and
        // after a whole vector.
        for (float s : special)
            for (const std::size_t n : {std::size_t(7), std::size_t(16 + 5)}) {
                std::vector<float> short_gate = random_floats(n, 5, 3.0f);
                short_gate.back() = s;
                check_same_bits(*k, short_gate, random_floats(n, 6, 1.0f));
            }
    }
}

// tests/data/expf/hard_cases.txt (its README says how it was made): for glibc's x86-64 and
// aarch64 builds, the 2048 floats each for which expf's double lands nearest the midpoint between
// two floats, where any step computed otherwise than glibc's shows in the last bit.
TEST_CASE("the SwiGLU kernels' exp gives std::exp's bits where the result is hardest to round") {
    std::ifstream in(smol_test::test_data_path("expf/hard_cases.txt"));
    REQUIRE_MESSAGE(in, "cannot open tests/data/expf/hard_cases.txt");
    std::vector<float> x;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) x.push_back(from_bits(std::uint32_t(std::stoul(line, nullptr, 16))));
    REQUIRE(x.size() == 2049);
    std::vector<float> expected(x.size());
    exp_scalar(x.data(), expected.data(), std::int64_t(x.size()));
    for (const SwigluKernels* k : runnable_simd_sets()) {
        std::vector<float> got(x.size(), -1.0f);
        k->exp(x.data(), got.data(), std::int64_t(x.size()));
        const std::int64_t i = first_difference(expected, got);
        INFO(isa_name(k->isa), ": first difference at ", i);
        CHECK(i == -1);
    }
}

TEST_CASE("SwiGLU in place and over threads gives the scalar loop's bits") {
    const std::size_t n = 3 * 65536 + 77;  // past swiglu's threading threshold, not a whole number of chunks
    const std::vector<float> gate = random_floats(n, 11, 3.0f), up = random_floats(n, 12, 1.0f);
    std::vector<float> expected(n);
    swiglu_scalar(gate.data(), up.data(), expected.data(), std::int64_t(n));
    for (const SwigluKernels* k : runnable_simd_sets()) {
        std::vector<float> h = gate;
        k->swiglu(h.data(), up.data(), h.data(), std::int64_t(n));
        CHECK_MESSAGE(std::memcmp(h.data(), expected.data(), 4 * n) == 0, isa_name(k->isa), " in place");
    }
    for (int threads : {1, 2, 3}) {
        std::vector<float> h = gate;
        swiglu(h.data(), up.data(), h.data(), std::int64_t(n), threads);
        CHECK_MESSAGE(std::memcmp(h.data(), expected.data(), 4 * n) == 0, "swiglu() on ", threads, " threads");
    }
}

TEST_CASE("silu: x * sigmoid(x)") {
    CHECK(silu(0.0f) == 0.0f);
    CHECK(silu(1.0f) == doctest::Approx(0.7310586f).epsilon(1e-6));
    CHECK(silu(-1.0f) == doctest::Approx(-0.2689414f).epsilon(1e-6));
    CHECK(silu(100.0f) == 100.0f);
    CHECK(silu(-100.0f) == -0.0f);
    CHECK(std::isnan(silu(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace test_swiglu
