// smol-synth: writes a GGUF with SmolLM3's shape and Q4_K_M tensor types (or one type for every
// matrix) and seeded random weights, so smol can be benchmarked without downloading the model
// (about 1.9 GB for 3b).
//
//   smol-synth -o OUT.gguf [--preset 3b|tiny] [--type T] [--seed N] [-t THREADS] [--vocab FILE]
//              [--layers N --dim N --ffn N --heads N --kv-heads N --head-dim N --vocab-size N]

#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "smol/model/synth.hpp"

namespace {

void usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: smol-synth -o OUT.gguf [options]\n"
                 "  Writes a SmolLM3-architecture GGUF with llama.cpp's Q4_K_M tensor types and seeded random\n"
                 "  weights (std 0.02, norms ~1), for benchmarks.\n"
                 "options:\n"
                 "  -o, --output FILE   where to write (required)\n"
                 "  --preset NAME       3b (SmolLM3-3B, default, ~1.9 GB) or tiny (the test fixture's shape)\n"
                 "  --type T            Q4_K_M (default: llama.cpp's mix of Q4_K and Q6_K), or Q2_K, Q3_K, Q4_K,\n"
                 "                      Q5_K, Q6_K, Q8_0: every matrix in that type (llama-quantize --pure)\n"
                 "  --seed N            random seed (default 42); the file depends only on the seed and shape\n"
                 "  -t, --threads N     quantization threads (default: all)\n"
                 "  --vocab FILE        copy the tokenizer (tokenizer.* keys, chat template) from this GGUF;\n"
                 "                      its vocabulary must have exactly the model's token count. Default: the\n"
                 "                      repository's SmolLM3 vocab (3b) or tiny fixture (tiny) when present and\n"
                 "                      of the right size, else a synthesized byte-level vocabulary\n"
                 "  custom sizes, on top of the preset:\n"
                 "  --layers N --dim N --ffn N --heads N --kv-heads N --head-dim N (default dim/heads)\n"
                 "  --vocab-size N      (also accepted as --vocab N when N is a number)\n");
}

