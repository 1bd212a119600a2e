#pragma once
// OpenAI's Responses API as smol-server reads it, without HTTP: a /v1/responses (or
// /v1/responses/input_tokens) body checked and turned into the same ApiRequest the chat route
// builds (api_request.hpp); responses_replies.hpp writes the Response object and its SSE events.
// Stateless: nothing is stored, so `store`, `previous_response_id` and `conversation` are
// refused. routes.hpp and completion_routes.hpp carry it over HTTP; tests/test_responses_api.cpp
// calls it directly.
//
// The mapping onto SmolLM3:
//   instructions, system and developer messages -> the one system message, joined in order
//                                                  (the template reads only a leading one)
//   user and assistant messages (input_text / output_text parts) -> their turns
//   function_call items          -> the assistant turn's tool calls, as the template writes them
//   function_call_output items   -> "tool" turns, in the order they come
//   reasoning items handed back  -> dropped, as the template drops past reasoning
//   tools [{type: "function", name, description, parameters, strict}] and tool_choice
//                                -> the chat route's tools and call grammar (forced, or under
//                                "auto" started by the model's <tool_call>)
//   text.format json_object / json_schema -> the answer's grammar; with tools (tool_choice
//                                "auto") the reply is that JSON or one call
//   reasoning.effort "none"/"minimal" -> thinking off; "low"/"medium"/"high" -> on, with the
//                                budgets of reasoning_budget.hpp's effort_budget; absent -> the
//                                template's default (on) under --reasoning-budget

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api_request.hpp"
#include "outgoing_text.hpp"
#include "reasoning_budget.hpp"
#include "sampling_fields.hpp"
#include "smol/smol.hpp"
#include "tool_fields.hpp"

