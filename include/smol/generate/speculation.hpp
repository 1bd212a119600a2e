#pragma once
// Draft-free speculative decoding: guesses for the next tokens taken from the context itself
// (prompt lookup), which Sequence (generate/sequence.hpp) checks in one forward pass.
//
// Decode reads every weight once per step, so a step carrying k tokens costs little more than
// a step carrying one while the weights dominate (smol-bench --spec-steps measures it). Text
// that repeats what came before (editing code, quoting a document, filling JSON from a prompt)
// lets the drafts come from the context: the longest suffix of the tokens so far that occurred
// before predicts that what followed it then follows it now.
//
// The output never changes: every position is still sampled from its own logits, with the
// sampler, grammar and random draws plain decoding would use, and a row's logits are the same
// bits alone or in a batch (the kernels are batch invariant). A draft only decides how many
// positions one forward pass computes.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"

namespace smol {

enum class SpeculationType {
    none,   // one token per forward pass
    ngram,  // drafts from the longest earlier match of the context's tail (prompt lookup)
};

inline std::string_view to_string(SpeculationType type) {
    return type == SpeculationType::ngram ? "ngram" : "none";
}

// llama.cpp's --spec-type / --draft-max / --draft-min, per generation.
struct SpeculationParams {
    static constexpr int kMaxDraft = 64;  // a verify step of more rows costs like a prompt chunk

    SpeculationType type = SpeculationType::none;
    int draft_max = 16;  // tokens drafted per step at most, 1..kMaxDraft
    int draft_min = 1;   // a shorter draft is not worth its rows: the step carries one token
    // Drafts as long as they pay (choose_draft_length: the acceptance so far against what a step
    // of that many rows costs), and after a draft the model rejects entirely, while the
    // acceptance so far is low, the next 1, 2, 4 .. 16 steps (doubling while drafts keep failing)
    // carry none, so text that does not repeat its context costs next to nothing. Off: every step drafts all it can, up to draft_max
    // (smol-bench's verify-step timing).
    bool adaptive = true;

    bool enabled() const { return type != SpeculationType::none && draft_max > 0; }

    // Throws smol::Error naming the bad value (a request's or a flag's).
    void validate() const {
        if (draft_max < 0 || draft_max > kMaxDraft)
            fail("speculation: expected draft_max in [0, ", kMaxDraft, "], found ", draft_max);
        if (draft_min < 0 || draft_min > draft_max)
            fail("speculation: expected draft_min in [0, draft_max = ", draft_max, "], found ", draft_min);
    }
};

// What a forward pass of decode rows costs, by its number of rows (1 + the drafts of the
// sequences in it), measured as the engine runs them: a verify step reads the weights once for
// all its rows, so its cost grows far slower than its rows until the kernels turn compute-bound
// (smol-bench --spec-steps prints the curve). Until a row count has been timed, a prior curve
// stands in for it, prior()'s constants, in one-row steps: 2 rows 1.15, 4 rows 1.8, 8 rows 3.7,
// 9-16 through the prompt GEMMs 6, longer ones 0.3 a row. They were taken from step costs
// measured on a 2-core Zen 5 (AVX-512 and AVX2 alike, 3B Q4_K_M; Intel's AMX Xeon measured
// cheaper). Shared by the threads of every sequence on one engine: the times are atomics,
// written under the engine's forward lock.
class StepCosts {
public:
    static constexpr int kMaxRows = SpeculationParams::kMaxDraft + 1;

    // The prior: a step of `rows` rows against a one-row step.
    static double prior(int rows) {
        if (rows <= 1) return 1.0;
        if (rows <= 4) return std::array{1.0, 1.15, 1.45, 1.8}[std::size_t(rows - 1)];
        if (rows <= 8) return 1.8 + 0.475 * (rows - 4);
        return std::max(6.0, 0.3 * rows);
    }

    // A pass of `rows` rows took `seconds`: a running average per row count (a fifth of the
    // newest), so the curve follows a context that grows and a host that gets busier.
    void record(int rows, double seconds) {
        if (rows < 1 || rows > kMaxRows || !(seconds > 0.0)) return;
        std::atomic<double>& slot = seconds_[std::size_t(rows - 1)];
        const double old = slot.load(std::memory_order_relaxed);
        slot.store(old > 0.0 ? 0.8 * old + 0.2 * seconds : seconds, std::memory_order_relaxed);
    }

