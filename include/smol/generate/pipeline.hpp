#pragma once
// What happens to one sequence's sampled tokens, the same for every caller: a chat session
// (CLI, embedding) and the server's scheduler both run their tokens through a
// GenerationPipeline, so the text, the finish reason, the usage and the sampling rules cannot
// drift apart between them.
//
//   logits -> ThinkingBudget (a spent reasoning budget: the pipeline writes "</think>\n" itself)
//          -> Sampler (penalties and DRY seeded with the prompt's tail, as llama-server does)
//          (a grammar, when given, masks the tokens that would leave it: grammar_constraint.hpp;
//          not inside a think block, and with a trigger only from the trigger token on)
//          -> end of generation? max_tokens? room in the context?
//          -> StreamDecoder (whole UTF-8 characters)
//          -> ThinkingParser (reasoning / answer; primed with the assistant prefix)
//          -> ToolCallParser (<tool_call> blocks in the answer become calls; when asked for)
//          -> StopStringMatcher (on the answer; holds back what may become a stop string)
//          -> TextDelta for the caller (with each token's log-probability, when asked for)
//
// The pipeline knows nothing about KV caches or threads: the caller runs the model and tells
// the pipeline whether the context has room for another token.

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/grammar_constraint.hpp"
#include "smol/generate/logprobs.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/speculation.hpp"
#include "smol/generate/stop_strings.hpp"
#include "smol/generate/thinking_budget.hpp"
#include "smol/text/thinking.hpp"
#include "smol/text/tool_calls.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

struct GenerationParams {
    SamplerParams sampling;
    int max_tokens = -1;            // tokens sampled at most; negative: until end of generation or a full context
    std::vector<std::string> stop;  // generation ends before any of these (matched on the answer); never shown
    bool parse_tool_calls = false;  // <tool_call> blocks become ToolCalls (turn on when tools were rendered)
    bool split_reasoning = true;    // <think> blocks become reasoning; false: all text is content (raw completions)
    // Negative: no log-probabilities. 0..kMaxTopLogprobs: each generated token's (end of
    // generation excepted) with this many most likely alternatives.
    int logprobs = -1;
    // List each generated token's id (end of generation excepted) in TextDelta::tokens, as
    // llama-server's native completions return them.
    bool token_ids = false;
    // When set, the answer is a sentence of this grammar (Engine::compile_grammar); generation
    // can end only once it is complete, and it completes within max_tokens and the context.
    // Reasoning may come first (split_reasoning): the grammar starts after </think>, and a think
    // block is closed early when the tokens left are what the grammar needs to complete.
    std::shared_ptr<const TokenGrammar> grammar;
    // A lazy grammar (tool_choice "auto"): text is free until the model writes this token
    // (e.g. "<tool_call>", one token of the vocabulary), which starts a sentence of the grammar;
    // once that is complete text is free again until the next. Empty: the grammar holds the answer.
    std::string grammar_trigger;
    // Tokens the model may think (inside <think>...</think>) before the pipeline closes the
    // block itself and the answer follows (ThinkingBudget); -1: no limit, 0: closed at once.
    int reasoning_budget = -1;
    // Draft-free speculative decoding (generate/speculation.hpp): more tokens per forward pass
    // where the text repeats its context, the same tokens either way. Off by default.
    SpeculationParams speculation;
};

enum class FinishReason {
    end_of_generation,  // the model sampled an end-of-generation token
    stop_string,        // the answer reached one of the stop strings
    max_tokens,         // max_tokens were sampled
    context_full,       // the KV cache has no room for another token
    tool_calls,         // the model ended its turn after calling tools
    cancelled,          // the caller (or a client that left) stopped it
    error,              // the model or the sampler failed
};

inline std::string_view to_string(FinishReason reason) {
    switch (reason) {
        case FinishReason::end_of_generation: return "eos";
        case FinishReason::stop_string: return "stop_string";
        case FinishReason::max_tokens: return "length";
        case FinishReason::context_full: return "context_full";
        case FinishReason::tool_calls: return "tool_calls";
        case FinishReason::cancelled: return "cancelled";
        case FinishReason::error: return "error";
    }
    return "unknown";
}

