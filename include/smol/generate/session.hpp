#pragma once
// A chat with the model: the conversation so far, the KV cache that holds it, and the
// generation loop that streams a reply.
//
// Each turn renders the whole conversation with the chat template and tokenizes it, keeps
// the longest prefix of those tokens that the KV cache already holds and runs only the rest
// through the model. Reusing by token prefix rather than by "what was appended" stays correct
// whatever the caller changes (edited history, another system prompt, thinking switched), and
// costs one comparison per cached token.
//
// Decoding, one token at a time:
//   sample -> end of generation? -> StreamDecoder (whole UTF-8 characters)
//          -> StopStringMatcher (holds back what may still become a stop string)
//          -> ThinkingParser (reasoning / answer) -> the caller's callback.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "smol/core/error.hpp"
#include "smol/generate/engine.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/stop_strings.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/text/chat_template.hpp"
#include "smol/text/thinking.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

struct GenerationParams {
    SamplerParams sampling;
    int max_tokens = -1;             // tokens sampled at most; negative: until end of generation or a full context
    std::vector<std::string> stop;   // generation ends before any of these; they are never shown
    bool enable_thinking = true;     // the template's reasoning mode (a system "/think" or "/no_think" overrides it)
};

enum class StopReason { EndOfGeneration, StopString, MaxTokens, ContextFull, Cancelled };

inline std::string_view to_string(StopReason reason) {
    switch (reason) {
        case StopReason::EndOfGeneration: return "eos";
        case StopReason::StopString: return "stop_string";
        case StopReason::MaxTokens: return "length";
        case StopReason::ContextFull: return "context_full";
        case StopReason::Cancelled: return "cancelled";
    }
    return "unknown";
}

struct Timings {
    int prompt_tokens = 0;     // prompt tokens run through the model (the part not already cached)
    int cached_tokens = 0;     // prompt tokens reused from the KV cache
    int generated_tokens = 0;  // tokens sampled, counting a final end-of-generation token
    double prompt_ms = 0.0;    // running prompt_tokens through the model
    double generation_ms = 0.0;  // from the end of the prompt to the end of generation
    double time_to_first_token_ms = 0.0;  // from the call to the first sampled token (render and tokenize included)

    double prompt_tps() const { return prompt_ms > 0.0 ? prompt_tokens * 1000.0 / prompt_ms : 0.0; }
    double generation_tps() const { return generation_ms > 0.0 ? generated_tokens * 1000.0 / generation_ms : 0.0; }
};

struct GenerationResult {
    std::string reasoning;  // text inside <think>...</think>
    std::string answer;     // everything else
    StopReason stop_reason = StopReason::EndOfGeneration;
    Timings timings;
};

// One streamed step; either part may be empty (never both). Views into the loop's buffers,
// valid during the callback only.
struct StreamPiece {
    std::string_view reasoning;
    std::string_view answer;
};

// Return false to stop generating (the result then reports StopReason::Cancelled).
using PieceCallback = std::function<bool(const StreamPiece&)>;

class ChatSession {
public:
    // context: KV cache size in tokens (0: the model default). A non-empty system prompt
    // becomes the first message and survives clear().
    explicit ChatSession(Engine& engine, int context = 0, std::string system_prompt = "")
        : engine_(&engine),
          cache_(engine.make_cache(context)),
          system_prompt_(std::move(system_prompt)),
          logits_(std::size_t(engine.n_vocab())) {
        cached_tokens_.reserve(std::size_t(cache_.capacity()));
        clear();
    }

    ChatSession(const ChatSession&) = delete;
    ChatSession& operator=(const ChatSession&) = delete;

    // Adds a user message, generates the reply and adds it to the conversation without its
    // reasoning (the template renders assistant history that way). If generation fails with
    // an exception the user message is taken back out.
    GenerationResult send(std::string user_message, const GenerationParams& params, const PieceCallback& on_piece = {}) {
        messages_.push_back(nlohmann::ordered_json{{"role", "user"}, {"content", std::move(user_message)}});
        GenerationResult result;
        try {
            result = complete(messages_, params, on_piece);
        } catch (...) {
            messages_.erase(messages_.end() - 1);
            throw;
        }
        messages_.push_back(nlohmann::ordered_json{{"role", "assistant"}, {"content", result.answer}});
        return result;
    }

