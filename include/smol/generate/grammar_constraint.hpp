#pragma once
// Constrained decoding: before each token is sampled, every token that would take the text out
// of a grammar (text/grammar.hpp) gets logit -inf, so whatever the model prefers, the output
// stays a sentence of the grammar, and end of generation is allowed only once it is a whole one.
//
// Which tokens fit is found by walking the vocabulary as a byte trie with the grammar matcher:
// tokens that share a prefix share its steps, and a prefix the grammar refuses cuts off every
// token below it. The set for a grammar state is cached by the state's signature, since a long
// string or a repeated structure revisits the same states.
//
// A budget keeps weak models honest: a token is allowed only if the characters the grammar
// still needs after it fit in the tokens left (max_tokens, or the context), so even a model
// with random weights ends with a complete sentence. Any character can be written by some
// token, so a token that brings the end one character closer always fits.
//
// The walk runs on the thread that decodes every request, so it is bounded: each token's walk
// has a budget of matcher work (kGrammarStepBudget), the whole reply another
// (kGrammarRequestBudget; past either the request ends with GrammarTooComplex, which names the
// cause), and each walk looks every kCancelCheckNodes trie nodes at
// whether its request was cancelled (then it throws GenerationCancelled), so one grammar cannot
// hold the others.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/grammar.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

// Matcher work one token may take, for its vocabulary walk and again for taking it. The
// costliest real walk, SmolLM3's 128K vocabulary inside a JSON string, is 2.4 million units
// (test_pipeline times it), a fourteenth of this: a hostile grammar can hold the decoding thread
// for about fourteen such walks per token, no more.
inline constexpr std::uint64_t kGrammarStepBudget = std::uint64_t(1) << 25;
// Matcher work one request may take over all its tokens: 32 of the costliest steps the step
// budget lets through, or 450 full walks inside a JSON string (walks are cached by grammar
// state, so a long structured reply repeats few). Past it the request ends with
// GrammarTooComplex: a grammar just under the step budget cannot hold the decoding thread for
// a whole reply.
inline constexpr std::uint64_t kGrammarRequestBudget = kGrammarStepBudget * 32;

// A generation stopped inside a step because its request was cancelled (its client left).
class GenerationCancelled : public Error {
public:
    using Error::Error;
};

// The vocabulary's token bytes as a trie (control tokens left out: they are not text).
class TokenTrie {
public:
    explicit TokenTrie(const text::Tokenizer& tokenizer) {
        struct BuildNode {
            std::vector<std::pair<std::uint8_t, std::uint32_t>> children;
            std::vector<std::int32_t> tokens;
        };
        std::vector<BuildNode> build(1);
        for (std::int32_t id = 0; id < std::int32_t(tokenizer.n_vocab()); ++id) {
            if (tokenizer.is_control(id)) continue;
            const std::string& bytes = tokenizer.token_bytes(id);
            if (bytes.empty()) continue;
            std::uint32_t node = 0;
            for (const char c : bytes) {
                const auto byte = static_cast<std::uint8_t>(c);
                std::uint32_t next = 0;
                for (const auto& [b, child] : build[node].children)
                    if (b == byte) next = child;
                if (next == 0) {
                    next = std::uint32_t(build.size());
                    build[node].children.push_back({byte, next});
                    build.emplace_back();
                }
                node = next;
            }
            build[node].tokens.push_back(id);
            max_length_ = std::max(max_length_, bytes.size());
        }
        nodes_.resize(build.size());
        for (std::size_t i = 0; i < build.size(); ++i) {
            nodes_[i] = {std::uint32_t(edges_.size()), std::uint32_t(build[i].children.size()),
                         std::uint32_t(token_ids_.size()), std::uint32_t(build[i].tokens.size())};
            edges_.insert(edges_.end(), build[i].children.begin(), build[i].children.end());
            token_ids_.insert(token_ids_.end(), build[i].tokens.begin(), build[i].tokens.end());
        }
        n_vocab_ = tokenizer.n_vocab();
    }

