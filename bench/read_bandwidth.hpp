#pragma once
// The machine's own memory read limit, measured the way decode reads weights: each thread
// streams a contiguous slice of a buffer several times larger than the last-level cache, four
// streams at once with software prefetch ahead of each. smol-bench prints tg's GB/s against it.

#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "smol/smol.hpp"

namespace smol_bench {

// Bytes large enough that no cache holds a useful share: four times the last-level cache,
// at least 512 MiB.
inline std::size_t bandwidth_buffer_bytes() {
    return std::max<std::size_t>(std::size_t(512) << 20, 4 * smol::platform::last_level_cache_bytes());
}

class ReadBandwidth {
public:
    ReadBandwidth() : bytes_(bandwidth_buffer_bytes()) {
        buffer_.reset(static_cast<std::uint8_t*>(::operator new[](bytes_, std::align_val_t{64})));
#pragma omp parallel for schedule(static)  // first touch by the threads that will read it
        for (std::int64_t i = 0; i < std::int64_t(bytes_ >> 20); ++i) std::memset(buffer_.get() + (i << 20), int(i), 1 << 20);
    }

    // GB/s for `threads` threads: the best of `passes` full reads.
    double measure(int threads, int passes = 3) {
        const std::size_t slice = bytes_ / std::size_t(threads) / 4 / 256 * 256;  // per stream, whole 256-byte steps
        const double bytes_read = double(slice * 4 * std::size_t(threads));
        double best = 0;
        for (int p = 0; p < passes; ++p) {
            const auto start = std::chrono::steady_clock::now();
            std::uint64_t sink = 0;
#pragma omp parallel num_threads(threads) reduction(^ : sink)
            sink ^= read_streams(buffer_.get() + std::size_t(omp_get_thread_num()) * 4 * slice, slice);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            asm volatile("" : : "r"(sink));  // the sums are used, so the reads cannot be dropped
            best = std::max(best, bytes_read / s / 1e9);
        }
        return best;
    }

private:
    static constexpr std::size_t kAhead = 4096;  // prefetch distance per stream, as the kernels'

    // Four streams of `slice` bytes each, starting at base, base + slice, ...; returns a value the
    // compiler cannot drop.
    static std::uint64_t read_streams(const std::uint8_t* base, std::size_t slice) {
        // Plain 64-bit adds, four per stream side by side, which the compiler turns into the
        // baseline's vector adds (AVX2 on x86-64, NEON on AArch64); the prefetch is the kernels'
        // (__builtin_prefetch, locality 3: into L1).
        std::uint64_t acc[4][4] = {};
        for (std::size_t off = 0; off < slice; off += 256) {
            for (int s = 0; s < 4; ++s) {
                const std::uint8_t* p = base + std::size_t(s) * slice + off;
                for (int line = 0; line < 256; line += 64) __builtin_prefetch(p + kAhead + line, 0, 3);
                const auto* words = reinterpret_cast<const std::uint64_t*>(p);
                for (int v = 0; v < 32; v += 4)
                    for (int lane = 0; lane < 4; ++lane) acc[s][lane] += words[v + lane];
            }
        }
        std::uint64_t all = 0;
        for (const auto& stream : acc)
            for (const std::uint64_t lane : stream) all ^= lane;
        return all;
    }

    struct AlignedDelete {
        void operator()(std::uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
    };
    std::size_t bytes_;
    std::unique_ptr<std::uint8_t[], AlignedDelete> buffer_;
};

// GB/s for each thread count, measured in a child process so that the buffer never counts in
// this process's peak RSS (which smol-bench reports). Call before any OpenMP region runs here
// (a forked child has only the calling thread). Empty if the child could not run.
inline std::vector<double> measure_read_bandwidth(const std::vector<int>& thread_counts) {
    int fds[2];
    if (pipe(fds) != 0) return {};
    const pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return {};
    }
    if (pid == 0) {
        close(fds[0]);
        ReadBandwidth bandwidth;
        std::vector<double> gbps;
        for (int t : thread_counts) gbps.push_back(bandwidth.measure(t));
        const auto* p = reinterpret_cast<const char*>(gbps.data());
        std::size_t left = gbps.size() * sizeof(double);
        while (left > 0) {
            const ssize_t n = write(fds[1], p, left);
            if (n <= 0) _exit(1);
            p += n;
            left -= std::size_t(n);
        }
        _exit(0);
    }
    close(fds[1]);
    std::vector<double> gbps(thread_counts.size());
    auto* p = reinterpret_cast<char*>(gbps.data());
    std::size_t got = 0;
    while (got < gbps.size() * sizeof(double)) {
        const ssize_t n = read(fds[0], p + got, gbps.size() * sizeof(double) - got);
        if (n <= 0) break;
        got += std::size_t(n);
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != gbps.size() * sizeof(double) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
    return gbps;
}

}  // namespace smol_bench
