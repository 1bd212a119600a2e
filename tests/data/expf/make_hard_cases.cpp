// Writes hard_cases.txt: the floats x (|x| < 88, where glibc's expf takes its main path) for which
// glibc's expf ends nearest a rounding boundary between two floats: its steps in double
// (swiglu_x86.hpp's constants, scalar here) give a double within a few 1e-7 of a float ulp of
// the midpoint. There the float returned depends on the last bits of that double arithmetic, so
// these inputs tell apart any two ways of computing glibc's steps that differ at all (unfusing
// one product changes 2 results of all 2^32 floats, and both are among these).
// Build and run from the repository root:
//   g++ -O2 -std=c++20 -march=x86-64-v3 -Iinclude tests/data/expf/make_hard_cases.cpp -o /tmp/hard && /tmp/hard
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "smol/ops/swiglu_x86.hpp"

namespace glibc = smol::swiglu_x86::glibc_expf;

// glibc's expf before its last rounding (swiglu_set.hpp's expf_lanes, one lane).
double expf_in_double(float x) {
    const double xd = x;
    const double shifted = std::fma(xd, glibc::kInvLn2N, glibc::kShift);
    const double k = shifted - glibc::kShift;
    const double r = std::fma(xd, glibc::kInvLn2N, -k);
    const auto bits = std::bit_cast<std::uint64_t>(shifted);
    const double scale = std::bit_cast<double>(glibc::kTable[bits % 32] + (bits << 47));
    const double z = std::fma(r, glibc::kC0, glibc::kC1);
    const double y = std::fma(z, r * r, std::fma(r, glibc::kC2, 1.0));
    return y * scale;
}

int main() {
    constexpr std::size_t kKeep = 2048;
    struct Case {
        double distance;  // |y - the nearest midpoint between floats| in units of the float's ulp
        std::uint32_t bits;
    };
    std::vector<Case> best;
    for (std::uint64_t u = 0; u < (std::uint64_t(1) << 32); ++u) {
        const auto x = std::bit_cast<float>(std::uint32_t(u));
        if (!(std::fabs(x) < 88.0f)) continue;
        const double y = expf_in_double(x);
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
    std::FILE* out = std::fopen("tests/data/expf/hard_cases.txt", "w");
    for (const Case& c : best) std::fprintf(out, "0x%08x\n", unsigned(c.bits));
    std::fclose(out);
    std::printf("kept %zu, largest distance %g ulp\n", best.size(), best.back().distance);
}