namespace smol_server {

// The top-level fields /v1/responses reads; any other is a 400 naming it. `prompt_cache_key`
// (Codex CLI sends one) asks for prefix caching, which smol-server does on its own: it changes
// no output. `speculative` is smol's own, as on every API that generates (read_sampling).
inline constexpr std::string_view kResponsesFields[] = {
    "model",  "input",    "instructions", "max_output_tokens", "temperature", "top_p",      "tools",
    "tool_choice", "parallel_tool_calls", "text", "reasoning", "metadata",   "stream",      "store",
    "user",   "truncation", "include",    "prompt_cache_key", "client_metadata", "speculative", "cache_salt"};
// /v1/responses/input_tokens reads what shapes the prompt (OpenAI's own list, less what is stored).
inline constexpr std::string_view kInputTokensFields[] = {
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text", "reasoning", "truncation"};

// The most items `input` may hold (the body's size bounds them too; this bounds the work).
inline constexpr std::size_t kMaxInputItems = 4096;

// A message's content (a string, or a list of input_text / output_text parts) as one string;
// the parts are joined as the chat route joins them.
inline std::string response_content_text(const json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array())
        reject(400, where + " must be a string or a list of input_text parts, found " + content.type_name(), "invalid_type");
    std::string joined;
    for (std::size_t i = 0; i < content.size(); ++i) {
        const json& part = content[i];
        const std::string at = where + "[" + std::to_string(i) + "]";
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
            reject(400, at + " must be a content part with a 'type'", "invalid_content");
        const std::string& type = part["type"].get_ref<const std::string&>();
        if (type == "input_text") check_fields(part, {"type", "text"}, at);
        else if (type == "output_text") check_fields(part, {"type", "text", "annotations", "logprobs"}, at);
        else if (type == "input_image" || type == "input_file" || type == "input_audio")
            unsupported(at, "is an " + type + " part: SmolLM3 reads text only");
        else
            reject(400, at + " has type \"" + type + "\"; input_text or output_text expected", "invalid_content");
        joined += string_member(part, "text", at);
    }
    return joined;
}

// A function_call item's arguments (a JSON text) as the object the template writes back.
inline json call_arguments(const json& item, const std::string& where) {
    const std::string& text = string_member(item, "arguments", where);
    json arguments;
    try {
        arguments = smol::parse_json(text, where + ".arguments");
    } catch (const smol::JsonError& e) {
        if (e.over_limits) reject(400, e.what(), "json_too_complex");
    }
    if (!arguments.is_object())
        reject(400, where + ".arguments must be a JSON object in a string, found " + loggable(text), "invalid_value");
    return arguments;
}

// One item of `input` (`where` names it) added to the turns, or its text to the system text.
inline void add_input_item(json& turns, SystemText& system, const json& item, const std::string& where) {
    if (!item.is_object()) reject(400, where + " must be an object, found " + item.type_name(), "invalid_type");
    const auto type_it = item.find("type");
    if (type_it != item.end() && !type_it->is_string())
        reject(400, where + ".type must be a string", "invalid_type");
    // A message may leave its type out (OpenAI's "easy input message").
    const std::string type = type_it == item.end() ? "message" : type_it->get<std::string>();
    // The assistant turn the function_call items join: the last turn, when it is one.
    const auto open_assistant_turn = [&]() -> json& {
        if (turns.empty() || turns.back()["role"] != "assistant")
            turns.push_back({{"role", "assistant"}, {"content", ""}});
        return turns.back();
    };
    if (type == "message") {
        check_fields(item, {"type", "role", "content", "id", "status", "phase"}, where);
        const std::string& role = string_member(item, "role", where);
        const auto content = item.find("content");
        if (content == item.end()) reject(400, where + " has no 'content'", "missing_content");
        const std::string text = response_content_text(*content, where + ".content");
        if (role == "system" || role == "developer") system.add(text);
        else if (role == "user") turns.push_back({{"role", "user"}, {"content", text}});
        else if (role == "assistant") {
            json& turn = open_assistant_turn();
            // Text after the turn's calls would be written before them; keep the order.
            if (turn.contains("tool_calls")) turns.push_back({{"role", "assistant"}, {"content", text}});
            else turn["content"] = turn["content"].get<std::string>() + text;
        } else
            reject(400,
                   where + ".role must be \"user\", \"assistant\", \"system\" or \"developer\", found \"" +
                       role + "\"",
                   "invalid_role");
    } else if (type == "function_call") {
        check_fields(item, {"type", "id", "call_id", "name", "arguments", "status"}, where);
        string_member(item, "call_id", where);
        check_tool_name(item.value("name", json()), where + ".name");
        json call = {{"type", "function"},
                     {"function", {{"name", item["name"]}, {"arguments", call_arguments(item, where)}}}};
        json& turn = open_assistant_turn();
        if (!turn.contains("tool_calls")) turn["tool_calls"] = json::array();
        turn["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
        check_fields(item, {"type", "id", "call_id", "output", "status"}, where);
        string_member(item, "call_id", where);
        const auto output = item.find("output");
        if (output == item.end()) reject(400, where + " has no 'output'", "missing_output");
        turns.push_back({{"role", "tool"}, {"content", response_content_text(*output, where + ".output")}});
    } else if (type == "reasoning") {
        // Reasoning handed back from an earlier turn: SmolLM3's template shows the model
        // no past reasoning, so it is dropped here as the template would drop it.
        check_fields(item, {"type", "id", "summary", "content", "encrypted_content", "status"}, where);
    } else if (type == "item_reference") {
        unsupported(where + ".type", "is \"item_reference\": smol-server stores no items to refer to");
    } else {
        unsupported(where + ".type",
                    "is \"" + type + "\": smol-server reads message, function_call, function_call_output and "
                                     "reasoning items");
    }
}

// `instructions` and `input` as chat-template messages: one system message first (when any
// system text was given), then the turns.
inline json response_messages(const json& body) {
    SystemText system;
    if (const auto it = body.find("instructions"); it != body.end() && !it->is_null()) {
        if (!it->is_string())
            reject(400, std::string("'instructions' must be a string, found ") + it->type_name(), "invalid_type");
        system.add(it->get<std::string>());
    }
    const auto input = body.find("input");
    if (input == body.end() || input->is_null())
        reject(400, "'input' is required: a string or a list of input items (smol-server stores no earlier responses)",
               "missing_input");
    json turns = json::array();
    if (input->is_string()) {
        turns.push_back({{"role", "user"}, {"content", *input}});
    } else if (input->is_array()) {
        if (input->size() > kMaxInputItems)
            reject(400, "'input' holds " + std::to_string(input->size()) + " items; at most " +
                            std::to_string(kMaxInputItems) + " are accepted",
                   "invalid_value");
        for (std::size_t i = 0; i < input->size(); ++i) {
            add_input_item(turns, system, (*input)[i], "input[" + std::to_string(i) + "]");
        }
    } else {
        reject(400, std::string("'input' must be a string or a list of input items, found ") + input->type_name(),
               "invalid_type");
    }
    if (turns.empty()) reject(400, "'input' holds no user, assistant or tool turn; at least one is needed", "invalid_value");
    return system.before(std::move(turns));
}

// `tools` (function tools: {type, name, description, parameters, strict}) and `tool_choice`
// into the template's tool list; returns the grammar of a forced call, else "". `functions`
// receives the definitions, for a grammar that allows a call beside a JSON answer.
inline std::string read_response_tools(const json& body, smol::ChatOptions& chat, json& functions) {
    functions = read_tool_list(body, [](const json& tool, const std::string& where) {
        if (!tool.is_object() || !tool.contains("type") || !tool["type"].is_string())
            reject(400, where + " must be a tool definition with a 'type'", "invalid_value");
        const std::string& type = tool["type"].get_ref<const std::string&>();
        // Hosted tools (web_search, file_search, code_interpreter, ...) run on OpenAI's side.
        if (type != "function") unsupported(where + ".type", "is \"" + type + "\": smol-server has only function tools");
        check_fields(tool, {"type", "name", "description", "parameters", "strict"}, where);
        json function = named_function(tool, where);
        const auto parameters = tool.find("parameters");
        if (parameters == tool.end() || parameters->is_null())
            function["parameters"] = json{{"type", "object"}, {"properties", json::object()}};
        else if (parameters->is_object()) function["parameters"] = *parameters;
        else reject(400, where + ".parameters must be a JSON schema object", "invalid_type");
        bool_field(tool, "strict");  // the grammar holds a forced call to the schema either way
        return function;
    });
    ToolChoice choice = ToolChoice::automatic;
    json forced_name;
    if (const auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
        if (c->is_string()) {
            const std::string& name = c->get_ref<const std::string&>();
            if (name == "auto") choice = ToolChoice::automatic;
            else if (name == "none") choice = ToolChoice::none;
            else if (name == "required") choice = ToolChoice::any;
            else
                reject(400,
                       "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}, "
                       "found \"" + name + "\"",
                       "invalid_value");
        } else if (c->is_object()) {
            const json type = c->value("type", json());
            if (type != "function")
                unsupported("tool_choice.type", "is " + type.dump() + ": smol-server forces only function calls");
            check_fields(*c, {"type", "name"}, "tool_choice");
            forced_name = c->value("name", json());
            if (!forced_name.is_string()) reject(400, "'tool_choice.name' must name the function to call", "invalid_value");
            choice = ToolChoice::named;
        } else {
            reject(400, std::string("'tool_choice' must be a string or an object, found ") + c->type_name(), "invalid_type");
        }
    }
    return tools_into_template(functions, choice, forced_name, "tools[].parameters", chat);
}

// `text`: {format: {type: "text" | "json_object" | "json_schema", ...}, verbosity}; the grammar
// a JSON format asks for, else "".
inline std::string read_text_format(const json& body) {
    const auto text = body.find("text");
    if (text == body.end() || text->is_null()) return "";
    if (!text->is_object()) reject(400, std::string("'text' must be an object, found ") + text->type_name(), "invalid_type");
    check_fields(*text, {"format", "verbosity"}, "text");
    // SmolLM3 has no verbosity control: only the default is honoured.
    if (const auto v = text->find("verbosity"); v != text->end() && !v->is_null() && *v != "medium")
        unsupported("text.verbosity", "is " + v->dump() + ": only \"medium\" (the default) is supported");
    const auto format = text->find("format");
    if (format == text->end() || format->is_null()) return "";
    if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
        reject(400, "'text.format' must be an object with a 'type': text, json_object or json_schema", "invalid_value");
    const std::string& type = (*format)["type"].get_ref<const std::string&>();
    if (type == "text") {
        check_fields(*format, {"type"}, "text.format");
        return "";
    }
    if (type == "json_object") {
        check_fields(*format, {"type"}, "text.format");
        return json_answer_grammar(nullptr, "text.format");
    }
    if (type != "json_schema")
        reject(400, "'text.format.type' must be \"text\", \"json_object\" or \"json_schema\", found \"" + type + "\"",
               "invalid_value");
    check_fields(*format, {"type", "name", "schema", "strict", "description"}, "text.format");
    if (const auto name = format->find("name"); name != format->end() && !name->is_string())
        reject(400, "'text.format.name' must be a string", "invalid_type");
    bool_field(*format, "strict");  // the grammar holds the answer to the schema either way
    const auto schema = format->find("schema");
    if (schema == format->end() || !schema->is_object())
        reject(400, "'text.format.schema' must be a JSON schema object", "invalid_value");
    return json_answer_grammar(*schema, "text.format.schema");
}

// `reasoning`: {effort, summary}: the thinking budget the effort names (0: thinking off);
// nullopt when no effort was given (the template's default).
inline std::optional<int> read_reasoning(const json& body) {
    const auto it = body.find("reasoning");
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_object()) reject(400, std::string("'reasoning' must be an object, found ") + it->type_name(), "invalid_type");
    check_fields(*it, {"effort", "summary"}, "reasoning");
    // No summary is written; the reasoning comes back whole as reasoning_text.
    if (const auto s = it->find("summary");
        s != it->end() && !s->is_null() && *s != "auto" && *s != "concise" && *s != "detailed")
        reject(400, "'reasoning.summary' must be \"auto\", \"concise\" or \"detailed\", found " + s->dump(), "invalid_value");
    const auto effort = it->find("effort");
    if (effort == it->end() || effort->is_null()) return std::nullopt;
    if (*effort == "none" || *effort == "minimal" || *effort == "low" || *effort == "medium" || *effort == "high")
        return effort_budget(*it, "effort", "reasoning.effort");
    unsupported("reasoning.effort", "is " + effort->dump() + ": use \"none\", \"minimal\", \"low\", \"medium\" or \"high\"");
}

// The fields that change no output but are still checked: metadata, client_metadata (Codex
// CLI's, opaque), user, store, truncation, include, prompt_cache_key.
inline void check_response_extras(const json& body) {
    if (const auto it = body.find("client_metadata"); it != body.end() && !it->is_null() && !it->is_object())
        reject(400, std::string("'client_metadata' must be an object, found ") + it->type_name(), "invalid_type");
    if (const auto it = body.find("metadata"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) reject(400, std::string("'metadata' must be an object, found ") + it->type_name(), "invalid_type");
        if (it->size() > 16) reject(400, "'metadata' holds at most 16 pairs", "invalid_value");
        for (const auto& item : it->items()) {
            if (item.key().size() > 64) reject(400, "'metadata' keys may be at most 64 bytes long", "invalid_value");
            if (!item.value().is_string() || item.value().get_ref<const std::string&>().size() > 512)
                reject(400, "'metadata." + loggable(item.key()) + "' must be a string of at most 512 bytes", "invalid_value");
        }
    }
    for (const char* name : {"user", "prompt_cache_key"})
        if (const auto it = body.find(name); it != body.end() && !it->is_null() &&
                                               (!it->is_string() || it->get_ref<const std::string&>().size() > 1024))
            reject(400, std::string("'") + name + "' must be a string of at most 1024 bytes", "invalid_value");
    if (!absent_or(body, "store", false))
        unsupported("store", "must be false or absent: smol-server stores no responses");
    if (!absent_or(body, "truncation", "disabled"))
        unsupported("truncation", "must be \"disabled\" or absent: a prompt longer than the context is a 400");
    if (const auto it = body.find("include"); it != body.end() && !it->is_null()) {
        if (!it->is_array()) reject(400, std::string("'include' must be a list, found ") + it->type_name(), "invalid_type");
        // Codex CLI asks for reasoning.encrypted_content, to hand reasoning back next turn
        // without a stored response. smol-server keeps no state and SmolLM3's template leaves
        // earlier reasoning out, so there is nothing to carry: the items come without it.
        for (std::size_t i = 0; i < it->size(); ++i)
            if ((*it)[i] != "reasoning.encrypted_content")
                unsupported("include[" + std::to_string(i) + "]",
                            "is " + (*it)[i].dump().substr(0, 64) + ", which smol-server does not produce");
    }
}

// A GBNF grammar with every rule name given `prefix`, so two grammars can live in one: names
// are renamed where they are defined and referenced, never inside literals, character classes,
// repetition counts or comments.
inline std::string prefix_rule_names(std::string_view grammar, std::string_view prefix) {
    const auto name_char = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    };
    std::string out;
    std::size_t i = 0;
    while (i < grammar.size()) {
        const char c = grammar[i];
        if (c == '"' || c == '[') {  // a literal or a class, escapes and all
            const char close = c == '"' ? '"' : ']';
            std::size_t end = i + 1;
            while (end < grammar.size() && grammar[end] != close) end += grammar[end] == '\\' ? 2 : 1;
            end = std::min(end + 1, grammar.size());
            out.append(grammar.substr(i, end - i));
            i = end;
        } else if (c == '{' || c == '#') {  // a count, or a comment to the line's end
            const std::size_t end = std::min(grammar.find(c == '{' ? '}' : '\n', i), grammar.size());
            out.append(grammar.substr(i, end - i));
            i = end;
        } else if (name_char(c)) {
            std::size_t end = i;
            while (end < grammar.size() && name_char(grammar[end])) ++end;
            out.append(prefix).append(grammar.substr(i, end - i));
            i = end;
        } else {
            out += c;
            ++i;
        }
    }
    return out;
}

