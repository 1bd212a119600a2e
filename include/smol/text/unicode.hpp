#pragma once
// Unicode helpers for the byte-level BPE tokenizer: character classes of the pre-tokenizer
// regex, UTF-8 decoding that never fails, UTF-8 encoding, the GPT-2 byte-to-unicode mapping,
// and the UTF-8 validation a streaming decoder needs to hold back partial characters.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "smol/text/unicode_tables.hpp"

namespace smol::text::unicode {

using unicode_tables::CharClass;

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr char32_t kMaxCodepoint = 0x10FFFF;

// Class of one code point for \p{L}, \p{N} and \s. ASCII is answered from a small table because
// it dominates real text; everything else is a binary search over ~800 generated ranges.
inline CharClass char_class(char32_t cp) {
    static constexpr auto ascii = [] {
        std::array<CharClass, 128> table{};
        for (char32_t c = 0; c < 128; ++c) {
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) table[c] = CharClass::Letter;
            else if (c >= '0' && c <= '9') table[c] = CharClass::Number;
            else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) table[c] = CharClass::Whitespace;
        }
        return table;
    }();
    if (cp < 128) return ascii[cp];
    const auto& ranges = unicode_tables::kClassRanges;
    auto it = std::upper_bound(std::begin(ranges), std::end(ranges), std::uint32_t(cp),
                               [](std::uint32_t c, const unicode_tables::ClassRange& r) { return c < r.first; });
    if (it == std::begin(ranges)) return CharClass::Other;
    --it;
    return cp <= it->last ? it->char_class : CharClass::Other;
}

inline bool is_letter(char32_t cp) { return char_class(cp) == CharClass::Letter; }
inline bool is_number(char32_t cp) { return char_class(cp) == CharClass::Number; }
inline bool is_whitespace(char32_t cp) { return char_class(cp) == CharClass::Whitespace; }

