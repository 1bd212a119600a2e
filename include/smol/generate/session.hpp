#pragma once
// A chat with the model: the conversation so far and the Sequence (generate/sequence.hpp) that
// holds it in a KV cache, run alone, the same one a server slot runs batched.
//
// Each turn renders the whole conversation with the chat template and tokenizes it; the
// Sequence keeps the longest prefix of those tokens that its cache already holds and runs only
// the rest through the model. Reusing by token prefix rather than by "what was appended" stays
// correct whatever the caller changes (edited history, another system prompt, thinking
// switched), and costs one comparison per cached token. Each picked token goes through the
// GenerationPipeline (generate/pipeline.hpp); what is left here is the conversation, the
// streaming callback and cancellation.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "smol/core/error.hpp"
#include "smol/generate/cache_file.hpp"
#include "smol/generate/engine.hpp"
#include "smol/generate/pipeline.hpp"
#include "smol/generate/sequence.hpp"
#include "smol/text/chat_template.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

struct GenerationResult {
    std::string reasoning;  // text inside <think>...</think>
    std::string answer;     // everything else but tool calls
    std::vector<ToolCall> tool_calls;  // when the template rendered tools (ChatOptions::xml_tools)
    FinishReason finish_reason = FinishReason::end_of_generation;
    GenerationUsage usage;
    // Messages dropped from the start of the conversation to make room before this reply
    // (ChatSession::set_drop_oldest_turns); 0 when everything fit.
    int dropped_messages = 0;
};

// One streamed step; either part may be empty (never both). Views into the loop's buffers,
// valid during the callback only.
struct StreamPiece {
    std::string_view reasoning;
    std::string_view answer;
    std::span<const ToolCall> tool_calls;  // calls completed with this step
};

// Return false to stop generating (the result then reports FinishReason::cancelled).
using PieceCallback = std::function<bool(const StreamPiece&)>;

class ChatSession {
public:
    // context: KV cache size in tokens (0: the model default). A non-empty system prompt
    // becomes the first message and survives clear().
    explicit ChatSession(Engine& engine, int context = 0, std::string system_prompt = "")
        : engine_(&engine),
          sequence_(engine.make_cache(context)),
          system_prompt_(std::move(system_prompt)),
          logits_(std::size_t(engine.n_vocab())) {
        clear();
    }

    ChatSession(const ChatSession&) = delete;
    ChatSession& operator=(const ChatSession&) = delete;

    // Adds a user message, generates the reply and adds it to the conversation without its
    // reasoning (the template renders assistant history that way). If generation fails with
    // an exception the user message is taken back out.
    GenerationResult send(std::string user_message, const GenerationParams& params, const PieceCallback& on_piece = {}) {
        return send_message(nlohmann::ordered_json{{"role", "user"}, {"content", std::move(user_message)}}, params,
                            on_piece);
    }

    // send() for any message the model should answer, such as a tool result
    // {"role": "tool", "content": ...}.
    GenerationResult send_message(nlohmann::ordered_json message, const GenerationParams& params,
                                  const PieceCallback& on_piece = {}) {
        messages_.push_back(std::move(message));
        try {
            return add_reply(params, on_piece);
        } catch (...) {
            messages_.erase(messages_.end() - 1);
            throw;
        }
    }

    // Generates the last reply again from the conversation before it (a new sample unless
    // sampling is greedy or reuses a fixed seed), replacing it. The conversation must end with
    // an assistant reply; if generation fails with an exception the old reply is kept.
    GenerationResult regenerate(const GenerationParams& params, const PieceCallback& on_piece = {}) {
        // Every stored message went through render_chat, so it is an object with a string role.
        const std::string role = messages_.empty() ? "" : messages_.back().value("role", "");
        if (role != "assistant")
            fail("regenerate: expected the conversation to end with an assistant reply, found ",
                 messages_.empty() ? std::string("no messages") : "a " + role + " message last");
        nlohmann::ordered_json previous = std::move(messages_.back());
        messages_.erase(messages_.end() - 1);
        try {
            return add_reply(params, on_piece);
        } catch (...) {
            messages_.push_back(std::move(previous));
            throw;
        }
    }

