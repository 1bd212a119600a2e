#pragma once
// Token sampling as llama.cpp's sampler chain: logit bias first, then the stages of
// SamplerParams::samplers in their order, then a seeded draw. The default order is
// llama.cpp's: penalties -> DRY -> top-n-sigma -> top-k -> typical-p -> top-p -> min-p ->
// XTC -> temperature. Top-p and min-p therefore see the untempered distribution, as in
// llama.cpp, so the same flags keep the same meaning for users coming from there. With
// mirostat (1 or 2) the chain is llama.cpp's mirostat chain instead: logit bias ->
// temperature -> mirostat, which picks the token itself.
//
// Cost on a 128256-token vocabulary: stages that touch only a few logits (penalties, DRY)
// edit the logits in place; top-k collects its k best without copying the vocabulary, top-p
// sorts only about its nucleus (bucketed), and a stage that needs the whole vocabulary copies
// it once. Temperature is kept as a scale applied where probabilities are taken, so stages
// never rewrite every logit. Scratch buffers are sized in the constructor, so sample() does
// not allocate (DRY's history grows to its window once).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"

// Seed value meaning "draw a random seed from std::random_device", like llama.cpp's
// LLAMA_DEFAULT_SEED (what `-s -1` selects on its command line).
#define SMOL_DEFAULT_SEED 0xFFFFFFFFu

namespace smol {

// The stages a chain can hold, by llama.cpp's names (common_sampler_type_to_str).
enum class SamplerStage { penalties, dry, top_n_sigma, top_k, typical_p, top_p, min_p, xtc, temperature };

inline constexpr SamplerStage kDefaultSamplerOrder[] = {
    SamplerStage::penalties, SamplerStage::dry,   SamplerStage::top_n_sigma, SamplerStage::top_k,      SamplerStage::typical_p,
    SamplerStage::top_p,     SamplerStage::min_p, SamplerStage::xtc,         SamplerStage::temperature};

inline std::string_view sampler_stage_name(SamplerStage stage) {
    switch (stage) {
        case SamplerStage::penalties: return "penalties";
        case SamplerStage::dry: return "dry";
        case SamplerStage::top_n_sigma: return "top_n_sigma";
        case SamplerStage::top_k: return "top_k";
        case SamplerStage::typical_p: return "typ_p";
        case SamplerStage::top_p: return "top_p";
        case SamplerStage::min_p: return "min_p";
        case SamplerStage::xtc: return "xtc";
        case SamplerStage::temperature: return "temperature";
    }
    return "?";
}

// A stage by its llama.cpp name; with `alternative_names` also the spellings llama.cpp's
// --samplers flag accepts ("top-k", "nucleus", "typical", "temp", ...). nullopt when unknown.
inline std::optional<SamplerStage> parse_sampler_stage(std::string_view name, bool alternative_names) {
    for (const SamplerStage stage : kDefaultSamplerOrder)
        if (name == sampler_stage_name(stage)) return stage;
    if (!alternative_names) return std::nullopt;
    static constexpr std::pair<std::string_view, SamplerStage> kAlternatives[] = {
        {"top-k", SamplerStage::top_k},         {"top-p", SamplerStage::top_p},
        {"nucleus", SamplerStage::top_p},       {"typical-p", SamplerStage::typical_p},
        {"typical", SamplerStage::typical_p},   {"typ-p", SamplerStage::typical_p},
        {"typ", SamplerStage::typical_p},       {"min-p", SamplerStage::min_p},
        {"temp", SamplerStage::temperature},    {"top-n-sigma", SamplerStage::top_n_sigma}};
    for (const auto& [alternative, stage] : kAlternatives)
        if (name == alternative) return stage;
    return std::nullopt;
}

// A stage by llama.cpp's one-letter code (--sampling-seq, and a `samplers` string in
// llama-server's requests): d dry, s top-n-sigma, k top-k, y typical-p, p top-p, m min-p,
// x xtc, t temperature, e penalties.
inline std::optional<SamplerStage> parse_sampler_stage_letter(char letter) {
    switch (letter) {
        case 'e': return SamplerStage::penalties;
        case 'd': return SamplerStage::dry;
        case 's': return SamplerStage::top_n_sigma;
        case 'k': return SamplerStage::top_k;
        case 'y': return SamplerStage::typical_p;
        case 'p': return SamplerStage::top_p;
        case 'm': return SamplerStage::min_p;
        case 'x': return SamplerStage::xtc;
        case 't': return SamplerStage::temperature;
        default: return std::nullopt;
    }
}

struct SamplerParams {
    // Bounds every caller checks against (the server's fields, the programs' flags).
    static constexpr int kMaxStages = 16;              // entries of `samplers`
    static constexpr int kMaxDryWindow = 1 << 16;      // dry_penalty_last_n, and what -1 means
    static constexpr int kMaxDryBreakers = 16;         // dry_sequence_breakers
    static constexpr std::size_t kMaxDryBreakerBytes = 40;  // llama.cpp's MAX_CHAR_LEN

