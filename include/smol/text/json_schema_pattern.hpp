#pragma once
// JSON Schema's `pattern` (an ECMA-262 regular expression, read as Ajv reads it, in Unicode
// mode) to GBNF for the text between a JSON string's quotes: the grammar writes each character
// the way JSON spells it (`"` as \", a newline as \n, controls without a short escape as
// \u00XX), so the string's decoded value is what the expression matches.
//
// Supported: literals and escapes (\n \r \t \v \f \0 \cX \xHH \uHHHH \u{H...} and escaped syntax
// characters), classes with ranges and negation, \d \w \s and their negations (in classes too),
// `.` (anything but line terminators), groups (capturing, named and (?:...)), alternation,
// ? * + {n} {n,} {n,m} (lazy forms too: the same strings match), and the anchors ^ and $ at the
// ends of the top-level alternatives. As in JSON Schema (and unlike llama.cpp, which refuses
// them), an unanchored pattern matches anywhere in the string: `ab` is `^.*ab.*$` with `.`
// taking any character. Lookaheads right after the ^ that starts the pattern or a top-level
// alternative, as in Zod's email pattern `^(?!\.)(?!.*\.\.)...`, hold too: such a pattern, a
// pattern beside a format or narrowed by lengths compiles to automata (text/automaton.hpp) that
// are intersected, not to GBNF directly. Refused by name: lookbehinds and other lookaheads,
// backreferences, word boundaries, Unicode property escapes, anchors elsewhere, and a * or +
// over something that can match nothing (GBNF would read it as left recursion).
//
// Patterns come from strangers: their length (kMaxPatternLength bytes), group nesting
// (kMaxPatternNesting), counts (kMaxPatternCount) and the grammar they expand to
// (kMaxPatternElements, counted with repetitions multiplied out) are capped, with
// GrammarTooComplex past a cap.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/automaton.hpp"
#include "smol/text/grammar.hpp"

