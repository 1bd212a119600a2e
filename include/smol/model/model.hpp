#pragma once
// The run-time face of a compiled model: what tools, sessions and servers hold. Each compiled
// config implements it (model/transformer.hpp); model/registry.hpp picks one for a file.

#include <cstdint>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/threads.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/model/config.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/ops/rope.hpp"

namespace smol {

// RoPE scaling as llama.cpp's flags ask for it; resolve_rope_scaling fills in the rest.
struct RopeScalingRequest {
    // --rope-scaling none|yarn. Unset: YaRN exactly when the context is past the trained one.
    std::optional<RopeScaling::Type> type;
    double factor = 0.0;       // --rope-scale F; 0: context / original context, at least 1
    int original_context = 0;  // --yarn-orig-ctx N; 0: the context the model was trained at
};

struct LoadOptions {
    int max_batch = 512;  // tokens per forward chunk; longer inputs are processed in chunks
    // The longest context the caller will ask make_cache for (0: not said). Past the trained
    // context it turns YaRN on unless rope_scaling says otherwise (SmolLM3's model card recipe).
    int context = 0;
    RopeScalingRequest rope_scaling;
    KvCacheTypes cache_types;  // what make_cache(context) stores keys and values as (-ctk / -ctv)
    // Regroup the k-quant matrices for decode at load (quant/row_groups.hpp): faster decode, the
    // same logits, those weights copied out of the mapped file. false: --no-repack.
    bool repack = true;
    // Threads every parallel region of the load and of each forward pass runs on (the programs'
    // -t); 0: OpenMP's default (smol::thread_team). Model::set_threads changes it between passes.
    int threads = 0;
    // When set, the weights are paged in at load and this hears how far (model/load_progress.hpp).
    std::function<void(std::uint64_t done, std::uint64_t total)> on_progress;
};

// Integer multiply-adds of the weight matrices for one token: rows x cols of each matrix that is
// multiplied with int8 activations (every quantized type; float matrices count 0). A prompt runs
// every layer's matrices for each of its tokens and the LM head only for the rows whose logits
// are wanted; attention's products over the cache are not counted (float, and growing with the
// context).
struct MatrixMacs {
    std::uint64_t layers = 0;  // every layer's projections and FFN
    std::uint64_t head = 0;    // the LM head, one token's logits
};

struct ModelInfo {
    std::string config_name;    // the compiled config that runs this file
    std::string file;
    std::string architecture;
    std::string description;    // general.name, if present
    Hyperparameters hp{};
    std::uint64_t n_params = 0;
    std::uint64_t file_bytes = 0;
    std::uint64_t tensor_bytes = 0;  // all tensor data
    std::uint64_t matrix_bytes = 0;  // weights read per generated token (every matrix incl. the LM head)
    MatrixMacs int8_macs;            // the weights' int8 multiply-adds per token
    RopeScaling rope_scaling;        // as resolved at load
    bool rope_scaling_automatic = false;  // YaRN was turned on because the context asked for it
    int max_context = 0;             // the longest cache make_cache gives: trained, or YaRN's limit
    KvCacheTypes cache_types;        // make_cache's default, from LoadOptions
};

// What a request comes to for a model with these sizes and a context of `context` tokens.
inline RopeScaling resolve_rope_scaling(const Hyperparameters& hp, const RopeScalingRequest& request, int context,
                                        bool* automatic = nullptr) {
    if (automatic) *automatic = false;
    RopeScaling scaling;
    const bool past_trained = context > hp.max_context;
    if (request.type == RopeScaling::Type::none || (!request.type && !past_trained)) return scaling;
    if (!request.type) {
        if (hp.max_yarn_context <= 0 || context > hp.max_yarn_context) return scaling;  // make_cache explains
        if (automatic) *automatic = true;
    }
    if (hp.max_yarn_context <= 0) fail("--rope-scaling yarn: this model has no YaRN context extension");
    if (request.factor != 0.0 && !(request.factor >= 1.0 && std::isfinite(request.factor)))
        fail("--rope-scale: expected a factor of at least 1, found ", request.factor);
    if (request.original_context < 0)
        fail("--yarn-orig-ctx: expected a positive context (0: the trained ", hp.max_context, "), found ",
             request.original_context);
    scaling.type = RopeScaling::Type::yarn;
    scaling.original_context = request.original_context > 0 ? request.original_context : hp.max_context;
    scaling.factor = request.factor > 0.0 ? request.factor
                                          : std::max(1.0, double(context) / double(scaling.original_context));
    return scaling;
}

// "YaRN, factor 2 over 65536 tokens" or "none".
inline std::string describe(const RopeScaling& scaling) {
    if (!scaling.yarn()) return "none";
    char text[96];
    std::snprintf(text, sizeof text, "YaRN, factor %g over %d tokens", scaling.factor, scaling.original_context);
    return text;
}

// A run of tokens of one sequence in a batch. Its tokens continue the sequence at cache->size().
struct SequenceBatch {
    KvCache* cache = nullptr;
    std::span<const std::int32_t> tokens;
    bool all_logits = false;  // logits for every token, or only for the last one
};

class Model {
public:
    virtual ~Model() = default;
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const ModelInfo& info() const { return info_; }
    const gguf::File& file() const { return file_; }
    int n_vocab() const { return info_.hp.n_vocab; }

    // The threads forward passes run on (LoadOptions::threads; 0: OpenMP's default), and the
    // team that gives (thread_team). Not to be changed during a forward pass.
    int threads() const { return threads_; }
    int thread_team() const { return smol::thread_team(threads_); }
    void set_threads(int threads) {
        if (threads < 0) fail("Model::set_threads: expected 0 (OpenMP's default) or more threads, found ", threads);
        threads_ = threads;
    }

    // A KV cache for `context` tokens (0: the default, 4096), in the types the model was
    // loaded with or in `types`.
    KvCache make_cache(int context) const { return make_cache(context, info_.cache_types); }
    virtual KvCache make_cache(int context, KvCacheTypes types) const = 0;

    // Runs every sequence's tokens through the network, appending to their caches, and writes
    // the wanted logit rows in batch order to `logits`: [n_rows, n_vocab], where each sequence
    // contributes all its rows (all_logits) or its last row. Not reentrant: one call at a time.
    virtual void forward(std::span<const SequenceBatch> batch, float* logits) = 0;

    // One sequence: logits for every token ([n, n_vocab]) or the last ([1, n_vocab]).
    void forward(KvCache& cache, std::span<const std::int32_t> tokens, float* logits, bool all_logits) {
        const SequenceBatch one{&cache, tokens, all_logits};
        forward(std::span<const SequenceBatch>(&one, 1), logits);
    }

protected:
    Model(gguf::File file, int threads) : file_(std::move(file)) { set_threads(threads); }
    gguf::File file_;
    ModelInfo info_;
    int threads_ = 0;
};

template <class Config>
ModelInfo describe(const gguf::File& file, std::uint64_t matrix_bytes, MatrixMacs int8_macs) {
    ModelInfo info;
    info.config_name = std::string(Config::name);
    info.file = file.name();
    info.architecture = std::string(file.get_string_or("general.architecture", ""));
    info.description = std::string(file.get_string_or("general.name", ""));
    info.hp = Config::hp;
    info.file_bytes = file.file_size();
    for (const auto& t : file.tensors()) {
        info.n_params += t.n_elements;
        info.tensor_bytes += t.n_bytes;
    }
    info.matrix_bytes = matrix_bytes;
    info.int8_macs = int8_macs;
    return info;
}

}  // namespace smol
