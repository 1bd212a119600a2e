// smol-logits: the logits of every position of a token sequence, for comparing smol with
// another engine. Writes little-endian float32 [n_tokens][n_vocab] to -o, or a summary.
//
//   smol-logits -m MODEL --tokens 1,2,3 [-o out.f32] [-t THREADS]

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "program_args.hpp"
#include "smol/smol.hpp"

namespace {

// What the flags set.
struct Flags {
    std::string model_path, out_path;
    std::vector<std::int32_t> tokens;
    int threads = 0, batch = 512;
    smol::RopeScalingRequest rope_scaling;
    smol::KvCacheTypes cache_types;
    bool help = false;
};

// smol-logits' one table of flags: parsing, checking and --help all read it.
smol::args::FlagTable flag_table(Flags& f) {
    using namespace smol::args;
    FlagTable table("usage: smol-logits -m MODEL --tokens ID,ID,... [options]\n"
                    "  Runs the tokens through the model in one batch and writes the logits of every position\n"
                    "  as little-endian float32 [n_tokens][n_vocab] to OUT (default: print the top tokens).");
    table.add(model_flag(f.model_path))
        .add({{"--tokens"}, "ID,...", "the token ids to run (required)",
              int_list_value(f.tokens, 0, INT32_MAX, "token ids")})
        .add({{"-o", "--output"}, "FILE", "where to write the logits", text_value(f.out_path)})
        .add(threads_flag(f.threads))
        .add({{"--batch"}, "N", "tokens per forward chunk", integer_value(f.batch, 1, 1 << 20)})
        .add(rope_scaling_flags(f.rope_scaling))
        .add(kv_cache_type_flags(f.cache_types))
        .add(help_flag(f.help));
    return table;
}

}  // namespace

int main(int argc, char** argv) {
    Flags f;
    const smol::args::FlagTable table = flag_table(f);
    if (const auto status = table.parse_or_exit_status(argc, argv, f.help, "smol-logits", [&] {
            if (f.model_path.empty() || f.tokens.empty())
                throw smol::args::UsageError("both -m MODEL and --tokens ID,... are required");
        }))
        return *status;
    const auto& [model_path, out_path, tokens, threads, batch, rope_scaling, cache_types, help] = f;
    try {
        smol::LoadOptions options;
        options.threads = threads;
        options.max_batch = batch;
        options.rope_scaling = rope_scaling;
        options.cache_types = cache_types;
        options.context = std::max<int>(int(tokens.size()), smol::kDefaultContext);
        auto model = smol::load_model(model_path, options);
        const int n_vocab = model->n_vocab();
        if (model->info().rope_scaling.yarn())
            std::fprintf(stderr, "smol-logits: RoPE scaling: %s%s\n", smol::describe(model->info().rope_scaling).c_str(),
                         model->info().rope_scaling_automatic ? " (the tokens are past the trained context)" : "");
        auto cache = model->make_cache(options.context);
        std::vector<float> logits(tokens.size() * std::size_t(n_vocab));
        model->forward(cache, tokens, logits.data(), /*all_logits=*/true);
        if (!out_path.empty()) {
            std::ofstream out(out_path, std::ios::binary);
            out.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
            if (!out) smol::fail(out_path, ": write failed");
            std::fprintf(stderr, "smol-logits: wrote %zu x %d logits to %s (%s)\n", tokens.size(), n_vocab,
                         out_path.c_str(), model->info().config_name.c_str());
        } else {
            for (std::size_t t = 0; t < tokens.size(); ++t) {
                const float* row = logits.data() + t * std::size_t(n_vocab);
                int best = 0;
                for (int v = 1; v < n_vocab; ++v)
                    if (row[v] > row[best]) best = v;
                std::printf("%zu: token %d -> argmax %d (%.4f)\n", t, tokens[t], best, row[best]);
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-logits: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
