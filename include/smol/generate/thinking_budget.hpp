#pragma once
// The reasoning budget of one generation: how many tokens the model may write inside its think
// block, and the tokens the pipeline writes itself to close that block when they are spent.
//
//   model inside <think>, budget left     -> the model picks (each pick counts)
//   budget spent, or the answer needs     -> the pipeline writes "</think>\n" token by token
//   the remaining tokens (a grammar)         (ThinkingParser::template_close, as the chat
//                                            template closes a block), then the model answers
//   model writes </think> itself while    -> the pipeline writes the rest of the close ("\n"),
//   a grammar waits for the answer           so the grammar starts where the template's answer does
//
// As llama.cpp's --reasoning-budget: the close is forced, the answer still follows. Whether the
// model is inside a think block is the ThinkingParser's to say; this class only counts and forces.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/thinking.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

// The largest budget a request may give (as max_tokens' bound); -1 is no limit.
inline constexpr int kMaxReasoningBudget = 1 << 30;

class ThinkingBudget {
public:
    // budget: thinking tokens at most, -1 for no limit. Throws smol::Error for a budget out of
    // range. A vocabulary without a </think> token still gets the close written (as its text's
    // tokens), but a close the model writes itself is then left to the ThinkingParser alone.
    ThinkingBudget(const text::Tokenizer& tokenizer, int budget)
        : close_(tokenizer.encode(ThinkingParser::template_close, /*parse_special=*/false)), budget_(budget) {
        if (budget < -1 || budget > kMaxReasoningBudget)
            fail("generation: the reasoning budget must be -1 (no limit) to ", kMaxReasoningBudget, " tokens, found ",
                 budget);
        if (close_.empty()) fail("generation: \"", ThinkingParser::template_close, "\" encodes to no tokens");
        close_is_token_ = tokenizer.token_bytes(close_.front()) == ThinkingParser::close_tag;
    }

    // The token the pipeline writes next instead of sampling, or -1 when the model picks.
    // in_reasoning: the model is inside a think block now; answer_needs_room: the tokens left
    // must go to the answer (a grammar that has to complete), so the block closes now.
    std::int32_t forced(bool in_reasoning, bool answer_needs_room) {
        if (next_close_ == 0 && in_reasoning && (answer_needs_room || spent())) next_close_ = 1;
        return next_close_ > 0 ? close_[next_close_ - 1] : -1;
    }

    // After each token: `was_forced` when forced() gave it; in_reasoning as given to forced().
    // complete_close: when the model writes </think> itself, the pipeline writes the rest of
    // the template's close after it.
    void picked(std::int32_t token, bool was_forced, bool in_reasoning, bool complete_close) {
        if (was_forced) {
            if (++next_close_ > close_.size()) next_close_ = 0;
            return;
        }
        if (!in_reasoning) return;
        if (!close_is_token_ || token != close_.front()) ++thinking_tokens_;
        else if (complete_close && close_.size() > 1) next_close_ = 2;
    }

    // Whether the pipeline is writing a close now (the grammar waits until it is written).
    bool closing() const { return next_close_ > 0; }
    // Tokens the model picked inside think blocks (the close excepted).
    int thinking_tokens() const { return thinking_tokens_; }
    // Tokens a close takes.
    long close_length() const { return long(close_.size()); }

private:
    bool spent() const { return budget_ >= 0 && thinking_tokens_ >= budget_; }

    std::vector<std::int32_t> close_;  // ThinkingParser::template_close as tokens, </think> first
    bool close_is_token_ = false;      // close_.front() is the </think> token
    int budget_;
    int thinking_tokens_ = 0;
    std::size_t next_close_ = 0;  // k > 0: close_[k - 1] is written next; 0: not closing
};

}  // namespace smol
