#pragma once
// ollama's native API as smol-server reads it, without HTTP: /api/chat and /api/generate bodies
// checked and turned into the same ApiRequest the OpenAI chat route builds (api_request.hpp).
// ollama_replies.hpp writes the replies and errors, ollama_model_info.hpp what /api/tags,
// /api/show and /api/ps say of the model. ollama_routes.hpp and completion_routes.hpp carry them
// over HTTP; tests/test_ollama_api.cpp calls them directly.
//
// The mapping onto SmolLM3:
//   messages [{role, content}]           -> the conversation; system messages anywhere are joined
//                                           into the leading one (the template reads only that)
//   messages[].tool_calls (arguments as an object), role "tool" (tool_name dropped: the template
//                                           does not name the tool in a result turn)
//   messages[].thinking                  -> dropped, as the template drops earlier reasoning
//   generate: system + prompt            -> a system and a user turn through the template;
//             raw: true                  -> the prompt continued as it is (as /v1/completions)
//   tools [{type: "function", function}] -> the chat route's tools (ollama has no tool_choice)
//   think true / false                   -> enable_thinking; absent: the template's default (on)
//   format "json" / a JSON schema        -> the chat route's json_object / json_schema grammar
//   options                              -> the sampler, max tokens and a context cap (kOllamaOptions)
//   keep_alive                           -> checked, then nothing: the model stays loaded while the
//                                           server runs

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "api_request.hpp"
#include "reasoning_budget.hpp"
#include "sampling_fields.hpp"
#include "smol/smol.hpp"
#include "tool_fields.hpp"

