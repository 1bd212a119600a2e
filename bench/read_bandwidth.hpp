#pragma once
// The machine's own memory read limit, measured the way decode reads weights: each thread
// streams a contiguous slice of a buffer several times larger than the last-level cache, four
// streams at once with software prefetch ahead of each. smol-bench prints tg's GB/s against it.

#include <immintrin.h>
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

namespace smol_bench {

// Bytes large enough that no cache holds a useful share: four times the last-level cache,
// at least 512 MiB.
inline std::size_t bandwidth_buffer_bytes() {
    long llc = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    return std::max<std::size_t>(std::size_t(512) << 20, 4 * std::size_t(std::max(0L, llc)));
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
        __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (std::size_t off = 0; off < slice; off += 256) {
            for (int s = 0; s < 4; ++s) {
                const std::uint8_t* p = base + std::size_t(s) * slice + off;
                for (int line = 0; line < 256; line += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kAhead + line), _MM_HINT_T0);
                for (int v = 0; v < 256; v += 32)
                    acc[s] = _mm256_add_epi64(acc[s], _mm256_load_si256(reinterpret_cast<const __m256i*>(p + v)));
            }
        }
        const __m256i all = _mm256_xor_si256(_mm256_xor_si256(acc[0], acc[1]), _mm256_xor_si256(acc[2], acc[3]));
        alignas(32) std::uint64_t lanes[4];
        _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), all);
        return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
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