namespace smol::text {

// A schema that is valid but asks for something the compiler cannot express (a keyword, a
// reference, a bound, a construct of a pattern): callers answer it differently from a malformed
// schema.
class UnsupportedSchema : public Error {
public:
    using Error::Error;
};

inline constexpr std::size_t kMaxPatternLength = 4096;
inline constexpr int kMaxPatternNesting = 32;
inline constexpr int kMaxPatternCount = 1000;
inline constexpr std::uint64_t kMaxPatternElements = 100000;

namespace pattern_detail {

using Ranges = std::vector<std::pair<char32_t, char32_t>>;  // inclusive code point ranges
inline constexpr char32_t kLastCodePoint = 0x10FFFF;
inline constexpr std::uint64_t kUnbounded = std::numeric_limits<std::uint64_t>::max();

// Sorted, with overlapping and adjacent ranges merged.
inline Ranges normalized(Ranges r) {
    std::sort(r.begin(), r.end());
    Ranges out;
    for (const auto& [lo, hi] : r) {
        if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
        else out.push_back({lo, hi});
    }
    return out;
}

inline Ranges complement(const Ranges& set) {
    Ranges out;
    char32_t next = 0;
    for (const auto& [lo, hi] : normalized(set)) {
        if (lo > next) out.push_back({next, lo - 1});
        next = hi + 1;
    }
    if (next <= kLastCodePoint) out.push_back({next, kLastCodePoint});
    return out;
}

inline Ranges subtract(const Ranges& a, const Ranges& b) {
    Ranges out;
    const Ranges keep = complement(b);
    for (const auto& [lo, hi] : normalized(a))
        for (const auto& [klo, khi] : keep)
            if (klo <= hi && khi >= lo) out.push_back({std::max(lo, klo), std::min(hi, khi)});
    return out;
}

inline bool contains(const Ranges& set, char32_t c) {
    return std::any_of(set.begin(), set.end(), [c](const auto& r) { return c >= r.first && c <= r.second; });
}

inline std::string utf8(char32_t c) {
    std::string out;
    if (c < 0x80) {
        out += char(c);
    } else if (c < 0x800) {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += char(0xE0 | (c >> 12));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    } else {
        out += char(0xF0 | (c >> 18));
        out += char(0x80 | ((c >> 12) & 0x3F));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    }
    return out;
}

inline std::string hex(std::uint32_t value, int digits) {
    static const char* kDigits = "0123456789abcdef";
    std::string out(std::size_t(digits), '0');
    for (int i = digits - 1; i >= 0; --i, value >>= 4) out[std::size_t(i)] = kDigits[value & 15];
    return out;
}

// How JSON writes the character c inside a string.
inline std::string json_spelling(char32_t c) {
    if (c == '"') return "\\\"";
    if (c == '\\') return "\\\\";
    if (c == '\n') return "\\n";
    if (c == '\r') return "\\r";
    if (c == '\t') return "\\t";
    if (c == '\b') return "\\b";
    if (c == '\f') return "\\f";
    if (c < 0x20) return "\\u" + hex(c, 4);
    return utf8(c);
}

// A GBNF literal for the bytes of `text`.
inline std::string gbnf_literal(std::string_view text) {
    std::string out = "\"";
    for (const char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

// One character of a GBNF class: itself when plain ASCII, else an escape.
inline std::string class_member(char32_t c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return std::string(1, char(c));
    return "\\U" + hex(c, 8);
}

// GBNF for one character of `set` as JSON writes it inside a string: the characters JSON writes
// as themselves in one class, the ones it must escape after one "\\" (so that matching, which
// expands every alternative of a rule it enters, meets two alternatives here rather than one
// per escaped character): a class of short escapes, then \u000X and \u001X for the other
// controls.
inline std::string json_char_of(const Ranges& set) {
    static const Ranges kEscaped = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}};
    std::vector<std::string> alternatives;
    const Ranges plain = subtract(set, kEscaped);
    if (!plain.empty()) {
        std::string cls = "[";
        for (const auto& [lo, hi] : plain) cls += class_member(lo) + (lo == hi ? "" : "-" + class_member(hi));
        alternatives.push_back(cls + "]");
    }
    std::string short_escapes;      // letters after the backslash
    std::string low_controls, high_controls;  // last hex digits of \u000X and \u001X
    for (char32_t c = 0; c <= '\\'; ++c) {
        if (!(c < 0x20 || c == '"' || c == '\\') || !contains(set, c)) continue;
        const std::string spelled = json_spelling(c);
        if (spelled.size() == 2) short_escapes += class_member(char32_t(spelled[1]));
        else (c < 0x10 ? low_controls : high_controls) += class_member(char32_t(spelled.back()));
    }
    std::vector<std::string> escapes;
    if (!short_escapes.empty()) escapes.push_back("[" + short_escapes + "]");
    if (!low_controls.empty()) escapes.push_back("\"u000\" [" + low_controls + "]");
    if (!high_controls.empty()) escapes.push_back("\"u001\" [" + high_controls + "]");
    if (!escapes.empty()) {
        std::string tail;
        for (std::size_t i = 0; i < escapes.size(); ++i) tail += (i ? " | " : "") + escapes[i];
        alternatives.push_back("\"\\\\\" (" + tail + ")");
    }
    std::string out;
    for (std::size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
    return out;
}

inline const Ranges& digit_set() {
    static const Ranges set = {{'0', '9'}};
    return set;
}
inline const Ranges& word_set() {
    static const Ranges set = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    return set;
}
// ECMA-262 WhiteSpace and LineTerminator.
inline const Ranges& space_set() {
    static const Ranges set = normalized({{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
                                          {0xFEFF, 0xFEFF}});
    return set;
}
// What `.` matches: everything but the line terminators.
inline const Ranges& dot_set() {
    static const Ranges set = complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});
    return set;
}
inline const Ranges& every_char() {
    static const Ranges set = {{0, kLastCodePoint}};
    return set;
}

// A compiled piece of a pattern: its GBNF, the elements it expands to, and the fewest and most
// characters it matches; compiled to an automaton, its fragment of the Nfa instead of GBNF:
// states [first, the arena's end when the piece was done), entered at `in`, left at `out`.
struct Piece {
    std::string gbnf;
    std::uint64_t elements = 0;
    std::uint64_t min_chars = 0;
    std::uint64_t max_chars = 0;  // kUnbounded: no most
    int in = -1, out = -1, first = 0;
};

// A top-level alternative compiled to an automaton: its body (padded with any characters where
// it is not anchored) and the lookaheads right after its ^, each with any characters after it
// (a lookahead at the start matches the rest of the string's beginning).
struct Lookahead {
    bool negative = false;
    Piece piece;
};
struct TopAlternative {
    Piece body;
    std::vector<Lookahead> lookaheads;
};
struct PatternAutomaton {
    Piece whole;  // every top-level alternative, lookaheads left out
    std::vector<TopAlternative> alternatives;
    bool has_lookaheads = false;
};

// Whether a pattern may hold a lookahead (or is near enough that only the automaton can tell):
// those compile only as automata.
inline bool mentions_lookahead(std::string_view pattern) {
    return pattern.find("(?=") != std::string_view::npos || pattern.find("(?!") != std::string_view::npos;
}

inline std::uint64_t add_counts(std::uint64_t a, std::uint64_t b) { return a == kUnbounded || b == kUnbounded ? kUnbounded : a + b; }
inline std::uint64_t times(std::uint64_t a, std::uint64_t n) {
    if (a == 0 || n == 0) return 0;
    return a == kUnbounded || n == kUnbounded ? kUnbounded : a * n;
}

class PatternCompiler {
public:
    // named_set(body): the name of a rule with that GBNF body (one rule per distinct body).
    // With an Nfa, pieces become fragments of it (compile_automaton) and named_set is not used.
    PatternCompiler(std::string_view pattern, std::string where, std::function<std::string(const std::string&)> named_set,
                    automaton::Nfa* nfa = nullptr)
        : where_(std::move(where)), named_set_(std::move(named_set)), nfa_(nfa) {
        if (pattern.size() > kMaxPatternLength)
            throw GrammarTooComplex("JSON schema: the pattern at " + where_ + " is " + std::to_string(pattern.size()) +
                                    " bytes long; the limit is " + std::to_string(kMaxPatternLength));
        decode(pattern);
    }