    // Replaces the conversation, e.g. with one saved from messages(): an array of OpenAI-style
    // messages, checked the way render_chat reads them (an error names the message), so a bad
    // one leaves the session as it was. The system prompt given at construction is not added;
    // clear() still goes back to it.
    void set_messages(nlohmann::ordered_json messages) {
        if (!messages.is_array())
            fail("chat messages: expected an array of {role, content} messages, found ", messages.type_name());
        if (!messages.empty()) (void)render_chat(messages, template_options_);
        messages_ = std::move(messages);
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
    int context_size() const { return sequence_.capacity(); }
    int cached_token_count() const { return sequence_.size(); }
    // The tokens the KV cache holds, in order.
    std::span<const std::int32_t> cached_tokens() const { return sequence_.tokens(); }

    // What the KV cache holds, to a cache file (generate/cache_file.hpp); the bytes written.
    std::uint64_t save_cache(const std::filesystem::path& path) const {
        return write_cache_file(path, *sequence_.cache(), sequence_.tokens(), cache_model_identity(*engine_), "");
    }
    // Replaces the KV cache with one read from a cache file: the next turn runs only what its
    // prompt does not share with the file's tokens. The tokens restored; throws CacheFileError
    // (the cache is then as it was) for a file of another model, cache type or shape.
    std::size_t load_cache(const std::filesystem::path& path) {
        KvCache cache = engine_->make_cache(context_size());
        RestoredCache restored = read_cache_file(path, cache, cache_model_identity(*engine_), engine_->n_vocab());
        sequence_.adopt(std::move(cache), std::move(restored.tokens));
        return std::size_t(sequence_.size());
    }

    // When on, a conversation that no longer fits drops its oldest turns before the next reply
    // (a turn: a message and everything up to the next user message), never the system message
    // or the newest turn, until the prompt leaves room for the reply: max_tokens when it is set,
    // at most a quarter of the context. Off (the default), a conversation too long is an error.
    void set_drop_oldest_turns(bool on) { drop_oldest_turns_ = on; }

    // Reasoning mode, date and tool definitions for rendering (add_generation_prompt is set by
    // each call).
    void set_template_options(ChatOptions options) { template_options_ = std::move(options); }
    const ChatOptions& template_options() const { return template_options_; }

    // Lower level, for callers that keep their own history (a server): renders `messages`
    // with the generation prompt and generates the assistant's reply. The session's own
    // history is not touched.
    GenerationResult complete(const nlohmann::ordered_json& messages, const GenerationParams& params,
                              const PieceCallback& on_piece = {}) {
        cancel_requested_.store(false, std::memory_order_relaxed);
        ChatOptions options = template_options_;
        options.add_generation_prompt = true;
        options.continue_final_message = false;
        GenerationParams with_tools = params;
        with_tools.parse_tool_calls = params.parse_tool_calls || !options.xml_tools.empty();
        return generate(render_chat(messages, options), with_tools, on_piece);
    }

    // Lowest level: generates after an already rendered prompt (parsed with special tokens).
    GenerationResult complete_prompt(const ChatPrompt& prompt, const GenerationParams& params,
                                     const PieceCallback& on_piece = {}) {
        cancel_requested_.store(false, std::memory_order_relaxed);
        return generate(prompt, params, on_piece);
    }

private:
    // Generates the reply to the conversation and adds it without its reasoning; tool calls
    // go in as OpenAI-style tool_calls, which the template writes back the way the model did.
    GenerationResult add_reply(const GenerationParams& params, const PieceCallback& on_piece) {
        const int dropped = drop_oldest_turns_ ? fit_to_context(params) : 0;
        GenerationResult result = complete(messages_, params, on_piece);
        result.dropped_messages = dropped;
        nlohmann::ordered_json reply = {{"role", "assistant"}, {"content", result.answer}};
        if (!result.tool_calls.empty()) {
            reply["tool_calls"] = nlohmann::ordered_json::array();
            for (const ToolCall& call : result.tool_calls)
                reply["tool_calls"].push_back(
                    {{"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        messages_.push_back(std::move(reply));
        return result;
    }

    bool cancelled() const { return cancel_requested_.load(std::memory_order_relaxed); }

    // Drops the oldest turns (see set_drop_oldest_turns) until the prompt leaves room for the
    // reply; returns how many messages went. Stops when only the system message and the newest
    // turn are left: if those do not fit, generate() reports it.
    int fit_to_context(const GenerationParams& params) {
        const int capacity = sequence_.capacity();
        const int room = params.max_tokens > 0 ? std::min(params.max_tokens, capacity / 4) : capacity / 4;
        ChatOptions options = template_options_;
        options.add_generation_prompt = true;
        options.continue_final_message = false;
        const auto role = [&](std::size_t i) { return messages_[i].value("role", std::string()); };
        int dropped = 0;
        while (true) {
            const std::size_t n_prompt = [&] {
                const ChatPrompt chat = render_chat(messages_, options);
                return engine_->tokenizer().encode(chat.text, chat.message_text).size();
            }();
            if (long(n_prompt) + room <= capacity) return dropped;
            const std::size_t first = !messages_.empty() && role(0) == "system" ? 1 : 0;
            std::size_t next = first + 1;
            while (next < messages_.size() && role(next) != "user") ++next;
            if (next >= messages_.size()) return dropped;  // only the newest turn is left
            messages_.erase(messages_.begin() + std::ptrdiff_t(first), messages_.begin() + std::ptrdiff_t(next));
            dropped += int(next - first);
        }
    }

    GenerationResult generate(const ChatPrompt& chat, const GenerationParams& params, const PieceCallback& on_piece) {
        const text::Tokenizer& tokenizer = engine_->tokenizer();
        const std::vector<std::int32_t> prompt = tokenizer.encode(chat.text, chat.message_text);
        if (prompt.empty()) fail("generate: the rendered prompt is empty; there is nothing to continue from");

        // Built, and the prompt's length checked, before the cache is touched, so bad
        // parameters or a prompt too long leave the session as it was.
        GenerationPipeline pipeline(tokenizer, params, prompt, chat.assistant_prefix);
        // Room for every row of a verify step; the Sequence drafts no more than fits.
        const SpeculationParams& speculation = pipeline.speculation();
        const int rows = speculation.enabled() ? 1 + speculation.draft_max : 1;
        logits_.resize(std::size_t(engine_->n_vocab()) * std::size_t(rows));
        sequence_.start(prompt, &pipeline);
        GenerationResult result;
        auto deliver = [&](const TextDelta& delta) {
            if (delta.empty()) return;
            result.reasoning += delta.reasoning;
            result.answer += delta.content;
            result.tool_calls.insert(result.tool_calls.end(), delta.tool_calls.begin(), delta.tool_calls.end());
            if (on_piece && !on_piece(StreamPiece{delta.reasoning, delta.content, delta.tool_calls})) cancel();
        };
        auto end = [&](FinishReason reason) {
            sequence_.end();
            TextDelta tail;
            pipeline.finish(reason, tail);
            deliver(tail);
            result.finish_reason = pipeline.finish_reason();
            result.usage = pipeline.usage();
            return result;
        };

        try {
            // Chunks of the engine's batch size, so a cancel does not wait for a long prompt.
            const std::size_t chunk = std::size_t(std::max(1, engine_->load_options().max_batch));
            while (sequence_.reading_prompt()) {
                if (cancelled()) return end(FinishReason::cancelled);
                sequence_.feed(*engine_, logits_, chunk);
            }

            if (params.max_tokens == 0) return end(FinishReason::max_tokens);
            while (true) {
                if (cancelled()) return end(FinishReason::cancelled);
                TextDelta delta;
                const bool ended = sequence_.step(logits_, delta);
                deliver(delta);
                if (ended) return end(pipeline.finish_reason());
                if (cancelled()) return end(FinishReason::cancelled);  // the callback may have asked
                sequence_.feed(*engine_, logits_);
            }
        } catch (...) {
            sequence_.reset();  // a forward pass that failed part way leaves the cache untrustworthy
            throw;
        }
    }

    Engine* engine_;
    Sequence sequence_;  // the KV cache and the tokens it holds
    std::string system_prompt_;
    nlohmann::ordered_json messages_;
    ChatOptions template_options_;
    std::vector<float> logits_;  // [rows, n_vocab] logits of the last run: 1 row, or a verify step's
    std::atomic<bool> cancel_requested_{false};
    bool drop_oldest_turns_ = false;
    static_assert(std::atomic<bool>::is_always_lock_free, "cancel() must be safe to call from a signal handler");
};

}  // namespace smol