    // Back to the system prompt alone. The KV cache is kept: the next turn reuses whatever
    // prefix still matches (the system block at least).
    void clear() {
        messages_ = nlohmann::ordered_json::array();
        if (!system_prompt_.empty())
            messages_.push_back(nlohmann::ordered_json{{"role", "system"}, {"content", system_prompt_}});
    }

    // Stops a running generation before its next token; callable from any thread and from a
    // signal handler (one lock-free atomic store). A cancel before a call starts is ignored.
    void cancel() { cancel_requested_.store(true, std::memory_order_relaxed); }

    const nlohmann::ordered_json& messages() const { return messages_; }
    const std::string& system_prompt() const { return system_prompt_; }
    int context_size() const { return cache_.capacity(); }
    int cached_token_count() const { return cache_.size(); }
    // The tokens the KV cache holds, in order.
    std::span<const std::int32_t> cached_tokens() const { return cached_tokens_; }

    // Date and tool definitions for rendering (enable_thinking and add_generation_prompt are
    // taken from each call).
    void set_template_options(ChatOptions options) { template_options_ = std::move(options); }
    const ChatOptions& template_options() const { return template_options_; }

    // Lower level, for callers that keep their own history (a server): renders `messages`
    // with the generation prompt and generates the assistant's reply. The session's own
    // history is not touched.
    GenerationResult complete(const nlohmann::ordered_json& messages, const GenerationParams& params,
                              const PieceCallback& on_piece = {}) {
        const auto start = Clock::now();
        cancel_requested_.store(false, std::memory_order_relaxed);
        ChatOptions options = template_options_;
        options.enable_thinking = params.enable_thinking;
        options.add_generation_prompt = true;
        const std::string prompt = render_chat(messages, options);
        return generate(prompt, params, on_piece, start);
    }

    // Lowest level: generates after an already rendered prompt (parsed with special tokens).
    GenerationResult complete_prompt(std::string_view prompt, const GenerationParams& params,
                                     const PieceCallback& on_piece = {}) {
        const auto start = Clock::now();
        cancel_requested_.store(false, std::memory_order_relaxed);
        return generate(prompt, params, on_piece, start);
    }

private:
    using Clock = std::chrono::steady_clock;
    static double ms_between(Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double, std::milli>(b - a).count();
    }
    bool cancelled() const { return cancel_requested_.load(std::memory_order_relaxed); }