    // The whole pattern, each top-level alternative padded with any characters where it is not
    // anchored.
    Piece compile() {
        Piece out = alternation(true);
        if (pos_ < text_.size()) error("the end of the pattern or '|'");
        return out;
    }

    // The whole pattern as Nfa fragments (the compiler was given an Nfa), with each top-level
    // alternative and its lookaheads apart for the automata that need them.
    PatternAutomaton compile_automaton() {
        PatternAutomaton out;
        out.whole = compile();
        out.alternatives = std::move(alternatives_);
        for (const TopAlternative& a : out.alternatives) out.has_lookaheads = out.has_lookaheads || !a.lookaheads.empty();
        return out;
    }

private:
    std::u32string text_;
    std::size_t pos_ = 0;
    int depth_ = 0;
    std::string where_;
    std::function<std::string(const std::string&)> named_set_;
    automaton::Nfa* nfa_;
    std::vector<TopAlternative> alternatives_;

    int state_count() const { return int(nfa_->states.size()); }
    void link(int from, int to) { nfa_->states[std::size_t(from)].empty.push_back(to); }
    // Any characters, any number of them: one state looping on every character.
    Piece any_string() {
        const int s = nfa_->add_state();
        nfa_->add_move(s, subtract(every_char(), {{0xD800, 0xDFFF}}), s);
        return {"", 2, 0, kUnbounded, s, s, s};
    }

    void decode(std::string_view bytes) {
        for (std::size_t i = 0; i < bytes.size();) {
            const auto b = static_cast<unsigned char>(bytes[i]);
            const int length = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
            if (length == 0 || i + std::size_t(length) > bytes.size())
                fail("JSON schema: the pattern at ", where_, " is not valid UTF-8 (byte ", i, ")");
            char32_t c = length == 1 ? b : b & (0x7F >> length);
            for (int k = 1; k < length; ++k) c = (c << 6) | (static_cast<unsigned char>(bytes[i + std::size_t(k)]) & 0x3F);
            text_ += c;
            i += std::size_t(length);
        }
    }

    std::string found() const {
        if (pos_ >= text_.size()) return "the end";
        std::string out = "'";
        for (std::size_t i = pos_; i < std::min(text_.size(), pos_ + 12); ++i) out += utf8(text_[i]);
        return out + "' at character " + std::to_string(pos_);
    }
    [[noreturn]] void error(const std::string& expected) const {
        fail("JSON schema: the pattern at ", where_, ": expected ", expected, ", found ", found());
    }
    [[noreturn]] void unsupported(const std::string& what) const {
        throw UnsupportedSchema("JSON schema: " + what + " (" + found() + ") in the pattern at " + where_ + " is not supported");
    }
    void check_size(const Piece& p) const {
        if (p.elements > kMaxPatternElements)
            throw GrammarTooComplex("JSON schema: the pattern at " + where_ + " expands to more than " +
                                    std::to_string(kMaxPatternElements) + " grammar elements once its counts are multiplied out; the limit is " +
                                    std::to_string(kMaxPatternElements));
    }
    bool at(char32_t c) const { return pos_ < text_.size() && text_[pos_] == c; }

