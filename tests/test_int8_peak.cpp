// The int8 peak loops smol-bench times (quant/int8_peak.hpp): each set's loop stores what its
// scalar reference computes from random operands, and the reference is the instructions'
// arithmetic (products of the right signedness, vpmaddubsw's i16 saturation, wrapping sums).
// What is checked is the result, never the time.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "emulated_tiles.hpp"
#include "smol/core/cpu.hpp"
#include "smol/quant/dispatch.hpp"
#include "smol/quant/int8_peak.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_int8_peak {

using namespace smol;

namespace {

struct Operands {
    std::vector<std::uint8_t> a, b;
};

// Random bytes, or with `extreme` the values that saturate and overflow most: a all 255, b all
// -128 (0x80) or 127.
Operands random_operands(const Int8PeakLoop& loop, std::mt19937& rng, int extreme) {
    Operands ops{std::vector<std::uint8_t>(loop.operand_bytes()), std::vector<std::uint8_t>(loop.operand_bytes())};
    for (std::size_t i = 0; i < ops.a.size(); ++i) {
        ops.a[i] = extreme > 0 ? 255 : std::uint8_t(rng());
        ops.b[i] = extreme == 1 ? 0x80 : extreme == 2 ? 127 : std::uint8_t(rng());
    }
    return ops;
}

std::vector<std::int32_t> reference_sums(const Int8PeakLoop& loop, const Operands& ops, std::int64_t iterations) {
    std::vector<std::int32_t> sums(loop.sum_lanes());
    int8_peak_reference(loop, ops.a.data(), ops.b.data(), iterations, sums.data());
    return sums;
}

// The loop's sums against the reference's, over random and extreme operands, for a run of
// iteration counts (long enough for a 4-byte lane of extremes to wrap past 2^31).
template <class Run>
void check_loop(const Int8PeakLoop& loop, Run run, std::uint32_t seed, std::initializer_list<std::int64_t> iteration_counts) {
    std::mt19937 rng(seed);
    for (int trial = 0; trial < 12; ++trial) {
        const int extreme = trial < 3 ? trial : 0;
        const Operands ops = random_operands(loop, rng, extreme);
        for (const std::int64_t iterations : iteration_counts) {
            CAPTURE(trial);
            CAPTURE(iterations);
            std::vector<std::int32_t> got(loop.sum_lanes(), 12345);
            run(ops.a.data(), ops.b.data(), iterations, got.data());
            const std::vector<std::int32_t> expected = reference_sums(loop, ops, iterations);
            for (std::size_t l = 0; l < got.size(); ++l) {
                CAPTURE(l);
                REQUIRE(got[l] == expected[l]);
            }
        }
    }
}

}  // namespace

