#pragma once
// llama-server's request fields that both OpenAI endpoints take beside OpenAI's own: n_predict,
// n_probs, id_slot, ignore_eos, json_schema and `grammar` (GBNF) with response_format as the
// output grammar. Its sampler extensions (typical_p, DRY, XTC, mirostat, samplers) are read with
// every API's sampling (sampling_fields.hpp); n_keep is checked with OpenAI's refused values
// (openai_fields.hpp) and cache_prompt accepted as it comes.

#include <cstdint>
#include <string>
#include <string_view>

#include "api_request.hpp"

namespace smol_server {

// llama-server's own names that both OpenAI endpoints take (read_llama_server_fields).
inline constexpr std::string_view kLlamaServerFields[] = {"n_predict", "n_probs", "id_slot", "ignore_eos",
                                                          "json_schema", "n_keep"};
// The fields only llama-server's native /completion takes (llama_completion_request.hpp).
inline constexpr std::string_view kLlamaCompletionFields[] = {
    "prompt", "return_tokens", "response_fields", "post_sampling_probs", "timings_per_token", "min_keep",
    "dynatemp_range", "dynatemp_exponent", "n_indent", "t_max_predict_ms", "t_max_prompt_ms"};

// The grammar the output must follow: response_format {"type": "json_object"} (chat only) or
// llama-server's `grammar` (GBNF text); not both.
inline std::string read_output_grammar(const json& body) {
    std::string grammar;
    if (const auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
        if (!it->is_string()) reject(400, std::string("'grammar' must be GBNF text, found ") + it->type_name(), "invalid_type");
        grammar = it->get<std::string>();
        if (grammar.empty()) reject(400, "'grammar' is empty", "invalid_value");
    }
    // llama-server's json_schema: the schema itself, as response_format's json_schema.schema.
    if (const auto it = body.find("json_schema"); it != body.end() && !it->is_null()) {
        if (!grammar.empty() || !absent_or(body, "response_format", json{{"type", "text"}}))
            reject(400, "give one of 'json_schema', 'grammar' and 'response_format', not several", "invalid_value");
        if (!it->is_object())
            reject(400, std::string("'json_schema' must be a JSON schema object, found ") + it->type_name(), "invalid_type");
        return schema_grammar(*it, "json_schema");
    }
    const auto format = body.find("response_format");
    // reject_unsupported_values() checked the shape and the type already.
    if (format == body.end() || format->is_null() || format->value("type", json()) == "text") return grammar;
    if (!grammar.empty()) reject(400, "give either 'grammar' or 'response_format', not both", "invalid_value");
    if (format->value("type", json()) == "json_object") return json_answer_grammar(nullptr, "response_format");
    // json_schema: {name, description, schema, strict}; without a schema, any JSON object.
    const auto spec = format->find("json_schema");
    if (spec == format->end() || !spec->is_object())
        reject(400, "'response_format.json_schema' must be an object with the 'schema'", "invalid_value");
    const auto schema = spec->find("schema");
    return json_answer_grammar(schema == spec->end() ? json() : *schema, "response_format.json_schema.schema");
}

// llama-server's request fields that have an OpenAI twin or a scheduler meaning: n_predict
// (max_tokens when that is absent; -1 is no limit), n_probs (alternatives per token, as
// top_logprobs or the completions API's logprobs), id_slot (the slot to run in, -1 any: its
// cache is the one reused) and ignore_eos (end-of-generation tokens are never sampled, so
// the reply runs to max_tokens, a stop string or a full context). json_schema is read with
// the grammar (read_output_grammar) and n_keep by reject_unsupported_values. Returns n_probs.
inline int read_llama_server_fields(const json& body, ApiRequest& out, const smol::text::Tokenizer& tokenizer) {
    smol::GenerationParams& params = out.generation.params;
    if (auto v = integer_field(body, "n_predict", -1, 1 << 30);
        v && !body.contains("max_tokens") && !body.contains("max_completion_tokens")) {
        if (*v == 0) reject(400, "'n_predict' must be -1 (no limit) or at least 1, found 0", "invalid_value");
        params.max_tokens = int(*v);
    }
    if (auto v = integer_field(body, "id_slot", -1, 1 << 20)) out.generation.slot = int(*v);
    if (bool_field(body, "ignore_eos").value_or(false)) {
        if (!out.grammar.empty())
            reject(400, "'ignore_eos' cannot be combined with a grammar, json_schema or response_format: the output "
                        "could never end where they say it is complete", "invalid_value");
        // Finite, as every bias must be; no logit comes near it, so these tokens' probability is 0.
        for (const std::int32_t id : tokenizer.end_of_generation_ids())
            params.sampling.logit_bias.emplace_back(id, -1e30f);
    }
    return int(integer_field(body, "n_probs", 0, smol::kMaxTopLogprobs).value_or(0));
}

}  // namespace smol_server
