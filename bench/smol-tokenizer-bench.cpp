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

#include "smol/core/comma_list.hpp"
#include "smol/smol.hpp"

namespace {

void usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: smol-tokenizer-bench -m MODEL.gguf -f TEXT [-r N] [--parse-special] [-o md|json]\n"
                 "  Encodes the whole text N times (default 5) with the model's tokenizer and reports the best\n"
                 "  run: bytes, tokens, MB/s and tokens/s. Any GGUF with a tokenizer works, vocabulary-only\n"
                 "  files too. --parse-special turns special-token text into special tokens.\n");
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) smol::fail("cannot open text file ", path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path, text_path, format = "md";
    int repetitions = 5;
    bool parse_special = false;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) smol::fail(a, " needs a value");
                return argv[++i];
            };
            if (a == "-m" || a == "--model") model_path = value();
            else if (a == "-f" || a == "--file") text_path = value();
            else if (a == "-r" || a == "--repetitions") {
                const auto counts = smol::parse_int_list(a, value(), 1, 1000);
                if (counts.size() != 1) smol::fail(a, ": expected one count, found ", counts.size());
                repetitions = int(counts[0]);
            } else if (a == "--parse-special") parse_special = true;
            else if (a == "-o" || a == "--output") {
                format = value();
                if (format != "md" && format != "json") smol::fail("-o: expected md or json, found '", format, "'");
            } else if (a == "-h" || a == "--help") {
                usage(stdout);
                return 0;
            } else smol::fail("unknown argument '", a, "'");
        }
        if (model_path.empty() || text_path.empty()) smol::fail("both -m MODEL and -f TEXT are required");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-tokenizer-bench: %s\n", e.what());
        usage(stderr);
        return 2;
    }

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