// Token counts and times of one generation. Every interval is measured by the pipeline, so a
// session and the server report the same quantities the same way.
struct GenerationUsage {
    int prompt_tokens = 0;      // the whole prompt
    int cached_tokens = 0;      // prompt tokens reused from the KV cache, not run again
    int completion_tokens = 0;  // tokens sampled, counting a final end-of-generation token
    int reasoning_tokens = 0;   // of those, the model's inside think blocks (ThinkingBudget)
    double queue_ms = 0.0;      // from the request to the start of its prompt (waiting for a slot)
    double prompt_ms = 0.0;     // from the start of the prompt to the first sampled token
    double generation_ms = 0.0;  // from the first to the last sampled token
    double time_to_first_token_ms = 0.0;  // from the request to the first sampled token
    int drafted_tokens = 0;   // speculation: tokens drafted and checked by the model
    int accepted_tokens = 0;  // of those, the ones the model picked too (each saved a step)

    int prompt_evaluated() const { return prompt_tokens - cached_tokens; }
    double prompt_tokens_per_second() const { return prompt_ms > 0.0 ? prompt_evaluated() * 1000.0 / prompt_ms : 0.0; }
    // Tokens after the first over the time between first and last: each is one decode step.
    double tokens_per_second() const {
        return completion_tokens > 1 && generation_ms > 0.0 ? (completion_tokens - 1) * 1000.0 / generation_ms : 0.0;
    }
};

// What one step (or one finish) produced; any part may be empty.
struct TextDelta {
    std::string reasoning;  // inside <think>...</think>
    std::string content;    // the answer
    std::vector<ToolCall> tool_calls;  // calls completed in this step
    // One per token generated in this step (GenerationParams::logprobs), whether its text is
    // shown yet or still held back.
    std::vector<TokenLogprob> logprobs;
    // The ids of the tokens generated in this step (GenerationParams::token_ids), likewise.
    std::vector<std::int32_t> tokens;

    bool empty() const {
        return reasoning.empty() && content.empty() && tool_calls.empty() && logprobs.empty() && tokens.empty();
    }
    void append(const TextDelta& more) {
        reasoning += more.reasoning;
        content += more.content;
        tool_calls.insert(tool_calls.end(), more.tool_calls.begin(), more.tool_calls.end());
        logprobs.insert(logprobs.end(), more.logprobs.begin(), more.logprobs.end());
        tokens.insert(tokens.end(), more.tokens.begin(), more.tokens.end());
    }
};

class GenerationPipeline {
public:
    using Clock = std::chrono::steady_clock;

    // prompt: the tokens the generation continues (its tail seeds the repetition penalties).
    // assistant_prefix: the assistant text the prompt already ends with (see ChatPrompt); it
    // tells the parsers whether generation starts inside a think block or a tool call. Throws
    // smol::Error for bad parameters, before anything has run. The request's clock starts here.
    GenerationPipeline(const text::Tokenizer& tokenizer, const GenerationParams& params,
                       std::span<const std::int32_t> prompt, std::string_view assistant_prefix)
        : tokenizer_(&tokenizer),
          sampler_(params.sampling, int(tokenizer.n_vocab()), dry_breakers(params.sampling, tokenizer)),
          stops_(params.stop),
          decoder_(tokenizer),
          thinking_(/*thinking_enabled=*/true),
          budget_(tokenizer, params.reasoning_budget),
          parse_tool_calls_(params.parse_tool_calls),
          split_reasoning_(params.split_reasoning),
          logprobs_(params.logprobs),
          token_ids_(params.token_ids),
          max_tokens_(params.max_tokens),
          speculation_(params.speculation),
          requested_(Clock::now()) {
        if (prompt.empty()) fail("generation: the prompt is empty; at least one token is needed to continue from");
        speculation_.validate();
        if (params.grammar) constraint_.emplace(params.grammar, tokenizer);
        set_grammar_trigger(params.grammar_trigger);
        if (logprobs_ > kMaxTopLogprobs)
            fail("generation: at most ", kMaxTopLogprobs, " alternatives per token, asked for ", logprobs_);
        usage_.prompt_tokens = int(prompt.size());
        // Sets the parsers' state (inside a think block, inside a call); that text is the
        // caller's, not output.
        const ThinkingPiece prefix =
            split_reasoning_ ? thinking_.push(assistant_prefix) : ThinkingPiece{{}, std::string(assistant_prefix)};
        if (parse_tool_calls_) (void)tools_.push(prefix.answer);
        // The model may open a think block first only where the prompt has none (thinking mode).
        think_may_open_ = split_reasoning_ && assistant_prefix.find(ThinkingParser::open_tag) == std::string_view::npos;
        think_open_ = tokenizer.find(ThinkingParser::open_tag).value_or(-1);
        grammar_active_ = constraint_ && trigger_ < 0 && !in_reasoning() && !think_may_open_;
        const std::size_t window = std::min(std::size_t(params.sampling.history_window()), prompt.size());
        for (std::int32_t token : prompt.last(window)) sampler_.accept(token);
    }

