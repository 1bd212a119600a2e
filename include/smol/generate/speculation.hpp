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
    // After a draft the model rejects entirely, the next 1, 2, 4 .. 16 steps (doubling while
    // drafts keep failing) carry no draft, so text that does not repeat its context costs next
    // to nothing. Off: every step drafts (smol-bench's verify-step timing).
    bool back_off = true;

    bool enabled() const { return type != SpeculationType::none && draft_max > 0; }

    // Throws smol::Error naming the bad value (a request's or a flag's).
    void validate() const {
        if (draft_max < 0 || draft_max > kMaxDraft)
            fail("speculation: expected draft_max in [0, ", kMaxDraft, "], found ", draft_max);
        if (draft_min < 0 || draft_min > draft_max)
            fail("speculation: expected draft_min in [0, draft_max = ", draft_max, "], found ", draft_min);
    }
};

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
