#pragma once
// One sequence through the model: a KV cache, the tokens it holds, and the generation running
// on it. Every driver runs its tokens through a Sequence, so prefix reuse, the prompt-length
// rule, the "run the last prompt token again" rule, speculative decoding and the reset after an
// error exist once. The drivers differ only in who feeds it and how the forward pass is shared:
//
//   ChatSession (smol-cli, examples/embed, the library)  one Sequence, run alone: feed()
//   Scheduler (smol-server)                              a Sequence per slot, many in one pass:
//                                                        next_input() -> Engine::forward(batch) -> ran()
//   smol-bench (pp, tg, tg+grammar)                      one Sequence, run alone: feed()
//
//   start(prompt, pipeline)
//     -> room check: check_prompt_fits (the one prompt-length rule, below)
//     -> prefix reuse: keep the longest prefix the cached tokens share with the prompt, less
//        the prompt's last token (its logits pick the first new token); cut the cache there
//     -> pipeline.begin_prompt(tokens kept)
//   feed(), or next_input() + the driver's forward pass + ran()
//     -> the rest of the prompt in chunks, then each picked token
//     -> with speculation (GenerationParams::speculation, generate/speculation.hpp) the picked
//        token t carries a draft d0 d1 ... guessed from the context: [t d0 d1 ...], every row's
//        logits (a verify step); without, [t] alone
//     -> tokens() records what the cache holds
//   step(logits of the rows run)
//     -> row i: pipeline.sample (room: the free positions plain decoding would have)
//               -> pipeline.push (a position for this token?)
//        while the token picked at row i is d_i, row i+1 is what plain decoding would have run
//        next, so the walk goes on; the first other token (or an end) stops it, and the
//        rejected rows go from the cache (KvCache::truncate) and from tokens()
//     -> the last token picked is the next input, or the generation has ended
//   end()    the generation is over (finished, cancelled); the cache stays for prefix reuse
//   reset()  after an error: a forward pass that failed part way may have filled positions
//            nobody recorded, so the cache and its tokens are forgotten
//
// Speculation changes no token: each position is sampled from its own logits (the same bits
// alone or in a batch: the kernels are batch invariant), with the same sampler, grammar and
// random draw (one per position, never per attempt), and the text stages see the picked tokens
// one by one. Between calls the cache holds exactly tokens(), as plain decoding's would.
//
// A Sequence knows nothing about threads or cancellation: the driver checks between calls.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/engine.hpp"
#include "smol/generate/pipeline.hpp"
#include "smol/generate/speculation.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"

namespace smol {

// A prompt that leaves no room to generate in the context (a server answers 400).
class PromptTooLongError : public Error {
public:
    using Error::Error;
};

// The prompt-length rule, the one every caller asks: a prompt fits a context of `context`
// tokens when it leaves at least one position for a generated token.
inline bool prompt_fits(std::size_t n_prompt, int context) {
    return context > 0 && n_prompt < std::size_t(context);
}

// What a prompt that does not fit is told.
inline std::string prompt_too_long_message(std::size_t n_prompt, int context) {
    return "the prompt is " + std::to_string(n_prompt) + " tokens but the context holds " + std::to_string(context) +
           " tokens; expected at most " + std::to_string(std::max(context - 1, 0)) +
           ", so that one is left to generate: shorten the prompt or raise the context size (-c / --ctx-size)";
}

// Throws PromptTooLongError when the prompt does not fit (prompt_fits).
inline void check_prompt_fits(std::size_t n_prompt, int context) {
    if (!prompt_fits(n_prompt, context)) throw PromptTooLongError(prompt_too_long_message(n_prompt, context));
}

class Sequence {
public:
    static constexpr std::size_t kWholePrompt = std::numeric_limits<std::size_t>::max();

    // Without a cache: a scheduler slot gets one when a request first needs it (set_cache).
    Sequence() = default;
    explicit Sequence(KvCache cache) { set_cache(std::move(cache)); }

