#pragma once
// Splits streamed assistant text into reasoning (inside <think>...</think>) and answer.
//
// Pieces are one token's decoded text each. SmolLM3 normally emits <think> and </think> as
// single tokens, but a tag can also arrive spelled out over several pieces ("<thi" + "nk>"),
// so the parser holds back the shortest tail that could still grow into a tag and never
// shows partial tag text. Like llama.cpp's reasoning parser, whitespace right after <think>
// and right after </think> is dropped (the model writes "<think>\n...\n</think>\n");
// everything else passes through byte for byte, including bytes of an incomplete UTF-8
// sequence (the tags are ASCII, so cutting at them never splits a character).

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace smol {

struct ThinkingPiece {
    std::string reasoning;
    std::string answer;
};

class ThinkingParser {
public:
    static constexpr std::string_view open_tag = "<think>";
    static constexpr std::string_view close_tag = "</think>";
    // How SmolLM3's chat template ends a think block before the answer (its no-think prefix is
    // "<think>\n\n</think>\n"): what the engine writes when it closes a block itself.
    static constexpr std::string_view template_close = "</think>\n";

    // thinking_enabled = false means the prompt already ended with the empty
    // "<think>\n\n</think>\n" block, so the answer starts right after a closing tag and its
    // leading whitespace is dropped. A think block the model writes anyway is still parsed.
    explicit ThinkingParser(bool thinking_enabled)
        : thinking_enabled_(thinking_enabled), skipping_whitespace_(!thinking_enabled) {}

    ThinkingPiece push(std::string_view text) {
        ThinkingPiece out;
        std::string buffer = std::move(held_);
        held_.clear();
        buffer.append(text);

        std::string_view rest = buffer;
        while (!rest.empty()) {
            if (skipping_whitespace_) {
                std::size_t start = 0;
                while (start < rest.size() && is_space(rest[start])) ++start;
                rest.remove_prefix(start);
                if (rest.empty()) break;
                skipping_whitespace_ = false;
            }
            const std::string_view tag = in_reasoning_ ? close_tag : open_tag;
            const std::size_t found = rest.find(tag);
            if (found != std::string_view::npos) {
                channel(out).append(rest.substr(0, found));
                rest.remove_prefix(found + tag.size());
                in_reasoning_ = !in_reasoning_;
                skipping_whitespace_ = true;
                continue;
            }
            const std::size_t hold = partial_tag_suffix(rest, tag);
            channel(out).append(rest.substr(0, rest.size() - hold));
            held_.assign(rest.substr(rest.size() - hold));
            break;
        }
        return out;
    }

    // End of the message: held-back text turned out not to be a tag, so it is emitted as is.
    // An unclosed think block stays reasoning (in_reasoning() still reports it).
    ThinkingPiece finish() {
        ThinkingPiece out;
        channel(out).append(held_);
        held_.clear();
        return out;
    }

    bool in_reasoning() const { return in_reasoning_; }
    bool thinking_enabled() const { return thinking_enabled_; }

private:
    static bool is_space(char c) {
        return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f';
    }

    // Length of the longest suffix of text that is a proper prefix of tag: the least we
    // must hold back, since any longer tail already differs from the tag.
    static std::size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
        for (std::size_t length = std::min(text.size(), tag.size() - 1); length > 0; --length)
            if (text.substr(text.size() - length) == tag.substr(0, length)) return length;
        return 0;
    }

    std::string& channel(ThinkingPiece& piece) const { return in_reasoning_ ? piece.reasoning : piece.answer; }

    bool thinking_enabled_;
    bool in_reasoning_ = false;
    bool skipping_whitespace_;
    std::string held_;  // tail that may be the start of the next tag
};

// The answer part of a whole assistant message, think blocks removed (what goes back into
// the chat history). An unclosed think block swallows the rest of the message.
inline std::string strip_reasoning(std::string_view full) {
    ThinkingParser parser(/*thinking_enabled=*/true);
    std::string answer = parser.push(full).answer;
    answer += parser.finish().answer;
    return answer;
}

}  // namespace smol
