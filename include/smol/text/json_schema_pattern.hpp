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
// taking any character. Refused by name: lookarounds, backreferences, word boundaries, Unicode
// property escapes, anchors elsewhere, and a * or + over something that can match nothing
// (GBNF would read it as left recursion).
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
// characters it matches.
struct Piece {
    std::string gbnf;
    std::uint64_t elements = 0;
    std::uint64_t min_chars = 0;
    std::uint64_t max_chars = 0;  // kUnbounded: no most
};

inline std::uint64_t add_counts(std::uint64_t a, std::uint64_t b) { return a == kUnbounded || b == kUnbounded ? kUnbounded : a + b; }
inline std::uint64_t times(std::uint64_t a, std::uint64_t n) {
    if (a == 0 || n == 0) return 0;
    return a == kUnbounded || n == kUnbounded ? kUnbounded : a * n;
}

class PatternCompiler {
public:
    // named_set(body): the name of a rule with that GBNF body (one rule per distinct body).
    PatternCompiler(std::string_view pattern, std::string where, std::function<std::string(const std::string&)> named_set)
        : where_(std::move(where)), named_set_(std::move(named_set)) {
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

private:
    std::u32string text_;
    std::size_t pos_ = 0;
    int depth_ = 0;
    std::string where_;
    std::function<std::string(const std::string&)> named_set_;

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
        if (subtract(set, {{0xD800, 0xDFFF}}).empty()) unsupported("a class that matches no character");
        return {named_set_(json_char_of(set)), 1, 1, 1};
    }

    // Alternatives separated by '|'; at the top, each may be anchored.
    Piece alternation(bool top) {
        std::vector<Piece> alternatives{sequence(top)};
        while (at('|')) {
            ++pos_;
            alternatives.push_back(sequence(top));
        }
        if (alternatives.size() == 1) return alternatives[0];
        Piece out{"(", 1, kUnbounded, 0};
        for (std::size_t i = 0; i < alternatives.size(); ++i) {
            const Piece& a = alternatives[i];
            out.gbnf += (i ? " | " : "") + a.gbnf;
            out.elements += a.elements;
            out.min_chars = std::min(out.min_chars, a.min_chars);
            out.max_chars = std::max(out.max_chars, a.max_chars);
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
        while (pos_ < text_.size() && !at('|') && !at(')')) {
            if (top && at('$') && (pos_ + 1 == text_.size() || text_[pos_ + 1] == '|')) {
                ++pos_;
                anchored_end = true;
                break;
            }
            const Piece item = quantified(atom());
            out.gbnf += (out.gbnf.empty() ? "" : " ") + item.gbnf;
            out.elements += item.elements;
            out.min_chars = add_counts(out.min_chars, item.min_chars);
            out.max_chars = add_counts(out.max_chars, item.max_chars);
            check_size(out);
        }
        if (top && !(anchored_start && anchored_end)) {
            const Piece any = set_piece(every_char());
            if (!anchored_start) out = {any.gbnf + "* " + out.gbnf, out.elements + 2, out.min_chars, kUnbounded};
            if (!anchored_end) out = {out.gbnf + " " + any.gbnf + "*", out.elements + 2, out.min_chars, kUnbounded};
        }
        if (out.gbnf.empty()) out.gbnf = "\"\"";
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
        return out;
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
            return {gbnf_literal(json_spelling(single)), 1, 1, 1};
        }
        ++pos_;
        return {gbnf_literal(json_spelling(c)), 1, 1, 1};
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
                unsupported("a lookahead or lookbehind");
            }
        }
        if (++depth_ > kMaxPatternNesting)
            throw GrammarTooComplex("JSON schema: groups in the pattern at " + where_ + " nest more than " +
                                    std::to_string(kMaxPatternNesting) + " deep; the limit is " + std::to_string(kMaxPatternNesting));
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

}  // namespace pattern_detail

}  // namespace smol::text
