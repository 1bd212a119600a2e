// Writes hard_cases.txt: for each of glibc's two builds of expf (x86-64 with FMA, aarch64), the
// 2048 floats x (|x| < 88, where it takes its main path) for which it ends nearest a rounding
// boundary between two floats: its steps in double (glibc_expf.hpp's constants, scalar here)
// give a double within about 2e-6 of a float ulp of the midpoint. There the float returned
// depends on the last bits of that double arithmetic, so these inputs tell apart any two ways of
// computing the steps that differ at all (on x86-64, unfusing one product changes 2 results of
// all 2^32 floats, and both are among these). The two lists differ in one float; the file holds
// both, the x86-64 list first.
// Build and run from the repository root:
//   g++ -O2 -std=c++20 -march=x86-64-v3 -Iinclude tests/data/expf/make_hard_cases.cpp -o /tmp/hard && /tmp/hard
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "smol/ops/glibc_expf.hpp"

namespace glibc = smol::glibc_expf;

// glibc's expf before its last rounding (swiglu_set.hpp's expf_lanes, one lane), as its x86-64
// build with FMA or its aarch64 build splits x * 32 / ln 2 into k + r (swiglu_x86.hpp's and
// swiglu_neon.hpp's Lanes::reduce).
double expf_in_double(float x, bool aarch64) {
    const double xd = x;
    double r;
    std::uint64_t bits;  // k's bits, or those of k + 1.5 * 2^52
    if (aarch64) {
        const volatile double z = xd * glibc::kInvLn2N;  // volatile: rounded, never fused with the subtraction
        r = z - std::round(z);
        bits = std::uint64_t(std::llround(z));
    } else {
        const double shifted = std::fma(xd, glibc::kInvLn2N, glibc::kShift);
        r = std::fma(xd, glibc::kInvLn2N, -(shifted - glibc::kShift));
        bits = std::bit_cast<std::uint64_t>(shifted);
    }
    const double scale = std::bit_cast<double>(glibc::kTable[bits % 32] + (bits << 47));
    const double z = std::fma(r, glibc::kC0, glibc::kC1);
    const double y = std::fma(z, r * r, std::fma(r, glibc::kC2, 1.0));
    return y * scale;
}

std::vector<std::uint32_t> hard_cases(bool aarch64) {
    constexpr std::size_t kKeep = 2048;
    struct Case {
        double distance;  // |y - the nearest midpoint between floats| in units of the float's ulp
        std::uint32_t bits;
    };
    std::vector<Case> best;
    for (std::uint64_t u = 0; u < (std::uint64_t(1) << 32); ++u) {
        const auto x = std::bit_cast<float>(std::uint32_t(u));
        if (!(std::fabs(x) < 88.0f)) continue;
        const double y = expf_in_double(x, aarch64);
        const float nearest = static_cast<float>(y);
        const float below = double(nearest) <= y ? nearest : std::nextafter(nearest, 0.0f);
        const float above = std::nextafter(below, INFINITY);
        const double ulp = double(above) - double(below), midpoint = double(below) + ulp / 2;
        best.push_back({std::fabs(y - midpoint) / ulp, std::uint32_t(u)});
        if (best.size() >= 64 * kKeep) {
            std::nth_element(best.begin(), best.begin() + kKeep, best.end(),
                             [](const Case& a, const Case& b) { return a.distance < b.distance; });
            best.resize(kKeep);
        }
    }
    std::sort(best.begin(), best.end(), [](const Case& a, const Case& b) { return a.distance < b.distance; });
    best.resize(std::min(best.size(), kKeep));
    std::printf("%s: largest distance kept %g ulp\n", aarch64 ? "aarch64" : "x86-64", best.back().distance);
    std::vector<std::uint32_t> bits;
    for (const Case& c : best) bits.push_back(c.bits);
    return bits;
}

int main() {
    std::vector<std::uint32_t> all = hard_cases(false);
    for (std::uint32_t bits : hard_cases(true))
        if (std::find(all.begin(), all.end(), bits) == all.end()) all.push_back(bits);
    std::FILE* out = std::fopen("tests/data/expf/hard_cases.txt", "w");
    for (std::uint32_t bits : all) std::fprintf(out, "0x%08x\n", unsigned(bits));
    std::fclose(out);
    std::printf("wrote %zu floats\n", all.size());
}