// The grammar of a reply that is either the JSON answer `answer` asks for or one call of one of
// `functions` (a text.format with tools and tool_choice "auto": both hold).
inline std::string answer_or_call_grammar(const std::string& answer, const json& functions) {
    smol::ChatOptions scratch;
    const std::string call = tools_into_template(functions, ToolChoice::any, json(), "tools[].parameters", scratch);
    return "root ::= answer-root | call-root\n" + prefix_rule_names(answer, "answer-") + "\n" +
           prefix_rule_names(call, "call-") + "\n";
}

enum class ResponsesEndpoint { create, input_tokens };

// A /v1/responses (or /v1/responses/input_tokens) body as the request the scheduler runs. For
// input_tokens only the prompt is built and counted, and a prompt longer than the context is
// still counted.
inline ApiRequest parse_responses_request(const json& body, const smol::text::Tokenizer& tokenizer, int context,
                                          ResponsesEndpoint endpoint = ResponsesEndpoint::create,
                                          const RequestDefaults& defaults = {}) {
    const bool create = endpoint == ResponsesEndpoint::create;
    reject_unlisted_fields(body, {create ? FieldNames(kResponsesFields) : FieldNames(kInputTokensFields)}, "",
                           "smol-server's Responses API");
    ApiRequest out = request_with(defaults);
    check_response_extras(body);
    bool_field(body, "parallel_tool_calls");
    if (create) {
        read_sampling(body, out, tokenizer);  // temperature, top_p, stream, speculative
        if (auto v = integer_field(body, "max_output_tokens", 1, 1 << 30)) out.generation.params.max_tokens = int(*v);
    }
    const json messages = response_messages(body);

    smol::ChatOptions chat;
    const std::optional<int> effort = read_reasoning(body);
    json functions;
    const std::string forced_call = read_response_tools(body, chat, functions);
    const std::string format = read_text_format(body);
    // A forced reply is a call, which the format does not govern; with tools on offer the
    // reply may be the formatted answer or a call.
    if (!forced_call.empty()) out.grammar = forced_call;
    else if (!format.empty() && chat.xml_tools.is_array() && !chat.xml_tools.empty())
        out.grammar = answer_or_call_grammar(format, functions);
    else out.grammar = format;
    const bool offered = chat.xml_tools.is_array() && !chat.xml_tools.empty();
    // Otherwise, under "auto", each call the model starts with <tool_call> follows its schema.
    if (offered) lazy_call_grammar(functions, "tools[].parameters", out);
    // Reasoning comes before any of these grammars.
    apply_reasoning_budget(effort, defaults.reasoning_budget, /*thinking_asked=*/false, chat, out);
    out.generation.params.parse_tool_calls = offered;

    render_counted_prompt(messages, chat, tokenizer, out, context, create ? PromptUse::generate : PromptUse::count);
    return out;
}

}  // namespace smol_server
