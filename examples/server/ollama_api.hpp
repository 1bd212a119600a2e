#pragma once
// ollama's native API as smol-server speaks it, without HTTP: /api/chat and /api/generate bodies
// checked and turned into the same ApiRequest the OpenAI chat route builds (openai_api.hpp), the
// scheduler's events rendered as ollama's newline-delimited JSON objects (streamed) or as one
// object (stream: false), and errors in ollama's shape. ollama_routes.hpp, completion_routes.hpp
// and reply_adapters.hpp carry them over HTTP; tests/test_ollama_api.cpp calls them directly.
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

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "messages_api.hpp"
#include "openai_api.hpp"
#include "outgoing_text.hpp"
#include "smol/smol.hpp"

namespace smol_server {

// ---- errors -----------------------------------------------------------------------------------

// {"error": "message"}: what ollama answers with, and what its clients read (the npm client
// throws a ResponseError holding the string).
inline json ollama_error_body(const ApiError& e) { return json{{"error", e.message}}; }

// Whether a request path belongs to ollama's API, whose errors take ollama's shape.
inline bool is_ollama_path(std::string_view path) { return path.starts_with("/api/"); }

// An error in the shape of the API `path` (no query string) belongs to: Anthropic's on the
// Messages API's paths, ollama's under /api/, OpenAI's everywhere else. The routes and the
// connection gate both use it.
inline json error_body_for_path(std::string_view path, const ApiError& e) {
    if (is_messages_path(path)) return anthropic_error_body(e);
    if (is_ollama_path(path)) return ollama_error_body(e);
    return error_body(e);
}

// ---- requests ---------------------------------------------------------------------------------

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
    if (it->is_object()) return schema_grammar(*it, "format");
    if (it->is_string()) {
        const std::string& format = it->get_ref<const std::string&>();
        if (format.empty()) return "";
        if (format == "json") return std::string(smol::text::kJsonObjectGrammar);
        reject(400, "'format' must be \"json\" or a JSON schema object, found " + it->dump().substr(0, 64), "invalid_value");
    }
    reject(400, std::string("'format' must be \"json\" or a JSON schema object, found ") + it->type_name(), "invalid_type");
}

