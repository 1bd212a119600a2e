#pragma once
// Comparing float results bit for bit: the kernels, the attention and the decoding paths promise
// the reference's bits, not results within a tolerance.

#include <cstring>
#include <span>

namespace smol_test {

// Whether a and b hold the same floats, bit for bit (NaNs included, -0 apart from +0).
inline bool same_bits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace smol_test