    float temperature = 0.6f;        // <= 0: greedy (argmax, ties -> lowest id)
    int top_k = 40;                  // 0 = off
    float top_p = 0.95f;             // in (0, 1]; 1 = off
    float min_p = 0.05f;             // in [0, 1]; 0 = off
    float typical_p = 1.0f;          // locally typical sampling, in (0, 1]; 1 = off
    float top_n_sigma = -1.0f;       // keeps logits within n standard deviations of the top; <= 0 = off
    float xtc_probability = 0.0f;    // in [0, 1]: how often XTC cuts the top choices; 0 = off
    float xtc_threshold = 0.1f;      // in [0, 1]: probability a top choice needs; above 0.5 = off
    float repeat_penalty = 1.0f;     // > 0; 1 = off
    float presence_penalty = 0.0f;   // 0 = off
    float frequency_penalty = 0.0f;  // 0 = off
    int penalty_last_n = 64;         // how many recently accepted tokens the penalties see; 0 = off
    // DRY ("don't repeat yourself"): the token that would extend a repeat of at least
    // dry_allowed_length tokens loses dry_multiplier * dry_base^(length - dry_allowed_length).
    float dry_multiplier = 0.0f;     // >= 0; 0 = off
    float dry_base = 1.75f;          // >= 1
    int dry_allowed_length = 2;      // >= 1
    int dry_penalty_last_n = -1;     // tokens DRY looks back; -1 = kMaxDryWindow; 0 = off
    // A repeat never reaches back across one of these texts (llama.cpp's defaults).
    std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};
    int mirostat = 0;                // 0 = off, 1 = Mirostat, 2 = Mirostat 2.0
    float mirostat_tau = 5.0f;       // target surprise, bits
    float mirostat_eta = 0.1f;       // learning rate
    std::vector<SamplerStage> samplers{std::begin(kDefaultSamplerOrder), std::end(kDefaultSamplerOrder)};
    std::uint64_t seed = SMOL_DEFAULT_SEED;
    // (token id, value added to its logit) before anything else, as OpenAI's logit_bias:
    // -100 all but bans a token, +100 all but forces it.
    std::vector<std::pair<std::int32_t, float>> logit_bias;

    // The window DRY looks back over, 0 when DRY is off.
    int dry_window() const {
        if (!(dry_multiplier > 0.0f) || dry_penalty_last_n == 0) return 0;
        return dry_penalty_last_n < 0 ? kMaxDryWindow : dry_penalty_last_n;
    }
    // How many accepted tokens the sampler keeps: what the penalties and DRY look back over.
    int history_window() const {
        const bool penalties = std::find(samplers.begin(), samplers.end(), SamplerStage::penalties) != samplers.end();
        return std::max(penalties ? penalty_last_n : 0, dry_window());
    }
};

// DRY's sequence breakers as token sequences (llama.cpp's processing): a breaker text may be
// split across tokens any way the model writes it, so every token whose text contains the
// breaker is a breaker by itself, and every token whose text ends with a proper prefix of it is
// the head of a sequence whose tail is the tokenized rest.
struct DryBreakers {
    struct Tail {
        std::vector<std::int32_t> tokens;  // [1, 40] the rest of the breaker after its head
        std::vector<std::int32_t> heads;   // sorted: tokens ending with the breaker's beginning
    };
    std::vector<std::int32_t> whole;  // sorted: tokens whose text contains a breaker
    std::vector<Tail> tails;          // sorted by tokens.back()
};

// token_text(id): the bytes token `id` decodes to; tokenize(text): the ids of plain text.
inline DryBreakers build_dry_breakers(const std::vector<std::string>& breakers, int n_vocab,
                                      const std::function<std::string_view(std::int32_t)>& token_text,
                                      const std::function<std::vector<std::int32_t>(std::string_view)>& tokenize) {
    DryBreakers table;
    std::vector<std::pair<std::vector<std::int32_t>, std::int32_t>> sequences;  // (tail, head)
    for (const std::string& breaker : breakers) {
        if (breaker.empty()) continue;
        std::vector<std::optional<std::vector<std::int32_t>>> rest(breaker.size());  // tokenize(breaker[k:]), lazily
        for (std::int32_t id = 0; id < n_vocab; ++id) {
            const std::string_view word = token_text(id);
            if (word.find(breaker) != std::string_view::npos) {
                table.whole.push_back(id);
                continue;
            }
            // Each k where the token ends with breaker[0, k): its last k bytes start with the
            // breaker's first byte, so one search for that byte rejects almost every token.
            const std::size_t longest = std::min(word.size(), breaker.size() - 1);
            for (std::size_t at = word.find(breaker[0], word.size() - longest); at != std::string_view::npos;
                 at = word.find(breaker[0], at + 1)) {
                const std::size_t k = word.size() - at;
                if (word.substr(at) != std::string_view(breaker).substr(0, k)) continue;
                if (!rest[k]) rest[k] = tokenize(std::string_view(breaker).substr(k));
                if (!rest[k]->empty()) sequences.emplace_back(*rest[k], id);
            }
        }
    }
    std::sort(table.whole.begin(), table.whole.end());
    table.whole.erase(std::unique(table.whole.begin(), table.whole.end()), table.whole.end());
    std::sort(sequences.begin(), sequences.end());
    sequences.erase(std::unique(sequences.begin(), sequences.end()), sequences.end());
    for (const auto& [tail, head] : sequences) {
        if (table.tails.empty() || table.tails.back().tokens != tail) table.tails.push_back({tail, {}});
        table.tails.back().heads.push_back(head);  // sorted: sequences are sorted by (tail, head)
    }
    std::stable_sort(table.tails.begin(), table.tails.end(),
                     [](const DryBreakers::Tail& a, const DryBreakers::Tail& b) { return a.tokens.back() < b.tokens.back(); });
    return table;
}

class Sampler {
public:
    // `breakers`: the params' dry_sequence_breakers as token sequences (build_dry_breakers);
    // without it DRY runs with no breakers.
    Sampler(SamplerParams params, int n_vocab, DryBreakers breakers = {})
        : params_(std::move(params)), n_vocab_(n_vocab), breakers_(std::move(breakers)) {
        validate();
        history_capacity_ = static_cast<std::size_t>(params_.history_window());
        recent_.reserve(std::min<std::size_t>(history_capacity_, 4096));
        window_scratch_.reserve(static_cast<std::size_t>(params_.penalty_last_n));
        candidates_.reserve(static_cast<std::size_t>(n_vocab_));
        if (params_.typical_p < 1.0f) typical_order_.reserve(static_cast<std::size_t>(n_vocab_));
        reset();
    }

