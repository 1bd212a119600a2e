#pragma once
// Reads the chat's input one line at a time. On a terminal, when smol-cli was built with
// libedit (SMOL_CLI_HAS_LIBEDIT), a line can be edited and earlier ones recalled with the
// arrow keys; the history is kept in <cache>/cli_history (<cache> is $SMOL_CACHE, else
// ~/.cache/smol), so it outlives the session. Anywhere else, plain std::getline, so a pipe
// gets exactly the bytes it sends and no escape sequences.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <system_error>

#include <smol/smol.hpp>

#if SMOL_CLI_HAS_LIBEDIT
#include <editline/readline.h>
#endif

namespace smol::cli {

class LineReader {
public:
    // terminal: stdin and stdout are both terminals (the editor draws on stdout).
    explicit LineReader(bool terminal) {
#if SMOL_CLI_HAS_LIBEDIT
        editing_ = terminal;
        if (!editing_) return;
        using_history();
        stifle_history(kHistoryLines);
        history_file_ = history_path();
        if (!history_file_.empty()) read_history(history_file_.c_str());  // none yet is fine
#else
        (void)terminal;
#endif
    }

    LineReader(const LineReader&) = delete;
    LineReader& operator=(const LineReader&) = delete;

    // Shows `prompt` and returns the next line without its newline; nullopt at the end of input.
    std::optional<std::string> read(const std::string& prompt) {
#if SMOL_CLI_HAS_LIBEDIT
        if (editing_) {
            std::fflush(stdout);
            char* raw = readline(prompt.c_str());
            if (raw == nullptr) return std::nullopt;
            std::string line(raw);
            std::free(raw);
            if (!line.empty()) {
                add_history(line.c_str());
                // Saved after every line: Ctrl-C at the prompt ends the program without unwinding.
                if (!history_file_.empty()) write_history(history_file_.c_str());
            }
            return line;
        }
#endif
        std::fwrite(prompt.data(), 1, prompt.size(), stdout);
        std::fflush(stdout);
        std::string line;
        if (!std::getline(std::cin, line)) return std::nullopt;
        return line;
    }

private:
#if SMOL_CLI_HAS_LIBEDIT
    static constexpr int kHistoryLines = 1000;

    // "" when there is no cache folder to keep it in: the history then lasts for the session.
    static std::string history_path() {
        try {
            const std::filesystem::path dir = hub::default_cache_dir();
            std::error_code ec;
            std::filesystem::create_directories(dir, ec);
            if (ec) return "";
            return (dir / "cli_history").string();
        } catch (const Error&) {
            return "";
        }
    }

    bool editing_ = false;
    std::string history_file_;
#endif
};

}  // namespace smol::cli
