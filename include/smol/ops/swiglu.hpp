#pragma once
// SwiGLU gate: h = silu(gate) * up, elementwise.

#include <cmath>
#include <cstdint>

#include "smol/core/threads.hpp"

namespace smol {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// gate, up, h: [n] (h may alias gate). `threads`: the work's thread count (thread_team).
inline void swiglu(const float* gate, const float* up, float* h, std::int64_t n, int threads = 0) {
#pragma omp parallel for schedule(static) num_threads(thread_team(threads)) if (n > 65536)
    for (std::int64_t i = 0; i < n; ++i) h[i] = silu(gate[i]) * up[i];
}

}  // namespace smol
