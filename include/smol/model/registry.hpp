#pragma once
// Picks the compiled config that matches a GGUF file's metadata and builds its model, so tools
// take any supported file. Loading a file into a config it does not match fails with a message
// listing each expected value beside the one found.

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/model/configs.hpp"
#include "smol/model/load_progress.hpp"
#include "smol/model/transformer.hpp"

namespace smol {

// Every config this build can run, in the order they are tried.
template <class... Configs>
struct ConfigList {};
using CompiledConfigs = ConfigList<SmolLM3_3B, SmolLM3_TinyQ4, SmolLM3_TinyF32>;

inline constexpr std::string_view kArchitecture = "smollm3";

// Differences between a file's metadata and a config, one line each ("key: expected X, found Y");
// empty when the file matches.
template <class Config>
std::vector<std::string> config_mismatches(const gguf::File& file) {
    std::vector<std::string> out;
    const std::string arch(file.get_string_or("general.architecture", "(missing)"));
    if (arch != kArchitecture) {
        out.push_back("general.architecture: expected " + std::string(kArchitecture) + ", found " + arch);
        return out;
    }
    auto check_int = [&](const char* key, long long expected) {
        const std::string full = std::string(kArchitecture) + "." + key;
        const gguf::Value* v = file.find(full);
        if (!v || !v->as_int()) out.push_back(full + ": expected " + std::to_string(expected) + ", found (missing)");
        else if (*v->as_int() != expected)
            out.push_back(full + ": expected " + std::to_string(expected) + ", found " + std::to_string(*v->as_int()));
    };
    auto check_float = [&](const char* key, double expected) {
        const std::string full = std::string(kArchitecture) + "." + key;
        const gguf::Value* v = file.find(full);
        if (!v || !v->as_float()) out.push_back(full + ": expected " + std::to_string(expected) + ", found (missing)");
        else if (std::abs(*v->as_float() - expected) > 1e-6 * std::abs(expected))
            out.push_back(full + ": expected " + std::to_string(expected) + ", found " + std::to_string(*v->as_float()));
    };
    const auto& hp = Config::hp;
    check_int("block_count", hp.n_layers);
    check_int("embedding_length", hp.d_model);
    check_int("feed_forward_length", hp.d_ffn);
    check_int("attention.head_count", hp.n_heads);
    check_int("attention.head_count_kv", hp.n_kv_heads);
    check_float("rope.freq_base", hp.rope_theta);
    check_float("attention.layer_norm_rms_epsilon", hp.norm_eps);
    // Optional in some converters' output; when present they must agree.
    const std::string rope_dims = std::string(kArchitecture) + ".rope.dimension_count";
    if (file.find(rope_dims)) check_int("rope.dimension_count", hp.head_dim);
    if (const auto* t = file.find_tensor("token_embd.weight"); t && t->shape.size() == 2 && t->shape[1] != hp.n_vocab)
        out.push_back("token_embd.weight rows (vocabulary): expected " + std::to_string(hp.n_vocab) + ", found " +
                      std::to_string(t->shape[1]));
    return out;
}

// Loads `file` as `Config`, failing with every mismatch listed.
template <class Config>
std::unique_ptr<Model> load_as(gguf::File file, const LoadOptions& options = {}) {
    const auto mismatches = config_mismatches<Config>(file);
    if (!mismatches.empty()) {
        std::string message = file.name() + ": does not match the " + std::string(Config::name) + " config:";
        for (const auto& m : mismatches) message += "\n  " + m;
        fail(message);
    }
    return std::make_unique<Transformer<Config>>(std::move(file), options);
}

namespace detail {
template <class... Configs>
std::unique_ptr<Model> load_first_match(gguf::File& file, const LoadOptions& options, std::string& report,
                                        ConfigList<Configs...>) {
    std::unique_ptr<Model> model;
    auto try_one = [&]<class Config>(Config*) {
        if (model) return;
        const auto mismatches = config_mismatches<Config>(file);
        if (mismatches.empty()) {
            model = std::make_unique<Transformer<Config>>(std::move(file), options);
            return;
        }
        report += "\n  " + std::string(Config::name) + ":";
        for (const auto& m : mismatches) report += "\n    " + m;
    };
    (try_one(static_cast<Configs*>(nullptr)), ...);
    return model;
}
}  // namespace detail

// Loads a model file with whichever compiled config matches it.
inline std::unique_ptr<Model> load_model(gguf::File file, const LoadOptions& options = {}) {
    if (options.on_progress) page_in(file, options.on_progress);
    std::string report;
    const std::string name = file.name();
    auto model = detail::load_first_match(file, options, report, CompiledConfigs{});
    if (!model) fail(name, ": no compiled model config matches this file:", report);
    return model;
}
inline std::unique_ptr<Model> load_model(const std::filesystem::path& path, const LoadOptions& options = {}) {
    return load_model(gguf::File::open(path), options);
}

// Which compiled config a file matches, and if none, why not (for smol-inspect).
inline std::string match_report(const gguf::File& file) {
    std::string report;
    std::string matched;
    auto check = [&]<class Config>(Config*) {
        const auto mismatches = config_mismatches<Config>(file);
        if (mismatches.empty() && matched.empty()) matched = std::string(Config::name);
        report += "\n  " + std::string(Config::name) + (mismatches.empty() ? ": matches" : ":");
        for (const auto& m : mismatches) report += "\n    " + m;
    };
    [&]<class... Configs>(ConfigList<Configs...>) { (check(static_cast<Configs*>(nullptr)), ...); }(CompiledConfigs{});
    return (matched.empty() ? "no compiled config matches" : "matches " + matched) + report;
}

}  // namespace smol
