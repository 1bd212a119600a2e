#pragma once
// llama-server's native completion API, POST /completion and /completions (OpenAI's shape is at
// /v1/completions): its body is a text completion's (openai_text_request.hpp) with llama-server's
// own fields, and LlamaCompletionSettings is what its reply repeats or needs besides
// (llama_completion_replies.hpp writes the reply).

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "api_request.hpp"
#include "openai_text_request.hpp"
#include "sampling_fields.hpp"

namespace smol_server {

inline constexpr std::size_t kMaxResponseFields = 64;

// What a native completion's reply repeats or needs besides the generation's events.
struct LlamaCompletionSettings {
    bool return_tokens = false;                // the reply lists the generated token ids ("tokens")
    std::vector<std::string> response_fields;  // when any, the reply holds only these ("a/b": b inside a)
    json generation_settings;                  // the request's sampling, as llama-server repeats it
    std::string prompt;                        // the prompt as text, control tokens spelled out
    int prompt_tokens = 0;
};

// The sampling a request runs with, by llama-server's names: its replies' generation_settings
// and /props' default_generation_settings.params.
inline json generation_settings_json(const smol::GenerationParams& params) {
    const smol::SamplerParams& s = params.sampling;
    return json{{"n_predict", params.max_tokens},
                {"seed", s.seed},
                {"temperature", s.temperature},
                {"top_k", s.top_k},
                {"top_p", s.top_p},
                {"min_p", s.min_p},
                {"repeat_penalty", s.repeat_penalty},
                {"repeat_last_n", s.penalty_last_n},
                {"presence_penalty", s.presence_penalty},
                {"frequency_penalty", s.frequency_penalty},
                {"typical_p", s.typical_p},
                {"top_n_sigma", s.top_n_sigma},
                {"xtc_probability", s.xtc_probability},
                {"xtc_threshold", s.xtc_threshold},
                {"dry_multiplier", s.dry_multiplier},
                {"dry_base", s.dry_base},
                {"dry_allowed_length", s.dry_allowed_length},
                {"dry_penalty_last_n", s.dry_penalty_last_n},
                {"dry_sequence_breakers", s.dry_sequence_breakers},
                {"mirostat", s.mirostat},
                {"mirostat_tau", s.mirostat_tau},
                {"mirostat_eta", s.mirostat_eta},
                {"stop", params.stop},
                {"n_probs", std::max(params.logprobs, 0)},
                {"samplers", sampler_names(s.samplers)},
                {"max_tokens", params.max_tokens}};
}

// llama-server's native fields whose neutral value smol-server honours but whose others it
// cannot: a 400 naming them, never a reply that quietly ignores them.
inline void reject_unsupported_native_values(const json& body) {
    if (!absent_or(body, "post_sampling_probs", false))
        unsupported("post_sampling_probs", "must be false or absent: smol-server gives the model's own log-probabilities "
                                           "(a softmax of the raw logits), not the sampler's");
    if (!absent_or(body, "timings_per_token", false))
        unsupported("timings_per_token", "must be false or absent: timings come with the last chunk");
    if (!absent_or(body, "min_keep", 0)) unsupported("min_keep", "must be 0 or absent");
    if (!absent_or(body, "dynatemp_range", 0)) unsupported("dynatemp_range", "must be 0 or absent: no dynamic temperature");
    if (!absent_or(body, "dynatemp_exponent", 1)) unsupported("dynatemp_exponent", "must be 1 or absent: no dynamic temperature");
    if (!absent_or(body, "n_indent", 0)) unsupported("n_indent", "must be 0 or absent");
    for (const char* limit : {"t_max_predict_ms", "t_max_prompt_ms"})
        if (!absent_or(body, limit, 0)) unsupported(limit, "must be 0 or absent: replies end by tokens, not by time");
}

// A native /completion body as the one request model: a text completion's, whose reply also
// needs the generated token ids (tokens_predicted as it streams, `tokens` with return_tokens).
inline ApiRequest parse_llama_completion_request(const json& body, const smol::text::Tokenizer& tokenizer, int context,
                                                 const RequestDefaults& defaults = {}) {
    ApiRequest out = parse_text_request(body, tokenizer, context, defaults, TextApi::llama);
    reject_unsupported_native_values(body);
    (void)bool_field(body, "return_tokens");
    if (const auto it = body.find("response_fields"); it != body.end() && !it->is_null()) {
        if (!it->is_array() || it->size() > kMaxResponseFields)
            reject(400, "'response_fields' must be a list of at most " + std::to_string(kMaxResponseFields) + " field paths",
                   "invalid_value");
        for (const json& path : *it)
            if (!path.is_string() || path.get_ref<const std::string&>().empty() || path.get_ref<const std::string&>().size() > 256)
                reject(400, "'response_fields' must hold paths of 1 to 256 bytes, found " + path.dump().substr(0, 64),
                       "invalid_value");
    }
    out.generation.params.token_ids = true;
    return out;
}

// What the reply of an accepted native /completion body repeats (parse_llama_completion_request
// checked the fields).
inline LlamaCompletionSettings llama_completion_settings(const json& body, const ApiRequest& request,
                                                         const smol::text::Tokenizer& tokenizer) {
    LlamaCompletionSettings s;
    s.return_tokens = bool_field(body, "return_tokens").value_or(false);
    if (const auto it = body.find("response_fields"); it != body.end() && it->is_array())
        for (const json& path : *it) s.response_fields.push_back(path.get<std::string>());
    s.generation_settings = generation_settings_json(request.generation.params);
    s.prompt = tokenizer.decode(request.generation.prompt, /*show_control=*/true);
    s.prompt_tokens = request.prompt_tokens;
    return s;
}

}  // namespace smol_server
