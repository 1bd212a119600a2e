#pragma once
// SwiGLU gate: h = silu(gate) * up, elementwise.

#include <cmath>
#include <cstdint>

namespace smol {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// gate, up, h: [n] (h may alias gate)
inline void swiglu(const float* gate, const float* up, float* h, std::int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (std::int64_t i = 0; i < n; ++i) h[i] = silu(gate[i]) * up[i];
}

}  // namespace smol