TEST_CASE("the int8 peak reference is each instruction's arithmetic") {
    const auto one_lane = [](Int8Product product, std::uint8_t a, std::uint8_t b, std::int64_t iterations) {
        const Int8PeakLoop loop{Isa::scalar, product, "test", product == Int8Product::tdpbusd ? 1024 : 16, 1, nullptr};
        const std::vector<std::uint8_t> av(loop.operand_bytes(), a), bv(loop.operand_bytes(), b);
        std::vector<std::int32_t> sums(loop.sum_lanes());
        int8_peak_reference(loop, av.data(), bv.data(), iterations, sums.data());
        for (const std::int32_t s : sums) REQUIRE(s == sums[0]);  // equal operands, equal lanes
        return sums[0];
    };
    // vpdpbusd: a unsigned, b signed, 4 products, no saturation.
    CHECK(one_lane(Int8Product::dpbusd, 255, 0x80, 1) == 4 * 255 * -128);
    CHECK(one_lane(Int8Product::dpbusd, 255, 127, 3) == 3 * 4 * 255 * 127);
    // vpmaddubsw saturates each pair's sum to i16 (2 * 255 * 127 = 64770 becomes 32767) and vpaddw
    // adds it into its own word, wrapping modulo 2^16: an i32 lane holds two equal words here.
    const auto words = [](std::int32_t word) { return std::int32_t(std::uint32_t(std::uint16_t(word)) * 0x10001u); };
    CHECK(one_lane(Int8Product::maddubs, 255, 127, 1) == words(32767));
    CHECK(one_lane(Int8Product::maddubs, 255, 0x80, 1) == words(-32768));
    CHECK(one_lane(Int8Product::maddubs, 3, 5, 2) == words(2 * 2 * 15));
    CHECK(one_lane(Int8Product::maddubs, 255, 127, 3) == words(3 * 32767 - 65536));  // 98301 wraps to 32765
    // sdot: both signed, so 0xff is -1.
    CHECK(one_lane(Int8Product::sdot, 0xff, 0x80, 1) == 4 * 128);
    // smmla: both signed, 8 products per lane (a row of a 2 x 8 by a column of an 8 x 2), and four
    // times sdot's multiply-adds per instruction.
    CHECK(one_lane(Int8Product::smmla, 0xff, 0x80, 1) == 8 * 128);
    CHECK((Int8PeakLoop{Isa::scalar, Int8Product::smmla, "test", 16, 1, nullptr}.macs_per_iteration()) == 64);
    // tdpbusd: 16 groups of 4 products per lane.
    CHECK(one_lane(Int8Product::tdpbusd, 255, 0x80, 1) == 64 * 255 * -128);
    // Sums wrap modulo 2^32, as the accumulators do: 10^5 iterations of -130560 is -13056000000.
    CHECK(one_lane(Int8Product::dpbusd, 255, 0x80, 100000) == std::int32_t(std::uint32_t(-13056000000LL & 0xffffffff)));
    // Chain j multiplies a[(j / 2) % 2] with b[j % 2].
    const Int8PeakLoop four{Isa::scalar, Int8Product::dpbusd, "test", 16, 4, nullptr};
    std::vector<std::uint8_t> a(32, 1), b(32, 1);
    std::fill(a.begin() + 16, a.end(), 2);
    std::fill(b.begin() + 16, b.end(), 3);
    std::vector<std::int32_t> sums(four.sum_lanes());
    int8_peak_reference(four, a.data(), b.data(), 1, sums.data());
    CHECK(sums[0] == 4 * 1 * 1);
    CHECK(sums[4] == 4 * 1 * 3);
    CHECK(sums[8] == 4 * 2 * 1);
    CHECK(sums[12] == 4 * 2 * 3);
    CHECK(four.macs_per_iteration() == 64);
}

TEST_CASE("every set with int8 kernels has a peak loop, whose sums are the reference's") {
    CHECK(int8_peak_loop(Isa::scalar) == nullptr);
    CHECK(int8_peak_loop(Isa::neon) == nullptr);
    for (const Isa isa : kAllIsas) {
        CAPTURE(isa_name(isa));
        const Int8PeakLoop* loop = int8_peak_loop(isa);
        const bool expected = isa_compiled(isa) && isa != Isa::scalar && isa != Isa::neon;
        CHECK((loop != nullptr) == expected);
        if (loop == nullptr) continue;
        CHECK(loop->isa == isa);
        CHECK(loop->macs_per_iteration() > 0);
        if (!cpu_features().supports(isa)) {
            MESSAGE("skipping the ", isa_name(isa), " peak loop: this CPU lacks the set (", describe(), ")");
            continue;
        }
        check_loop(*loop, loop->run, 100 + std::uint32_t(isa), {1, 2, 7, 100000});
    }
}

#if SMOL_HAVE_AMX_KERNELS
TEST_CASE("the AMX peak loop gives the reference's sums on emulated tiles") {
    const Int8PeakLoop* loop = int8_peak_loop(Isa::amx);
    REQUIRE(loop != nullptr);
    CHECK(loop->macs_per_iteration() == 4 * 16 * 16 * 64);
    const auto emulated = [](const std::uint8_t* a, const std::uint8_t* b, std::int64_t iterations, std::int32_t* sums) {
        auto tiles = std::make_unique<testing::EmulatedTiles>();
        int8_peak_detail::amx_loop(*tiles, a, b, iterations, sums);
        CHECK_FALSE(tiles->configured);  // the loop releases its tiles
    };
    check_loop(*loop, emulated, 7, {1, 3});
}
#endif

}  // namespace test_int8_peak