    // How a long step (a grammar's vocabulary walk) finds out that its request was cancelled;
    // it then throws GenerationCancelled.
    void set_cancelled(std::function<bool()> cancelled) {
        if (constraint_) constraint_->set_cancelled(std::move(cancelled));
    }

    // The grammar constraint, when the request has one (for its work counters).
    const GrammarConstraint* constraint() const { return constraint_ ? &*constraint_ : nullptr; }

    // The prompt starts running now, `cached_tokens` of it already in the KV cache.
    void begin_prompt(int cached_tokens) {
        prompt_started_ = Clock::now();
        usage_.cached_tokens = cached_tokens;
        usage_.queue_ms = ms_between(requested_, prompt_started_);
    }

    // Picks the next token from the logits of the last position (modified in place). room:
    // tokens the context still holds after the current ones (a grammar completes within it).
    std::int32_t sample(std::span<float> logits, long room = std::numeric_limits<long>::max()) {
        if (logprobs_ >= 0) raw_logits_.assign(logits.begin(), logits.end());  // the sampler edits logits
        long budget = room;  // tokens that may still be generated, this one included
        if (max_tokens_ >= 0) budget = std::min<long>(budget, max_tokens_ - usage_.completion_tokens);
        const bool thinking = in_reasoning();
        std::int32_t token = budget_.forced(thinking, thinking && answer_needs(budget));
        const bool forced = token >= 0;
        if (!forced) {
            constrain(logits, budget, thinking);
            token = sampler_.sample(logits);
        }
        sampler_.accept(token);
        budget_.picked(token, forced, thinking, /*complete_close=*/grammar_waits_for_answer());
        if (!forced) grammar_accept(token, thinking);
        usage_.reasoning_tokens = budget_.thinking_tokens();
        think_may_open_ = false;
        if (logprobs_ >= 0) last_logprob_ = token_logprob(raw_logits_, token, logprobs_);
        const auto now = Clock::now();
        if (usage_.completion_tokens++ == 0) {
            first_token_ = now;
            usage_.prompt_ms = ms_between(prompt_started_, now);
            usage_.time_to_first_token_ms = ms_between(requested_, now);
        }
        usage_.generation_ms = ms_between(first_token_, now);
        return token;
    }

    // Runs a sampled token through the text stages, appending what it shows to `out`. Returns
    // true when generation ends here (end of generation, a stop string, max_tokens, or no
    // room in the context for this token); otherwise the caller feeds the token to the model.
    bool push(std::int32_t token, bool context_has_room, TextDelta& out) {
        if (tokenizer_->is_end_of_generation(token)) {
            finish(FinishReason::end_of_generation, out);
            return true;
        }
        if (logprobs_ >= 0) out.logprobs.push_back(std::move(last_logprob_));
        if (token_ids_) out.tokens.push_back(token);
        show(decoder_.push(token), out);
        if (stops_.stopped()) finish(FinishReason::stop_string, out);
        else if (max_tokens_ >= 0 && usage_.completion_tokens >= max_tokens_) finish(FinishReason::max_tokens, out);
        else if (!context_has_room) finish(FinishReason::context_full, out);
        return finished_;
    }

