#pragma once
// Download progress: the struct the downloader reports after every chunk, and the default
// renderer on stderr (a redrawn bar on a terminal, one log line per ~10% otherwise, so logs
// of a service or CI job stay short; smol/core/progress_line.hpp draws both).

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "smol/core/progress_line.hpp"

namespace smol::hub {

struct Progress {
    std::string file;                 // repository file being downloaded
    std::uint64_t downloaded = 0;     // bytes in the file so far, a resumed part included
    std::uint64_t total = 0;          // expected size; 0 when the server did not announce one
    double bytes_per_second = 0;      // over this run's transfer, resumed bytes excluded
    double eta_seconds = -1;          // -1 when unknown
    bool finished = false;            // verified and moved into place
};

using ProgressCallback = std::function<void(const Progress&)>;

// "812.3 MB", "4.0 KB", "17 B" (decimal units, as download speeds are quoted).
inline std::string format_bytes(double bytes) {
    char text[32];
    if (bytes < 1e3) std::snprintf(text, sizeof text, "%.0f B", bytes);
    else if (bytes < 1e6) std::snprintf(text, sizeof text, "%.1f KB", bytes / 1e3);
    else if (bytes < 1e9) std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
    else std::snprintf(text, sizeof text, "%.2f GB", bytes / 1e9);
    return text;
}

// "1:02:03", "02:03", "--:--" when unknown.
inline std::string format_eta(double seconds) {
    if (!(seconds >= 0) || !std::isfinite(seconds) || seconds > 99 * 3600) return "--:--";
    const long s = std::lround(seconds);
    char text[32];
    if (s >= 3600) std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else std::snprintf(text, sizeof text, "%02ld:%02ld", s / 60, s % 60);
    return text;
}

// One status line without the bar: "45% 812.3 MB / 1.80 GB, 35.2 MB/s, ETA 00:28".
inline std::string format_progress_status(const Progress& p) {
    std::string line;
    if (p.total > 0) {
        char percent[16];
        std::snprintf(percent, sizeof percent, "%3d%% ", static_cast<int>(100.0 * p.downloaded / p.total));
        line += percent;
        line += format_bytes(static_cast<double>(p.downloaded)) + " / " + format_bytes(static_cast<double>(p.total));
    } else {
        line += format_bytes(static_cast<double>(p.downloaded));
    }
    line += ", " + format_bytes(p.bytes_per_second) + "/s";
    if (!p.finished && p.total > 0) line += ", ETA " + format_eta(p.eta_seconds);
    return line;
}

// "[=========>          ] " followed by the status; `width` is the bar's inner width.
inline std::string format_progress_bar(const Progress& p, int width = 30) {
    const double fraction = p.total > 0 ? static_cast<double>(p.downloaded) / p.total : 0.0;
    const char head = p.total > 0 && !p.finished ? '>' : '\0';  // no moving head when the size is unknown
    return progress_bar(fraction, width, '=', head) + " " + format_progress_status(p);
}

// Default renderer. On a terminal it redraws one line at most ~10 times a second; elsewhere it
// logs a line each time another 10% is done (every 100 MB when the size is unknown).
class ProgressPrinter {
public:
    explicit ProgressPrinter(std::FILE* out = stderr) : line_(out) {}
    ProgressPrinter(std::FILE* out, bool is_terminal) : line_(out, is_terminal) {}

    void operator()(const Progress& p) {
        if (p.file != file_) {  // a new file starts over
            file_ = p.file;
            last_step_ = -1;
            line_.restart();
        }
        if (line_.is_terminal()) line_.redraw(file_ + " " + format_progress_bar(p), p.finished);
        else log_line(p);
    }

private:
    void log_line(const Progress& p) {
        const long step = p.total > 0 ? static_cast<long>(10.0 * p.downloaded / p.total)
                                      : static_cast<long>(p.downloaded / 100'000'000);
        if (!p.finished && step == last_step_) return;
        last_step_ = step;
        line_.log(std::string("smol: ") + (p.finished ? "downloaded " : "downloading ") + file_ + ": " +
                  format_progress_status(p));
    }

    ProgressLine line_;
    std::string file_;
    long last_step_ = -1;
};

inline ProgressCallback stderr_progress() {
    return [printer = std::make_shared<ProgressPrinter>(stderr)](const Progress& p) { (*printer)(p); };
}

}  // namespace smol::hub
