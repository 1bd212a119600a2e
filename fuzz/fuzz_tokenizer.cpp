// libFuzzer target for the tokenizer, on the real SmolLM3 vocabulary (SMOL_FUZZ_VOCAB, set by
// fuzz/CMakeLists.txt). For any input bytes x:
//   - encode(x) with and without parse_special gives ids inside the vocabulary and never throws;
//   - decoding gives back x with invalid UTF-8 replaced as the tokenizer documents it (each byte
//     the lenient decoder cannot use becomes U+FFFD, overlong forms are shortened), so for valid
//     UTF-8 and parse_special off, decode(encode(x)) == x exactly;
//   - without parse_special no CONTROL token comes out (they must be written by the template);
//   - the StreamDecoder, fed those ids and also ids standing for x's raw bytes one by one, emits
//     only valid UTF-8: decode()'s text with each ill-formed part replaced by one U+FFFD.
// Anything else (a sanitizer report, an exception, a broken property) is a finding.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "smol/gguf/reader.hpp"
#include "smol/text/tokenizer.hpp"
#include "smol/text/unicode.hpp"

namespace {

using smol::text::StreamDecoder;
using smol::text::Tokenizer;
namespace unicode = smol::text::unicode;

std::string printable(std::string_view s) {
    std::string out;
    for (const unsigned char c : s.substr(0, 200)) {
        if (c >= 0x20 && c < 0x7F && c != '\\') {
            out += char(c);
        } else {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02X", c);
            out += escaped;
        }
    }
    return s.size() > 200 ? out + "..." : out;
}

[[noreturn]] void finding(const char* what, std::string_view input, std::string_view got = {}, std::string_view want = {}) {
    std::fprintf(stderr, "fuzz_tokenizer: %s\n  input: \"%s\"\n", what, printable(input).c_str());
    if (!got.empty() || !want.empty())
        std::fprintf(stderr, "  got:   \"%s\"\n  want:  \"%s\"\n", printable(got).c_str(), printable(want).c_str());
    std::abort();
}

struct Vocab {
    Tokenizer tokenizer;
    std::vector<std::int32_t> byte_token;  // [256] the token of each single raw byte
};

const Vocab& vocab() {
    static const Vocab v = [] {
        try {
            Tokenizer t = Tokenizer::from_gguf(smol::gguf::File::open(SMOL_FUZZ_VOCAB));
            std::vector<std::int32_t> byte_token(256);
            for (int b = 0; b < 256; ++b) {
                const auto id = t.find(unicode::ByteMapping::get().byte_to_utf8(std::uint8_t(b)));
                if (!id) {
                    std::fprintf(stderr, "fuzz_tokenizer: the vocabulary has no token for byte %d\n", b);
                    std::abort();
                }
                byte_token[std::size_t(b)] = *id;
            }
            return Vocab{std::move(t), std::move(byte_token)};
        } catch (const std::exception& e) {
            std::fprintf(stderr, "fuzz_tokenizer: cannot load %s: %s\n", SMOL_FUZZ_VOCAB, e.what());
            std::abort();
        }
    }();
    return v;
}

// What decoding must give back for `text`: the code points the lenient decoder reads, re-encoded.
std::string expected_round_trip(std::string_view text) {
    std::string out;
    for (const char32_t cp : unicode::decode_utf8_lenient(text).codepoints) unicode::append_utf8(out, cp);
    return out;
}

// `text` with each maximal ill-formed subpart replaced by U+FFFD (Unicode 15, section 3.9), the
// StreamDecoder's promise. Worked out from code point ranges, independently of unicode.hpp's byte
// tables: a prefix is a valid start when some completion of it encodes a scalar value in the
// range its length allows (no overlong forms, no surrogates, nothing above U+10FFFF).
std::string sanitize_reference(std::string_view text) {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    std::string out;
    for (std::size_t i = 0; i < n;) {
        const unsigned char b = s[i];
        const int length = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
        if (length == 1) {
            out += char(b);
            ++i;
            continue;
        }
        int present = length ? 1 : 0;  // lead plus the continuation bytes that follow it
        while (length && present < length && i + std::size_t(present) < n && (s[i + std::size_t(present)] & 0xC0) == 0x80)
            ++present;
        const char32_t min_cp = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
        const char32_t max_cp = length == 2 ? 0x7FF : length == 3 ? 0xFFFF : 0x10FFFF;
        // Whether the first `k` bytes can start a well-formed sequence of `length` bytes.
        auto can_start = [&](int k) {
            char32_t lo = b & (0x7F >> length), hi = lo;
            for (int m = 1; m < length; ++m) {
                const bool have = m < k;
                lo = (lo << 6) | (have ? s[i + std::size_t(m)] & 0x3F : 0x00);
                hi = (hi << 6) | (have ? s[i + std::size_t(m)] & 0x3F : 0x3F);
            }
            const char32_t first = std::max(lo, min_cp), last = std::min(hi, max_cp);
            return first <= last && !(first >= 0xD800 && last <= 0xDFFF);
        };
        if (length && present == length && can_start(length)) {
            out.append(text.substr(i, std::size_t(length)));
            i += std::size_t(length);
            continue;
        }
        int valid_prefix = 0;
        while (valid_prefix < present && can_start(valid_prefix + 1)) ++valid_prefix;
        unicode::append_utf8(out, unicode::kReplacementChar);
        i += std::size_t(std::max(valid_prefix, 1));
    }
    return out;
}

// Streams `ids` and checks the pieces against decode(ids).
void check_stream(const Tokenizer& t, const std::vector<std::int32_t>& ids, bool show_control, std::string_view input) {
    StreamDecoder stream(t, show_control);
    std::string streamed;
    for (const std::int32_t id : ids) {
        const std::string piece = stream.push(id);
        if (!unicode::is_valid_utf8(piece)) finding("StreamDecoder::push returned invalid UTF-8", input, piece);
        streamed += piece;
    }
    const std::string rest = stream.flush();
    if (!unicode::is_valid_utf8(rest)) finding("StreamDecoder::flush returned invalid UTF-8", input, rest);
    if (stream.has_pending()) finding("StreamDecoder holds bytes after flush", input);
    streamed += rest;
    const std::string whole = t.decode(ids, show_control);
    const std::string want = sanitize_reference(whole);
    if (streamed != want) finding("streamed text is not decode() with ill-formed UTF-8 replaced", input, streamed, want);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    (void)vocab();  // load once, before the first input is timed
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const Vocab& v = vocab();
    const Tokenizer& t = v.tokenizer;
    // An exact-size heap copy, so ASan flags a read one byte past the end.
    const std::string input(reinterpret_cast<const char*>(data), size);
    const std::string expected = expected_round_trip(input);
    try {
        for (const bool parse_special : {false, true}) {
            const std::vector<std::int32_t> ids = t.encode(input, parse_special);
            for (const std::int32_t id : ids)
                if (id < 0 || std::size_t(id) >= t.n_vocab()) finding("encode produced an id outside the vocabulary", input);
            if (input.empty() != ids.empty()) finding("encode: empty output for non-empty input or the reverse", input);
            if (!parse_special)
                for (const std::int32_t id : ids)
                    if (t.is_control(id)) finding("encode without parse_special produced a CONTROL token", input);
            // Control tokens stand for their text only when they were parsed from it.
            const std::string decoded = t.decode(ids, /*show_control=*/parse_special);
            if (decoded != expected) finding("decode(encode(x)) is not x with invalid UTF-8 replaced", input, decoded, expected);
            if (!parse_special && unicode::is_valid_utf8(input) && decoded != input)
                finding("decode(encode(x)) != x for valid UTF-8", input, decoded, input);
            check_stream(t, ids, parse_special, input);
        }
        // The raw bytes as byte tokens: every way a character can be split across tokens.
        std::vector<std::int32_t> byte_ids;
        byte_ids.reserve(input.size());
        for (const char c : input) byte_ids.push_back(v.byte_token[std::uint8_t(c)]);
        if (t.decode(byte_ids) != input) finding("byte tokens do not decode to their bytes", input);
        check_stream(t, byte_ids, false, input);
    } catch (const std::exception& e) {
        finding(e.what(), input);
    }
    return 0;
}
