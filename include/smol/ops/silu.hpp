#pragma once
// SiLU, x * sigmoid(x), with std::exp: the reference every SwiGLU kernel keeps the bits of.

#include <cmath>

namespace smol {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace smol