    struct Node {
        std::uint32_t first_edge, edge_count;    // into edges()
        std::uint32_t first_token, token_count;  // into tokens(): the ids whose bytes end here
    };
    const Node& node(std::uint32_t i) const { return nodes_[i]; }
    std::span<const std::pair<std::uint8_t, std::uint32_t>> edges(const Node& n) const {
        return {edges_.data() + n.first_edge, n.edge_count};
    }
    std::span<const std::int32_t> tokens(const Node& n) const { return {token_ids_.data() + n.first_token, n.token_count}; }
    std::size_t n_vocab() const { return n_vocab_; }
    std::size_t max_length() const { return max_length_; }  // the longest token's bytes

private:
    std::vector<Node> nodes_;  // [0]: the root (the empty prefix)
    std::vector<std::pair<std::uint8_t, std::uint32_t>> edges_;
    std::vector<std::int32_t> token_ids_;
    std::size_t n_vocab_ = 0;
    std::size_t max_length_ = 0;
};

// A grammar ready to constrain one model's tokens; shared by every request that uses it, and so
// is what they learn: the tokens allowed in each grammar state, found once (a full walk of the
// vocabulary inside a JSON string is the costliest walk) and reused by every later visit.
class TokenGrammar {
public:
    // Throws text::GrammarTooComplex when even the state before any text costs more than one
    // step's budget, so such a grammar is refused when compiled rather than at its first token.
    TokenGrammar(text::Grammar grammar, std::shared_ptr<const TokenTrie> vocabulary)
        : grammar(std::move(grammar)), vocabulary(std::move(vocabulary)) {
        text::GrammarMatcher trial(this->grammar);
        trial.set_budget(kGrammarStepBudget);
        (void)trial.start();
    }

    const text::Grammar grammar;
    const std::shared_ptr<const TokenTrie> vocabulary;

    // The tokens a grammar state allows, and the most characters any of them leaves to finish
    // (when fewer tokens than that remain, the constraint filters the set further).
    struct AllowedTokens {
        std::vector<std::uint64_t> bits;  // bit t: token t allowed
        std::uint32_t max_chars_after = 0;
    };
    using TokenSet = std::shared_ptr<const AllowedTokens>;
    TokenSet find(const std::string& state_signature) const {
        std::lock_guard lock(mutex_);
        const auto it = allowed_.find(state_signature);
        return it == allowed_.end() ? nullptr : it->second;
    }
    void remember(std::string state_signature, TokenSet allowed) const {
        std::lock_guard lock(mutex_);
        if (allowed_.size() >= kLimit) allowed_.clear();  // 16 KB each: 4 MB at most per grammar
        allowed_.emplace(std::move(state_signature), std::move(allowed));
    }

private:
    static constexpr std::size_t kLimit = 256;
    mutable std::mutex mutex_;
    mutable std::unordered_map<std::string, TokenSet> allowed_;
};

// One sequence's constraint: which tokens may come next, and the text so far.
class GrammarConstraint {
public:
    // request_budget: the matcher work the whole generation may take (kGrammarRequestBudget).
    GrammarConstraint(std::shared_ptr<const TokenGrammar> grammar, const text::Tokenizer& tokenizer,
                      std::uint64_t request_budget = kGrammarRequestBudget)
        : grammar_(std::move(grammar)), tokenizer_(&tokenizer), matcher_(grammar_->grammar), state_(start(matcher_)),
          request_budget_(request_budget) {
        if (grammar_->vocabulary->n_vocab() != tokenizer.n_vocab())
            fail("grammar constraint: its vocabulary has ", grammar_->vocabulary->n_vocab(), " tokens, the tokenizer ",
                 tokenizer.n_vocab());
    }

    // How often (in trie nodes) the walk looks for a cancellation.
    static constexpr std::uint32_t kCancelCheckNodes = 4096;

    // Called during long walks; true stops them with GenerationCancelled.
    void set_cancelled(std::function<bool()> cancelled) { cancelled_ = std::move(cancelled); }

    // Matcher work so far (apply and accept, every token), and the most one step took: what the
    // budgets are measured against (test_pipeline, smol-bench).
    std::uint64_t work_total() const { return work_total_; }
    std::uint64_t work_max_step() const { return work_max_step_; }

