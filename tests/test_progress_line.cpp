// The shared progress renderer (smol/core/progress_line.hpp) and the two displays built on it:
// loading weights (LoadProgressPrinter) and downloading (hub::ProgressPrinter), on a terminal.
// Their non-terminal log lines are covered by test_reference and test_download.

#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <thread>

#include "smol/core/progress_line.hpp"
#include "smol/hub/progress.hpp"
#include "smol/model/load_progress.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_progress_line {

namespace {

// Everything written to `file` so far.
std::string contents(std::FILE* file) {
    std::fflush(file);
    std::rewind(file);
    std::string text;
    char buffer[512];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
    return text;
}

}  // namespace

TEST_CASE("progress_bar: filled cells, an optional head, clamped fraction") {
    CHECK(smol::progress_bar(0.0, 4, '#') == "[    ]");
    CHECK(smol::progress_bar(0.5, 4, '#') == "[##  ]");
    CHECK(smol::progress_bar(0.74, 4, '#') == "[##  ]");  // a cell fills only when done
    CHECK(smol::progress_bar(1.0, 4, '#') == "[####]");
    CHECK(smol::progress_bar(0.5, 4, '=', '>') == "[==> ]");
    CHECK(smol::progress_bar(0.0, 4, '=', '>') == "[>   ]");
    CHECK(smol::progress_bar(1.0, 4, '=', '>') == "[====]");  // no head past the end
    CHECK(smol::progress_bar(1.7, 4, '=', '>') == "[====]");
    CHECK(smol::progress_bar(-0.2, 4, '=') == "[    ]");
}

TEST_CASE("ProgressLine: redraws in place at most every 100 ms, the last one always, logs plain lines") {
    std::FILE* out = std::tmpfile();
    REQUIRE(out);
    smol::ProgressLine line(out, /*is_terminal=*/true);
    CHECK(line.is_terminal());
    CHECK(line.redraw("a", false));
    CHECK_FALSE(line.redraw("b", false));  // right after "a": skipped
    CHECK(line.redraw("c", true));         // the last state is always shown
    line.restart();
    CHECK(line.redraw("d", false));  // a new item's first state is shown at once
    std::this_thread::sleep_for(smol::ProgressLine::kRedrawInterval + std::chrono::milliseconds(20));
    CHECK(line.redraw("e", false));
    CHECK(contents(out) == "\ra\x1b[K\rc\x1b[K\n\rd\x1b[K\re\x1b[K");
    std::fclose(out);

    out = std::tmpfile();
    REQUIRE(out);
    smol::ProgressLine log(out, /*is_terminal=*/false);
    CHECK_FALSE(log.is_terminal());
    log.log("one");
    log.log("two");
    CHECK(contents(out) == "one\ntwo\n");
    std::fclose(out);
}

TEST_CASE("LoadProgressPrinter on a terminal: a # bar with percent and GB, ended by a newline") {
    std::FILE* out = std::tmpfile();
    REQUIRE(out);
    smol::LoadProgressPrinter printer("m.gguf", out, /*is_terminal=*/true);
    printer(0, 2'000'000'000);
    printer(1'000'000'000, 2'000'000'000);  // within 100 ms of the first: skipped
    printer(2'000'000'000, 2'000'000'000);
    CHECK(contents(out) == "\rloading m.gguf [                              ]   0% 0.00 / 2.00 GB\x1b[K"
                           "\rloading m.gguf [##############################] 100% 2.00 / 2.00 GB\x1b[K\n");
    std::fclose(out);
}

TEST_CASE("hub::ProgressPrinter on a terminal: file name, = bar with a head, status; each file from the start") {
    std::FILE* out = std::tmpfile();
    REQUIRE(out);
    smol::hub::ProgressPrinter printer(out, /*is_terminal=*/true);
    smol::hub::Progress p;
    p.file = "a.gguf";
    p.total = 1000;
    p.downloaded = 500;
    p.bytes_per_second = 2000;
    p.eta_seconds = 0.25;
    printer(p);
    p.downloaded = 1000;
    p.finished = true;
    printer(p);
    p = {};
    p.file = "b.json";
    p.downloaded = 10;  // size unknown: no head, no percent, no ETA
    p.bytes_per_second = 20;
    printer(p);
    CHECK(contents(out) == "\ra.gguf [===============>              ]  50% 500 B / 1.0 KB, 2.0 KB/s, ETA 00:00\x1b[K"
                           "\ra.gguf [==============================] 100% 1.0 KB / 1.0 KB, 2.0 KB/s\x1b[K\n"
                           "\rb.json [                              ] 10 B, 20 B/s\x1b[K");
    std::fclose(out);
}

}  // namespace test_progress_line