    bool has_cache() const { return cache_.has_value(); }
    // Attaches an empty cache, replacing any other (and what it held).
    void set_cache(KvCache cache) {
        cache_.emplace(std::move(cache));
        cache_->clear();
        tokens_.clear();
        tokens_.reserve(std::size_t(cache_->capacity()));
        end();
    }
    // Attaches a cache that already holds `tokens` (one read from a cache file, or a copy of
    // another sequence's), replacing any other.
    void adopt(KvCache cache, std::vector<std::int32_t> tokens) {
        if (cache.size() != int(tokens.size()))
            fail("sequence: expected a cache holding the ", tokens.size(), " tokens given, found ", cache.size(),
                 " positions");
        cache_.emplace(std::move(cache));
        tokens_ = std::move(tokens);
        tokens_.reserve(std::size_t(cache_->capacity()));
        end();
    }
    // Replaces what the cache holds with the first `n` tokens of `other`'s and their keys and
    // values: a prefix another sequence computed, so this one need not run it again.
    void copy_prefix_from(const Sequence& other, std::size_t n) {
        if (!cache_ || !other.cache_) fail("sequence: copying a prefix needs a KV cache on both sides");
        if (n > other.tokens_.size())
            fail("sequence: cannot copy ", n, " tokens, the other sequence holds ", other.tokens_.size());
        cache_->assign_prefix(*other.cache_, int(n));
        tokens_.assign(other.tokens_.begin(), other.tokens_.begin() + std::ptrdiff_t(n));
        end();
    }
    // The attached cache, or nullptr (a cache file is written from it).
    const KvCache* cache() const { return cache_ ? &*cache_ : nullptr; }
    // Frees the cache's memory (a scheduler under its memory budget); its tokens go with it.
    void release_cache() {
        cache_.reset();
        tokens_ = {};
        end();
    }

    int capacity() const { return cache_ ? cache_->capacity() : 0; }
    int size() const { return int(tokens_.size()); }
    // The tokens the cache holds, in order.
    std::span<const std::int32_t> tokens() const { return tokens_; }

    // How many leading tokens of `prompt` the cache already holds.
    std::size_t shared_prefix(std::span<const std::int32_t> prompt) const {
        const std::size_t limit = std::min(tokens_.size(), prompt.size());
        std::size_t n = 0;
        while (n < limit && tokens_[n] == prompt[n]) ++n;
        return n;
    }

    // Forgets every token from `n` on (a benchmark going back to its starting context).
    void truncate(std::size_t n) {
        if (!cache_ || n > tokens_.size())
            fail("sequence: cannot keep ", n, " tokens, it holds ", tokens_.size());
        cache_->truncate(int(n));
        tokens_.resize(n);
        end();
    }

    // Starts a generation that continues `prompt`: checks that the prompt fits
    // (PromptTooLongError, thrown before anything changes), keeps the cached prefix it shares
    // and tells the pipeline how much of the prompt that is. `pipeline` picks the tokens and
    // must outlive the generation (until end() or reset()); nullptr when the caller only runs
    // tokens (a benchmark), and then step() is not available. Returns the prompt tokens kept.
    std::size_t start(std::span<const std::int32_t> prompt, GenerationPipeline* pipeline) {
        if (!cache_) fail("sequence: start() needs a KV cache, and none is attached (set_cache)");
        if (prompt.empty()) fail("sequence: the prompt is empty; at least one token is needed to continue from");
        check_prompt_fits(prompt.size(), cache_->capacity());
        // At least the last prompt token runs again: its logits pick the first new token.
        const std::size_t kept = std::min(shared_prefix(prompt), prompt.size() - 1);
        end();
        cache_->truncate(int(kept));
        tokens_.resize(kept);
        prompt_.assign(prompt.begin(), prompt.end());
        pipeline_ = pipeline;
        if (pipeline_) pipeline_->begin_prompt(int(kept));
        return kept;
    }

    // The step costs that choose the draft length (SpeculationParams::adaptive): the engine's
    // that runs this sequence (Engine::step_costs; feed() takes its engine's); unset, the prior.
    void set_step_costs(const StepCosts* costs) { step_costs_ = costs; }

    // Whether prompt tokens are still to be run.
    bool reading_prompt() const { return tokens_.size() < prompt_.size(); }
    // Whether the logits of the last run are waiting for step().
    bool wants_step() const { return rows_waiting_ > 0; }
    // How many logit rows step() expects: 1, or 1 + the draft a verify step carried.
    std::size_t rows_waiting() const { return rows_waiting_; }

    // What the next forward pass runs for this sequence, as a batch entry: the token step()
    // picked, with a draft of at most max_draft tokens when the generation speculates (then
    // all_logits: a verify step), or else up to max_prompt_tokens (at least 1) more of the
    // prompt (last logits only). Valid until the next call, ran(), end() or reset().
    SequenceBatch next_input(std::size_t max_prompt_tokens = kWholePrompt, std::size_t max_draft = 0) {
        if (next_token_ >= 0) {
            input_.assign(1, next_token_);  // a draft from an earlier call is made again
            add_draft(max_draft);
            return {&*cache_, input_, input_.size() > 1};
        }
        if (!reading_prompt() || max_prompt_tokens == 0)
            fail("sequence: expected something to run (prompt tokens, or a token step() picked), found ",
                 reading_prompt() ? "a limit of 0 prompt tokens" : "the prompt run and no token picked");
        const std::size_t n = std::min(prompt_.size() - tokens_.size(), max_prompt_tokens);
        return {&*cache_, std::span<const std::int32_t>(prompt_).subspan(tokens_.size(), n), false};
    }

