#pragma once
// The one way smol shows progress of something long (paging weights in, downloading a model):
// on a terminal a single status line redrawn in place, elsewhere (a service's log, CI) plain
// lines, because carriage returns and escape codes turn a log into noise. Callers decide what the
// line says and when a log line is worth writing; this renders it.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace smol {

// "[=========>          ]": `width` cells, the done fraction (clamped to 0..1) drawn with `fill`
// and, when `head` is not '\0' and the bar is not full, `head` in the first undone cell.
inline std::string progress_bar(double fraction, int width, char fill, char head = '\0') {
    const int filled = int(std::clamp(fraction, 0.0, 1.0) * width);
    std::string bar(std::size_t(width) + 2, ' ');
    bar.front() = '[';
    bar.back() = ']';
    for (int i = 0; i < filled; ++i) bar[std::size_t(i) + 1] = fill;
    if (head != '\0' && filled < width) bar[std::size_t(filled) + 1] = head;
    return bar;
}

class ProgressLine {
public:
    // Redraws closer together than this are skipped (a download reports every network chunk;
    // redrawing each one costs more than it shows). The final redraw is never skipped.
    static constexpr std::chrono::milliseconds kRedrawInterval{100};

    explicit ProgressLine(std::FILE* out = stderr) : ProgressLine(out, ::isatty(::fileno(out)) != 0) {}
    ProgressLine(std::FILE* out, bool is_terminal) : out_(out), terminal_(is_terminal) {}

    // Whether redraw() or log() is the caller's way to report.
    bool is_terminal() const { return terminal_; }

    // Terminal only: replaces the current line with `text`; `last` ends it with a newline so the
    // next output starts below. Returns whether it drew (false: throttled).
    bool redraw(const std::string& text, bool last) {
        const auto now = std::chrono::steady_clock::now();
        if (!last && now - last_draw_ < kRedrawInterval) return false;
        last_draw_ = now;
        std::fprintf(out_, "\r%s\x1b[K", text.c_str());  // \x1b[K clears what a longer line left
        if (last) std::fputc('\n', out_);
        std::fflush(out_);
        return true;
    }

    // Writes `line` and a newline, for output that is not a terminal.
    void log(const std::string& line) {
        std::fprintf(out_, "%s\n", line.c_str());
        std::fflush(out_);
    }

    // The next redraw() draws even if the previous one was just now (a new item's first state).
    void restart() { last_draw_ = {}; }

private:
    std::FILE* out_;
    bool terminal_;
    std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace smol