    GenerationResult generate(std::string_view prompt_text, const GenerationParams& params,
                              const PieceCallback& on_piece, Clock::time_point start) {
        const text::Tokenizer& tokenizer = engine_->tokenizer();
        const std::vector<std::int32_t> prompt = tokenizer.encode(prompt_text, /*parse_special=*/true);
        const int n_prompt = int(prompt.size());
        if (n_prompt == 0) fail("generate: the rendered prompt is empty; there is nothing to continue from");
        if (n_prompt > cache_.capacity())
            fail("the prompt is ", n_prompt, " tokens but the context holds ", cache_.capacity(),
                 " tokens; shorten the conversation or raise the context size (-c / --ctx-size)");

        // Built before the cache is touched, so bad parameters leave the session as it was.
        Sampler sampler(params.sampling, engine_->n_vocab());
        StopStringMatcher stops(params.stop);
        // The no-think generation prompt ends with the empty think block: the answer follows.
        ThinkingParser thinking(/*thinking_enabled=*/!prompt_text.ends_with("</think>\n"));
        text::StreamDecoder decoder(tokenizer);

        GenerationResult result;
        Timings& timings = result.timings;

        try {
            // Reuse the longest common prefix, but always run at least the last prompt token:
            // its logits are what the first sample needs.
            const std::size_t limit = std::min(cached_tokens_.size(), prompt.size() - 1);
            std::size_t common = 0;
            while (common < limit && cached_tokens_[common] == prompt[common]) ++common;
            cache_.truncate(int(common));
            cached_tokens_.resize(common);
            timings.cached_tokens = int(common);
            timings.prompt_tokens = n_prompt - int(common);

            // The penalties see the end of the prompt, as in llama.cpp.
            const int penalty_window = std::min(params.sampling.penalty_last_n, n_prompt);
            for (int i = n_prompt - penalty_window; i < n_prompt; ++i) sampler.accept(prompt[std::size_t(i)]);

            // Chunks of the engine's batch size, so a cancel does not wait for a long prompt.
            const auto prompt_start = Clock::now();
            const std::size_t chunk = std::size_t(std::max(1, engine_->load_options().max_batch));
            for (std::size_t at = common; at < prompt.size(); at += chunk) {
                if (cancelled()) {
                    result.stop_reason = StopReason::Cancelled;
                    timings.prompt_ms = ms_between(prompt_start, Clock::now());
                    return result;
                }
                const std::size_t n = std::min(chunk, prompt.size() - at);
                const std::span<const std::int32_t> part(prompt.data() + at, n);
                engine_->forward(cache_, part, logits_.data(), /*all_logits=*/false);
                cached_tokens_.insert(cached_tokens_.end(), part.begin(), part.end());
            }
            const auto generation_start = Clock::now();
            timings.prompt_ms = ms_between(prompt_start, generation_start);

            auto deliver = [&](const ThinkingPiece& piece) {
                if (piece.reasoning.empty() && piece.answer.empty()) return;
                result.reasoning += piece.reasoning;
                result.answer += piece.answer;
                if (on_piece && !on_piece(StreamPiece{piece.reasoning, piece.answer})) cancel();
            };
            auto show = [&](std::string_view text) {
                if (!text.empty()) deliver(thinking.push(text));
            };

            StopReason reason = StopReason::MaxTokens;
            const int max_tokens = params.max_tokens;
            while (max_tokens < 0 || timings.generated_tokens < max_tokens) {
                if (cancelled()) {
                    reason = StopReason::Cancelled;
                    break;
                }
                const std::int32_t id = sampler.sample(logits_);
                sampler.accept(id);
                if (++timings.generated_tokens == 1) timings.time_to_first_token_ms = ms_between(start, Clock::now());
                if (tokenizer.is_end_of_generation(id)) {
                    reason = StopReason::EndOfGeneration;
                    break;
                }
                const std::string piece = decoder.push(id);
                if (!piece.empty()) {
                    StopStringMatcher::Result matched = stops.push(piece);
                    show(matched.emit);
                    if (matched.stopped) {
                        reason = StopReason::StopString;
                        break;
                    }
                }
                if (max_tokens >= 0 && timings.generated_tokens >= max_tokens) {
                    reason = StopReason::MaxTokens;
                    break;
                }
                if (cache_.size() >= cache_.capacity()) {
                    reason = StopReason::ContextFull;
                    break;
                }
                if (cancelled()) {  // the callback may have asked while showing this token
                    reason = StopReason::Cancelled;
                    break;
                }
                engine_->forward(cache_, std::span<const std::int32_t>(&id, 1), logits_.data(), /*all_logits=*/false);
                cached_tokens_.push_back(id);
            }

            // Whatever is still held back is shown unless a stop string already ended the text.
            if (!stops.stopped()) {
                const std::string tail = decoder.flush();
                if (!tail.empty()) {
                    StopStringMatcher::Result matched = stops.push(tail);
                    show(matched.emit);
                    if (matched.stopped) reason = StopReason::StopString;
                }
                show(stops.finish());
            }
            deliver(thinking.finish());

            result.stop_reason = reason;
            timings.generation_ms = ms_between(generation_start, Clock::now());
        } catch (...) {
            // A forward pass that failed part way may have filled positions we did not
            // record; start the cache over rather than trust it.
            cache_.clear();
            cached_tokens_.clear();
            throw;
        }
        return result;
    }

    Engine* engine_;
    KvCache cache_;
    std::vector<std::int32_t> cached_tokens_;  // [cache_.size()] the tokens whose keys/values the cache holds
    std::string system_prompt_;
    nlohmann::ordered_json messages_;
    ChatOptions template_options_;
    std::vector<float> logits_;  // [n_vocab] logits of the last token run
    std::atomic<bool> cancel_requested_{false};
    static_assert(std::atomic<bool>::is_always_lock_free, "cancel() must be safe to call from a signal handler");
};

}  // namespace smol