    // Sets logits[t] = -inf for every token t that may not come next. budget: tokens that may
    // still be generated, this one included; a token is allowed only if the characters it leaves
    // to finish fit in the tokens after it (each character can be written by some token), so the
    // text is complete before the budget runs out.
    void apply(std::span<float> logits, long budget) {
        if (logits.size() != tokenizer_->n_vocab())
            fail("grammar constraint: expected ", tokenizer_->n_vocab(), " logits, got ", logits.size());
        const StepWork counted(*this);
        const std::uint32_t need = matcher_.chars_to_finish(state_);
        const TokenGrammar::AllowedTokens& cached = cached_set();
        const long after = budget - 1;  // tokens left once this one is taken
        const std::vector<std::uint64_t>& allowed =
            after >= long(cached.max_chars_after) ? cached.bits : within_budget(std::uint32_t(std::max(after, 0L)));
        // A budget smaller than the characters still needed (max_tokens too small for the
        // grammar; multi-character tokens may still make it): the tokens that get closest.
        if (std::none_of(allowed.begin(), allowed.end(), [](std::uint64_t w) { return w != 0; }) && !matcher_.accepting(state_))
            return apply_mask(logits, closest(), need, budget);
        apply_mask(logits, allowed, need, budget);
    }

private:
    void apply_mask(std::span<float> logits, const std::vector<std::uint64_t>& allowed, std::uint32_t need, long budget) {
        // End of generation (control tokens, never in the trie) is allowed once the text is whole.
        const bool may_end = matcher_.accepting(state_);
        std::vector<float> end_logits;
        for (std::int32_t id : tokenizer_->end_of_generation_ids()) end_logits.push_back(logits[std::size_t(id)]);
        bool any = may_end;
        for (std::size_t t = 0; t < logits.size(); ++t) {
            if (allowed[t / 64] >> (t % 64) & 1) any = true;
            else logits[t] = -std::numeric_limits<float>::infinity();
        }
        if (may_end)
            for (std::size_t i = 0; i < end_logits.size(); ++i)
                logits[std::size_t(tokenizer_->end_of_generation_ids()[i])] = end_logits[i];
        if (!any)
            fail("grammar constraint: no token can continue the text, and it is not complete (", need,
                 " characters missing, ", budget, " tokens left) after '", text_, "'");
    }

public:
    // Takes a sampled token (one apply() allowed); end-of-generation tokens are not text.
    void accept(std::int32_t token) {
        if (tokenizer_->is_end_of_generation(token)) {
            if (!matcher_.accepting(state_)) fail("grammar constraint: generation ended before the grammar was complete");
            return;
        }
        text_ += tokenizer_->token_bytes(token);
        const StepWork counted(*this);
        for (const char c : tokenizer_->token_bytes(token))
            if (!matcher_.step(state_, static_cast<std::uint8_t>(c)))
                fail("grammar constraint: token ", token, " does not fit the grammar here");
        matcher_.compact(state_);
    }

    bool complete() const { return matcher_.accepting(state_); }

    // The fewest characters that complete the text from here (no more tokens than that are
    // needed: every character can be written by some token).
    std::uint32_t chars_to_finish() { return matcher_.chars_to_finish(state_); }

    // Back to the grammar's start for another sentence (a lazy grammar's next trigger); the work
    // counted so far stays, so every sentence of one reply draws on the same request budget.
    void restart() {
        state_ = start(matcher_);
        text_.clear();
    }

private:
    static text::GrammarState start(text::GrammarMatcher& matcher) {
        matcher.set_budget(kGrammarStepBudget);
        return matcher.start();
    }

    std::shared_ptr<const TokenGrammar> grammar_;
    const text::Tokenizer* tokenizer_;
    text::GrammarMatcher matcher_;
    text::GrammarState state_;
    std::string text_;  // the output so far, for error messages
    TokenGrammar::TokenSet last_;  // the set apply() used last (the grammar's cache may drop it)
    std::vector<std::uint64_t> filtered_;
    std::vector<text::GrammarState> depth_states_;  // the walk's state at each trie depth
    std::function<bool()> cancelled_;
    std::uint32_t nodes_until_check_ = kCancelCheckNodes;
    std::uint64_t request_budget_;
    std::uint64_t work_total_ = 0, work_max_step_ = 0;

