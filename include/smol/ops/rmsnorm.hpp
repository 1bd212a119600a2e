#pragma once
// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, row by row.

#include <cmath>
#include <cstdint>

#include "smol/core/threads.hpp"

namespace smol {

// x, y: [n_rows, dim]; weight: [dim]. y may alias x. `threads`: the work's thread count (thread_team).
inline void rmsnorm(const float* x, const float* weight, float* y, std::int64_t n_rows, int dim, float eps,
                    int threads = 0) {
#pragma omp parallel for schedule(static) num_threads(thread_team(threads)) if (n_rows > 1)
    for (std::int64_t r = 0; r < n_rows; ++r) {
        const float* xr = x + r * dim;
        float* yr = y + r * dim;
        double sum_squares = 0.0;  // double, as ggml accumulates it
        for (int i = 0; i < dim; ++i) sum_squares += double(xr[i]) * double(xr[i]);
        const float scale = float(1.0 / std::sqrt(sum_squares / dim + double(eps)));
        for (int i = 0; i < dim; ++i) yr[i] = xr[i] * scale * weight[i];
    }
}

}  // namespace smol