int parse_int(const std::string& flag, const std::string& text) {
    std::size_t used = 0;
    long long v = 0;
    try {
        v = std::stoll(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != text.size() || v <= 0 || v > (1ll << 30))
        smol::fail(flag, ": expected a positive integer, found '", text, "'");
    return int(v);
}

// --type: "Q4_K_M" is the default recipe (nullopt); any other value names one tensor type.
std::optional<smol::TensorType> parse_type(const std::string& text) {
    if (text == "Q4_K_M") return std::nullopt;
    for (std::uint32_t id = 0; id < 64; ++id) {
        const auto traits = smol::tensor_type_traits(id);
        if (traits && traits->name == text) {
            smol::synth::pure_file_type(traits->type);  // refuses types it cannot write
            return traits->type;
        }
    }
    smol::fail("--type: expected Q4_K_M, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or Q8_0, found '", text, "'");
}

bool is_number(const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// The repository's fixtures, found next to this source file (the build records its path).
std::filesystem::path source_data_dir() {
    return std::filesystem::path(__FILE__).parent_path().parent_path() / "tests" / "data";
}

std::string megabytes(std::uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MB", double(bytes) / 1e6);
    return buf;
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path, preset = "3b", vocab_path;
    std::optional<smol::TensorType> pure_type;
    std::uint64_t seed = 42;
    int threads = 0;
    int layers = 0, dim = 0, ffn = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab_size = 0;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) {
                    std::fprintf(stderr, "smol-synth: %s needs a value\n", a.c_str());
                    usage(stderr);
                    std::exit(2);
                }
                return argv[++i];
            };
            if (a == "-o" || a == "--output") out_path = value();
            else if (a == "--preset") preset = value();
            else if (a == "--type") pure_type = parse_type(value());
            else if (a == "--seed") {
                const std::string v = value();
                if (!is_number(v)) smol::fail("--seed: expected a non-negative integer, found '", v, "'");
                seed = std::stoull(v);
            } else if (a == "-t" || a == "--threads") threads = parse_int(a, value());
            else if (a == "--vocab") {
                // --vocab N sets the size (the spelling); --vocab FILE names a tokenizer source.
                const std::string v = value();
                if (is_number(v)) vocab_size = parse_int(a, v);
                else vocab_path = v;
            } else if (a == "--vocab-size") vocab_size = parse_int(a, value());
            else if (a == "--layers") layers = parse_int(a, value());
            else if (a == "--dim") dim = parse_int(a, value());
            else if (a == "--ffn") ffn = parse_int(a, value());
            else if (a == "--heads") heads = parse_int(a, value());
            else if (a == "--kv-heads") kv_heads = parse_int(a, value());
            else if (a == "--head-dim") head_dim = parse_int(a, value());
            else if (a == "-h" || a == "--help") {
                usage(stdout);
                return 0;
            } else {
                std::fprintf(stderr, "smol-synth: unknown argument '%s'\n", a.c_str());
                usage(stderr);
                return 2;
            }
        }
        if (out_path.empty()) {
            std::fprintf(stderr, "smol-synth: -o OUT is required\n");
            usage(stderr);
            return 2;
        }
        if (threads > 0) omp_set_num_threads(threads);

        smol::synth::Options options;
        options.seed = seed;
        options.pure_type = pure_type;
        options.shape = smol::synth::preset(preset);
        smol::synth::Shape& s = options.shape;
        const bool custom = layers || dim || ffn || heads || kv_heads || head_dim || vocab_size;
        if (layers) s.n_layers = layers;
        if (dim) s.d_model = dim;
        if (ffn) s.d_ffn = ffn;
        if (heads) s.n_heads = heads;
        if (kv_heads) s.n_kv_heads = kv_heads;
        if (vocab_size) s.n_vocab = vocab_size;
        // SmolLM3 ties head_dim to width / heads; keep that unless told otherwise.
        if (head_dim) s.head_dim = head_dim;
        else if (dim || heads) {
            if (s.d_model % s.n_heads != 0)
                smol::fail("--dim ", s.d_model, " is not divisible by --heads ", s.n_heads, " (or give --head-dim)");
            s.head_dim = s.d_model / s.n_heads;
        }
        if (!vocab_path.empty()) {
            options.vocab_files = {vocab_path};
            options.require_vocab_file = true;
        } else {
            options.vocab_files = {source_data_dir() / "vocab" / "smollm3-vocab.gguf",
                                   source_data_dir() / "tiny" / "smollm3-tiny-Q4_K_M.gguf"};
        }
        std::string name_type;  // " Q5_K" for a pure file (appended: GCC 12 warns on " " + string)
        if (pure_type) name_type.append(" ").append(smol::type_name(*pure_type));
        if (!custom && preset == "3b") options.name = "SmolLM3-3B" + name_type + " synthetic (seeded random weights)";
        if (!custom && preset == "tiny") options.name = "SmolLM3-tiny-512" + name_type + " synthetic (seeded random weights)";

        const auto plan = smol::synth::plan_tensors(s, pure_type);
        std::uint64_t total = 0;
        for (const auto& t : plan) total += t.n_bytes();
        std::fprintf(stderr,
                     "smol-synth: %d layers, dim %d, ffn %d, %d/%d heads of %d, vocab %d: %zu tensors, %s of "
                     "weights, seed %llu, %d threads\n",
                     s.n_layers, s.d_model, s.d_ffn, s.n_heads, s.n_kv_heads, s.head_dim, s.n_vocab, plan.size(),
                     megabytes(total).c_str(), (unsigned long long)seed, omp_get_max_threads());

        const bool tty = ::isatty(STDERR_FILENO);
        int last_decile = 0;
        auto report = [&](const smol::synth::Progress& p) {
            const double fraction = p.bytes_total ? double(p.bytes_done) / double(p.bytes_total) : 1.0;
            const double rate = p.seconds > 0 ? double(p.bytes_done) / 1e6 / p.seconds : 0.0;
            if (tty) {
                std::fprintf(stderr, "\r[%3.0f%%] %zu/%zu tensors, %s / %s, %.0f MB/s, %.1f s  %-28.*s", 100 * fraction,
                             p.tensors_done, p.tensors_total, megabytes(p.bytes_done).c_str(),
                             megabytes(p.bytes_total).c_str(), rate, p.seconds, int(p.current.size()),
                             p.current.data());
                if (p.tensors_done == p.tensors_total) std::fprintf(stderr, "\n");
            } else if (int decile = int(fraction * 10 + 1e-9); decile > last_decile) {
                last_decile = decile;
                std::fprintf(stderr, "smol-synth: %3d%% (%zu/%zu tensors, %s, %.1f s)\n", decile * 10, p.tensors_done,
                             p.tensors_total, megabytes(p.bytes_done).c_str(), p.seconds);
            }
        };

        const auto vocab = smol::synth::choose_vocab(options);
        if (!vocab.note.empty()) std::fprintf(stderr, "smol-synth: note: %s\n", vocab.note.c_str());
        std::fprintf(stderr, "smol-synth: tokenizer from %s\n",
                     vocab.file.empty() ? "(synthesized byte-level vocabulary)" : vocab.file.c_str());
        const auto result = smol::synth::write_model(out_path, options, report);
        std::fprintf(stderr, "smol-synth: wrote %s: %zu tensors, %llu parameters, %llu bytes (%s) in %.1f s\n",
                     out_path.c_str(), result.n_tensors, (unsigned long long)result.n_params,
                     (unsigned long long)result.file_bytes, megabytes(result.file_bytes).c_str(), result.seconds);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "\nsmol-synth: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
