// smol-synth: writes a GGUF with SmolLM3's shape and Q4_K_M tensor types (or one type for every
// matrix) and seeded random weights, so smol can be benchmarked without downloading the model
// (about 1.9 GB for 3b).
//
//   smol-synth -o OUT.gguf [--preset 3b|tiny] [--type T] [--seed N] [-t THREADS] [--vocab FILE]
//              [--layers N --dim N --ffn N --heads N --kv-heads N --head-dim N --vocab-size N]

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "model_synthesis.hpp"
#include "program_args.hpp"

namespace {

// --type: Q4_K_M (the default recipe: nullopt) or a tensor type by its ggml name ("Q4_0"), any case.
std::optional<smol::TensorType> parse_type(const std::string& flag, const std::string& text) {
    std::string upper = text;
    for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    if (upper == "Q4_K_M") return std::nullopt;
    for (std::uint32_t id = 0; id < 64; ++id)
        if (const auto traits = smol::tensor_type_traits(id); traits && traits->name == upper && smol::is_weight_type(traits->type) &&
            smol::type_row(traits->type, "--type").from_float[0] != nullptr)
            return traits->type;
    throw smol::args::UsageError(flag + ": expected Q4_K_M or a weight type (" + smol::supported_weight_types(true) +
                                 "), found '" + text + "'");
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

// What the flags set.
struct Flags {
    std::string out_path, preset = "3b", vocab_path;
    std::optional<smol::TensorType> matrix_type;
    std::uint64_t seed = 42;
    int threads = 0;
    int layers = 0, dim = 0, ffn = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab_size = 0;
    bool help = false;
};

// smol-synth's one table of flags: parsing, checking and --help all read it.
smol::args::FlagTable flag_table(Flags& f) {
    using namespace smol::args;
    const auto size = [](int& target, std::string help) {
        return FlagValue(with_default(integer_value(target, 1, 1 << 30), help));
    };
    const auto type = [&f](const std::string& flag, const std::string& text) { f.matrix_type = parse_type(flag, text); };
    const auto vocab = [&f](const std::string& flag, const std::string& v) {
        // --vocab N sets the size (the spelling); --vocab FILE names a tokenizer source.
        if (is_number(v)) f.vocab_size = parse_integer<int>(flag, v, 1, 1 << 30);
        else f.vocab_path = v;
    };
    FlagTable table("usage: smol-synth -o OUT.gguf [options]\n"
                    "  Writes a SmolLM3-architecture GGUF with llama.cpp's Q4_K_M tensor types (or --type) and\n"
                    "  seeded random weights (std 0.02, norms ~1), for benchmarks.");
    table.add({{"-o", "--output"}, "FILE", "where to write (required)", text_value(f.out_path)})
        .add({{"--preset"}, "NAME", "3b (SmolLM3-3B, ~1.9 GB) or tiny (the test fixture's shape)", text_value(f.preset)})
        .add({{"--type"}, "T",
              "Q4_K_M (llama.cpp's mix of Q4_K and Q6_K), or every matrix of type T (as llama-quantize --pure): " +
                  smol::supported_weight_types(),
              with_default(text_reader(type), "Q4_K_M")})
        .add({{"--seed"}, "N", "random seed; the file depends only on the seed and shape",
              integer_value(f.seed, std::uint64_t(0))})
        .add(threads_flag(f.threads))
        .add({{"--vocab"}, "FILE|N",
              "copy the tokenizer (tokenizer.* keys, chat template) from this GGUF; its vocabulary must have exactly "
              "the model's token count. A number N is --vocab-size N",
              with_default(text_reader(vocab),
                           "the repository's SmolLM3 vocab (3b) or tiny fixture (tiny) when present and of the right "
                           "size, else a synthesized byte-level vocabulary")})
        .note("  custom sizes, on top of the preset:")
        .add({{"--layers"}, "N", "layers", size(f.layers, "the preset's")})
        .add({{"--dim"}, "N", "model width", size(f.dim, "the preset's")})
        .add({{"--ffn"}, "N", "feed-forward width", size(f.ffn, "the preset's")})
        .add({{"--heads"}, "N", "query heads", size(f.heads, "the preset's")})
        .add({{"--kv-heads"}, "N", "key/value heads", size(f.kv_heads, "the preset's")})
        .add({{"--head-dim"}, "N", "width of a head", size(f.head_dim, "dim / heads")})
        .add({{"--vocab-size"}, "N", "tokens in the vocabulary", size(f.vocab_size, "the preset's")})
        .add(help_flag(f.help));
    return table;
}

}  // namespace

int main(int argc, char** argv) {
    Flags flags;
    const smol::args::FlagTable table = flag_table(flags);
    if (const auto status = table.parse_or_exit_status(argc, argv, flags.help, "smol-synth", [&] {
            if (flags.out_path.empty()) throw smol::args::UsageError("-o OUT is required");
        }))
        return *status;
    const auto& [out_path, preset, vocab_path, matrix_type, seed, threads, layers, dim, ffn, heads, kv_heads, head_dim,
                 vocab_size, help] = flags;
    try {
        smol::synth::Options options;
        options.threads = threads;
        options.seed = seed;
        options.matrix_type = matrix_type;
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
        const std::string types = matrix_type ? std::string(smol::type_name(*matrix_type)) + " " : "";
        if (!custom && preset == "3b") options.name = "SmolLM3-3B " + types + "synthetic (seeded random weights)";
        if (!custom && preset == "tiny") options.name = "SmolLM3-tiny-512 " + types + "synthetic (seeded random weights)";

        const auto plan = smol::synth::plan_tensors(s, matrix_type);
        std::uint64_t total = 0;
        for (const auto& t : plan) total += t.n_bytes();
        std::fprintf(stderr,
                     "smol-synth: %d layers, dim %d, ffn %d, %d/%d heads of %d, vocab %d: %zu tensors, %s of "
                     "weights, seed %llu, %d threads\n",
                     s.n_layers, s.d_model, s.d_ffn, s.n_heads, s.n_kv_heads, s.head_dim, s.n_vocab, plan.size(),
                     megabytes(total).c_str(), (unsigned long long)seed, smol::thread_team(threads));

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