// `options`, checked and applied to `out`; returns num_ctx when it was given. The sampler's
// options have read_sampling's names and checks (its errors say they were in 'options').
inline std::optional<int> read_ollama_options(const json& body, ApiRequest& out, std::size_t n_vocab, int context) {
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
        read_sampling(options, out, n_vocab);
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

// A field that must be a string when present (`model`, `system`, `prompt`).
inline std::optional<std::string> optional_string(const json& body, const char* name) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) reject(400, std::string("'") + name + "' must be a string, found " + it->type_name(), "invalid_type");
    return it->get<std::string>();
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
    const auto list = body.find("messages");
    if (list == body.end() || list->is_null())
        reject(400, "'messages' is required: a list of {role, content} objects", "missing_messages");
    if (!list->is_array()) reject(400, std::string("'messages' must be an array, found ") + list->type_name(), "invalid_type");
    if (list->empty()) reject(400, "'messages' is empty; at least one message is needed", "invalid_value");
    SystemText system;
    json turns = json::array();
    for (std::size_t i = 0; i < list->size(); ++i) {
        const json& m = (*list)[i];
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
    ApiRequest out;
    out.generation.params.sampling = defaults.sampling;
    const json messages = ollama_messages(body);
    smol::ChatOptions chat;
    json offered;
    read_tools(body, chat, &offered);  // ollama has no tool_choice: the model calls a tool or answers
    settle_format_and_think(body, out, chat, defaults);
    lazy_call_grammar(offered, "tools[].function.parameters", out);  // each call follows its schema
    out.generation.params.parse_tool_calls = chat.xml_tools.is_array() && !chat.xml_tools.empty();
    const std::optional<int> num_ctx = read_ollama_options(body, out, tokenizer.n_vocab(), context);
    render_prompt(messages, chat, tokenizer, out);
    check_prompt_fits(out, context);
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
    ApiRequest out;
    out.generation.params.sampling = defaults.sampling;
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
        num_ctx = read_ollama_options(body, out, tokenizer.n_vocab(), context);
        out.generation.prompt = tokenizer.encode(*prompt, /*parse_special=*/true);
    } else {
        smol::ChatOptions chat;
        settle_format_and_think(body, out, chat, defaults);
        num_ctx = read_ollama_options(body, out, tokenizer.n_vocab(), context);
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

// ---- replies ----------------------------------------------------------------------------------

// A time (nanoseconds since the Unix epoch) as RFC 3339 in UTC with nanoseconds, as ollama's
// created_at and modified_at.
inline std::string rfc3339(std::int64_t ns) {
    const std::time_t seconds = std::time_t(ns / 1'000'000'000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[64];
    std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                  utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<long long>(ns % 1'000'000'000));
    return text;
}

inline std::string rfc3339_now() {
    return rfc3339(std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count());
}

// ollama's done_reason: "stop" for a natural end, a stop string or a turn of tool calls, "length"
// when a limit cut the reply short. Cancelled and failed generations have none (nullptr).
inline const char* ollama_done_reason(smol::FinishReason reason) {
    switch (reason) {
        case smol::FinishReason::end_of_generation:
        case smol::FinishReason::stop_string:
        case smol::FinishReason::tool_calls: return "stop";
        case smol::FinishReason::max_tokens:
        case smol::FinishReason::context_full: return "length";
        case smol::FinishReason::cancelled:
        case smol::FinishReason::error: return nullptr;
    }
    return nullptr;
}

// Calls as ollama gives them: [{"function": {"name", "arguments": {...}}}], arguments an object.
inline json ollama_tool_calls(const std::vector<smol::ToolCall>& calls) {
    json out = json::array();
    for (const smol::ToolCall& call : calls) out.push_back({{"function", {{"name", call.name}, {"arguments", tool_input(call)}}}});
    return out;
}

inline std::int64_t nanoseconds(double ms) { return std::int64_t(std::llround(ms * 1e6)); }

// One object of a reply: a piece of it (done: false) or, with `usage`, the end (done: true, its
// reason and the counts and durations, in nanoseconds). The model was loaded before the request
// (load_duration 0); prompt_eval_count is the whole prompt, cached tokens included.
inline json ollama_object(OllamaEndpoint endpoint, const std::string& model, const std::string& reasoning,
                          const std::string& content, const std::vector<smol::ToolCall>& calls,
                          const smol::StreamEvent* end = nullptr) {
    json out = {{"model", model}, {"created_at", rfc3339_now()}};
    if (endpoint == OllamaEndpoint::chat) {
        json message = {{"role", "assistant"}, {"content", content}};
        if (!reasoning.empty()) message["thinking"] = reasoning;
        if (!calls.empty()) message["tool_calls"] = ollama_tool_calls(calls);
        out["message"] = std::move(message);
    } else {
        out["response"] = content;
        if (!reasoning.empty()) out["thinking"] = reasoning;
    }
    out["done"] = end != nullptr;
    if (!end) return out;
    const smol::GenerationUsage& u = end->usage;
    out["done_reason"] = ollama_done_reason(end->finish);
    out["total_duration"] = nanoseconds(u.queue_ms + u.prompt_ms + u.generation_ms);
    out["load_duration"] = 0;
    out["prompt_eval_count"] = u.prompt_tokens;
    out["prompt_eval_duration"] = nanoseconds(u.prompt_ms);
    out["eval_count"] = u.completion_tokens;
    out["eval_duration"] = nanoseconds(u.generation_ms);
    return out;
}

// A reply that answers at once with nothing generated (a load request, is_load_request).
inline json ollama_load_reply(OllamaEndpoint endpoint, const std::string& model) {
    json out = ollama_object(endpoint, model, "", "", {});
    out["done"] = true;
    out["done_reason"] = "load";
    return out;
}

// A streamed reply as newline-delimited JSON: each generation event one object (done: false), the
// last event's text followed by the closing object (done: true, with the statistics), or for a
// failed or cancelled generation an {"error"} object, which ollama's clients raise.
class OllamaStream {
public:
    OllamaStream() = default;
    OllamaStream(OllamaEndpoint endpoint, std::string model) : endpoint_(endpoint), model_(std::move(model)) {}

    std::string render(const smol::StreamEvent& event, const ApiError* error = nullptr) const {
        std::string out;
        if (!event.reasoning.empty() || !event.content.empty() || !event.tool_calls.empty())
            out += line(ollama_object(endpoint_, model_, event.reasoning, event.content, event.tool_calls));
        if (!event.finished) return out;
        if (error) return out + line(ollama_error_body(*error));
        return out + line(ollama_object(endpoint_, model_, "", "", {}, &event));
    }

    // An object with no text, written while the request waits (for a slot, or a long prompt):
    // writing is how a client that left is noticed, and ollama's clients parse every line as
    // JSON, so a comment such as the SSE streams send would break them.
    std::string idle() const { return line(ollama_object(endpoint_, model_, "", "", {})); }

private:
    static std::string line(const json& object) { return to_wire(object) + "\n"; }

    OllamaEndpoint endpoint_ = OllamaEndpoint::chat;
    std::string model_;
};

// ---- the model: /api/tags, /api/show, /api/ps -----------------------------------------------

// The ollama release whose API this follows (think and message.thinking, format as a JSON schema,
// tool_name): /api/version gives it, so clients that check for features by version find them.
inline constexpr const char* kOllamaApiVersion = "0.9.0";

// llama.cpp's names for general.file_type (its llama_ftype), as ollama's quantization_level.
inline std::string file_type_name(const smol::gguf::File& file) {
    const smol::gguf::Value* v = file.find("general.file_type");
    const std::optional<std::int64_t> type = v ? v->as_int() : std::nullopt;
    if (!type) return "unknown";
    static constexpr std::pair<int, const char*> kNames[] = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},     {3, "Q4_1"},     {7, "Q8_0"},    {8, "Q5_0"},    {9, "Q5_1"},
        {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},  {13, "Q3_K_L"},  {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"},
        {17, "Q5_K_M"}, {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},  {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},
        {24, "IQ1_S"},  {25, "IQ4_NL"}, {26, "IQ3_S"},   {27, "IQ3_M"},   {28, "IQ2_S"},  {29, "IQ2_M"},  {30, "IQ4_XS"},
        {31, "IQ1_M"},  {32, "BF16"},   {36, "TQ1_0"},   {37, "TQ2_0"}};
    for (const auto& [id, name] : kNames)
        if (id == *type) return name;
    return "file type " + std::to_string(*type);
}

// A parameter count as ollama writes parameter_size: "3.1B", "137.0M", "52.3K".
inline std::string parameter_size(std::uint64_t n) {
    char text[32];
    if (n >= 1'000'000'000) std::snprintf(text, sizeof text, "%.1fB", double(n) / 1e9);
    else if (n >= 1'000'000) std::snprintf(text, sizeof text, "%.1fM", double(n) / 1e6);
    else if (n >= 1'000) std::snprintf(text, sizeof text, "%.1fK", double(n) / 1e3);
    else std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(n));
    return text;
}

// `details` of /api/tags, /api/show and /api/ps.
inline json ollama_model_details(const smol::Engine& engine) {
    const smol::ModelInfo& info = engine.info();
    return json{{"parent_model", ""},
                {"format", "gguf"},
                {"family", info.architecture},
                {"families", json::array({info.architecture})},
                {"parameter_size", parameter_size(info.n_params)},
                {"quantization_level", file_type_name(engine.model().file())}};
}

// /api/show's model_info: the file's metadata, each string and number as it is, and the arrays
// of up to 64 numbers; longer arrays (the vocabulary, merges, token types) are given empty, as
// ollama gives them without `verbose`, so the reply stays small. The chat template is /api/show's
// `template`.
inline json ollama_model_info(const smol::Engine& engine) {
    using smol::gguf::ValueType;
    json out = json::object();
    for (const auto& [key, value] : engine.model().file().metadata()) {
        if (key == "tokenizer.chat_template") continue;
        if (value.is_array()) {
            const bool numbers = value.element_type() != ValueType::String && value.element_type() != ValueType::Array;
            json list = json::array();
            if (numbers && value.size() <= 64) {
                const bool integers = value.element_type() != ValueType::F32 && value.element_type() != ValueType::F64;
                if (integers)
                    for (const std::int64_t v : value.ints()) list.push_back(v);
                else
                    for (const double v : value.floats()) list.push_back(v);
            }
            out[key] = std::move(list);
        } else if (const auto text = value.as_string()) {
            out[key] = std::string(*text);
        } else if (const auto flag = value.as_bool()) {
            out[key] = *flag;
        } else if (value.type() == ValueType::F32 || value.type() == ValueType::F64) {
            out[key] = *value.as_float();
        } else if (const auto i = value.as_int()) {
            out[key] = *i;
        } else if (const auto u = value.as_uint()) {
            out[key] = *u;
        }
    }
    if (!out.contains("general.parameter_count")) out["general.parameter_count"] = engine.info().n_params;
    return out;
}

// /api/show's `parameters`: the sampler's defaults, one "name value" line each, as ollama lists a
// model's PARAMETER lines.
inline std::string ollama_parameters(int context) {
    const smol::SamplerParams d;
    char text[512];
    std::snprintf(text, sizeof text,
                  "num_ctx %d\ntemperature %g\ntop_k %d\ntop_p %g\nmin_p %g\nrepeat_penalty %g\nrepeat_last_n %d\n"
                  "presence_penalty %g\nfrequency_penalty %g",
                  context, double(d.temperature), d.top_k, double(d.top_p), double(d.min_p), double(d.repeat_penalty),
                  d.penalty_last_n, double(d.presence_penalty), double(d.frequency_penalty));
    return text;
}

// A /api/show body: `model` (or the older `name`) names the model; smol-server answers for its
// one model whatever the name. `verbose` lists the vocabulary in model_info, which smol-server
// does not send (the reply would be megabytes).
inline void check_show_request(const json& body) {
    check_fields(body, {"model", "name", "verbose"}, "");
    optional_string(body, "model");
    optional_string(body, "name");
    if (bool_field(body, "verbose").value_or(false))
        unsupported("verbose", "as true is not supported: the vocabulary and merges would make the reply megabytes");
}

}  // namespace smol_server
