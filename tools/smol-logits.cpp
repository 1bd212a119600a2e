// smol-logits: the logits of every position of a token sequence, for comparing smol with
// another engine. Writes little-endian float32 [n_tokens][n_vocab] to -o, or a summary.
//
//   smol-logits -m MODEL --tokens 1,2,3 [-o out.f32] [-t THREADS]

#include <omp.h>

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

void usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: smol-logits -m MODEL --tokens ID,ID,... [-o OUT.f32] [-t THREADS] [--batch N] [RoPE flags] [-ctk T] [-ctv T]\n"
                 "  Runs the tokens through the model in one batch and writes the logits of every position\n"
                 "  as little-endian float32 [n_tokens][n_vocab] to OUT (default: print the top tokens).\n"
                 "%s%s",
                 smol::args::kRopeScalingUsage, smol::args::kKvCacheTypeUsage);
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path, out_path;
    std::vector<std::int32_t> tokens;
    int threads = 0, batch = 512;
    smol::RopeScalingRequest rope_scaling;
    smol::KvCacheTypes cache_types;
    try {
        smol::args::ArgReader args(argc, argv);
        while (args.next()) {
            if (read_rope_scaling_flag(args, rope_scaling) || read_kv_cache_type_flag(args, cache_types)) continue;
            if (args.is("-m", "--model")) model_path = args.value();
            else if (args.is("--tokens")) {
                const auto ids = args.int_list(0, INT32_MAX, "token ids");
                tokens.assign(ids.begin(), ids.end());
            } else if (args.is("-o", "--output")) out_path = args.value();
            else if (args.is("-t", "--threads")) threads = args.integer<int>(0, 1024);
            else if (args.is("--batch")) batch = args.integer<int>(1, 1 << 20);
            else if (args.is("-h", "--help")) {
                usage(stdout);
                return 0;
            } else args.unknown();
        }
        if (model_path.empty() || tokens.empty()) throw smol::args::UsageError("both -m MODEL and --tokens ID,... are required");
    } catch (const smol::args::UsageError& e) {
        std::fprintf(stderr, "smol-logits: %s\n", e.what());
        usage(stderr);
        return 2;
    }
    try {
        if (threads > 0) omp_set_num_threads(threads);
        smol::LoadOptions options;
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