    Piece set_piece(const Ranges& set) {
        const Ranges characters = subtract(set, {{0xD800, 0xDFFF}});
        if (characters.empty()) unsupported("a class that matches no character");
        if (!nfa_) return {named_set_(json_char_of(set)), 1, 1, 1};
        const int in = nfa_->add_state(), out = nfa_->add_state();
        nfa_->add_move(in, characters, out);
        return {"", 1, 1, 1, in, out, in};
    }
    Piece char_piece(char32_t c) {
        if (nfa_) return set_piece({{c, c}});
        return {gbnf_literal(json_spelling(c)), 1, 1, 1};
    }

    // Alternatives separated by '|'; at the top, each may be anchored.
    Piece alternation(bool top) {
        const int first = nfa_ ? state_count() : 0;
        std::vector<Piece> alternatives{sequence(top)};
        while (at('|')) {
            ++pos_;
            alternatives.push_back(sequence(top));
        }
        if (alternatives.size() == 1) return alternatives[0];
        Piece out{"(", 1, kUnbounded, 0};
        if (nfa_) {
            out.in = nfa_->add_state();
            out.out = nfa_->add_state();
            out.first = first;
        }
        for (std::size_t i = 0; i < alternatives.size(); ++i) {
            const Piece& a = alternatives[i];
            out.gbnf += (i ? " | " : "") + a.gbnf;
            out.elements += a.elements;
            out.min_chars = std::min(out.min_chars, a.min_chars);
            out.max_chars = std::max(out.max_chars, a.max_chars);
            if (nfa_) {
                link(out.in, a.in);
                link(a.out, out.out);
            }
        }
        out.gbnf += ")";
        check_size(out);
        return out;
    }

    Piece sequence(bool top) {
        Piece out{"", 0, 0, 0};
        bool anchored_start = false, anchored_end = false;
        if (top && at('^')) {
            ++pos_;
            anchored_start = true;
        }
        std::vector<Lookahead> lookaheads;
        if (nfa_) {
            out.first = state_count();
            out.in = out.out = nfa_->add_state();
            while (top && anchored_start && lookahead_next()) lookaheads.push_back(lookahead());
        }
        while (pos_ < text_.size() && !at('|') && !at(')')) {
            if (top && at('$') && (pos_ + 1 == text_.size() || text_[pos_ + 1] == '|')) {
                ++pos_;
                anchored_end = true;
                break;
            }
            append(out, quantified(atom()));
        }
        if (top && !(anchored_start && anchored_end)) {
            if (nfa_) {
                if (!anchored_start) {
                    Piece padded = any_string();
                    padded.first = out.first;
                    append(padded, out);
                    out = padded;
                }
                if (!anchored_end) append(out, any_string());
            } else {
                const Piece any = set_piece(every_char());
                if (!anchored_start) out = {any.gbnf + "* " + out.gbnf, out.elements + 2, out.min_chars, kUnbounded};
                if (!anchored_end) out = {out.gbnf + " " + any.gbnf + "*", out.elements + 2, out.min_chars, kUnbounded};
            }
        }
        if (out.gbnf.empty()) out.gbnf = "\"\"";
        if (top && nfa_) alternatives_.push_back({out, std::move(lookaheads)});
        return out;
    }

    // `item` after `out`.
    void append(Piece& out, const Piece& item) {
        out.gbnf += (out.gbnf.empty() ? "" : " ") + item.gbnf;
        out.elements += item.elements;
        out.min_chars = add_counts(out.min_chars, item.min_chars);
        out.max_chars = add_counts(out.max_chars, item.max_chars);
        check_size(out);
        if (nfa_) {
            link(out.out, item.in);
            out.out = item.out;
        }
    }

    // One group deeper, within kMaxPatternNesting.
    void enter_group() {
        if (++depth_ > kMaxPatternNesting)
            throw GrammarTooComplex("JSON schema: groups in the pattern at " + where_ + " nest more than " +
                                    std::to_string(kMaxPatternNesting) + " deep; the limit is " + std::to_string(kMaxPatternNesting));
    }