    // A step of `rows` rows against a one-row step: measured when both have been, else prior().
    double relative(int rows) const {
        if (rows <= 1) return 1.0;
        if (rows > kMaxRows) return prior(rows);
        const double one = seconds_[0].load(std::memory_order_relaxed);
        const double these = seconds_[std::size_t(rows - 1)].load(std::memory_order_relaxed);
        return one > 0.0 && these > 0.0 ? these / one : prior(rows);
    }

private:
    std::array<std::atomic<double>, kMaxRows> seconds_{};  // [rows - 1]: running average, 0 until timed
};

// How often the model takes a drafted token, from the verify steps so far: a draft token is
// taken with some probability alpha while every one before it was, so a step drafting d tokens
// and taking a < d of them saw a successes and one failure (a = d: d successes). Older steps
// count less (each step keeps 0.9 of the totals), and one success and one failure stand in
// before any: alpha starts at 0.5.
class DraftAcceptance {
public:
    void record(std::size_t drafted, std::size_t accepted) {
        taken_ = kKeep * taken_ + double(accepted);
        missed_ = kKeep * missed_ + (accepted < drafted ? 1.0 : 0.0);
    }
    // A step that carried no draft: the evidence fades toward the start, so text that turns
    // repetitive again is tried again.
    void fade() {
        taken_ *= kKeep;
        missed_ *= kKeep;
    }
    double rate() const { return (taken_ + 1.0) / (taken_ + missed_ + 2.0); }
    void reset() { taken_ = missed_ = 0.0; }

private:
    static constexpr double kKeep = 0.9;
    double taken_ = 0.0, missed_ = 0.0;
};

// The draft length (0, or draft_min..limit) with the most tokens per unit of step cost: a step
// drafting d tokens gives 1 + alpha + ... + alpha^d tokens on average (the accepted prefix and
// the model's own next token) and costs costs.relative(1 + d). 0: a plain step pays best.
inline std::size_t choose_draft_length(double alpha, const StepCosts& costs, std::size_t draft_min, std::size_t limit) {
    std::size_t best = 0;
    double best_rate = 1.0;  // a plain step: one token for one step's cost
    double expected = 1.0, power = 1.0;
    for (std::size_t d = 1; d <= limit; ++d) {
        power *= alpha;
        expected += power;
        if (d < draft_min) continue;
        const double rate = expected / costs.relative(int(d + 1));
        if (rate > best_rate) {
            best_rate = rate;
            best = d;
        }
    }
    return best;
}

// "none" or "ngram" as a flag or a request gives it; throws naming what was found.
inline SpeculationType parse_speculation_type(std::string_view text) {
    if (text == "none") return SpeculationType::none;
    if (text == "ngram") return SpeculationType::ngram;
    fail("speculation: expected the type none or ngram, found '", std::string(text), "'");
}

// Writes the draft for what follows `context` (at most max_tokens) into `draft`, which the
// caller has cleared. The default is draft_by_prompt_lookup; tests put in others.
using Drafter = std::function<void(std::span<const std::int32_t> context, std::size_t max_tokens,
                                   std::vector<std::int32_t>& draft)>;

// The n-gram lengths prompt lookup matches: a single token repeats too often by chance (its
// drafts are mostly rejected), and past 8 tokens a longer match predicts no better.
inline constexpr std::size_t kLookupMinMatch = 2;
inline constexpr std::size_t kLookupMaxMatch = 8;

// Prompt lookup: finds the earlier place in `context` whose preceding tokens match the longest
// tail of `context` (kLookupMinMatch..kLookupMaxMatch tokens; the most recent place among
// equally long ones) and drafts the tokens that followed it. Where the copy reaches the end of
// the context it goes on copying from its own start, so a loop of period p drafts past p.
// One pass over the context: O(context) compares, microseconds beside a decode step.
inline void draft_by_prompt_lookup(std::span<const std::int32_t> context, std::size_t max_tokens,
                                   std::vector<std::int32_t>& draft) {
    const std::size_t n = context.size();
    if (max_tokens == 0 || n < kLookupMinMatch + 1) return;
    std::size_t best_end = 0, best_length = 0;  // the match ends at context[best_end]
    // end < n - 1: the tail itself is not a match, and something follows every match.
    for (std::size_t end = n - 1; end-- > 0;) {
        std::size_t length = 0;
        while (length < kLookupMaxMatch && length <= end && context[end - length] == context[n - 1 - length]) ++length;
        if (length > best_length) {
            best_length = length;
            best_end = end;
            if (length == kLookupMaxMatch) break;  // the longest, and the most recent of those
        }
    }
    if (best_length < kLookupMinMatch) return;
    for (std::size_t i = 0; i < max_tokens; ++i) {
        const std::size_t from = best_end + 1 + i;  // context followed by the draft so far
        draft.push_back(from < n ? context[from] : draft[from - n]);
    }
}

}  // namespace smol
