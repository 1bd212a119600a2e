#pragma once
// What a chat needs from one GGUF file: the compiled model that runs it and the tokenizer
// stored in it. Sessions (generate/session.hpp) borrow an Engine; several sessions may share
// one, since every forward pass goes through forward(), which takes a lock (a model's scratch
// buffers serve one call at a time).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>

#include "smol/core/error.hpp"
#include "smol/generate/grammar_constraint.hpp"
#include "smol/generate/speculation.hpp"
#include "smol/model/model.hpp"
#include "smol/model/registry.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

class Engine {
public:
    explicit Engine(const std::filesystem::path& path, const LoadOptions& options = {})
        : options_(options), model_(load_model(path, options)), tokenizer_(text::Tokenizer::from_gguf(model_->file())) {
        // Logit rows past the tokenizer's vocabulary (padding) could be sampled but never
        // decoded; a tokenizer larger than the logits could produce ids the model cannot embed.
        if (tokenizer_.n_vocab() != std::size_t(model_->n_vocab()))
            fail(path.string(), ": the tokenizer has ", tokenizer_.n_vocab(), " tokens but the model has ",
                 model_->n_vocab(), " logit rows (token_embd.weight); expected the same count");
    }

    // Same as the constructor; reads well at call sites: `auto engine = Engine::load(path);`.
    static Engine load(const std::filesystem::path& path, const LoadOptions& options = {}) {
        return Engine(path, options);
    }

    // Sessions hold a reference to their engine, so it stays where it was made.
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const Model& model() const { return *model_; }
    const ModelInfo& info() const { return model_->info(); }
    const text::Tokenizer& tokenizer() const { return tokenizer_; }
    const LoadOptions& load_options() const { return options_; }
    int n_vocab() const { return model_->n_vocab(); }

    // The threads forward passes run on (LoadOptions::threads; 0: OpenMP's default). Changing
    // it waits for a running pass, so each pass runs on one count throughout.
    int threads() const { return model_->threads(); }
    void set_threads(int threads) {
        std::lock_guard lock(forward_mutex_);
        model_->set_threads(threads);
        options_.threads = threads;
    }

    KvCache make_cache(int context) const { return model_->make_cache(context); }

    // A GBNF grammar (text/grammar.hpp) ready to constrain this model's output
    // (GenerationParams::grammar); throws smol::Error saying what is wrong with it.
    std::shared_ptr<const TokenGrammar> compile_grammar(std::string_view gbnf) const {
        return std::make_shared<const TokenGrammar>(text::Grammar::parse(gbnf), vocabulary_trie());
    }

    // The vocabulary as a byte trie for constrained decoding, built on first use.
    std::shared_ptr<const TokenTrie> vocabulary_trie() const {
        std::call_once(trie_built_, [&] { trie_ = std::make_shared<const TokenTrie>(tokenizer_); });
        return trie_;
    }

    // One sequence through the model, serialised with every other caller of this engine.
    // logits: [1, n_vocab] (the last token) or [n, n_vocab] with all_logits.
    void forward(KvCache& cache, std::span<const std::int32_t> tokens, float* logits, bool all_logits) {
        std::lock_guard lock(forward_mutex_);
        const auto start = std::chrono::steady_clock::now();
        model_->forward(cache, tokens, logits, all_logits);
        if (tokens.size() == 1 || all_logits) record_step(start, tokens.size());
    }

    // Several sequences in one pass (a server's continuous batching), also serialised.
    void forward(std::span<const SequenceBatch> batch, float* logits) {
        std::lock_guard lock(forward_mutex_);
        const auto start = std::chrono::steady_clock::now();
        model_->forward(batch, logits);
        std::size_t rows = 0;
        for (const SequenceBatch& entry : batch) {
            if (entry.tokens.size() > 1 && !entry.all_logits) return;  // a prompt chunk: not a decode step
            rows += entry.tokens.size();
        }
        record_step(start, rows);
    }

    // What the decode and verify steps run so far cost by their rows (speculation's draft length).
    const StepCosts& step_costs() const { return step_costs_; }

private:
    // A decode or verify pass of `rows` rows that began at `start` has ended (under the lock).
    void record_step(std::chrono::steady_clock::time_point start, std::size_t rows) {
        if (rows == 0 || rows > std::size_t(StepCosts::kMaxRows)) return;
        step_costs_.record(int(rows), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }

    LoadOptions options_;
    std::unique_ptr<Model> model_;
    text::Tokenizer tokenizer_;
    std::mutex forward_mutex_;
    StepCosts step_costs_;  // written under forward_mutex_
    mutable std::once_flag trie_built_;
    mutable std::shared_ptr<const TokenTrie> trie_;
};

}  // namespace smol