    bool lookahead_next() const {
        return pos_ + 2 < text_.size() && text_[pos_] == '(' && text_[pos_ + 1] == '?' && (text_[pos_ + 2] == '=' || text_[pos_ + 2] == '!');
    }
    // (?=...) or (?!...) right after a top-level ^: what follows must (or must not) begin with a
    // match of it.
    Lookahead lookahead() {
        Lookahead out;
        out.negative = text_[pos_ + 2] == '!';
        pos_ += 3;
        enter_group();
        out.piece = alternation(false);
        --depth_;
        if (!at(')')) error("')' closing a lookahead");
        ++pos_;
        append(out.piece, any_string());
        return out;
    }

    // ? * + {n} {n,} {n,m} (and their lazy forms) after an item.
    Piece quantified(Piece item) {
        if (pos_ >= text_.size()) return item;
        std::uint64_t min = 0, max = kUnbounded;
        const char32_t c = text_[pos_];
        std::string suffix;
        if (c == '?' || c == '*' || c == '+') {
            ++pos_;
            min = c == '+' ? 1 : 0;
            max = c == '?' ? 1 : kUnbounded;
            suffix = std::string(1, char(c));
        } else if (c == '{') {
            ++pos_;
            min = max = count();
            if (at(',')) {
                ++pos_;
                max = at('}') ? kUnbounded : count();
            }
            if (!at('}')) error("'}' closing a count");
            ++pos_;
            if (max < min) error("a count {n,m} with n <= m");
            suffix = "{" + std::to_string(min) + (max == min ? "" : "," + (max == kUnbounded ? "" : std::to_string(max))) + "}";
        } else {
            return item;
        }
        if (at('?')) ++pos_;  // lazy: the same strings match
        if (max == kUnbounded && item.min_chars == 0)
            unsupported("a * or + over something that can match nothing");
        Piece out;
        out.gbnf = "(" + item.gbnf + ")" + suffix;
        const std::uint64_t optional = max == kUnbounded ? 1 : max - min;
        out.elements = min * item.elements + optional * (item.elements + 1) + 1;
        out.min_chars = times(item.min_chars, min);
        out.max_chars = times(item.max_chars, max);
        check_size(out);
        if (nfa_) repeat_fragment(item, min, max, out);
        return out;
    }

    // The Nfa of `item` repeated min to max times (kUnbounded: no most) into out's fragment:
    // min copies in a row, then either a loop over one more or max - min optional ones.
    void repeat_fragment(const Piece& item, std::uint64_t min, std::uint64_t max, Piece& out) {
        const int end = state_count();
        const std::uint64_t copies = min + (max == kUnbounded ? 1 : max - min);
        std::vector<std::pair<int, int>> fragments;
        for (std::uint64_t k = 0; k < copies; ++k) {
            const int offset = k == 0 ? 0 : nfa_->copy(item.first, end);
            fragments.push_back({item.in + offset, item.out + offset});
        }
        out.first = item.first;
        out.in = nfa_->add_state();
        int at = out.in;
        for (std::uint64_t k = 0; k < min; ++k) {
            link(at, fragments[k].first);
            at = fragments[k].second;
        }
        if (max == kUnbounded) {
            link(at, fragments[min].first);
            link(fragments[min].second, at);
            out.out = at;
            return;
        }
        out.out = nfa_->add_state();
        for (std::uint64_t k = min; k < copies; ++k) {
            link(at, out.out);
            link(at, fragments[k].first);
            at = fragments[k].second;
        }
        link(at, out.out);
    }

    std::uint64_t count() {
        const std::size_t start = pos_;
        std::uint64_t value = 0;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
            value = value * 10 + (text_[pos_] - '0');
            if (value > std::uint64_t(kMaxPatternCount))
                throw GrammarTooComplex("JSON schema: a count in the pattern at " + where_ + " is above " +
                                        std::to_string(kMaxPatternCount) + ", the limit (" + found() + ")");
            ++pos_;
        }
        if (pos_ == start) error("a count");
        return value;
    }