    // Picks the next token from raw logits [n_vocab]. The logits are modified in place
    // (bias and penalties applied); callers pass a buffer they will overwrite anyway.
    int sample(std::span<float> logits) {
        if (logits.size() != static_cast<std::size_t>(n_vocab_))
            fail("Sampler::sample: expected ", n_vocab_, " logits (the vocabulary size), got ",
                 logits.size());
        for (const auto& [token, bias] : params_.logit_bias) logits[static_cast<std::size_t>(token)] += bias;
        logits_ = logits;
        built_ = false;
        count_ = 0;
        sorted_ = 0;
        scale_ = 1.0f;
        if (params_.mirostat != 0) return sample_mirostat();
        if (greedy_needs_only_logits()) {
            for (const SamplerStage stage : params_.samplers) {
                if (stage == SamplerStage::temperature) break;
                if (stage == SamplerStage::penalties || stage == SamplerStage::dry) apply_stage(stage);
            }
            return argmax(logits);
        }
        for (const SamplerStage stage : params_.samplers) {
            apply_stage(stage);
            if (built_ && count_ == 1) break;  // every stage keeps at least one token
        }
        return draw();
    }

    // Records a token the caller committed to (sampled, or forced such as prompt tokens)
    // for the penalties and DRY.
    void accept(int token) {
        if (token < 0 || token >= n_vocab_)
            fail("Sampler::accept: token id ", token, " is outside the vocabulary [0, ", n_vocab_, ")");
        if (history_capacity_ == 0) return;
        if (recent_.size() < history_capacity_) {
            recent_.push_back(token);
        } else {
            recent_[recent_oldest_] = token;
            recent_oldest_ = (recent_oldest_ + 1) % history_capacity_;
        }
        if (params_.dry_window() > 0) track_dry_breakers(token);
    }

    // Forgets the history, restarts mirostat and reseeds: a fixed seed restarts the same
    // sequence, SMOL_DEFAULT_SEED draws a new random seed (llama.cpp's behaviour).
    void reset() {
        recent_.clear();
        recent_oldest_ = 0;
        breaker_head_distance_ = -1;
        breaker_tail_length_ = 0;
        mirostat_mu_ = 2.0f * params_.mirostat_tau;
        reseed();
    }

    // Applies the repeat/presence/frequency penalties of the accepted history to logits
    // [n_vocab] in place (the penalties stage on a fresh vocabulary).
    void apply_penalties(std::span<float> logits) {
        if (logits.size() != static_cast<std::size_t>(n_vocab_))
            fail("Sampler::apply_penalties: expected ", n_vocab_, " logits (the vocabulary size), got ",
                 logits.size());
        if (!collect_penalised_tokens()) return;
        for (std::size_t i = 0; i < window_scratch_.size();) {
            std::size_t j = i;
            while (j < window_scratch_.size() && window_scratch_[j] == window_scratch_[i]) ++j;
            penalise(logits[static_cast<std::size_t>(window_scratch_[i])], j - i);
            i = j;
        }
    }

    std::uint64_t seed() const { return seed_in_use_; }  // the seed actually drawn with
    const SamplerParams& params() const { return params_; }
    int n_vocab() const { return n_vocab_; }
    float mirostat_mu() const { return mirostat_mu_; }  // mirostat's current surprise cap, bits

private:
    struct Candidate {
        float logit;
        int id;
    };
    static constexpr float infinity = std::numeric_limits<float>::infinity();

