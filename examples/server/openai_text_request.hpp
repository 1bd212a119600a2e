#pragma once
// A /v1/completions body (OpenAI's legacy text completions) checked and turned into the
// ApiRequest the scheduler runs: the prompt continued as it is, without the chat template.

#include <cstdint>
#include <string>
#include <vector>

#include "api_request.hpp"
#include "llama_server_fields.hpp"
#include "openai_fields.hpp"
#include "sampling_fields.hpp"

namespace smol_server {

// A /v1/completions body: `prompt` as a string (special tokens such as <|im_start|> are parsed)
// or as token ids, continued as it is: no chat template, and <think> blocks stay in the text.
// `logprobs` is the number of alternatives per token here, as in OpenAI's completions API.
inline ApiRequest parse_text_request(const json& body, const smol::text::Tokenizer& tokenizer, int context,
                                     const RequestDefaults& defaults = {}) {
    reject_unlisted_fields(body, {kSamplingFields, kTextFields, kLlamaServerFields});
    reject_unsupported_values(body);
    ApiRequest out = request_with(defaults);
    const auto prompt = body.find("prompt");
    if (prompt == body.end() || prompt->is_null())
        reject(400, "'prompt' is required: a string or a list of token ids", "missing_prompt");
    json text = *prompt;
    if (text.is_array() && text.size() == 1 && text[0].is_string()) text = text[0];  // one prompt in a list
    std::vector<std::int32_t>& ids = out.generation.prompt;
    if (text.is_string()) {
        ids = tokenizer.encode(text.get<std::string>(), /*parse_special=*/true);
    } else if (text.is_array() && (text.empty() || text[0].is_number())) {
        for (std::size_t i = 0; i < text.size(); ++i) {
            const json& id = text[i];
            if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= (long long)tokenizer.n_vocab())
                reject(400,
                       "'prompt[" + std::to_string(i) + "]' must be a token id in [0, " +
                           std::to_string(tokenizer.n_vocab()) + "), found " + id.dump(),
                       "invalid_value");
            ids.push_back(std::int32_t(id.get<long long>()));
        }
    } else if (text.is_array()) {
        unsupported("prompt", "as a list of several prompts is not supported: send one request per prompt");
    } else {
        reject(400, std::string("'prompt' must be a string or a list of token ids, found ") + text.type_name(),
               "invalid_type");
    }
    if (ids.empty()) reject(400, "'prompt' is empty; at least one token is needed to continue from", "invalid_value");
    read_sampling(body, out, tokenizer.n_vocab());
    smol::GenerationParams& params = out.generation.params;
    params.split_reasoning = false;
    out.grammar = read_output_grammar(body);
    auto logprobs = integer_field(body, "logprobs", 0, smol::kMaxTopLogprobs);
    if (const int n_probs = read_llama_server_fields(body, out, tokenizer); n_probs > 0) {
        if (logprobs && *logprobs != n_probs) reject(400, "'n_probs' and 'logprobs' differ; give one", "invalid_value");
        logprobs = n_probs;
    }
    out.logprobs = logprobs.has_value();
    params.logprobs = logprobs ? int(*logprobs) : -1;
    check_prompt_fits(out, context);
    return out;
}

}  // namespace smol_server