    // One step's budget, given to the matcher when the step starts and counted when it ends; a
    // step starts only while the request's total is not spent (so it passes it by one step at most).
    struct StepWork {
        GrammarConstraint& c;
        explicit StepWork(GrammarConstraint& constraint) : c(constraint) {
            if (c.work_total_ >= c.request_budget_)
                throw text::GrammarTooComplex(
                    "grammar: this reply's matching took more than its total budget of " +
                    std::to_string(c.request_budget_) + " units of work after " + std::to_string(c.text_.size()) +
                    " characters; the grammar is too ambiguous for a reply this long");
            c.matcher_.set_budget(kGrammarStepBudget);
        }
        ~StepWork() {
            const std::uint64_t used = kGrammarStepBudget - c.matcher_.budget_left();
            c.work_total_ += used;
            c.work_max_step_ = std::max(c.work_max_step_, used);
        }
        StepWork(const StepWork&) = delete;
        StepWork& operator=(const StepWork&) = delete;
    };

    std::vector<std::uint64_t> empty_set() const { return std::vector<std::uint64_t>((tokenizer_->n_vocab() + 63) / 64, 0); }

    const TokenGrammar::AllowedTokens& cached_set() {
        std::string key = matcher_.signature(state_);
        last_ = grammar_->find(key);
        if (!last_) {
            auto allowed = std::make_shared<TokenGrammar::AllowedTokens>();
            allowed->bits = empty_set();
            walk(0, state_, allowed->bits, text::Grammar::kNever, &allowed->max_chars_after);
            last_ = allowed;
            grammar_->remember(std::move(key), last_);
        }
        return *last_;
    }

    // The tokens that leave the fewest characters to finish.
    const std::vector<std::uint64_t>& closest() {
        std::uint32_t fewest = text::Grammar::kNever;
        filtered_ = empty_set();
        walk(0, state_, filtered_, text::Grammar::kNever, nullptr, 0, &fewest);
        return within_budget(fewest);
    }

    // Only the tokens that leave at most `limit` characters to finish.
    const std::vector<std::uint64_t>& within_budget(std::uint32_t limit) {
        filtered_ = empty_set();
        walk(0, state_, filtered_, limit, nullptr);
        return filtered_;
    }

    // Marks every token below trie node `node` whose bytes the grammar takes from `state` and
    // that leaves at most `limit` characters to finish; notes the most any marked token leaves.
    void walk(std::uint32_t node, const text::GrammarState& state, std::vector<std::uint64_t>& allowed,
              std::uint32_t limit, std::uint32_t* max_after, std::size_t depth = 0, std::uint32_t* min_after = nullptr) {
        const TokenTrie& trie = *grammar_->vocabulary;
        // Sized before the walk starts: growing it would move the states the callers hold.
        if (depth == 0 && depth_states_.size() < trie.max_length()) depth_states_.resize(trie.max_length());
        for (const auto& [byte, child] : trie.edges(trie.node(node))) {
            if (--nodes_until_check_ == 0) {
                nodes_until_check_ = kCancelCheckNodes;
                if (cancelled_ && cancelled_()) throw GenerationCancelled("generation was cancelled");
            }
            const std::size_t mark = matcher_.mark();
            text::GrammarState& next = depth_states_[depth];  // one per depth: no allocation per step
            next = state;
            if (matcher_.step(next, byte)) {
                const TokenTrie::Node& c = trie.node(child);
                if (c.token_count) {
                    const std::uint32_t after = matcher_.chars_to_finish(next);
                    if (after <= limit) {
                        for (std::int32_t id : trie.tokens(c)) allowed[std::size_t(id) / 64] |= std::uint64_t(1) << (id % 64);
                        if (max_after) *max_after = std::max(*max_after, after);
                        if (min_after) *min_after = std::min(*min_after, after);
                    }
                }
                walk(child, next, allowed, limit, max_after, depth + 1, min_after);
            }
            matcher_.rewind(mark);
        }
    }
};

}  // namespace smol
