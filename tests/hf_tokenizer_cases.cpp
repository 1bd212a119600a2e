// Writes what the differential test against Hugging Face's tokenizer needs, all from one GGUF:
//   OUT/tokenizer.json, OUT/tokenizer-plain.json  the file's tokenizer in Hugging Face's format,
//                                                 with and without the CONTROL tokens;
//   OUT/cases.jsonl                               seeded random texts, each with smol's ids for
//                                                 special parsing on and off.
// run_hf_tokenizer_differential.sh then has Hugging Face tokenize the same texts and compares.
//
//   hf_tokenizer_cases VOCAB.gguf OUT_DIR [--count N] [--seed S]

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "program_args.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/text/hf_tokenizer_json.hpp"
#include "smol/text/tokenizer.hpp"
#include "smol/text/unicode.hpp"

namespace {

using smol::text::Tokenizer;
using smol::text::TokenType;

// Texts are strings of pieces drawn from these kinds, so that every rule gets exercised: the
// vocabulary's own entries (every language it knows), the pre-tokenizer's whitespace, digit and
// punctuation rules, contractions in both cases, emoji sequences, numbers of other scripts, and
// the special tokens' text (split out, or plain text when special parsing is off).
class TextGenerator {
public:
    TextGenerator(const Tokenizer& tokenizer, std::uint64_t seed) : rng_(seed) {
        for (std::int32_t id = 0; id < std::int32_t(tokenizer.n_vocab()); ++id) {
            const std::string& bytes = tokenizer.token_bytes(id);
            if (bytes.empty()) continue;
            if (tokenizer.type(id) == TokenType::Normal) {
                // Byte-level entries can be pieces of a character; texts must be valid UTF-8.
                if (smol::text::unicode::is_valid_utf8(bytes)) words_.push_back(bytes);
            } else {
                specials_.push_back(bytes);
            }
        }
    }

    std::string next() {
        std::string text;
        const int n_pieces = std::uniform_int_distribution<int>(1, 24)(rng_);
        for (int i = 0; i < n_pieces; ++i) append_piece(text);
        return text;
    }

private:
    void append_piece(std::string& text) {
        const int kind = std::uniform_int_distribution<int>(0, 99)(rng_);
        if (kind < 50) text += pick(words_);
        else if (kind < 63) text += pick(kWhitespace);
        else if (kind < 71) {
            const int n_digits = std::uniform_int_distribution<int>(1, 8)(rng_);
            for (int d = 0; d < n_digits; ++d) text += char('0' + std::uniform_int_distribution<int>(0, 9)(rng_));
        } else if (kind < 84) text += pick(kPunctuation);
        else if (kind < 90) text += pick(kEmoji);
        else if (kind < 94) text += pick(kOtherNumbers);
        else text += pick(specials_);
    }

    template <typename List>
    const std::string& pick(const List& list) {
        return list[std::uniform_int_distribution<std::size_t>(0, list.size() - 1)(rng_)];
    }

    inline static const std::vector<std::string> kWhitespace = {
        " ", "  ", "   ", "\n", "\n\n", "\t", " \n", "\r\n", "\r", " \t ", "\n ", "\xC2\xA0" /* NBSP */,
        "\xE3\x80\x80" /* ideographic space */, "\xE2\x80\x89" /* thin space */, "\x0B", "\x0C"};
    inline static const std::vector<std::string> kPunctuation = {
        ".", ",", "!", "?", "...", ";", ":", "'", "\"", "'s", "'S", "'t", "'T", "'re", "'RE", "'ve", "'Ve", "'m",
        "'M", "'ll", "'LL", "'d", "'D", "(", ")", "[", "]", "{", "}", "-", "--", "_", "/", "\\", "*", "#", "@",
        "&", "%", "$", "+", "=", "<", ">", "|", "^", "~", "`", "\xE2\x80\x94" /* em dash */, "\xE2\x80\x9C",
        "\xE2\x80\x9D", "\xC2\xAB", "\xC2\xBB", "\xC2\xBF", "\xE2\x82\xAC" /* euro */, "\xE3\x80\x82" /* 。 */,
        "\xEF\xBC\x8C" /* ， */, "\xD8\x8C" /* Arabic comma */, "```", "://", "->", "=>", "!=", "#include"};
    inline static const std::vector<std::string> kEmoji = {
        "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xE2\x9D\xA4\xEF\xB8\x8F", "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",
        "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7", "\xF0\x9F\xA4\x96", "\xE2\x9C\xA8",
        "\xF0\x9F\x94\xA5", "\xF0\x9F\x98\x82"};
    inline static const std::vector<std::string> kOtherNumbers = {
        "\xD9\xA1\xD9\xA2\xD9\xA3" /* Arabic-Indic 123 */, "\xE0\xA5\xAA\xE0\xA5\xA8" /* Devanagari 42 */,
        "\xC2\xBD" /* 1/2 */, "\xC2\xB2" /* superscript 2 */, "\xE2\x85\xAB" /* Roman 12 */,
        "\xE4\xB8\x80\xE4\xBA\x8C\xE4\xB8\x89" /* CJK one two three */, "\xEF\xBC\x91\xEF\xBC\x92" /* fullwidth 12 */};

    std::mt19937_64 rng_;
    std::vector<std::string> words_;
    std::vector<std::string> specials_;
};

void write_file(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out.good()) smol::fail("hf_tokenizer_cases: cannot write ", path.string());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: hf_tokenizer_cases VOCAB.gguf OUT_DIR [--count N] [--seed S]\n");
        return 2;
    }
    const std::filesystem::path vocab_path = argv[1], out_dir = argv[2];
    int count = 4000;
    std::uint64_t seed = 20261124;
    try {
        smol::args::ArgReader args(argc, argv, /*first=*/3);
        while (args.next()) {
            if (args.is("--count")) count = args.integer<int>(1, 10000000);
            else if (args.is("--seed")) seed = args.integer<std::uint64_t>();
            else args.unknown();
        }
    } catch (const smol::args::UsageError& e) {
        std::fprintf(stderr, "hf_tokenizer_cases: %s\n", e.what());
        return 2;
    }
    try {
        const auto file = smol::gguf::File::open(vocab_path);
        const Tokenizer tokenizer = Tokenizer::from_gguf(file);
        std::filesystem::create_directories(out_dir);
        write_file(out_dir / "tokenizer.json", smol::text::hf_tokenizer_json(file, tokenizer, true).dump());
        write_file(out_dir / "tokenizer-plain.json", smol::text::hf_tokenizer_json(file, tokenizer, false).dump());

        TextGenerator generator(tokenizer, seed);
        std::string cases;
        for (int i = 0; i < count; ++i) {
            const std::string text = generator.next();
            for (const bool parse_special : {true, false}) {
                const nlohmann::json line = {
                    {"text", text}, {"parse_special", parse_special}, {"ids", tokenizer.encode(text, parse_special)}};
                cases += line.dump() + "\n";
            }
        }
        write_file(out_dir / "cases.jsonl", cases);
        std::printf("hf_tokenizer_cases: %d texts (seed %llu) in %s\n", count, static_cast<unsigned long long>(seed),
                    out_dir.string().c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hf_tokenizer_cases: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
