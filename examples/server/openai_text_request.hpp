#pragma once
// A text completion body (OpenAI's legacy /v1/completions, or llama-server's native
// /completion) checked and turned into the ApiRequest the scheduler runs: the prompt continued
// as it is, without the chat template.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "api_request.hpp"
#include "llama_server_fields.hpp"
#include "openai_fields.hpp"
#include "sampling_fields.hpp"

namespace smol_server {

// A text completion's `prompt` as token ids: a string (special tokens such as <|im_start|> are
// parsed), token ids, or llama-server's mix of both ([12, "text", 34]); one prompt in a list is
// that prompt. As in llama-server, a list of strings alone (or of lists) is several prompts.
inline std::vector<std::int32_t> read_text_prompt(const json& body, const smol::text::Tokenizer& tokenizer) {
    const auto prompt = body.find("prompt");
    if (prompt == body.end() || prompt->is_null())
        reject(400, "'prompt' is required: a string or a list of token ids", "missing_prompt");
    json text = *prompt;
    if (text.is_array() && text.size() == 1 && (text[0].is_string() || text[0].is_array())) text = text[0];
    if (text.is_string()) return tokenizer.encode(text.get<std::string>(), /*parse_special=*/true);
    if (!text.is_array())
        reject(400, std::string("'prompt' must be a string or a list of token ids, found ") + text.type_name(),
               "invalid_type");
    const auto is_string = [](const json& part) { return part.is_string(); };
    const auto is_structured = [](const json& part) { return part.is_array() || part.is_object(); };
    if ((text.size() > 1 && std::all_of(text.begin(), text.end(), is_string)) ||
        std::any_of(text.begin(), text.end(), is_structured))
        unsupported("prompt", "as a list of several prompts is not supported: send one request per prompt");
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const json& part = text[i];
        if (part.is_string()) {
            const std::vector<std::int32_t> piece = tokenizer.encode(part.get<std::string>(), /*parse_special=*/true);
            ids.insert(ids.end(), piece.begin(), piece.end());
            continue;
        }
        if (!part.is_number_integer() || part.get<long long>() < 0 || part.get<long long>() >= (long long)tokenizer.n_vocab())
            reject(400,
                   "'prompt[" + std::to_string(i) + "]' must be a token id in [0, " + std::to_string(tokenizer.n_vocab()) +
                       ") or a string, found " + part.dump(),
                   "invalid_value");
        ids.push_back(std::int32_t(part.get<long long>()));
    }
    return ids;
}

// Which API a text completion body comes in: OpenAI's /v1/completions, or llama-server's native
// /completion (llama_completion_request.hpp), whose extra fields the caller reads.
enum class TextApi { openai, llama };

// A text completion body: `prompt` (read_text_prompt) continued as it is: no chat template, and
// <think> blocks stay in the text. `logprobs` is the number of alternatives per token here, as
// in OpenAI's completions API.
inline ApiRequest parse_text_request(const json& body, const smol::text::Tokenizer& tokenizer, int context,
                                     const RequestDefaults& defaults = {}, TextApi api = TextApi::openai) {
    if (api == TextApi::openai) reject_unlisted_fields(body, {kSamplingFields, kTextFields, kLlamaServerFields});
    else reject_unlisted_fields(body, {kSamplingFields, kLlamaServerFields, kLlamaCompletionFields});
    reject_unsupported_values(body);
    ApiRequest out = request_with(defaults);
    out.generation.prompt = read_text_prompt(body, tokenizer);
    if (out.generation.prompt.empty())
        reject(400, "'prompt' is empty; at least one token is needed to continue from", "invalid_value");
    read_sampling(body, out, tokenizer);
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