    // After a forward pass ran the first n_tokens of next_input(): the cache holds them now.
    // Throws when the count is not what next_input() gave or the cache holds another number of
    // positions; the record is then not to be trusted, so the caller resets.
    void ran(std::size_t n_tokens) {
        if (next_token_ >= 0) {
            if (input_.empty() || input_.front() != next_token_ || n_tokens != input_.size())
                fail("sequence: expected ", input_.size(), " tokens run (the one step() picked and its draft of ",
                     input_.size() - 1, " from next_input()), found ", n_tokens);
            tokens_.insert(tokens_.end(), input_.begin(), input_.end());
            rows_waiting_ = input_.size();
            next_token_ = -1;
            input_.clear();
        } else {
            const std::size_t at = tokens_.size();
            if (n_tokens == 0 || n_tokens > prompt_.size() - at)
                fail("sequence: expected 1 to ", prompt_.size() - at, " prompt tokens run, found ", n_tokens);
            const auto first = prompt_.begin() + std::ptrdiff_t(at);
            tokens_.insert(tokens_.end(), first, first + std::ptrdiff_t(n_tokens));
            rows_waiting_ = reading_prompt() ? 0 : 1;
        }
        if (cache_->size() != int(tokens_.size()))
            fail("sequence: the KV cache holds ", cache_->size(), " positions, expected ", tokens_.size(),
                 " (the tokens run)");
    }

    // Runs next_input() alone through the engine and records it (ran()). logits: [rows,
    // n_vocab], receives the last token's row, or every row of a verify step: a draft is only
    // made as long as the rows fit (a buffer of one row never speculates).
    void feed(Engine& engine, std::span<float> logits, std::size_t max_prompt_tokens = kWholePrompt) {
        step_costs_ = &engine.step_costs();
        const std::size_t n_vocab = std::size_t(engine.n_vocab());
        if (logits.size() < n_vocab) fail("sequence: expected room for ", n_vocab, " logits, found ", logits.size());
        const SequenceBatch input = next_input(max_prompt_tokens, logits.size() / n_vocab - 1);
        engine.forward(*input.cache, input.tokens, logits.data(), input.all_logits);
        ran(input.tokens.size());
    }

    // Picks the next tokens from the logits of the rows run ([rows_waiting(), n_vocab], modified
    // in place) through the pipeline, which appends the text it shows to `out`: one token, or
    // after a verify step the draft's tokens the model picks too and the one after them. Returns
    // true when the generation ends here; otherwise the token picked last is the next input.
    bool step(std::span<float> logits, TextDelta& out) {
        if (!pipeline_) fail("sequence: step() needs a generation, started with a pipeline");
        if (rows_waiting_ == 0)
            fail("sequence: step() expected the logits of the prompt's last token or of the token picked last, "
                 "found ", reading_prompt() ? "the prompt still being read" : "them used already");
        const std::size_t rows = rows_waiting_;
        const std::size_t n_vocab = std::size_t(pipeline_->n_vocab());
        if (logits.size() < rows * n_vocab)
            fail("sequence: step() expected ", rows, " rows of ", n_vocab, " logits, found ", logits.size(), " logits");
        rows_waiting_ = 0;
        const std::size_t first = tokens_.size() - rows;  // the position row 0's token was run at
        const long capacity = cache_->capacity();
        std::size_t row = 0;
        bool ended = false;
        while (true) {
            // What plain decoding's cache would hold now: every token up to this row's.
            const long held = long(first + row + 1);
            picked_ = pipeline_->sample(logits.subspan(row * n_vocab, n_vocab), capacity - held);
            // The picked token goes into the cache next; it needs a free position.
            ended = pipeline_->push(picked_, held < capacity, out);
            if (ended || row + 1 == rows || tokens_[first + row + 1] != picked_) break;
            ++row;  // the draft guessed this token: the next row is the step plain decoding takes
        }
        if (rows > 1) {
            const std::size_t accepted = row;
            pipeline_->count_draft(int(rows - 1), int(accepted));
            cache_->truncate(int(first + row + 1));  // the rows past the walk were never decoded
            tokens_.resize(first + row + 1);
            acceptance_.record(rows - 1, accepted);
            adapt_drafting(accepted);
        } else {
            acceptance_.fade();
            if (skip_drafts_ > 0) --skip_drafts_;
        }
        if (!ended) next_token_ = picked_;
        return ended;
    }

    // The token step() picked last (also when it ended the generation), -1 before any.
    std::int32_t picked() const { return picked_; }

    // Replaces the drafter speculation uses (default draft_by_prompt_lookup); empty: the default.
    void set_drafter(Drafter drafter) { drafter_ = std::move(drafter); }

