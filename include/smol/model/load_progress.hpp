#pragma once
// Paging a model's weights in at load time, with progress. The weights are read from the mapped
// file (the row-group copy of model/weights.hpp reads them from it too); reading them once up
// front turns a cold disk's page faults into a progress line at load instead of a silent first
// token, and costs little when the file is already cached.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "smol/core/progress_line.hpp"
#include "smol/gguf/reader.hpp"

namespace smol {

// Called with the bytes paged in so far and the total.
using LoadProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

inline void page_in(const gguf::File& file, const LoadProgress& on_progress) {
    const auto& memory = file.memory();
    const std::uint64_t begin = file.data_offset(), end = memory.size();
    if (begin >= end) return;
    memory.will_need(std::size_t(begin), std::size_t(end - begin));
    constexpr std::uint64_t kPage = 4096, kReportEvery = 64ull << 20;
    volatile std::uint8_t sink = 0;
    std::uint64_t next_report = begin;
    for (std::uint64_t at = begin; at < end; at += kPage) {
        sink = sink + memory.data()[at];
        if (on_progress && at >= next_report) {
            on_progress(at - begin, end - begin);
            next_report = at + kReportEvery;
        }
    }
    if (on_progress) on_progress(end - begin, end - begin);
}

// The default display: a bar redrawn in place on a terminal, else one line when done.
class LoadProgressPrinter {
public:
    explicit LoadProgressPrinter(std::string name, std::FILE* out = stderr)
        : name_(std::move(name)), line_(out), start_(std::chrono::steady_clock::now()) {}
    LoadProgressPrinter(std::string name, std::FILE* out, bool is_terminal)
        : name_(std::move(name)), line_(out, is_terminal), start_(std::chrono::steady_clock::now()) {}

    void operator()(std::uint64_t done, std::uint64_t total) {
        const double fraction = total ? double(done) / double(total) : 1.0;
        char text[256];
        if (line_.is_terminal()) {
            // "loading m.gguf [#############                 ]  45% 0.81 / 1.80 GB"
            std::snprintf(text, sizeof text, " %3d%% %.2f / %.2f GB", int(fraction * 100), done / 1e9, total / 1e9);
            line_.redraw("loading " + name_ + " " + progress_bar(fraction, 30, '#') + text, done == total);
        } else if (done == total) {
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
            std::snprintf(text, sizeof text, " (%.2f GB of weights) in %.2f s", total / 1e9, seconds);
            line_.log("smol: loaded " + name_ + text);
        }
    }

private:
    std::string name_;
    ProgressLine line_;
    std::chrono::steady_clock::time_point start_;
};

inline LoadProgress stderr_load_progress(const std::string& name) {
    return [printer = std::make_shared<LoadProgressPrinter>(name)](std::uint64_t done, std::uint64_t total) {
        (*printer)(done, total);
    };
}

}  // namespace smol
