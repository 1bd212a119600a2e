// smol-tokenizer-bench: how fast smol's tokenizer encodes a text, in MB/s and tokens/s, best of
// several runs (one thread; the tokenizer is sequential). bench/tokenizer-bench.sh runs it beside
// Hugging Face's JavaScript tokenizer on the same text.
//
//   smol-tokenizer-bench -m MODEL_OR_VOCAB.gguf -f TEXT [-r 5] [--parse-special] [-o md|json]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "program_args.hpp"
#include "smol/smol.hpp"

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) smol::fail("cannot open text file ", path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What the flags set.
struct Flags {
    std::string model_path, text_path, format = "md";
    int repetitions = 5;
    bool parse_special = false;
    bool help = false;
};

// smol-tokenizer-bench's one table of flags: parsing, checking and --help all read it.
smol::args::FlagTable flag_table(Flags& f) {
    using namespace smol::args;
    FlagTable table("usage: smol-tokenizer-bench -m MODEL.gguf -f TEXT [options]\n"
                    "  Encodes the whole text N times with the model's tokenizer and reports the best run: bytes,\n"
                    "  tokens, MB/s and tokens/s. Any GGUF with a tokenizer works, vocabulary-only files too.");
    table.add(model_flag(f.model_path))
        .add({{"-f", "--file"}, "TEXT", "the text to encode (required)", text_value(f.text_path)})
        .add({{"-r", "--repetitions"}, "N", "runs", integer_value(f.repetitions, 1, 1000)})
        .add({{"--parse-special"}, "", "turn special-token text into special tokens", switch_value(f.parse_special, true)})
        .add({{"-o", "--output"}, "md|json", "output format", choice_value(f.format, {"md", "json"})})
        .add(help_flag(f.help));
    return table;
}

}  // namespace

int main(int argc, char** argv) {
    Flags f;
    const smol::args::FlagTable table = flag_table(f);
    auto& [model_path, text_path, format, repetitions, parse_special, help] = f;
    // std::exception: whatever reading the command line throws is answered as a usage mistake.
    if (const auto status = table.parse_or_exit_status<std::exception>(argc, argv, help, "smol-tokenizer-bench", [&] {
            if (model_path.empty() || text_path.empty())
                throw smol::args::UsageError("both -m MODEL and -f TEXT are required");
        }))
        return *status;

    try {
        const auto load_start = std::chrono::steady_clock::now();
        const auto tokenizer = smol::text::Tokenizer::from_gguf(smol::gguf::File::open(model_path));
        const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
        const std::string text = read_file(text_path);

        double best_s = std::numeric_limits<double>::infinity();
        std::size_t n_tokens = 0;
        for (int r = 0; r < repetitions; ++r) {
            const auto start = std::chrono::steady_clock::now();
            n_tokens = tokenizer.encode(text, parse_special).size();
            best_s = std::min(best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        const double mb_per_s = double(text.size()) / 1e6 / best_s;
        const double tokens_per_s = double(n_tokens) / best_s;
        if (format == "json") {
            const nlohmann::json result = {{"bytes", text.size()},      {"tokens", n_tokens},
                                           {"seconds", best_s},         {"mb_per_s", mb_per_s},
                                           {"tokens_per_s", tokens_per_s}, {"load_seconds", load_s},
                                           {"repetitions", repetitions}};
            std::printf("%s\n", result.dump().c_str());
        } else {
            std::printf("| text | bytes | tokens | bytes/token | MB/s | tokens/s |\n|---|--:|--:|--:|--:|--:|\n");
            std::printf("| %s | %zu | %zu | %.2f | %.2f | %.0f |\n", text_path.c_str(), text.size(), n_tokens,
                        double(text.size()) / double(std::max<std::size_t>(n_tokens, 1)), mb_per_s, tokens_per_s);
            std::printf("(best of %d; tokenizer loaded in %.0f ms)\n", repetitions, load_s * 1e3);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-tokenizer-bench: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