// Appends the UTF-8 encoding of `cp` (which must be at most U+10FFFF). Surrogates are encoded
// as three bytes like any other BMP value: the lenient decoder below can produce them, and
// re-encoding must give back the bytes it consumed.
inline void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(char(cp));
    } else if (cp < 0x800) {
        out.push_back(char(0xC0 | (cp >> 6)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(char(0xE0 | (cp >> 12)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(char(0xF0 | (cp >> 18)));
        out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    }
}

inline std::string to_utf8(char32_t cp) {
    std::string s;
    append_utf8(s, cp);
    return s;
}

// Decodes UTF-8 the way llama.cpp's tokenizer does, so that token ids agree on any input:
// a lead byte followed by the right number of continuation bytes gives one code point, with no
// check for overlong forms or surrogates; anything else (a stray continuation byte, a truncated
// sequence, a byte F8..FF) becomes one U+FFFD per offending byte and decoding resumes at the
// next byte. One deliberate difference: llama.cpp accepts F5..F7 leads whose value exceeds
// U+10FFFF and then throws while re-encoding them; here those lead bytes are invalid too.
struct DecodedText {
    std::vector<char32_t> codepoints;
    // True when re-encoding `codepoints` does not reproduce the input bytes (invalid bytes were
    // replaced or an overlong form was shortened).
    bool changed = false;
};

inline DecodedText decode_utf8_lenient(std::string_view text) {
    DecodedText result;
    result.codepoints.reserve(text.size());
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    auto continuation = [&](std::size_t i) { return i < n && (s[i] & 0xC0) == 0x80; };
    std::size_t i = 0;
    while (i < n) {
        const unsigned char b = s[i];
        char32_t cp = kReplacementChar;
        std::size_t length = 0;  // bytes consumed when valid
        if (b < 0x80) {
            cp = b;
            length = 1;
        } else if ((b & 0xE0) == 0xC0 && continuation(i + 1)) {
            cp = (char32_t(b & 0x1F) << 6) | (s[i + 1] & 0x3F);
            length = 2;
        } else if ((b & 0xF0) == 0xE0 && continuation(i + 1) && continuation(i + 2)) {
            cp = (char32_t(b & 0x0F) << 12) | (char32_t(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
            length = 3;
        } else if ((b & 0xF8) == 0xF0 && continuation(i + 1) && continuation(i + 2) && continuation(i + 3)) {
            cp = (char32_t(b & 0x07) << 18) | (char32_t(s[i + 1] & 0x3F) << 12) |
                 (char32_t(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
            length = cp <= kMaxCodepoint ? 4 : 0;
        }
        if (length == 0) {
            result.codepoints.push_back(kReplacementChar);
            result.changed = true;
            i += 1;
            continue;
        }
        const std::size_t canonical = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (canonical != length) result.changed = true;  // overlong form
        result.codepoints.push_back(cp);
        i += length;
    }
    return result;
}

// Length of the well-formed UTF-8 sequence (Unicode 15, table 3-7: no overlong forms, no
// surrogates, nothing above U+10FFFF) that starts at `text[0]`:
//   > 0: a complete, valid sequence of that many bytes;
//   = 0: the bytes present are a valid beginning but the sequence is cut short;
//   < 0: invalid; -k means the first k bytes form the maximal ill-formed subpart, which a
//        sanitizing decoder replaces with one U+FFFD.
inline int utf8_sequence_length(std::string_view text) {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    if (n == 0) return 0;
    const unsigned char b = s[0];
    if (b < 0x80) return 1;
    int length = 0;
    unsigned char second_lo = 0x80, second_hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) length = 2;
    else if (b == 0xE0) { length = 3; second_lo = 0xA0; }
    else if (b == 0xED) { length = 3; second_hi = 0x9F; }
    else if (b >= 0xE1 && b <= 0xEF) length = 3;
    else if (b == 0xF0) { length = 4; second_lo = 0x90; }
    else if (b == 0xF4) { length = 4; second_hi = 0x8F; }
    else if (b >= 0xF1 && b <= 0xF3) length = 4;
    else return -1;
    for (int k = 1; k < length; ++k) {
        if (std::size_t(k) >= n) return 0;
        const unsigned char lo = k == 1 ? second_lo : 0x80;
        const unsigned char hi = k == 1 ? second_hi : 0xBF;
        if (s[k] < lo || s[k] > hi) return -k;
    }
    return length;
}

inline bool is_valid_utf8(std::string_view text) {
    for (std::size_t i = 0; i < text.size();) {
        const int length = utf8_sequence_length(text.substr(i));
        if (length <= 0) return false;
        i += std::size_t(length);
    }
    return true;
}

// GPT-2's reversible byte-to-unicode mapping: printable Latin-1 bytes stand for themselves and
// the other 68 bytes (controls, space, soft hyphen...) are moved to U+0100.. in byte order, so
// every vocabulary entry is printable text without spaces.
class ByteMapping {
public:
    static const ByteMapping& get() {
        static const ByteMapping mapping;
        return mapping;
    }

    char32_t byte_to_codepoint(std::uint8_t byte) const { return to_codepoint_[byte]; }
    // The mapped character as UTF-8 (what vocabulary strings are made of).
    const std::string& byte_to_utf8(std::uint8_t byte) const { return to_utf8_[byte]; }
    // The byte a mapped code point stands for, or -1 for code points outside the mapping.
    int codepoint_to_byte(char32_t cp) const { return cp < to_byte_.size() ? to_byte_[cp] : -1; }

private:
    ByteMapping() {
        to_byte_.fill(-1);
        auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
        char32_t next_moved = 256;
        for (int b = 0; b < 256; ++b) {
            const char32_t cp = printable(b) ? char32_t(b) : next_moved++;
            to_codepoint_[b] = cp;
            to_utf8_[b] = to_utf8(cp);
            to_byte_[cp] = std::int16_t(b);
        }
    }

    std::array<char32_t, 256> to_codepoint_{};
    std::array<std::string, 256> to_utf8_{};
    std::array<std::int16_t, 324> to_byte_{};  // moved bytes end at U+0143
};

}  // namespace smol::text::unicode