    // Descending logit, ties to the lower id, so results never depend on library internals.
    static bool better(const Candidate& a, const Candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
    static bool better_logit_only(const Candidate& a, const Candidate& b) { return a.logit < b.logit; }

    void apply_stage(SamplerStage stage) {
        switch (stage) {
            case SamplerStage::penalties: return penalties_stage();
            case SamplerStage::dry: return dry_stage();
            case SamplerStage::top_n_sigma: return top_n_sigma_stage();
            case SamplerStage::top_k: return top_k_stage();
            case SamplerStage::typical_p: return typical_stage();
            case SamplerStage::top_p: return top_p_stage();
            case SamplerStage::min_p: return min_p_stage();
            case SamplerStage::xtc: return xtc_stage();
            case SamplerStage::temperature: return temperature_stage();
        }
    }

    // Greedy with nothing before the temperature stage that could drop the best token (top-k,
    // top-p, min-p and top-n-sigma all keep it): the pick is the argmax after the logit edits.
    bool greedy_needs_only_logits() const {
        if (params_.temperature > 0.0f) return false;
        for (const SamplerStage stage : params_.samplers) {
            if (stage == SamplerStage::temperature) return true;
            if (stage == SamplerStage::typical_p && params_.typical_p < 1.0f) return false;
            if (stage == SamplerStage::xtc && xtc_active()) return false;
        }
        return false;  // no temperature stage: llama.cpp then samples at temperature 1
    }

    // --- the candidate set -----------------------------------------------------------------
    // Until a stage needs it, the candidates are the whole vocabulary, still in logits_
    // (built_ false). Once built, candidates_[0, count_) are live and [0, sorted_) of them
    // are the best, in `better` order.

    void ensure_built() {
        if (built_) return;
        // NaN logits become -inf so the orderings below stay strict weak orderings.
        candidates_.resize(logits_.size());
        for (std::size_t i = 0; i < logits_.size(); ++i) {
            const float logit = logits_[i];
            candidates_[i] = {std::isnan(logit) ? -infinity : logit, static_cast<int>(i)};
        }
        count_ = candidates_.size();
        sorted_ = 0;
        built_ = true;
    }

    float max_logit() const {
        const auto first = candidates_.begin();
        const float max = count_ == 0 ? -infinity
                          : sorted_ > 0 ? first->logit
                                        : std::max_element(first, first + count_, better_logit_only)->logit;
        if (max == -infinity) fail("Sampler::sample: every candidate logit is -inf or NaN; nothing can be sampled");
        return max;
    }

    // Softmax weight of a candidate relative to the best (temperature applied).
    float weight(float logit, float max) const { return std::exp((logit - max) * scale_); }

    double total_weight(float max) const {
        double total = 0.0;
        for (std::size_t i = 0; i < count_; ++i) total += weight(candidates_[i].logit, max);
        return total;
    }

    // Keeps the candidates that satisfy `keep` (a threshold on the logit, so the sorted prefix
    // stays sorted).
    template <class Keep>
    void keep_where(Keep keep) {
        const auto first = candidates_.begin();
        if (sorted_ == count_) {
            count_ = static_cast<std::size_t>(std::partition_point(first, first + count_, keep) - first);
            sorted_ = count_;
        } else {
            count_ = static_cast<std::size_t>(std::partition(first, first + count_, keep) - first);
            sorted_ = 0;
        }
    }

    // Sorts the best `n` of the live candidates to the front.
    void sort_prefix(std::size_t n) {
        n = std::min(n, count_);
        if (sorted_ >= n) return;
        const auto first = candidates_.begin();
        if (n < count_) std::nth_element(first + sorted_, first + n, first + count_, better);
        std::sort(first + sorted_, first + n, better);
        sorted_ = n;
    }

    // --- stages, llama.cpp's definitions -----------------------------------------------------

    // Which distinct tokens the penalty window holds, sorted (with repeats) in window_scratch_;
    // false when the penalties change nothing.
    bool collect_penalised_tokens() {
        const float repeat = params_.repeat_penalty;
        if (repeat == 1.0f && params_.presence_penalty == 0.0f && params_.frequency_penalty == 0.0f) return false;
        const std::size_t window = std::min(recent_.size(), static_cast<std::size_t>(params_.penalty_last_n));
        if (window == 0) return false;
        // Counting distinct tokens by sorting a copy of the (short) window avoids a
        // vocabulary-sized count table.
        window_scratch_.clear();
        for (std::size_t i = 0; i < window; ++i) window_scratch_.push_back(recent_from_end(i));
        std::sort(window_scratch_.begin(), window_scratch_.end());
        return true;
    }

    void penalise(float& logit, std::size_t occurrences) const {
        const float repeat = params_.repeat_penalty;
        // Dividing a negative logit would make the token *more* likely, hence the split.
        logit = logit <= 0.0f ? logit * repeat : logit / repeat;
        logit -= static_cast<float>(occurrences) * params_.frequency_penalty + params_.presence_penalty;
    }

    void penalties_stage() {
        if (!built_) return apply_penalties(logits_);
        if (!collect_penalised_tokens()) return;
        for (std::size_t i = 0; i < count_; ++i) {
            const auto [low, high] = std::equal_range(window_scratch_.begin(), window_scratch_.end(), candidates_[i].id);
            if (low != high) penalise(candidates_[i].logit, static_cast<std::size_t>(high - low));
        }
        sorted_ = 0;
    }

    // The i-th most recent accepted token (0: the last one).
    int recent_from_end(std::size_t i) const {
        return recent_[(recent_oldest_ + recent_.size() - 1 - i) % recent_.size()];
    }

    // DRY: for every earlier place where the text before it repeats the text at the end (at
    // least dry_allowed_length tokens, never reaching back across a sequence breaker), the
    // token that followed there would extend the repeat; it loses
    // multiplier * base^(repeat length - allowed length), the longest repeat counting.
    void dry_stage() {
        const int window = params_.dry_window();
        if (window == 0 || params_.dry_base < 1.0f) return;
        const std::size_t n = std::min(recent_.size(), static_cast<std::size_t>(window));
        const auto allowed = static_cast<std::size_t>(params_.dry_allowed_length);
        if (n <= allowed) return;
        // A repeat may reach back to the end of the nearest breaker inside the window.
        std::size_t repeat_limit = n;
        if (breaker_head_distance_ >= 0 && static_cast<std::size_t>(breaker_head_distance_) < n)
            repeat_limit = static_cast<std::size_t>(breaker_head_distance_ - breaker_tail_length_);
        if (repeat_limit < allowed) return;
        // Z-function of the window read backwards: match_[k] is how many tokens before (and
        // including) the k-th most recent one equal the tokens at the end. O(n) per token.
        reversed_.resize(n);
        for (std::size_t i = 0; i < n; ++i) reversed_[i] = recent_from_end(i);
        match_.assign(n, 0);
        for (std::size_t k = 1, left = 0, right = 0; k < n; ++k) {
            std::size_t z = k < right ? std::min(right - k, match_[k - left]) : 0;
            while (k + z < n && reversed_[z] == reversed_[k + z]) ++z;
            match_[k] = z;
            if (k + z > right) left = k, right = k + z;
        }
        dry_hits_.clear();
        for (std::size_t k = 1; k < n; ++k) {
            const std::size_t length = std::min(match_[k], repeat_limit);
            if (length >= allowed) dry_hits_.emplace_back(reversed_[k - 1], static_cast<int>(length));
        }
        if (dry_hits_.empty()) return;
        // Per token the longest repeat, sorted by token.
        std::sort(dry_hits_.begin(), dry_hits_.end(),
                  [](const auto& a, const auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
        dry_hits_.erase(std::unique(dry_hits_.begin(), dry_hits_.end(),
                                    [](const auto& a, const auto& b) { return a.first == b.first; }),
                        dry_hits_.end());
        if (!built_) {
            for (const auto& [token, length] : dry_hits_) logits_[static_cast<std::size_t>(token)] -= dry_penalty(length);
            return;
        }
        for (std::size_t i = 0; i < count_; ++i) {
            const auto hit = std::lower_bound(dry_hits_.begin(), dry_hits_.end(), std::pair{candidates_[i].id, kMaxInt});
            if (hit != dry_hits_.end() && hit->first == candidates_[i].id) candidates_[i].logit -= dry_penalty(hit->second);
        }
        sorted_ = 0;
    }
    static constexpr int kMaxInt = std::numeric_limits<int>::max();

    float dry_penalty(int length) const {
        // The exponent stops where base^exponent would leave float's range (llama.cpp's cap).
        int exponent = length - params_.dry_allowed_length;
        if (params_.dry_base > 1.000001f) {
            const int max_exponent = static_cast<int>(88.7228391f / std::log(params_.dry_base));
            if (max_exponent > 0) exponent = std::min(exponent, max_exponent);
        }
        return params_.dry_multiplier * std::pow(params_.dry_base, static_cast<float>(exponent));
    }

    // Keeps the nearest breaker sequence (by where it starts; the longest there) up to date as
    // tokens arrive, so sampling never searches the window for breakers. O(breaker tails
    // ending in `token` x their length) per token.
    void track_dry_breakers(int token) {
        if (breaker_head_distance_ >= 0) ++breaker_head_distance_;
        const auto found = [&](int head_distance, int tail_length) {
            if (breaker_head_distance_ < 0 || head_distance < breaker_head_distance_ ||
                (head_distance == breaker_head_distance_ && tail_length > breaker_tail_length_)) {
                breaker_head_distance_ = head_distance;
                breaker_tail_length_ = tail_length;
            }
        };
        if (std::binary_search(breakers_.whole.begin(), breakers_.whole.end(), token)) found(0, 0);
        const auto by_last = [](const DryBreakers::Tail& tail, int t) { return tail.tokens.back() < t; };
        for (auto it = std::lower_bound(breakers_.tails.begin(), breakers_.tails.end(), token, by_last);
             it != breakers_.tails.end() && it->tokens.back() == token; ++it) {
            const std::size_t length = it->tokens.size();
            if (recent_.size() <= length) continue;
            bool match = true;
            for (std::size_t j = 0; j < length && match; ++j) match = recent_from_end(j) == it->tokens[length - 1 - j];
            if (match && std::binary_search(it->heads.begin(), it->heads.end(), recent_from_end(length)))
                found(static_cast<int>(length), static_cast<int>(length));
        }
    }

    // Top-n-sigma: keeps the logits within n standard deviations (over the finite logits) of
    // the best. Scale-free, so temperature before or after it changes nothing.
    void top_n_sigma_stage() {
        const float n = params_.top_n_sigma;
        if (!(n > 0.0f)) return;
        ensure_built();
        if (count_ <= 1) return;
        float max = -infinity;
        double sum = 0.0;
        std::size_t finite = 0;
        for (std::size_t i = 0; i < count_; ++i) {
            const float logit = candidates_[i].logit;
            if (logit == -infinity) continue;
            max = std::max(max, logit);
            sum += logit;
            ++finite;
        }
        if (finite == 0) return;
        const double mean = sum / static_cast<double>(finite);
        double squares = 0.0;
        for (std::size_t i = 0; i < count_; ++i)
            if (candidates_[i].logit != -infinity) squares += (candidates_[i].logit - mean) * (candidates_[i].logit - mean);
        const auto deviation = static_cast<float>(std::sqrt(squares / static_cast<double>(finite)));
        const float threshold = max - n * deviation;
        keep_where([threshold](const Candidate& c) { return c.logit >= threshold; });
    }

    void top_k_stage() {
        if (params_.top_k <= 0) return;
        const auto k = static_cast<std::size_t>(params_.top_k);
        if (!built_) {
            if (k >= logits_.size()) return;
            collect_top_k(logits_, k);
            count_ = sorted_ = candidates_.size();
            built_ = true;
            return;
        }
        if (k >= count_) return;
        sort_prefix(k);
        count_ = k;
    }

    // Locally typical sampling: keeps the tokens whose surprise (-log p) is closest to the
    // distribution's entropy, in that order, until they hold typical_p of the probability.
    void typical_stage() {
        const float p = params_.typical_p;
        if (p >= 1.0f) return;
        ensure_built();
        const float max = max_logit();
        const double total = total_weight(max);
        double entropy = 0.0;
        for (std::size_t i = 0; i < count_; ++i) {
            const double probability = weight(candidates_[i].logit, max) / total;
            if (probability > 0.0) entropy -= probability * std::log(probability);
        }
        typical_order_.resize(count_);
        for (std::size_t i = 0; i < count_; ++i) {
            const double probability = weight(candidates_[i].logit, max) / total;
            const double distance = probability > 0.0 ? std::abs(-std::log(probability) - entropy) : infinity;
            typical_order_[i] = {distance, candidates_[i]};
        }
        std::sort(typical_order_.begin(), typical_order_.end(), [](const auto& a, const auto& b) {
            return a.first < b.first || (a.first == b.first && better(a.second, b.second));
        });
        double cumulative = 0.0;
        std::size_t keep = count_;
        for (std::size_t i = 0; i < count_; ++i) {
            cumulative += weight(typical_order_[i].second.logit, max) / total;
            if (cumulative > p) {
                keep = i + 1;
                break;
            }
        }
        for (std::size_t i = 0; i < keep; ++i) candidates_[i] = typical_order_[i].second;
        count_ = keep;
        sorted_ = 0;
    }

    void top_p_stage() {
        if (params_.top_p >= 1.0f) return;
        ensure_built();
        const float max = max_logit();
        const double target = static_cast<double>(params_.top_p) * total_weight(max);
        if (sorted_ < count_) sorted_ = sort_nucleus_candidates(max, target);
        double cumulative = 0.0;
        for (std::size_t i = 0; i < count_; ++i) {
            if (i == sorted_) extend_sorted_prefix();
            cumulative += weight(candidates_[i].logit, max);
            if (cumulative >= target) {
                count_ = i + 1;
                sorted_ = std::min(sorted_, count_);
                return;
            }
        }
    }

    void min_p_stage() {
        if (params_.min_p <= 0.0f) return;
        ensure_built();
        // p / p_max >= min_p, in logits: (logit - max) * scale >= log(min_p).
        const float threshold = max_logit() + std::log(params_.min_p) / scale_;
        keep_where([threshold](const Candidate& c) { return c.logit >= threshold; });
    }

    bool xtc_active() const { return params_.xtc_probability > 0.0f && params_.xtc_threshold <= 0.5f; }

    // XTC ("exclude top choices"): with probability xtc_probability, of the tokens at or above
    // xtc_threshold probability all but the least likely are removed, when there are two or more.
    void xtc_stage() {
        if (!xtc_active() || (built_ && count_ < 2)) return;
        if (uniform01() > params_.xtc_probability) return;
        ensure_built();
        const float max = max_logit();
        const double cut = static_cast<double>(params_.xtc_threshold) * total_weight(max);
        const auto first = candidates_.begin();
        const auto above = [&](const Candidate& c) { return weight(c.logit, max) >= cut; };
        std::size_t n_above = 0;
        if (sorted_ == count_) {
            n_above = static_cast<std::size_t>(std::partition_point(first, first + count_, above) - first);
        } else {
            n_above = static_cast<std::size_t>(std::partition(first, first + count_, above) - first);
            std::sort(first, first + n_above, better);
            sorted_ = n_above;
        }
        if (n_above < 2) return;
        const std::size_t removed = n_above - 1;
        std::move(first + removed, first + count_, first);
        count_ -= removed;
        sorted_ -= removed;
    }

    void temperature_stage() {
        const float temperature = params_.temperature;
        if (temperature > 0.0f) {
            scale_ *= 1.0f / temperature;
            return;
        }
        // Greedy: only the best candidate stays.
        if (!built_) {
            candidates_.assign(1, {0.0f, argmax(logits_)});
            candidates_[0].logit = logits_[static_cast<std::size_t>(candidates_[0].id)];
            count_ = sorted_ = 1;
            built_ = true;
            return;
        }
        if (count_ == 0) fail("Sampler::sample: no candidate is left to sample");
        std::iter_swap(candidates_.begin(), std::min_element(candidates_.begin(), candidates_.begin() + count_, better));
        count_ = sorted_ = 1;
    }

    // Softmax over the live candidates and the seeded draw. The weights overwrite the logits
    // in scratch.
    int draw() {
        ensure_built();
        const float max = max_logit();
        const auto first = candidates_.begin();
        if (!std::isfinite(scale_))  // a denormal temperature: the limit is greedy
            return std::min_element(first, first + count_, better)->id;
        double sum = 0.0;
        for (std::size_t i = 0; i < count_; ++i) {
            first[i].logit = weight(first[i].logit, max);
            sum += first[i].logit;
        }
        return first[pick(sum)].id;
    }

    // Index of the weight (in candidates_[0, count_).logit) a uniform draw over `sum` lands on.
    std::size_t pick(double sum) {
        const double target = uniform01() * sum;
        double cumulative = 0.0;
        for (std::size_t i = 0; i < count_; ++i) {
            cumulative += candidates_[i].logit;
            if (target < cumulative) return i;
        }
        return count_ - 1;  // rounding left target at the very top of the range
    }

    // Mirostat: logit bias -> temperature -> a cut of the surprising tokens that steers the
    // observed surprise towards tau, learning mu as it goes.
    int sample_mirostat() {
        if (params_.temperature <= 0.0f) return argmax(logits_);
        scale_ = 1.0f / params_.temperature;
        ensure_built();
        const float max = max_logit();
        const double total = total_weight(max);
        if (params_.mirostat == 1) {
            sort_prefix(std::min<std::size_t>(count_, kMirostatM));
            count_ = mirostat_v1_k(max);
            sort_prefix(count_);
        } else {
            // Mirostat 2.0: the tokens with surprise -log2 p at most mu; the best alone if none.
            const double least = total * std::exp2(-static_cast<double>(mirostat_mu_));
            keep_where([&](const Candidate& c) { return weight(c.logit, max) >= least; });
            if (count_ == 0) {  // the partition only reordered: every token is still in the array
                count_ = candidates_.size();
                sort_prefix(1);
                count_ = 1;
            }
            sort_prefix(count_);
        }
        double sum = 0.0;
        for (std::size_t i = 0; i < count_; ++i) {
            candidates_[i].logit = weight(candidates_[i].logit, max);
            sum += candidates_[i].logit;
        }
        const std::size_t chosen = pick(sum);
        const double surprise = -std::log2(candidates_[chosen].logit / sum);
        mirostat_mu_ -= params_.mirostat_eta * static_cast<float>(surprise - params_.mirostat_tau);
        return candidates_[chosen].id;
    }
    static constexpr std::size_t kMirostatM = 100;  // tokens Mirostat 1 fits its Zipf exponent on

    // Mirostat 1's k: the Zipf exponent s fitted on the best kMirostatM probabilities (sorted
    // in front), then the k whose expected surprise is mu.
    std::size_t mirostat_v1_k(float max) const {
        const std::size_t m = std::min<std::size_t>(count_, kMirostatM);
        double sum_tb = 0.0, sum_tt = 0.0;
        for (std::size_t i = 0; i + 1 < m; ++i) {
            const double t = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
            const double b = std::log(static_cast<double>(weight(candidates_[i].logit, max)) /
                                      static_cast<double>(weight(candidates_[i + 1].logit, max)));
            sum_tb += t * b;
            sum_tt += t * t;
        }
        const double s = sum_tb / sum_tt;
        const double epsilon = s - 1.0;
        const double k = std::pow(epsilon * std::exp2(static_cast<double>(mirostat_mu_)) /
                                      (1.0 - std::pow(static_cast<double>(n_vocab_), -epsilon)),
                                  1.0 / s);
        if (!(k >= 1.0)) return 1;  // NaN (a flat or degenerate top) included
        return static_cast<std::size_t>(std::min(k, static_cast<double>(count_)));
    }

    // --- checks, randomness and the fast paths ----------------------------------------------

    void validate() const {
        const SamplerParams& p = params_;
        if (n_vocab_ <= 0) fail("Sampler: expected a positive vocabulary size, got ", n_vocab_);
        if (std::isnan(p.temperature)) fail("Sampler: temperature is NaN (use <= 0 for greedy)");
        if (p.top_k < 0) fail("Sampler: top_k must be >= 0 (0 turns it off), got ", p.top_k);
        if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
            fail("Sampler: top_p must be in (0, 1] (1 turns it off), got ", p.top_p);
        if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
            fail("Sampler: min_p must be in [0, 1] (0 turns it off), got ", p.min_p);
        if (!(p.typical_p > 0.0f && p.typical_p <= 1.0f))
            fail("Sampler: typical_p must be in (0, 1] (1 turns it off), got ", p.typical_p);
        if (!std::isfinite(p.top_n_sigma) || p.top_n_sigma > 100.0f)
            fail("Sampler: top_n_sigma must be at most 100 (<= 0 turns it off), got ", p.top_n_sigma);
        if (!(p.xtc_probability >= 0.0f && p.xtc_probability <= 1.0f))
            fail("Sampler: xtc_probability must be in [0, 1] (0 turns XTC off), got ", p.xtc_probability);
        if (!(p.xtc_threshold >= 0.0f && p.xtc_threshold <= 1.0f))
            fail("Sampler: xtc_threshold must be in [0, 1] (above 0.5 turns XTC off), got ", p.xtc_threshold);
        if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty))
            fail("Sampler: repeat_penalty must be a finite value > 0 (1 turns it off), got ", p.repeat_penalty);
        for (const auto& [token, bias] : p.logit_bias) {
            if (token < 0 || token >= n_vocab_)
                fail("Sampler: logit_bias names token id ", token, ", outside the vocabulary [0, ", n_vocab_, ")");
            if (!std::isfinite(bias)) fail("Sampler: logit_bias for token ", token, " must be finite, got ", bias);
        }
        if (!std::isfinite(p.presence_penalty))
            fail("Sampler: presence_penalty must be finite, got ", p.presence_penalty);
        if (!std::isfinite(p.frequency_penalty))
            fail("Sampler: frequency_penalty must be finite, got ", p.frequency_penalty);
        if (p.penalty_last_n < 0)
            fail("Sampler: penalty_last_n must be >= 0 (0 turns penalties off), got ", p.penalty_last_n);
        validate_dry();
        if (p.mirostat < 0 || p.mirostat > 2) fail("Sampler: mirostat must be 0, 1 or 2, got ", p.mirostat);
        if (!(p.mirostat_tau >= 0.0f && p.mirostat_tau <= 100.0f))
            fail("Sampler: mirostat_tau must be in [0, 100], got ", p.mirostat_tau);
        if (!(p.mirostat_eta >= 0.0f && p.mirostat_eta <= 10.0f))
            fail("Sampler: mirostat_eta must be in [0, 10], got ", p.mirostat_eta);
        if (p.samplers.size() > static_cast<std::size_t>(SamplerParams::kMaxStages))
            fail("Sampler: samplers lists at most ", SamplerParams::kMaxStages, " stages, got ", p.samplers.size());
    }

    void validate_dry() const {
        const SamplerParams& p = params_;
        if (!(p.dry_multiplier >= 0.0f && p.dry_multiplier <= 100.0f))
            fail("Sampler: dry_multiplier must be in [0, 100] (0 turns DRY off), got ", p.dry_multiplier);
        if (!(p.dry_base >= 1.0f && p.dry_base <= 100.0f))
            fail("Sampler: dry_base must be in [1, 100], got ", p.dry_base);
        if (p.dry_allowed_length < 1 || p.dry_allowed_length > SamplerParams::kMaxDryWindow)
            fail("Sampler: dry_allowed_length must be in [1, ", SamplerParams::kMaxDryWindow, "], got ",
                 p.dry_allowed_length);
        if (p.dry_penalty_last_n < -1 || p.dry_penalty_last_n > SamplerParams::kMaxDryWindow)
            fail("Sampler: dry_penalty_last_n must be in [-1, ", SamplerParams::kMaxDryWindow,
                 "] (-1: the most, 0 turns DRY off), got ", p.dry_penalty_last_n);
        if (p.dry_sequence_breakers.size() > static_cast<std::size_t>(SamplerParams::kMaxDryBreakers))
            fail("Sampler: dry_sequence_breakers holds at most ", SamplerParams::kMaxDryBreakers, " strings, got ",
                 p.dry_sequence_breakers.size());
        for (const std::string& breaker : p.dry_sequence_breakers)
            if (breaker.empty() || breaker.size() > SamplerParams::kMaxDryBreakerBytes)
                fail("Sampler: each dry_sequence_breakers string must be 1 to ", SamplerParams::kMaxDryBreakerBytes,
                     " bytes long, got one of ", breaker.size());
    }

    void reseed() {
        seed_in_use_ = params_.seed;
        if (params_.seed == SMOL_DEFAULT_SEED) {
            std::random_device device;
            seed_in_use_ = (static_cast<std::uint64_t>(device()) << 32) | device();
        }
        rng_.seed(seed_in_use_);
    }

    // 53 random bits -> [0, 1): same numbers on every standard library, unlike
    // std::uniform_real_distribution whose algorithm is unspecified.
    double uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

    static int argmax(std::span<const float> logits) {
        int best = -1;
        float best_logit = -infinity;
        for (std::size_t i = 0; i < logits.size(); ++i)
            if (logits[i] > best_logit) {  // strict: ties keep the lowest id; NaN never wins
                best_logit = logits[i];
                best = static_cast<int>(i);
            }
        if (best < 0) fail("Sampler::sample: every logit is -inf or NaN; greedy has nothing to pick");
        return best;
    }

    // Leaves the k best tokens of logits [n_vocab] in candidates_, sorted. A running
    // threshold (the k-th best so far) rejects almost every token with one comparison, so
    // only a few thousand are ever written, instead of copying the whole vocabulary.
    void collect_top_k(std::span<const float> logits, std::size_t k) {
        candidates_.clear();  // capacity n_vocab: push_back below never reallocates
        const std::size_t compact_at = std::min(logits.size(), 2 * k + 4096);
        float threshold = -infinity;
        for (std::size_t i = 0; i < logits.size(); ++i) {
            // Strict: a later token equal to the k-th best has a higher id and ranks below
            // it. NaN fails the comparison and so is never a candidate.
            if (!(logits[i] > threshold)) continue;
            candidates_.push_back({logits[i], static_cast<int>(i)});
            if (candidates_.size() == compact_at) {
                std::nth_element(candidates_.begin(), candidates_.begin() + (k - 1), candidates_.end(), better);
                candidates_.resize(k);
                threshold = candidates_[k - 1].logit;
            }
        }
        if (candidates_.size() > k) {
            std::nth_element(candidates_.begin(), candidates_.begin() + k, candidates_.end(), better);
            candidates_.resize(k);
        }
        std::sort(candidates_.begin(), candidates_.end(), better);
    }

    // Without top-k the nucleus has to be found among the whole vocabulary. A histogram of
    // the softmax weight over logit buckets below the maximum shows which buckets the
    // nucleus reaches into; only their tokens are moved to the front and sorted, an O(n)
    // pass plus a sort of about the nucleus (llama.cpp's bucket approach). Returns the
    // sorted length.
    std::size_t sort_nucleus_candidates(float max_logit, double target) {
        const std::size_t count = count_;
        const auto first = candidates_.begin();
        constexpr int n_buckets = static_cast<int>(nucleus_buckets);
        // Weights below e^-40 of the top cannot change a nucleus at float precision.
        constexpr float covered_range = 40.0f;
        constexpr float buckets_per_unit = static_cast<float>(n_buckets) / covered_range;
        const auto bucket_of = [max_logit, this](float logit) {
            const float position = (max_logit - logit) * scale_ * buckets_per_unit;  // +inf for -inf logits
            return position < static_cast<float>(n_buckets - 1) ? static_cast<int>(position) : n_buckets - 1;
        };
        bucket_weight_.fill(0.0);
        for (std::size_t i = 0; i < count; ++i)
            bucket_weight_[static_cast<std::size_t>(bucket_of(first[i].logit))] +=
                weight(first[i].logit, max_logit);
        int last_bucket = n_buckets - 1;
        double cumulative = 0.0;
        for (int b = 0; b < n_buckets; ++b) {
            cumulative += bucket_weight_[static_cast<std::size_t>(b)];
            if (cumulative >= target) {
                last_bucket = b;
                break;
            }
        }
        const auto nucleus_end = std::partition(first, first + count, [&](const Candidate& c) {
            return bucket_of(c.logit) <= last_bucket;
        });
        std::sort(first, nucleus_end, better);
        return static_cast<std::size_t>(nucleus_end - first);
    }

    // Fallback when rounding left the bucketed prefix just short of the target: grows the
    // sorted prefix geometrically.
    void extend_sorted_prefix() { sort_prefix(std::max<std::size_t>(64, sorted_ * 4)); }

    SamplerParams params_;
    int n_vocab_;
    DryBreakers breakers_;
    std::uint64_t seed_in_use_ = 0;
    std::mt19937_64 rng_;
    std::size_t history_capacity_ = 0;  // SamplerParams::history_window()
    std::vector<int> recent_;           // [<= history_capacity_] ring buffer of accepted tokens
    std::size_t recent_oldest_ = 0;     // slot overwritten next once the ring is full
    std::vector<int> window_scratch_;   // [<= penalty_last_n] sorted copy of the penalty window
    // The nearest DRY breaker sequence: its head's distance from the newest token (-1: none
    // seen) and its length after the head.
    int breaker_head_distance_ = -1;
    int breaker_tail_length_ = 0;
    std::vector<int> reversed_;                       // [<= DRY window] newest token first
    std::vector<std::size_t> match_;                  // [<= DRY window] Z-function of reversed_
    std::vector<std::pair<int, int>> dry_hits_;       // (token, repeat length it would extend)
    float mirostat_mu_ = 0.0f;                        // mirostat's surprise cap, bits
    // The chain's state during sample(): see ensure_built().
    std::span<float> logits_;
    bool built_ = false;
    std::size_t count_ = 0;
    std::size_t sorted_ = 0;
    float scale_ = 1.0f;                              // product of the temperature stages' 1 / T
    std::vector<Candidate> candidates_;               // [n_vocab] scratch
    std::vector<std::pair<double, Candidate>> typical_order_;  // [n_vocab] (|surprise - entropy|, token)
    static constexpr std::size_t nucleus_buckets = 1024;
    std::array<double, nucleus_buckets> bucket_weight_{};  // softmax weight per logit bucket
};

}  // namespace smol
