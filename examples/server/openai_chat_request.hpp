#pragma once
// A /v1/chat/completions body (and llama-server's /apply-template) checked and turned into the
// ApiRequest the scheduler runs: messages through the chat template, chat_template_kwargs,
// tools, response_format, reasoning_effort and the logprobs fields. routes.hpp and
// completion_routes.hpp carry it over HTTP; tests/test_openai_api.cpp calls it directly.

#include <optional>
#include <string>
#include <string_view>

#include "api_request.hpp"
#include "llama_server_fields.hpp"
#include "openai_fields.hpp"
#include "reasoning_budget.hpp"
#include "sampling_fields.hpp"
#include "tool_fields.hpp"

namespace smol_server {

// ---- chat completion requests -----------------------------------------------------------------

// Content given as a list of parts ([{"type": "text", "text": ...}]) becomes one string, since
// the template renders only string content.
inline json normalize_messages(const json& body) {
    const json& list = message_list(body);
    json messages = json::array();
    for (std::size_t i = 0; i < list.size(); ++i) {
        json m = list[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) reject(400, where + " must be an object, found " + m.type_name(), "invalid_type");
        const auto role = m.find("role");
        if (role == m.end()) reject(400, where + " has no 'role'", "missing_role");
        if (!role->is_string()) reject(400, where + ".role must be a string, found " + role->type_name(), "invalid_type");
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "user" && r != "assistant" && r != "tool")
            reject(400, where + ".role '" + r + "' is unknown; expected system, user, assistant or tool", "invalid_role");
        auto content = m.find("content");
        // An assistant turn that only called tools may leave its content out.
        if (content == m.end() && r == "assistant" && m.contains("tool_calls")) content = m.emplace("content", nullptr).first;
        if (content == m.end()) reject(400, where + " has no 'content'", "missing_content");
        if (content->is_array()) {
            std::string joined;
            for (const auto& part : *content) {
                // value() with a json default: a part whose "type" is not a string is a 400, not a
                // type_error (a 500).
                if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
                    !part["text"].is_string())
                    reject(400, where + ".content: only text parts {\"type\": \"text\", \"text\": ...} are supported",
                           "invalid_content");
                joined += part["text"].get<std::string>();
            }
            *content = joined;
        } else if (!content->is_string() && !content->is_null()) {
            reject(400, where + ".content must be a string, a list of text parts or null, found " +
                            content->type_name(),
                   "invalid_type");
        }
        messages.push_back(std::move(m));
    }
    return messages;
}

// chat_template_kwargs into the template's options: enable_thinking, and tools given as
// xml_tools or python_tools. Whether thinking was asked for explicitly.
inline bool read_template_kwargs(const json& body, smol::ChatOptions& chat) {
    bool thinking_asked = false;
    if (const auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
        if (!kw->is_object())
            reject(400, std::string("'chat_template_kwargs' must be an object, found ") + kw->type_name(), "invalid_type");
        if (auto think = bool_field(*kw, "enable_thinking")) {
            chat.enable_thinking = *think;
            thinking_asked = *think;
        }
        // SmolLM3's template lists tools given as xml_tools or python_tools in its system turn.
        for (const char* name : {"xml_tools", "python_tools"}) {
            const auto tools = kw->find(name);
            if (tools == kw->end() || tools->is_null()) continue;
            if (!tools->is_array())
                reject(400, std::string("'chat_template_kwargs.") + name + "' must be a list of tool definitions, found " +
                                tools->type_name(),
                       "invalid_type");
            (std::string_view(name) == "xml_tools" ? chat.xml_tools : chat.python_tools) = *tools;
        }
    }
    return thinking_asked;
}

// The fields llama-server's /apply-template reads: the conversation and what shapes its template.
inline constexpr std::string_view kApplyTemplateFields[] = {"messages", "chat_template_kwargs", "tools", "tool_choice"};

// llama-server's POST /apply-template: the prompt a chat request with these messages, template
// options and tools would run, as text (rendered as parse_chat_request renders it).
inline json apply_template(const json& body) {
    reject_unlisted_fields(body, {kApplyTemplateFields});
    const json messages = normalize_messages(body);
    smol::ChatOptions chat;
    read_template_kwargs(body, chat);
    read_tools(body, chat);
    return json{{"prompt", render_chat_text(messages, chat).text}};
}

inline ApiRequest parse_chat_request(const json& body, const smol::text::Tokenizer& tokenizer, int context,
                                     const RequestDefaults& defaults = {}) {
    reject_unlisted_fields(body, {kSamplingFields, kChatFields, kLlamaServerFields});
    reject_unsupported_values(body);
    ApiRequest out = request_with(defaults);
    const json messages = normalize_messages(body);

    smol::ChatOptions chat;
    const bool thinking_asked = read_template_kwargs(body, chat);
    json offered;  // the tools a call may name under tool_choice "auto"
    const std::string forced_call = read_tools(body, chat, &offered);
    // A grammar holds the answer (or, under "auto", each call), after any reasoning.
    out.grammar = read_output_grammar(body);
    if (!forced_call.empty()) {
        if (!out.grammar.empty()) reject(400, "a forced tool call cannot be combined with response_format or grammar", "invalid_value");
        out.grammar = forced_call;
    }
    lazy_call_grammar(offered, "tools[].function.parameters", out);
    const std::optional<int> effort = effort_budget(body, "reasoning_effort", "reasoning_effort");
    if (effort == 0 && thinking_asked)
        reject(400, "'reasoning_effort' \"" + body["reasoning_effort"].get<std::string>() +
                        "\" turns thinking off, but 'chat_template_kwargs.enable_thinking' is true",
               "invalid_value");
    apply_reasoning_budget(effort, defaults.reasoning_budget, thinking_asked, chat, out);
    smol::GenerationParams& params = out.generation.params;
    // Calls are looked for whenever the template listed tools (here or in chat_template_kwargs).
    params.parse_tool_calls = chat.xml_tools.is_array() && !chat.xml_tools.empty();
    read_sampling(body, out, tokenizer);
    if (auto v = integer_field(body, "max_completion_tokens", 1, 1 << 30)) params.max_tokens = int(*v);  // the newer name wins
    out.logprobs = bool_field(body, "logprobs").value_or(false);
    auto top_logprobs = integer_field(body, "top_logprobs", 0, smol::kMaxTopLogprobs);
    if (top_logprobs && !out.logprobs) reject(400, "'top_logprobs' needs \"logprobs\": true", "invalid_value");
    if (const int n_probs = read_llama_server_fields(body, out, tokenizer); n_probs > 0) {
        if (body.contains("logprobs") && !out.logprobs)
            reject(400, "'n_probs' asks for log-probabilities and \"logprobs\" is false", "invalid_value");
        if (top_logprobs && *top_logprobs != n_probs)
            reject(400, "'n_probs' and 'top_logprobs' differ; give one", "invalid_value");
        out.logprobs = true;
        top_logprobs = n_probs;
    }
    params.logprobs = out.logprobs ? int(top_logprobs.value_or(0)) : -1;

    // Rendering comes last, so a bad field is reported even when the prompt is also too long.
    render_counted_prompt(messages, chat, tokenizer, out, context);

    return out;
}

}  // namespace smol_server