    Piece atom() {
        const char32_t c = text_[pos_];
        if (c == '(') return group();
        if (c == '[') {
            ++pos_;
            return set_piece(class_body());
        }
        if (c == '.') {
            ++pos_;
            return set_piece(dot_set());
        }
        if (c == '^' || c == '$') unsupported("an anchor other than at the start or end of a top-level alternative");
        if (c == '*' || c == '+' || c == '?' || c == '{') error("something to repeat before '" + utf8(c) + "'");
        if (c == ']' || c == '}') error("no lone '" + utf8(c) + "' (escape it)");
        if (c == '\\') {
            ++pos_;
            Ranges set;
            const char32_t single = escape(false, set);
            if (!set.empty()) return set_piece(set);
            if (single >= 0xD800 && single <= 0xDFFF) unsupported("a lone surrogate");
            return char_piece(single);
        }
        ++pos_;
        return char_piece(c);
    }

    Piece group() {
        ++pos_;
        if (at('?')) {
            ++pos_;
            if (at(':')) {
                ++pos_;
            } else if (at('<') && pos_ + 1 < text_.size() && text_[pos_ + 1] != '=' && text_[pos_ + 1] != '!') {
                while (pos_ < text_.size() && !at('>')) ++pos_;
                if (!at('>')) error("'>' ending a group's name");
                ++pos_;
            } else {
                --pos_;
                unsupported(nfa_ ? "a lookbehind, or a lookahead other than right after the ^ that starts the pattern or a top-level alternative"
                                 : "a lookahead or lookbehind");
            }
        }
        enter_group();
        Piece inner = alternation(false);
        --depth_;
        if (!at(')')) error("')' closing a group");
        ++pos_;
        inner.gbnf = "(" + inner.gbnf + ")";
        inner.elements += 1;
        return inner;
    }

    // After '[': the class up to its ']'.
    Ranges class_body() {
        bool negated = false;
        if (at('^')) {
            negated = true;
            ++pos_;
        }
        Ranges set;
        while (!at(']')) {
            if (pos_ >= text_.size()) error("']' closing a class");
            Ranges member;
            const char32_t lo = class_atom(member);
            if (at('-') && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
                ++pos_;
                Ranges upper;
                const char32_t hi = class_atom(upper);
                if (!member.empty() || !upper.empty()) error("a character at both ends of a range, not a class escape");
                if (hi < lo) error("a range from low to high");
                set.push_back({lo, hi});
            } else if (member.empty()) {
                set.push_back({lo, lo});
            } else {
                set.insert(set.end(), member.begin(), member.end());
            }
        }
        ++pos_;
        return negated ? complement(set) : normalized(set);
    }

    // One character of a class; a class escape (\d ...) fills `set` instead.
    char32_t class_atom(Ranges& set) {
        const char32_t c = text_[pos_++];
        if (c != '\\') return c;
        return escape(true, set);
    }

    // After '\': the character it stands for, or the set it stands for (in `set`).
    char32_t escape(bool in_class, Ranges& set) {
        if (pos_ >= text_.size()) error("an escaped character");
        const char32_t e = text_[pos_++];
        switch (e) {
            case 'd': set = digit_set(); return 0;
            case 'D': set = complement(digit_set()); return 0;
            case 'w': set = word_set(); return 0;
            case 'W': set = complement(word_set()); return 0;
            case 's': set = space_set(); return 0;
            case 'S': set = complement(space_set()); return 0;
            case 'n': return '\n';
            case 'r': return '\r';
            case 't': return '\t';
            case 'v': return '\v';
            case 'f': return '\f';
            case 'x': return hex_digits(2);
            case 'u': return unicode_escape();
            case 'c': {
                if (pos_ >= text_.size() || !((text_[pos_] | 0x20) >= 'a' && (text_[pos_] | 0x20) <= 'z'))
                    error("a letter after \\c");
                return text_[pos_++] % 32;
            }
            case '0':
                if (at('0') || (pos_ < text_.size() && text_[pos_] >= '1' && text_[pos_] <= '9')) error("no digit after \\0");
                return 0;
            default: break;
        }
        if (e == 'b' && in_class) return '\b';
        --pos_;
        if (e == 'b' || e == 'B') unsupported("a word boundary");
        if ((e >= '1' && e <= '9') || e == 'k') unsupported("a backreference");
        if (e == 'p' || e == 'P') unsupported("a Unicode property escape");
        if (std::u32string_view(U"^$\\.*+?()[]{}|/").find(e) != std::u32string_view::npos || (in_class && e == '-')) {
            ++pos_;
            return e;
        }
        error("a known escape (\\d \\w \\s \\n \\t \\xHH \\uHHHH or an escaped syntax character)");
    }

