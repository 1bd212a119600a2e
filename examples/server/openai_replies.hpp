#pragma once
// The OpenAI API's replies as smol-server writes them, without HTTP: chat.completion objects and
// their stream chunks, text_completion objects, usage, logprobs and llama.cpp's "timings" (which
// chat front ends read). reply_adapters.hpp carries them over HTTP.

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "api_request.hpp"
#include "reply_ids.hpp"

namespace smol_server {

// The OpenAI API's finish_reason: "stop" for a natural end or a stop string, "length" when a
// limit cut the reply short, "tool_calls" when the turn ended with calls. Cancelled and
// failed generations have none (nullptr).
inline const char* openai_finish_reason(smol::FinishReason reason) {
    switch (reason) {
        case smol::FinishReason::end_of_generation:
        case smol::FinishReason::stop_string: return "stop";
        case smol::FinishReason::max_tokens:
        case smol::FinishReason::context_full: return "length";
        case smol::FinishReason::tool_calls: return "tool_calls";
        case smol::FinishReason::cancelled:
        case smol::FinishReason::error: return nullptr;
    }
    return nullptr;
}

inline json usage_json(const smol::GenerationUsage& u) {
    return json{{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens},
                {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
                {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

// llama.cpp's "timings" block, which chat front ends read for tokens/s.
inline json timings_json(const smol::GenerationUsage& u) {
    return json{{"cache_n", u.cached_tokens},
                {"prompt_n", u.prompt_evaluated()},
                {"prompt_ms", u.prompt_ms},
                {"prompt_per_second", u.prompt_tokens_per_second()},
                {"predicted_n", u.completion_tokens},
                {"predicted_ms", u.generation_ms},
                {"predicted_per_second", u.tokens_per_second()}};
}


// One tool call as the OpenAI API shapes it in message.tool_calls (delta.tool_calls adds "index").
inline json tool_call_json(const smol::ToolCall& call) {
    return json{{"id", "call_" + uuid_v7()},
                {"type", "function"},
                {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// One chat.completion.chunk of a streamed reply; finish_reason null until the last.
inline json chunk_json(const ReplyIds& ids, json delta, const char* finish_reason) {
    json choice = {{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", nullptr}};
    if (finish_reason) choice["finish_reason"] = finish_reason;
    return json{{"id", ids.id},
                {"object", "chat.completion.chunk"},
                {"created", ids.created},
                {"model", ids.model},
                {"choices", json::array({std::move(choice)})}};
}

// OpenAI's logprobs.content: per generated token its text, log-probability, UTF-8 bytes (a
// token may hold part of a character) and the most likely alternatives. `with_ids` adds each
// token's id, as llama-server's completion_probabilities have it.
inline json logprobs_json(std::span<const smol::TokenLogprob> entries, const smol::text::Tokenizer& tokenizer,
                          bool with_ids = false) {
    const auto token_fields = [&](std::int32_t id, float logprob) {
        const std::string& bytes = tokenizer.token_bytes(id);
        json byte_values = json::array();
        for (const char c : bytes) byte_values.push_back(int(static_cast<unsigned char>(c)));
        json fields = {{"token", bytes}, {"logprob", logprob}, {"bytes", std::move(byte_values)}};
        if (with_ids) fields["id"] = id;
        return fields;
    };
    json content = json::array();
    for (const smol::TokenLogprob& entry : entries) {
        json item = token_fields(entry.token, entry.logprob);
        json top = json::array();
        for (const smol::TokenAlternative& alt : entry.top) top.push_back(token_fields(alt.token, alt.logprob));
        item["top_logprobs"] = std::move(top);
        content.push_back(std::move(item));
    }
    return content;
}

// A choice's "logprobs": {content, refusal} when asked for, else null.
inline json choice_logprobs(bool requested, json content) {
    if (!requested) return nullptr;
    return json{{"content", std::move(content)}, {"refusal", nullptr}};
}

// The whole chat.completion object of a reply that finished (not cancelled, not failed).
// logprobs: choice_logprobs().
inline json completion_json(const ReplyIds& ids, const std::string& reasoning, const std::string& content,
                            json tool_calls, smol::FinishReason finish, const smol::GenerationUsage& usage,
                            json logprobs = nullptr) {
    json message = {{"role", "assistant"}, {"content", content}};
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) {
        if (content.empty()) message["content"] = nullptr;  // as OpenAI sends a call-only reply
        message["tool_calls"] = std::move(tool_calls);
    }
    json choice = {{"index", 0},
                   {"message", std::move(message)},
                   {"logprobs", std::move(logprobs)},
                   {"finish_reason", openai_finish_reason(finish)}};
    return json{{"id", ids.id},
                {"object", "chat.completion"},
                {"created", ids.created},
                {"model", ids.model},
                {"choices", json::array({std::move(choice)})},
                {"usage", usage_json(usage)},
                {"timings", timings_json(usage)}};
}

// The completions API's logprobs object for a run of tokens: parallel lists of the tokens, their
// log-probabilities, their alternatives ({token: logprob}) and their byte offsets in the
// completion, the first being `offset`.
inline json text_logprobs_json(std::span<const smol::TokenLogprob> entries, const smol::text::Tokenizer& tokenizer,
                               std::size_t offset) {
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
    for (const smol::TokenLogprob& entry : entries) {
        const std::string& bytes = tokenizer.token_bytes(entry.token);
        tokens.push_back(bytes);
        token_logprobs.push_back(entry.logprob);
        json alternatives = json::object();
        for (const smol::TokenAlternative& alt : entry.top) alternatives[tokenizer.token_bytes(alt.token)] = alt.logprob;
        top.push_back(std::move(alternatives));
        offsets.push_back(offset);
        offset += bytes.size();
    }
    return json{{"tokens", std::move(tokens)},
                {"token_logprobs", std::move(token_logprobs)},
                {"top_logprobs", std::move(top)},
                {"text_offset", std::move(offsets)}};
}

// One text_completion object: the whole reply (with usage) or, streamed, one chunk of it.
inline json text_completion_json(const ReplyIds& ids, const std::string& text, const char* finish_reason,
                                 json logprobs = nullptr) {
    json choice = {{"index", 0}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", nullptr}};
    if (finish_reason) choice["finish_reason"] = finish_reason;
    return json{{"id", ids.id},
                {"object", "text_completion"},
                {"created", ids.created},
                {"model", ids.model},
                {"choices", json::array({std::move(choice)})}};
}

}  // namespace smol_server