    // Ends generation for `reason`. Text still held back (an unfinished character, a possible
    // tag or stop string) is shown unless the generation failed: a cancelled reply keeps
    // everything the model wrote. A second call does nothing.
    void finish(FinishReason reason, TextDelta& out) {
        if (finished_) return;
        finished_ = true;
        reason_ = reason;
        if (reason == FinishReason::error || stops_.stopped()) return;
        show(decoder_.flush(), out);
        if (!stops_.stopped()) {
            if (split_reasoning_) {
                const ThinkingPiece last = thinking_.finish();
                out.reasoning += last.reasoning;
                answer(last.answer, out);
            }
            if (parse_tool_calls_ && !stops_.stopped()) {
                ToolCallPiece tail = tools_.finish();
                out.content += stops_.push(tail.text).emit;
            }
        }
        if (reason_ == FinishReason::end_of_generation && tools_.calls() > 0) reason_ = FinishReason::tool_calls;
        // A stop string completed by the held-back text still ends the reply as a stop.
        if (stops_.stopped()) {
            if (reason_ != FinishReason::cancelled) reason_ = FinishReason::stop_string;
        } else {
            out.content += stops_.finish();
        }
    }

    bool finished() const { return finished_; }
    FinishReason finish_reason() const { return reason_; }
    // The stop string that ended the answer; empty unless finish_reason() is stop_string.
    std::string matched_stop() const {
        return reason_ == FinishReason::stop_string ? std::string(stops_.matched()) : std::string();
    }
    const GenerationUsage& usage() const { return usage_; }
    int generated_tokens() const { return usage_.completion_tokens; }
    int n_vocab() const { return sampler_.n_vocab(); }
    // Tokens sample() may still pick before max_tokens ends the generation.
    long tokens_left() const {
        return max_tokens_ < 0 ? std::numeric_limits<long>::max() : long(max_tokens_) - usage_.completion_tokens;
    }

    const SpeculationParams& speculation() const { return speculation_; }
    // Tokens the model picked inside think blocks so far (ThinkingBudget).
    int thinking_tokens() const { return budget_.thinking_tokens(); }
    // A verify step checked `drafted` drafted tokens and the model picked `accepted` of them.
    void count_draft(int drafted, int accepted) {
        usage_.drafted_tokens += drafted;
        usage_.accepted_tokens += accepted;
    }

private:
    static double ms_between(Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double, std::milli>(b - a).count();
    }

    bool in_reasoning() const { return split_reasoning_ && thinking_.in_reasoning(); }

    // The trigger of a lazy grammar as a token id; -1 for none.
    void set_grammar_trigger(const std::string& trigger) {
        if (trigger.empty()) return;
        if (!constraint_) fail("generation: a grammar trigger (\"", trigger, "\") needs a grammar");
        const std::optional<std::int32_t> id = tokenizer_->find(trigger);
        if (!id) fail("generation: expected the grammar trigger \"", trigger, "\" to be one token of the vocabulary");
        trigger_ = *id;
    }

    // A grammar that holds the whole answer and has not started: the model is still reasoning.
    bool grammar_waits_for_answer() const { return constraint_ && trigger_ < 0 && !grammar_active_; }

    // Whether a think block must close now so that a waiting grammar can still complete in the
    // `budget` tokens left: the close's tokens, then a token per character the grammar needs.
    bool answer_needs(long budget) {
        return grammar_waits_for_answer() && budget <= budget_.close_length() + long(constraint_->chars_to_finish());
    }

