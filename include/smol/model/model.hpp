#pragma once
// The run-time face of a compiled model: what tools, sessions and servers hold. Each compiled
// config implements it (model/transformer.hpp); model/registry.hpp picks one for a file.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "smol/gguf/reader.hpp"
#include "smol/model/config.hpp"
#include "smol/model/kv_cache.hpp"

namespace smol {

struct LoadOptions {
    int max_batch = 512;  // tokens per forward chunk; longer inputs are processed in chunks
    // When set, the weights are paged in at load and this hears how far (model/load_progress.hpp).
    std::function<void(std::uint64_t done, std::uint64_t total)> on_progress;
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
};

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

    // A KV cache for `context` tokens (0: the default, 4096).
    virtual KvCache make_cache(int context) const = 0;

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
    explicit Model(gguf::File file) : file_(std::move(file)) {}
    gguf::File file_;
    ModelInfo info_;
};

template <class Config>
ModelInfo describe(const gguf::File& file, std::uint64_t matrix_bytes) {
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
    return info;
}

}  // namespace smol
