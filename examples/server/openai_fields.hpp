#pragma once
// Which top-level fields the two OpenAI endpoints (/v1/chat/completions, /v1/completions) read,
// and the values of them smol-server refuses rather than silently ignores. llama-server's own
// fields are in llama_server_fields.hpp.

#include <string>
#include <string_view>

#include "api_request.hpp"

namespace smol_server {

// Fields that smol-server implements, with llama-server's sampling extensions. `user` (an
// end-user id for the provider's abuse monitoring) and `cache_prompt` (prompt caching changes
// no output here, only speed) are accepted as they come; the others are checked for values
// smol-server cannot honour below. `speculative` is smol's own (read_sampling); `cache_salt`
// (vLLM's) is read by tenants.hpp.
inline constexpr std::string_view kSamplingFields[] = {
    "model", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repeat_penalty",
    "seed", "max_tokens", "stop", "stream", "stream_options", "n", "user", "cache_prompt", "logprobs", "logit_bias",
    "grammar", "speculative", "cache_salt", "typical_p", "top_n_sigma", "xtc_probability", "xtc_threshold",
    "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "mirostat",
    "mirostat_tau", "mirostat_eta", "samplers"};
inline constexpr std::string_view kChatFields[] = {
    "messages", "max_completion_tokens", "tools", "tool_choice", "chat_template_kwargs", "store",
    "parallel_tool_calls", "response_format", "top_logprobs", "metadata", "reasoning_effort"};
inline constexpr std::string_view kTextFields[] = {"prompt", "echo", "suffix", "best_of"};

// Fields whose neutral value smol-server honours but whose other values it cannot: a 400 for
// those, never a reply that silently ignores what was asked.
inline void reject_unsupported_values(const json& body) {
    if (!absent_or(body, "store", false)) unsupported("store", "must be false or absent: smol-server keeps no completions");
    if (!absent_or(body, "metadata", json::object()))
        unsupported("metadata", "is not supported: smol-server stores no completions to tag");
    if (!absent_or(body, "parallel_tool_calls", true))
        unsupported("parallel_tool_calls", "must be true or absent: the model may call several tools in one turn");
    if (!absent_or(body, "echo", false)) unsupported("echo", "is not supported: the reply holds only the completion");
    if (!absent_or(body, "suffix", "")) unsupported("suffix", "is not supported: SmolLM3 has no fill-in-the-middle tokens");
    if (!absent_or(body, "best_of", 1)) unsupported("best_of", "must be 1 or absent");
    // llama-server keeps the first n_keep tokens when it shifts a full context; smol-server
    // never shifts (a reply ends when the context is full), so only "keep nothing special" (0)
    // and "keep everything" (-1) describe what it does.
    if (!absent_or(body, "n_keep", 0) && !absent_or(body, "n_keep", -1))
        unsupported("n_keep", "must be 0, -1 or absent: smol-server never shifts the context, a reply ends when it is full");
    if (const auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
        if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string())
            reject(400, "'response_format' must be an object with a 'type'", "invalid_value");
        const std::string type = (*it)["type"];
        if (type != "text" && type != "json_object" && type != "json_schema")
            reject(400, "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", found \"" + type + "\"",
                   "invalid_value");
    }
    if (const auto it = body.find("stream_options"); it != body.end() && it->is_object())
        for (const auto& [key, value] : it->items())
            if (key != "include_usage" && !value.is_null()) unsupported("stream_options." + key, "is not supported");
}

}  // namespace smol_server
