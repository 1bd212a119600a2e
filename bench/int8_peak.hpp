#pragma once
// The machine's int8 multiply-add peak for the kernel set that runs, measured the way the read
// limit is: every thread runs the set's peak loop (smol/quant/int8_peak.hpp: its int8 instruction
// on operands held in registers, over enough accumulators that only throughput limits it) at the
// same time, on the OpenMP threads the tests run on. smol-bench prints pp's int8 MAC rate against it.

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "smol/smol.hpp"

namespace smol_bench {

// Multiply-adds per second of `loop` on `threads` threads at once: the best of `passes` passes of
// about `pass_seconds` each.
inline double measure_int8_peak(const smol::Int8PeakLoop& loop, int threads, int passes = 3, double pass_seconds = 0.05) {
    std::mt19937 rng(42);
    std::vector<std::uint8_t> a(loop.operand_bytes()), b(loop.operand_bytes());
    for (auto& x : a) x = std::uint8_t(rng());
    for (auto& x : b) x = std::uint8_t(rng());
    std::vector<std::int32_t> sums(std::size_t(threads) * loop.sum_lanes());  // each thread's own
    int team = threads;  // the threads OpenMP gave the last pass, which its MACs count
    const auto pass = [&](std::int64_t iterations) {
        const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
        {
            if (omp_get_thread_num() == 0) team = omp_get_num_threads();
            loop.run(a.data(), b.data(), iterations, sums.data() + std::size_t(omp_get_thread_num()) * loop.sum_lanes());
        }
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    // Iterations for a pass of about pass_seconds: doubled until a pass takes a fifth of it, then scaled.
    std::int64_t iterations = 256;
    double seconds = pass(iterations);
    while (seconds < pass_seconds / 5) seconds = pass(iterations *= 2);
    iterations = std::max(iterations, std::int64_t(double(iterations) * pass_seconds / seconds));
    double best = 0;
    for (int p = 0; p < passes; ++p) {
        const double seconds_taken = pass(iterations);
        best = std::max(best, double(team) * double(iterations) * double(loop.macs_per_iteration()) / seconds_taken);
    }
    return best;
}

}  // namespace smol_bench