    // The generation is over (finished or cancelled): the pipeline is let go and a picked token
    // not yet run is dropped. The cache and its tokens stay for the next start's prefix reuse.
    void end() {
        pipeline_ = nullptr;
        prompt_.clear();
        next_token_ = -1;
        input_.clear();
        rows_waiting_ = 0;
        draft_backoff_ = 0;
        skip_drafts_ = 0;
        acceptance_.reset();
        drafted_ = false;
    }

    // After an error: the cache may hold positions nobody recorded, so everything goes.
    void reset() {
        if (cache_) cache_->clear();
        tokens_.clear();
        end();
    }

private:
    // SpeculationParams::adaptive: plain steps after a draft the model rejects entirely while
    // the acceptance estimate is below kBackOffBelow, doubling per such draft up to
    // kMaxDraftBackoff, back to none when a draft token is taken. Text the model copies often
    // still has drafts rejected outright (at 60% acceptance, 40% of them): there a pause only
    // loses (measured on the 3B model, see docs/performance.md),
    // while text that does not repeat drops below the bar within two drafts and backs off.
    static constexpr int kMaxDraftBackoff = 16;
    static constexpr double kBackOffBelow = 0.3;

    // Appends to input_ (the picked token) a draft of at most max_draft tokens, when the
    // generation speculates: no more than the context has room for and max_tokens can use.
    void add_draft(std::size_t max_draft) {
        if (!pipeline_ || !pipeline_->speculation().enabled() || skip_drafts_ > 0) return;
        const SpeculationParams& speculation = pipeline_->speculation();
        std::size_t limit = std::min(max_draft, std::size_t(speculation.draft_max));
        // Positions after the picked token's; every drafted token needs one.
        const long room = long(cache_->capacity()) - long(tokens_.size()) - 1;
        // Row i picks the (i + 1)th token from now, so a draft past tokens_left() - 1 is never checked.
        const long useful = pipeline_->tokens_left() - 1;
        limit = std::size_t(std::max(0L, std::min({long(limit), room, useful})));
        if (limit == 0 || limit < std::size_t(speculation.draft_min)) return;
        if (speculation.adaptive) {
            static const StepCosts unmeasured;
            const std::size_t shortest = std::max<std::size_t>(1, std::size_t(speculation.draft_min));
            const std::size_t chosen = choose_draft_length(acceptance_.rate(), step_costs_ ? *step_costs_ : unmeasured,
                                                           shortest, limit);
            // Until one of its drafts is checked nothing is known about how repetitive this
            // generation's text is, so it drafts once however the costs look.
            limit = chosen > 0 ? chosen : drafted_ ? 0 : shortest;
            if (limit == 0) return;
        }
        draft_.clear();
        tokens_.push_back(next_token_);  // the context the draft continues ends with the picked token
        if (drafter_) drafter_(tokens_, limit, draft_);
        else draft_by_prompt_lookup(tokens_, limit, draft_);
        tokens_.pop_back();
        if (draft_.size() > limit) draft_.resize(limit);  // a drafter that wrote more than asked
        if (draft_.size() < std::size_t(std::max(1, speculation.draft_min))) return;
        input_.insert(input_.end(), draft_.begin(), draft_.end());
        drafted_ = true;
    }

    void adapt_drafting(std::size_t accepted) {
        if (accepted > 0 || !pipeline_->speculation().adaptive || acceptance_.rate() >= kBackOffBelow) {
            draft_backoff_ = 0;
            return;
        }
        draft_backoff_ = std::min(kMaxDraftBackoff, std::max(1, draft_backoff_ * 2));
        skip_drafts_ = draft_backoff_;
    }

    std::optional<KvCache> cache_;
    std::vector<std::int32_t> tokens_;  // [cache_->size()] the tokens whose keys/values the cache holds
    std::vector<std::int32_t> prompt_;  // the running generation's prompt; tokens_ starts with what of it ran
    GenerationPipeline* pipeline_ = nullptr;  // the running generation's, not owned
    std::int32_t next_token_ = -1;       // picked by step(), to be run next
    std::vector<std::int32_t> input_;    // next_input()'s tokens: next_token_, then its draft
    std::vector<std::int32_t> draft_;    // scratch for the drafter
    Drafter drafter_;                    // empty: draft_by_prompt_lookup
    std::int32_t picked_ = -1;           // what step() picked last
    std::size_t rows_waiting_ = 0;       // logit rows of the last run waiting for step()
    int draft_backoff_ = 0;              // plain steps after the next rejected draft / 2
    int skip_drafts_ = 0;                // plain steps left before drafting again
    DraftAcceptance acceptance_;         // this generation's drafts so far
    bool drafted_ = false;               // whether this generation has sent a draft
    const StepCosts* step_costs_ = nullptr;  // set_step_costs(); not owned
};

}  // namespace smol
