#pragma once
// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, row by row.
//
// A row's sum of squares is one chain of double additions in index order, as ggml accumulates
// it; each addition waits for the last, so one row at a time runs at the adder's latency. Rows
// are therefore summed kInterleavedRows at a time, one chain per row side by side: each row's
// chain is unchanged, so are its bits, and the adder is kept busy.

#include <cmath>
#include <cstdint>

#include "smol/core/threads.hpp"

namespace smol {

namespace rmsnorm_detail {

inline constexpr int kInterleavedRows = 8;

// sums[k] = sum over i of x[k * dim + i]^2 in double, added in order of i, for the R rows at x.
template <int R>
inline void sums_of_squares(const float* x, int dim, double (&sums)[R]) {
    for (int k = 0; k < R; ++k) sums[k] = 0.0;
    for (int i = 0; i < dim; ++i)
        for (int k = 0; k < R; ++k) {
            const double v = x[std::int64_t(k) * dim + i];
            sums[k] += v * v;
        }
}

// Rows first..first+R-1 of x normalized into y.
template <int R>
inline void normalize_rows(const float* x, const float* weight, float* y, std::int64_t first, int dim, float eps) {
    double sums[R];
    sums_of_squares<R>(x + first * dim, dim, sums);
    for (int k = 0; k < R; ++k) {
        const float scale = float(1.0 / std::sqrt(sums[k] / dim + double(eps)));
        const float* xr = x + (first + k) * dim;
        float* yr = y + (first + k) * dim;
        for (int i = 0; i < dim; ++i) yr[i] = xr[i] * scale * weight[i];
    }
}

}  // namespace rmsnorm_detail

// x, y: [n_rows, dim]; weight: [dim]. y may alias x. `threads`: the work's thread count (thread_team).
inline void rmsnorm(const float* x, const float* weight, float* y, std::int64_t n_rows, int dim, float eps,
                    int threads = 0) {
    using namespace rmsnorm_detail;
    const std::int64_t n_runs = (n_rows + kInterleavedRows - 1) / kInterleavedRows;
#pragma omp parallel for schedule(static) num_threads(thread_team(threads)) if (n_rows > 1)
    for (std::int64_t run = 0; run < n_runs; ++run) {
        const std::int64_t first = run * kInterleavedRows;
        if (first + kInterleavedRows <= n_rows) {
            normalize_rows<kInterleavedRows>(x, weight, y, first, dim, eps);
        } else {
            for (std::int64_t r = first; r < n_rows; ++r) normalize_rows<1>(x, weight, y, r, dim, eps);
        }
    }
}

}  // namespace smol