    char32_t hex_digits(int n) {
        char32_t value = 0;
        for (int i = 0; i < n; ++i, ++pos_) {
            if (pos_ >= text_.size()) error(std::to_string(n) + " hex digits");
            const char32_t c = text_[pos_];
            const int d = c >= '0' && c <= '9' ? int(c - '0') : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? int((c | 0x20) - 'a' + 10) : -1;
            if (d < 0) error(std::to_string(n) + " hex digits");
            value = value * 16 + char32_t(d);
        }
        return value;
    }

    // After \u: HHHH (a surrogate pair of two escapes joined) or {H...}.
    char32_t unicode_escape() {
        if (at('{')) {
            ++pos_;
            char32_t value = 0;
            const std::size_t start = pos_;
            while (!at('}')) {
                if (pos_ - start >= 6) error("at most 6 hex digits in \\u{...}");
                value = value * 16 + hex_digits(1);
            }
            if (pos_ == start || value > kLastCodePoint) error("a code point in \\u{...}");
            ++pos_;
            return value;
        }
        const char32_t first = hex_digits(4);
        if (first >= 0xD800 && first <= 0xDBFF && pos_ + 1 < text_.size() && text_[pos_] == '\\' && text_[pos_ + 1] == 'u') {
            const std::size_t back = pos_;
            pos_ += 2;
            const char32_t second = hex_digits(4);
            if (second >= 0xDC00 && second <= 0xDFFF) return 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
            pos_ = back;
        }
        return first;
    }
};

// One pattern a string must match, and where it came from (for messages).
struct PatternSource {
    std::string pattern;
    std::string where;
};

// GBNF (between a JSON string's quotes) for the strings that match every pattern and have at
// least min_chars and (max_chars >= 0) at most max_chars characters, as automata: each pattern
// (each top-level alternative with lookaheads apart) determinized, intersected, within the
// lengths, minimized, then one rule per state through define(name, body), named from `prefix`.
// Returns the first state's rule. An empty intersection is UnsupportedSchema naming `where`.
inline std::string intersection_gbnf(const std::vector<PatternSource>& patterns, std::uint64_t min_chars, std::int64_t max_chars,
                                     const std::string& where, const std::string& prefix,
                                     const std::function<std::string(const std::string&)>& named_set,
                                     const std::function<void(const std::string&, const std::string&)>& define) {
    automaton::Builder build(where);
    std::vector<PatternAutomaton> compiled;
    bool lengths_implied = min_chars == 0 && max_chars < 0;
    for (const PatternSource& p : patterns) {
        compiled.push_back(PatternCompiler(p.pattern, p.where, nullptr, &build.nfa).compile_automaton());
        const Piece& whole = compiled.back().whole;
        lengths_implied = lengths_implied || (whole.min_chars >= min_chars && max_chars >= 0 && whole.max_chars <= std::uint64_t(max_chars));
    }
    build.close_alphabet();
    automaton::Dfa all;
    for (std::size_t i = 0; i < compiled.size(); ++i) {
        const PatternAutomaton& c = compiled[i];
        automaton::Dfa language;
        if (!c.has_lookaheads) language = build.determinize(c.whole.in, c.whole.out);
        for (std::size_t k = 0; c.has_lookaheads && k < c.alternatives.size(); ++k) {
            const TopAlternative& a = c.alternatives[k];
            automaton::Dfa one = build.determinize(a.body.in, a.body.out);
            for (const Lookahead& l : a.lookaheads)
                one = build.minimized(build.combine(one, build.determinize(l.piece.in, l.piece.out),
                                                    l.negative ? automaton::Combine::first_not_second : automaton::Combine::both));
            language = k == 0 ? one : build.minimized(build.combine(language, one, automaton::Combine::either));
        }
        language = build.minimized(language);
        all = i == 0 ? language : build.minimized(build.combine(all, language, automaton::Combine::both));
    }
    if (!lengths_implied) all = build.minimized(build.within_lengths(all, min_chars, max_chars));
    if (all.start < 0)
        throw UnsupportedSchema("JSON schema: no string matches the pattern, format and lengths at " + where +
                                " together, so nothing could be generated");
    const auto set_rule = [&](const automaton::CodeRanges& set) { return named_set(json_char_of(set)); };
    return build.to_gbnf(all, prefix, set_rule, define, kMaxPatternElements);
}

}  // namespace pattern_detail

}  // namespace smol::text