    // Masks the logits for the grammar, when it applies to this token. Before a grammar that
    // holds the answer, reasoning may not end the reply; at the answer's start <think> may
    // still open a block (thinking mode), which then comes first.
    void constrain(std::span<float> logits, long budget, bool thinking) {
        if (!constraint_) return;
        if (!grammar_active_ && trigger_ < 0 && !thinking && !budget_.closing() && !think_may_open_)
            grammar_active_ = true;  // the think block (and its close) is over: the answer starts
        if (!grammar_active_) {
            if (thinking && trigger_ < 0)
                for (std::int32_t id : tokenizer_->end_of_generation_ids())
                    logits[std::size_t(id)] = -std::numeric_limits<float>::infinity();
            if (!think_may_open_ || trigger_ >= 0) return;
        }
        // A block opens only with room for it, its close and the grammar's shortest sentence.
        const bool keep_open = think_may_open_ && think_open_ >= 0 &&
                               budget > 1 + budget_.close_length() + long(constraint_->chars_to_finish());
        const float open_logit = keep_open ? logits[std::size_t(think_open_)] : 0.0f;
        constraint_->apply(logits, budget);
        if (keep_open) logits[std::size_t(think_open_)] = open_logit;
    }

    // Moves the grammar on by a token the model picked: a trigger starts a lazy grammar's
    // sentence, a complete one waits for the next trigger.
    void grammar_accept(std::int32_t token, bool thinking) {
        if (!constraint_) return;
        if (think_may_open_ && trigger_ < 0) {
            if (token == think_open_) return;  // a think block first; the grammar starts after it
            grammar_active_ = true;            // the answer starts with this token
        }
        if (!grammar_active_) {
            if (trigger_ < 0 || thinking || token != trigger_) return;
            grammar_active_ = true;
        }
        constraint_->accept(token);
        if (trigger_ >= 0 && constraint_->complete()) {
            constraint_->restart();
            grammar_active_ = false;
        }
    }

    void show(std::string_view text, TextDelta& out) {
        if (text.empty() || stops_.stopped()) return;
        if (!split_reasoning_) return answer(text, out);
        ThinkingPiece piece = thinking_.push(text);
        out.reasoning += piece.reasoning;
        answer(piece.answer, out);
    }

    void answer(std::string_view text, TextDelta& out) {
        if (!parse_tool_calls_) {
            out.content += stops_.push(text).emit;
            return;
        }
        ToolCallPiece piece = tools_.push(text);
        out.content += stops_.push(piece.text).emit;
        for (ToolCall& call : piece.calls) out.tool_calls.push_back(std::move(call));
    }

    const text::Tokenizer* tokenizer_;
    // DRY's sequence breakers in this vocabulary's tokens; nothing to build while DRY is off.
    static DryBreakers dry_breakers(const SamplerParams& params, const text::Tokenizer& tokenizer) {
        if (params.dry_window() == 0) return {};
        return build_dry_breakers(
            params.dry_sequence_breakers, int(tokenizer.n_vocab()),
            [&](std::int32_t id) { return std::string_view(tokenizer.token_bytes(id)); },
            [&](std::string_view text) { return tokenizer.encode(text, /*parse_special=*/false); });
    }

    Sampler sampler_;
    StopStringMatcher stops_;
    text::StreamDecoder decoder_;
    ThinkingParser thinking_;
    ThinkingBudget budget_;
    std::int32_t think_open_ = -1;  // the <think> token
    bool think_may_open_ = false;   // the next token may open a think block (the answer has not started)
    std::int32_t trigger_ = -1;     // GenerationParams::grammar_trigger's token; -1: none
    bool grammar_active_ = false;   // the grammar constrains the next token
    ToolCallParser tools_;
    bool parse_tool_calls_;
    bool split_reasoning_;
    int logprobs_;
    bool token_ids_;
    std::vector<float> raw_logits_;  // [n_vocab]: the last logits as the model gave them
    std::optional<GrammarConstraint> constraint_;
    TokenLogprob last_logprob_;      // of the token sample() returned last
    int max_tokens_;
    SpeculationParams speculation_;
    GenerationUsage usage_;
    bool finished_ = false;
    FinishReason reason_ = FinishReason::end_of_generation;
    Clock::time_point requested_, prompt_started_, first_token_;
};

}  // namespace smol