namespace smol_server {

// The top-level fields /api/chat and /api/generate read; any other is a 400 naming it.
// `speculative` and `cache_salt` are smol's own, as on every API that generates.
inline constexpr std::string_view kOllamaChatFields[] = {"model",  "messages",   "tools", "format",      "options",
                                                         "stream", "keep_alive", "think", "speculative", "cache_salt"};
inline constexpr std::string_view kOllamaGenerateFields[] = {
    "model",  "prompt",     "system", "suffix",      "template",  "context", "raw",    "images",
    "format", "options",    "stream", "keep_alive",  "think",     "speculative", "cache_salt"};
// The `options` that map onto smol: the sampler's (read_sampling's names), num_predict (the
// reply's length), num_ctx (a cap on prompt and reply together, up to the server's context) and
// repeat_last_n (the penalties' window). The others (tfs_z, num_gpu, num_thread, ...) are a 400
// naming them.
inline constexpr std::string_view kOllamaOptions[] = {
    "num_ctx",        "num_predict",      "temperature",       "top_k",        "top_p", "min_p", "seed",
    "stop",           "repeat_penalty",   "presence_penalty",  "frequency_penalty", "repeat_last_n",
    "typical_p",      "mirostat",         "mirostat_tau",      "mirostat_eta"};

inline constexpr const char* kOllamaReader = "smol-server's ollama API";

enum class OllamaEndpoint { chat, generate };

// `keep_alive`: how long ollama keeps the model loaded after the request, as seconds (a number)
// or a Go duration ("5m", "1h30m", "-1", "0"). smol-server keeps its one model loaded while it
// runs, whatever it says; a value of neither form is still a 400, as ollama gives.
inline void check_keep_alive(const json& body) {
    const auto it = body.find("keep_alive");
    if (it == body.end() || it->is_null()) return;
    if (it->is_number()) {
        if (!std::isfinite(it->get<double>())) reject(400, "'keep_alive' must be a finite number of seconds", "invalid_value");
        return;
    }
    const auto bad = [&] {
        reject(400,
               "'keep_alive' must be a number of seconds or a duration such as \"5m\", \"1h30m\" or \"-1\", found " +
                   it->dump().substr(0, 64),
               "invalid_value");
    };
    if (!it->is_string()) bad();
    const std::string& text = it->get_ref<const std::string&>();
    if (text.empty() || text.size() > 64) bad();
    std::size_t at = text[0] == '-' || text[0] == '+' ? 1 : 0;
    const auto digits = [&] {
        const std::size_t from = at;
        while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
        return at > from;
    };
    // A plain number of seconds, or number-unit pairs (Go's time.ParseDuration).
    if (!digits()) bad();
    if (at < text.size() && text[at] == '.') {
        ++at;
        digits();
    }
    if (at == text.size()) return;
    while (at < text.size()) {
        static constexpr std::string_view kUnits[] = {"ns", "us", "\xC2\xB5s", "ms", "s", "m", "h"};
        bool unit = false;
        for (const std::string_view u : kUnits)
            if (text.compare(at, u.size(), u) == 0 && !(u == "m" && text.compare(at, 2, "ms") == 0)) {
                at += u.size();
                unit = true;
                break;
            }
        if (!unit) bad();
        if (at == text.size()) return;
        if (!digits()) bad();
        if (at < text.size() && text[at] == '.') {
            ++at;
            digits();
        }
    }
}

// `think`: true or false turn SmolLM3's reasoning on or off; absent or null leave the template's
// default (on). ollama's levels ("low", "medium", "high") are for models that reason by degree.
inline std::optional<bool> read_think(const json& body) {
    const auto it = body.find("think");
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (it->is_boolean()) return it->get<bool>();
    if (it->is_string())
        unsupported("think", "as a level (" + it->dump().substr(0, 32) +
                                 ") is not supported: SmolLM3 reasons or does not, so send true or false");
    reject(400, std::string("'think' must be true or false, found ") + it->type_name(), "invalid_type");
}

// `format`: "json" (any JSON object) or a JSON schema the reply must follow, as GBNF; "" or
// absent for free text.
inline std::string read_ollama_format(const json& body) {
    const auto it = body.find("format");
    if (it == body.end() || it->is_null()) return "";
    if (it->is_object()) return json_answer_grammar(*it, "format");
    if (it->is_string()) {
        const std::string& format = it->get_ref<const std::string&>();
        if (format.empty()) return "";
        if (format == "json") return json_answer_grammar(nullptr, "format");
        reject(400, "'format' must be \"json\" or a JSON schema object, found " + it->dump().substr(0, 64), "invalid_value");
    }
    reject(400, std::string("'format' must be \"json\" or a JSON schema object, found ") + it->type_name(), "invalid_type");
}

// `options`, checked and applied to `out`; returns num_ctx when it was given. The sampler's
// options have read_sampling's names and checks (its errors say they were in 'options').
inline std::optional<int> read_ollama_options(const json& body, ApiRequest& out, const smol::text::Tokenizer& tokenizer,
                                              int context) {
    json options = json::object();
    if (const auto it = body.find("options"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) reject(400, std::string("'options' must be an object, found ") + it->type_name(), "invalid_type");
        reject_unlisted_fields(*it, {kOllamaOptions}, "options", kOllamaReader);
        options = *it;
    }
    const auto in_options = [](auto read) {
        try {
            return read();
        } catch (ApiError& e) {
            e.message = "in 'options': " + e.message;
            throw;
        }
    };
    smol::GenerationParams& params = out.generation.params;
    const auto num_predict = in_options([&] { return integer_field(options, "num_predict", -2, 1 << 30); });
    const auto num_ctx = in_options([&] { return integer_field(options, "num_ctx", 1, 1 << 30); });
    const auto last_n = in_options([&] { return integer_field(options, "repeat_last_n", -1, context); });
    for (const char* name : {"num_predict", "num_ctx", "repeat_last_n"}) options.erase(name);
    in_options([&] {
        read_sampling(options, out, tokenizer);
        return 0;
    });
    // -1 (ollama's default) and -2 (fill the context) both run until the end or a full context.
    if (num_predict == 0) reject(400, "'options.num_predict' must be at least 1, or -1 for no limit", "invalid_value");
    if (num_predict) params.max_tokens = *num_predict < 0 ? -1 : int(*num_predict);
    if (num_ctx && *num_ctx > context)
        unsupported("options.num_ctx", "is " + std::to_string(*num_ctx) + " tokens, more than this server's context of " +
                                           std::to_string(context) + " per conversation (start it with -c " +
                                           std::to_string(*num_ctx) + " for more)");
    // -1: the whole context, as ollama reads it.
    if (last_n) params.sampling.penalty_last_n = *last_n < 0 ? int(num_ctx.value_or(context)) : int(*last_n);
    return num_ctx ? std::optional<int>(int(*num_ctx)) : std::nullopt;
}

// num_ctx as ollama means it: the prompt and the reply together fit in it.
inline void apply_num_ctx(ApiRequest& out, std::optional<int> num_ctx) {
    if (!num_ctx) return;
    const std::size_t n_prompt = out.generation.prompt.size();
    if (!smol::prompt_fits(n_prompt, *num_ctx))
        reject(400, smol::prompt_too_long_message(n_prompt, *num_ctx) + " ('options.num_ctx')", "context_length_exceeded");
    int& max_tokens = out.generation.params.max_tokens;
    const int room = *num_ctx - int(n_prompt);
    max_tokens = max_tokens < 0 ? room : std::min(max_tokens, room);
}

// Images go to multimodal models; SmolLM3 reads text only. An empty list asks for nothing.
inline void refuse_images(const json& object, const std::string& field) {
    const auto it = object.find("images");
    if (it == object.end() || it->is_null() || (it->is_array() && it->empty())) return;
    unsupported(field, "holds images: SmolLM3 reads text only, so smol-server's ollama API takes none");
}

// An assistant message's tool_calls ([{"function": {"name", "arguments": {...}}}]) as the
// template writes calls.
inline json ollama_message_calls(const json& calls, const std::string& where) {
    if (!calls.is_array()) reject(400, where + " must be a list of tool calls, found " + calls.type_name(), "invalid_type");
    json out = json::array();
    for (std::size_t i = 0; i < calls.size(); ++i) {
        const json& call = calls[i];
        const std::string at = where + "[" + std::to_string(i) + "]";
        if (!call.is_object()) reject(400, at + " must be {\"function\": {\"name\", \"arguments\"}}", "invalid_value");
        check_fields(call, {"function", "id", "type"}, at);
        const auto function = call.find("function");
        if (function == call.end() || !function->is_object())
            reject(400, at + ".function must be an object with the name and arguments", "invalid_value");
        check_fields(*function, {"name", "arguments", "index"}, at + ".function");
        check_tool_name(function->value("name", json()), at + ".function.name");
        json arguments = json::object();
        if (const auto a = function->find("arguments"); a != function->end() && !a->is_null()) {
            if (!a->is_object())
                reject(400, at + ".function.arguments must be an object of the call's arguments, found " + a->type_name(),
                       "invalid_value");
            arguments = *a;
        }
        out.push_back({{"type", "function"}, {"function", {{"name", (*function)["name"]}, {"arguments", std::move(arguments)}}}});
    }
    return out;
}

// /api/chat's messages as the template's: system messages joined into the leading one.
inline json ollama_messages(const json& body) {
    const json& list = message_list(body, /*null_is_absent=*/true);
    SystemText system;
    json turns = json::array();
    for (std::size_t i = 0; i < list.size(); ++i) {
        const json& m = list[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) reject(400, where + " must be an object, found " + m.type_name(), "invalid_type");
        check_fields(m, {"role", "content", "thinking", "images", "tool_calls", "tool_name"}, where);
        const std::string& role = string_member(m, "role", where);
        if (role != "system" && role != "user" && role != "assistant" && role != "tool")
            reject(400, where + ".role '" + role + "' is unknown; expected system, user, assistant or tool", "invalid_role");
        std::string content;
        if (const auto c = m.find("content"); c != m.end() && !c->is_null()) {
            if (!c->is_string()) reject(400, where + ".content must be a string, found " + c->type_name(), "invalid_type");
            content = c->get<std::string>();
        }
        refuse_images(m, where + ".images");
        for (const char* text_field : {"thinking", "tool_name"})
            if (const auto t = m.find(text_field); t != m.end() && !t->is_null() && !t->is_string())
                reject(400, where + "." + text_field + " must be a string, found " + t->type_name(), "invalid_type");
        const auto calls = m.find("tool_calls");
        const bool has_calls = calls != m.end() && !calls->is_null();
        if (has_calls && role != "assistant") reject(400, where + ".tool_calls is for assistant messages only", "invalid_value");
        if (role == "system") {
            system.add(content);
            continue;
        }
        json turn = {{"role", role}, {"content", std::move(content)}};
        if (has_calls) {
            json template_calls = ollama_message_calls(*calls, where + ".tool_calls");
            if (!template_calls.empty()) turn["tool_calls"] = std::move(template_calls);
        }
        turns.push_back(std::move(turn));
    }
    if (turns.empty())
        reject(400, "'messages' holds only system messages; at least one user, assistant or tool message is needed",
               "invalid_value");
    return system.before(std::move(turns));
}

// What chat and generate share once their prompt is rendered: sampling options, the context
// cap, streaming (on unless "stream": false, as ollama streams by default) and `speculative`.
inline void read_ollama_common(const json& body, ApiRequest& out, std::optional<int> num_ctx) {
    apply_num_ctx(out, num_ctx);
    out.stream = bool_field(body, "stream").value_or(true);
    out.generation.speculative = bool_field(body, "speculative");
    out.prompt_tokens = int(out.generation.prompt.size());
}

// The output grammar and the thinking mode together: `think` as asked (absent: the template's
// default, on, unless --reasoning-budget is 0), the server's --reasoning-budget over the
// reasoning, and a `format` grammar holding the answer after it (as on the chat route).
inline void settle_format_and_think(const json& body, ApiRequest& out, smol::ChatOptions& chat,
                                    const RequestDefaults& defaults) {
    const std::optional<bool> think = read_think(body);
    if (think) chat.enable_thinking = *think;
    out.grammar = read_ollama_format(body);
    apply_reasoning_budget(std::nullopt, defaults.reasoning_budget, think == true, chat, out);
}

// A /api/chat body as the request the scheduler runs.
inline ApiRequest parse_ollama_chat_request(const json& body, const smol::text::Tokenizer& tokenizer, int context,
                                            const RequestDefaults& defaults = {}) {
    reject_unlisted_fields(body, {kOllamaChatFields}, "", kOllamaReader);
    optional_string(body, "model");
    check_keep_alive(body);
    ApiRequest out = request_with(defaults);
    const json messages = ollama_messages(body);
    smol::ChatOptions chat;
    json offered;
    read_tools(body, chat, &offered);  // ollama has no tool_choice: the model calls a tool or answers
    settle_format_and_think(body, out, chat, defaults);
    lazy_call_grammar(offered, "tools[].function.parameters", out);  // each call follows its schema
    out.generation.params.parse_tool_calls = chat.xml_tools.is_array() && !chat.xml_tools.empty();
    const std::optional<int> num_ctx = read_ollama_options(body, out, tokenizer, context);
    render_counted_prompt(messages, chat, tokenizer, out, context);
    read_ollama_common(body, out, num_ctx);
    return out;
}

// A /api/generate body as the request the scheduler runs: `system` and `prompt` through the chat
// template, or with raw: true the prompt continued as it is (its special tokens parsed, as
// /v1/completions does, since the client wrote the whole template).
inline ApiRequest parse_ollama_generate_request(const json& body, const smol::text::Tokenizer& tokenizer, int context,
                                                const RequestDefaults& defaults = {}) {
    reject_unlisted_fields(body, {kOllamaGenerateFields}, "", kOllamaReader);
    optional_string(body, "model");
    check_keep_alive(body);
    refuse_images(body, "images");
    if (!absent_or(body, "suffix", "")) unsupported("suffix", "is not supported: SmolLM3 has no fill-in-the-middle tokens");
    if (!absent_or(body, "template", ""))
        unsupported("template", "is not supported: smol-server renders prompts with the model's own chat template");
    if (!absent_or(body, "context", json::array()))
        unsupported("context", "is not supported: send the conversation to /api/chat, whose cached prefix is reused");
    const std::optional<std::string> prompt = optional_string(body, "prompt");
    if (!prompt || prompt->empty()) reject(400, "'prompt' is required: the text to answer", "missing_prompt");
    const std::optional<std::string> system = optional_string(body, "system");
    const bool raw = bool_field(body, "raw").value_or(false);
    ApiRequest out = request_with(defaults);
    smol::GenerationParams& params = out.generation.params;
    std::optional<int> num_ctx;
    if (raw) {
        if (system && !system->empty())
            reject(400, "'system' cannot be used with \"raw\": true: a raw prompt is not put in the template", "invalid_value");
        if (body.contains("think") && !body["think"].is_null())
            reject(400, "'think' cannot be used with \"raw\": true: a raw prompt is continued as it is, thinking blocks "
                        "included",
                   "invalid_value");
        out.grammar = read_ollama_format(body);
        params.split_reasoning = false;
        num_ctx = read_ollama_options(body, out, tokenizer, context);
        out.generation.prompt = tokenizer.encode(*prompt, /*parse_special=*/true);
    } else {
        smol::ChatOptions chat;
        settle_format_and_think(body, out, chat, defaults);
        num_ctx = read_ollama_options(body, out, tokenizer, context);
        SystemText system_text;
        if (system) system_text.add(*system);
        render_prompt(system_text.before(json::array({{{"role", "user"}, {"content", *prompt}}})), chat, tokenizer, out);
    }
    check_prompt_fits(out, context);
    read_ollama_common(body, out, num_ctx);
    return out;
}

// A request that only asks for the model to be loaded (ollama's documented way to preload or,
// with keep_alive 0, unload): /api/chat with an empty `messages`, /api/generate with no prompt.
// Its fields are still checked. smol-server's model is always loaded, so the answer is "load".
inline bool is_load_request(const json& body, OllamaEndpoint endpoint) {
    const bool chat = endpoint == OllamaEndpoint::chat;
    reject_unlisted_fields(body, {chat ? FieldNames(kOllamaChatFields) : FieldNames(kOllamaGenerateFields)}, "", kOllamaReader);
    check_keep_alive(body);
    if (chat) {
        const auto messages = body.find("messages");
        return messages != body.end() && messages->is_array() && messages->empty();
    }
    const auto prompt = body.find("prompt");
    return prompt == body.end() || prompt->is_null() || *prompt == "";
}

}  // namespace smol_server
