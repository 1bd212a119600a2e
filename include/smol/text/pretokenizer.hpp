#pragma once
// The Llama-3 pre-tokenizer (used by SmolLM3, `tokenizer.ggml.pre` = "smaug-bpe" or
// "llama-bpe"): splits text into the pieces BPE runs on, as the regex
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// would, matched leftmost-first. It is written out by hand over code points because std::regex
// has no \p{..} classes and backtracks far too slowly, and it follows llama.cpp's hand-written
// matcher where the two could differ (case folding of the contractions is ASCII-only there; the
// generator of unicode_tables.hpp checks that no other code point lowercases to those letters).

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "smol/text/unicode.hpp"

namespace smol::text {

// Half-open range of code point indices [first, second).
using CodepointRange = std::pair<std::size_t, std::size_t>;

inline std::vector<CodepointRange> pre_tokenize_llama3(std::span<const char32_t> cps) {
    using unicode::CharClass;
    const std::size_t n = cps.size();
    std::vector<CodepointRange> pieces;
    pieces.reserve(n / 3 + 1);

    // Past the end of the text there is no character at all: not a letter, number or space,
    // and not an "other" character that [^\s\p{L}\p{N}] could match either.
    enum class Kind { Letter, Number, Space, Other, End };
    auto kind = [&](std::size_t i) {
        if (i >= n) return Kind::End;
        switch (unicode::char_class(cps[i])) {
            case CharClass::Letter: return Kind::Letter;
            case CharClass::Number: return Kind::Number;
            case CharClass::Whitespace: return Kind::Space;
            default: return Kind::Other;
        }
    };
    auto is_newline = [&](std::size_t i) { return i < n && (cps[i] == U'\r' || cps[i] == U'\n'); };
    auto ascii_lower = [&](std::size_t i) { return cps[i] >= U'A' && cps[i] <= U'Z' ? cps[i] + 32 : cps[i]; };

    std::size_t pos = 0;
    while (pos < n) {
        const char32_t c = cps[pos];
        const Kind k = kind(pos);
        std::size_t end = pos + 1;

        if (c == U'\'' && pos + 1 < n) {  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
            const char32_t c1 = ascii_lower(pos + 1);
            const char32_t c2 = pos + 2 < n ? ascii_lower(pos + 2) : 0;
            if (c1 == U's' || c1 == U't' || c1 == U'm' || c1 == U'd') {
                pieces.emplace_back(pos, pos + 2);
                pos += 2;
                continue;
            }
            if ((c1 == U'r' && c2 == U'e') || (c1 == U'v' && c2 == U'e') || (c1 == U'l' && c2 == U'l')) {
                pieces.emplace_back(pos, pos + 3);
                pos += 3;
                continue;
            }
        }

        if (k == Kind::Letter || (!is_newline(pos) && k != Kind::Number && kind(pos + 1) == Kind::Letter)) {
            // [^\r\n\p{L}\p{N}]?\p{L}+ : an optional leading non-letter, then the letters.
            while (kind(end) == Kind::Letter) ++end;
        } else if (k == Kind::Number) {  // \p{N}{1,3}
            while (end - pos < 3 && kind(end) == Kind::Number) ++end;
        } else if (const Kind first = c == U' ' ? kind(pos + 1) : k; first == Kind::Other || first == Kind::End) {
            // " ?[^\s\p{L}\p{N}]+[\r\n]*". A lone space at the very end also lands here and
            // comes out as " ", which is what \s+ would have produced.
            end = c == U' ' ? pos + 1 : pos;
            while (kind(end) == Kind::Other) ++end;
            while (is_newline(end)) ++end;
        } else {
            // Here `c` is whitespace. \s*[\r\n]+ takes the run up to its last newline;
            // \s+(?!\S) leaves the last space of a run to the word that follows it; \s+ takes
            // a run that ends the text.
            std::size_t run_end = pos;
            std::size_t after_last_newline = 0;
            while (kind(run_end) == Kind::Space) {
                if (is_newline(run_end)) after_last_newline = run_end + 1;
                ++run_end;
            }
            if (after_last_newline > 0) end = after_last_newline;
            else if (run_end - pos > 1 && run_end < n) end = run_end - 1;
            else end = run_end;
        }
        pieces.emplace_back(pos, end);
        pos = end;
    }
    return pieces;
}

}  // namespace smol::text
