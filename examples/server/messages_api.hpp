#pragma once
// Anthropic's Messages API as smol-server speaks it, without HTTP: a /v1/messages body checked
// and turned into the same ApiRequest the chat route builds (api_request.hpp), and the scheduler's
// stream of generation events rendered as a Message object, as Anthropic's SSE events, or as an
// error in Anthropic's shape. routes.hpp, completion_routes.hpp and reply_adapters.hpp carry them
// over HTTP; tests/test_messages_api.cpp calls them directly.
//
// The mapping onto SmolLM3:
//   system (string or text blocks)       -> the system message
//   text blocks                          -> the turn's content, joined with "\n"
//   tool_use blocks (assistant)          -> the turn's tool calls, as the template writes them
//   tool_result blocks (user)            -> "tool" turns, in the order they come
//   thinking blocks handed back          -> dropped, as the template drops past reasoning
//   tools [{name, description, input_schema}] and tool_choice auto/any/tool/none
//                                        -> the chat route's tools and call grammar (forced, or
//                                           under "auto" started by the model's <tool_call>)
//   thinking {"type":"enabled", "budget_tokens": N}
//                                        -> enable_thinking, at most N thinking tokens; off when
//                                           absent or "disabled"; "adaptive": --reasoning-budget

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
#include "reply_ids.hpp"
#include "sampling_fields.hpp"
#include "smol/smol.hpp"
#include "tool_fields.hpp"

namespace smol_server {

// ---- errors -----------------------------------------------------------------------------------

// Anthropic's error types, by HTTP status.
inline const char* anthropic_error_type(int status) {
    switch (status) {
        case 401: return "authentication_error";
        case 403: return "permission_error";
        case 404: return "not_found_error";
        case 413: return "request_too_large";
        case 429: return "rate_limit_error";
        case 503: return "overloaded_error";
        default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

// {"type": "error", "error": {"type", "message"}}: what Anthropic's clients read.
inline json anthropic_error_body(const ApiError& e) {
    return json{{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.message}}}};
}

// Whether a request path belongs to the Messages API, whose errors take Anthropic's shape.
inline bool is_messages_path(std::string_view path) {
    return path == "/v1/messages" || path.starts_with("/v1/messages/");
}

// ---- requests ---------------------------------------------------------------------------------

// The top-level fields /v1/messages reads; any other is a 400 naming it. `speculative` is
// smol's own, as on every API that generates (read_sampling).
inline constexpr std::string_view kMessagesFields[] = {
    "model",    "max_tokens", "messages",       "system",        "stop_sequences", "temperature", "top_p",
    "top_k",    "tools",      "tool_choice",    "thinking",      "metadata",       "stream",      "output_config",
    "context_management", "speculative", "cache_salt"};
// /v1/messages/count_tokens reads what shapes the prompt (Anthropic's own list).
inline constexpr std::string_view kCountTokensFields[] = {"model",    "messages",      "system",            "tools",
                                                          "tool_choice", "thinking", "output_config", "context_management"};

// `cache_control` marks a prompt-caching breakpoint for Anthropic; smol-server reuses cached
// prompt prefixes on its own, so it changes no output and is accepted wherever it may appear.
inline void check_block_fields(const json& block, std::initializer_list<std::string_view> fields, const std::string& where) {
    static constexpr std::string_view kEveryBlock[] = {"type", "cache_control"};
    reject_unlisted_fields(block, {FieldNames(kEveryBlock), FieldNames(fields.begin(), fields.size())}, where);
}

// Content as a string or a list of {"type": "text", "text"} blocks, as one string.
inline std::string text_content(const json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array())
        reject(400, where + " must be a string or a list of text blocks, found " + content.type_name(), "invalid_type");
    std::string joined;
    for (std::size_t i = 0; i < content.size(); ++i) {
        const json& block = content[i];
        const std::string at = where + "[" + std::to_string(i) + "]";
        if (!block.is_object() || block.value("type", json()) != "text")
            reject(400, at + " must be a text block {\"type\": \"text\", \"text\": ...}", "invalid_content");
        check_block_fields(block, {"text"}, at);
        if (!joined.empty()) joined += "\n";
        joined += string_member(block, "text", at);
    }
    return joined;
}

// One Anthropic message as chat-template messages: a user turn may become several (each
// tool_result its own "tool" turn, text between them user turns), an assistant turn one.
inline void append_anthropic_message(const json& message, std::size_t index, json& out) {
    const std::string where = "messages[" + std::to_string(index) + "]";
    if (!message.is_object()) reject(400, where + " must be an object, found " + message.type_name(), "invalid_type");
    check_block_fields(message, {"role", "content"}, where);
    const std::string& role = string_member(message, "role", where);
    if (role != "user" && role != "assistant")
        reject(400, where + ".role must be \"user\", \"assistant\" or \"system\", found \"" + role + "\"", "invalid_role");
    const auto content = message.find("content");
    if (content == message.end()) reject(400, where + " has no 'content'", "missing_content");
    if (content->is_string()) {
        out.push_back({{"role", role}, {"content", *content}});
        return;
    }
    if (!content->is_array())
        reject(400, where + ".content must be a string or a list of content blocks, found " + content->type_name(),
               "invalid_type");

    const std::size_t turns_before = out.size();
    std::string text;          // text blocks since the last tool_result (user) or in the turn (assistant)
    bool has_text = false;
    json calls = json::array();  // the assistant's tool_use blocks, as the template takes them
    const auto flush_user_text = [&] {
        if (has_text) out.push_back({{"role", "user"}, {"content", text}});
        text.clear();
        has_text = false;
    };
    for (std::size_t i = 0; i < content->size(); ++i) {
        const json& block = (*content)[i];
        const std::string at = where + ".content[" + std::to_string(i) + "]";
        if (!block.is_object() || !block.contains("type") || !block["type"].is_string())
            reject(400, at + " must be a content block with a 'type'", "invalid_content");
        const std::string& type = block["type"].get_ref<const std::string&>();
        if (type == "text") {
            check_block_fields(block, {"text"}, at);
            if (has_text) text += "\n";
            text += string_member(block, "text", at);
            has_text = true;
        } else if (type == "tool_use" && role == "assistant") {
            check_block_fields(block, {"id", "name", "input"}, at);
            string_member(block, "id", at);
            check_tool_name(block.value("name", json()), at + ".name");
            const auto input = block.find("input");
            if (input == block.end() || !input->is_object())
                reject(400, at + ".input must be an object of the call's arguments", "invalid_value");
            calls.push_back({{"type", "function"}, {"function", {{"name", block["name"]}, {"arguments", *input}}}});
        } else if (type == "tool_result" && role == "user") {
            check_block_fields(block, {"tool_use_id", "content", "is_error"}, at);
            string_member(block, "tool_use_id", at);
            std::string result;
            if (const auto c = block.find("content"); c != block.end() && !c->is_null()) result = text_content(*c, at + ".content");
            if (const auto e = block.find("is_error"); e != block.end() && !e->is_null()) {
                if (!e->is_boolean()) reject(400, at + ".is_error must be true or false", "invalid_type");
                if (e->get<bool>()) result = "Error: " + result;
            }
            flush_user_text();
            out.push_back({{"role", "tool"}, {"content", std::move(result)}});
        } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
            // Reasoning handed back from an earlier turn: SmolLM3's template shows the model no
            // past reasoning, so it is dropped here as the template would drop it.
            check_block_fields(block, {"thinking", "signature", "data"}, at);
        } else if (type == "image" || type == "document") {
            unsupported(at, "is a " + type + " block: SmolLM3 reads text only");
        } else {
            reject(400,
                   at + " has type \"" + type + "\", which a " + role + " message cannot hold here (" +
                       (role == "user" ? "text or tool_result" : "text, tool_use or thinking") + " expected)",
                   "invalid_content");
        }
    }
    if (role == "user") {
        flush_user_text();
        // An empty block list is still a turn (and the conversation never ends up empty).
        if (out.size() == turns_before) out.push_back({{"role", "user"}, {"content", ""}});
        return;
    }
    json turn = {{"role", "assistant"}, {"content", text}};
    if (!calls.empty()) turn["tool_calls"] = std::move(calls);
    out.push_back(std::move(turn));
}

// `tools` ([{name, description, input_schema}]) and `tool_choice` into the template's tool list;
// returns the grammar of a forced call, else "".
// `offered` receives the tools a call may name under "auto".
inline std::string read_anthropic_tools(const json& body, smol::ChatOptions& chat, json& offered) {
    const json functions = read_tool_list(body, [](const json& tool, const std::string& where) {
        if (!tool.is_object()) reject(400, where + " must be a tool definition object", "invalid_type");
        // Anthropic's server tools (bash_..., web_search_..., text_editor_...) run on
        // Anthropic's side; only client tools, whose type is absent or "custom", exist here.
        if (const auto type = tool.find("type"); type != tool.end() && !type->is_null() && *type != "custom")
            unsupported(where + ".type", "is " + type->dump() + ": smol-server has only client tools (\"custom\")");
        check_block_fields(tool, {"name", "description", "input_schema"}, where);
        json function = named_function(tool, where);
        const auto schema = tool.find("input_schema");
        if (schema == tool.end() || !schema->is_object())
            reject(400, where + ".input_schema must be a JSON schema object", "invalid_value");
        function["parameters"] = *schema;
        return function;
    });
    ToolChoice choice = ToolChoice::automatic;
    json forced_name;
    if (const auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
        if (!c->is_object() || !c->contains("type") || !(*c)["type"].is_string())
            reject(400, "'tool_choice' must be an object with a 'type': auto, any, tool or none", "invalid_value");
        check_block_fields(*c, {"name", "disable_parallel_tool_use"}, "tool_choice");
        const std::string& type = (*c)["type"].get_ref<const std::string&>();
        if (type == "auto") choice = ToolChoice::automatic;
        else if (type == "any") choice = ToolChoice::any;
        else if (type == "none") choice = ToolChoice::none;
        else if (type == "tool") {
            choice = ToolChoice::named;
            forced_name = c->value("name", json());
            if (!forced_name.is_string()) reject(400, "'tool_choice.name' must name the tool to call", "invalid_value");
        } else {
            reject(400, "'tool_choice.type' must be \"auto\", \"any\", \"tool\" or \"none\", found \"" + type + "\"",
                   "invalid_value");
        }
        // A forced call is exactly one call; with "auto" the model may make several.
        if (const auto d = c->find("disable_parallel_tool_use"); d != c->end() && !d->is_null()) {
            if (!d->is_boolean()) reject(400, "'tool_choice.disable_parallel_tool_use' must be true or false", "invalid_type");
            if (d->get<bool>() && choice == ToolChoice::automatic)
                unsupported("tool_choice.disable_parallel_tool_use",
                            "as true is supported only with tool_choice \"any\" or \"tool\", which force exactly one call");
        }
    }
    if (choice == ToolChoice::automatic) offered = functions;
    return tools_into_template(functions, choice, forced_name, "tools[].input_schema", chat);
}

// What `thinking` asks for: reasoning on or off, and its budget in tokens.
struct ThinkingAsk {
    bool enabled = false;
    std::optional<int> budget_tokens;  // unset: the server's --reasoning-budget
};

// `thinking`: {"type": "enabled", "budget_tokens": N} turns SmolLM3's reasoning on for at most
// N tokens (then the engine closes the think block and the answer follows), {"type":
// "adaptive"} (the model decides how long to think, as Claude Code asks) on under the server's
// --reasoning-budget, {"type": "disabled"} (or no field, as in Anthropic's API) off. max_tokens
// bounds reasoning and answer together.
inline ThinkingAsk read_thinking(const json& body) {
    const auto it = body.find("thinking");
    if (it == body.end() || it->is_null()) return {};
    if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string())
        reject(400,
               "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N}, {\"type\": \"adaptive\"} or "
               "{\"type\": \"disabled\"}",
               "invalid_value");
    const std::string& type = (*it)["type"].get_ref<const std::string&>();
    if (type == "disabled" || type == "adaptive") {
        check_block_fields(*it, {}, "thinking");
        return {type == "adaptive", std::nullopt};
    }
    if (type != "enabled")
        unsupported("thinking.type", "\"" + type + "\" is not supported: use \"enabled\", \"adaptive\" or \"disabled\"");
    check_block_fields(*it, {"budget_tokens"}, "thinking");
    if (!it->contains("budget_tokens")) reject(400, "'thinking.budget_tokens' is required with \"enabled\"", "invalid_value");
    return {true, int(*integer_field(*it, "budget_tokens", 1, smol::kMaxReasoningBudget))};
}

// `metadata`: Anthropic defines only user_id (an opaque id for abuse monitoring, as OpenAI's
// `user`); it changes no output.
inline void read_metadata(const json& body) {
    const auto it = body.find("metadata");
    if (it == body.end() || it->is_null()) return;
    if (!it->is_object()) reject(400, std::string("'metadata' must be an object, found ") + it->type_name(), "invalid_type");
    for (const auto& item : it->items()) {
        if (item.key() != "user_id") unsupported("metadata." + item.key(), "is not supported: only user_id is");
        if (!item.value().is_string() && !item.value().is_null())
            reject(400, "'metadata.user_id' must be a string", "invalid_type");
    }
}

// `output_config`: only `effort` (how much the model may spend), which changes nothing for
// SmolLM3: whether it reasons is `thinking`'s to say, and max_tokens bounds the rest.
inline void read_output_config(const json& body) {
    const auto it = body.find("output_config");
    if (it == body.end() || it->is_null()) return;
    if (!it->is_object()) reject(400, std::string("'output_config' must be an object, found ") + it->type_name(), "invalid_type");
    static constexpr std::string_view kEfforts[] = {"low", "medium", "high", "max"};
    for (const auto& item : it->items()) {
        if (item.key() != "effort") unsupported("output_config." + item.key(), "is not supported: only effort is");
        if (!item.value().is_string() || !is_listed(item.value().get_ref<const std::string&>(), kEfforts))
            reject(400, "'output_config.effort' must be \"low\", \"medium\", \"high\" or \"max\", found " +
                            item.value().dump().substr(0, 64),
                   "invalid_value");
    }
}

// `context_management`: server-side edits of the prompt. Only clearing earlier turns' thinking
// is accepted, because SmolLM3's chat template already leaves every earlier turn's reasoning out
// of the prompt whatever `keep` says; clearing tool results is not done, so it is refused.
inline void read_context_management(const json& body) {
    const auto it = body.find("context_management");
    if (it == body.end() || it->is_null()) return;
    if (!it->is_object()) reject(400, "'context_management' must be an object", "invalid_type");
    check_block_fields(*it, {"edits"}, "context_management");
    const auto edits = it->find("edits");
    if (edits == it->end() || edits->is_null()) return;
    if (!edits->is_array()) reject(400, "'context_management.edits' must be a list", "invalid_type");
    if (edits->size() > 16) reject(400, "'context_management.edits' holds at most 16 edits", "invalid_value");
    for (std::size_t i = 0; i < edits->size(); ++i) {
        const json& edit = (*edits)[i];
        const std::string at = "context_management.edits[" + std::to_string(i) + "]";
        if (!edit.is_object() || !edit.contains("type") || !edit["type"].is_string())
            reject(400, "'" + at + "' must be an object with a string 'type'", "invalid_value");
        const std::string& type = edit["type"].get_ref<const std::string&>();
        if (type.rfind("clear_thinking_", 0) != 0)
            unsupported(at + ".type", "\"" + type.substr(0, 64) +
                                          "\" is not supported: only clear_thinking edits (SmolLM3's template drops "
                                          "earlier reasoning itself)");
        check_block_fields(edit, {"keep"}, at);
    }
}

enum class MessagesEndpoint { create, count_tokens };

// A /v1/messages (or /v1/messages/count_tokens) body as the request the scheduler runs. For
// count_tokens only the prompt is built and counted, and a prompt longer than the context is
// still counted.
inline ApiRequest parse_messages_request(const json& body, const smol::text::Tokenizer& tokenizer, int context,
                                         MessagesEndpoint endpoint = MessagesEndpoint::create,
                                         const RequestDefaults& defaults = {}) {
    const bool create = endpoint == MessagesEndpoint::create;
    reject_unlisted_fields(body, {create ? FieldNames(kMessagesFields) : FieldNames(kCountTokensFields)}, "",
                           "smol-server's Messages API");
    ApiRequest out = request_with(defaults);
    if (create) {
        if (!body.contains("max_tokens") || body["max_tokens"].is_null())
            reject(400, "'max_tokens' is required: the most tokens the reply may hold", "missing_max_tokens");
        read_metadata(body);
        read_sampling(body, out, tokenizer);  // max_tokens, temperature, top_p, top_k, stream, speculative
        read_stop_strings(body, "stop_sequences", StopShape::list, out.generation.params.stop);
    }

    // `system`, then any system-role messages (Claude Code sends some between the turns).
    SystemText system;
    if (const auto it = body.find("system"); it != body.end() && !it->is_null()) system.add(text_content(*it, "system"));
    const json& list = message_list(body);
    json turns = json::array();
    for (std::size_t i = 0; i < list.size(); ++i) {
        const json& message = list[i];
        if (message.is_object() && message.contains("role") && message["role"] == "system") {
            const std::string where = "messages[" + std::to_string(i) + "]";
            check_block_fields(message, {"role", "content"}, where);
            if (!message.contains("content")) reject(400, where + " has no 'content'", "missing_content");
            system.add(text_content(message["content"], where + ".content"));
            continue;
        }
        append_anthropic_message(message, i, turns);
    }
    if (turns.empty())
        reject(400, "'messages' holds only system messages; at least one user or assistant turn is needed", "invalid_value");
    const json messages = system.before(std::move(turns));

    smol::ChatOptions chat;
    const ThinkingAsk thinking = read_thinking(body);
    chat.enable_thinking = thinking.enabled;
    read_output_config(body);
    read_context_management(body);
    json offered;
    // A forced call's grammar holds the reply after any reasoning; under "auto", each call.
    out.grammar = read_anthropic_tools(body, chat, offered);
    lazy_call_grammar(offered, "tools[].input_schema", out);
    if (thinking.enabled) apply_reasoning_budget(thinking.budget_tokens, defaults.reasoning_budget, true, chat, out);
    smol::GenerationParams& params = out.generation.params;
    params.parse_tool_calls = chat.xml_tools.is_array() && !chat.xml_tools.empty();

    render_counted_prompt(messages, chat, tokenizer, out, context, create ? PromptUse::generate : PromptUse::count);
    return out;
}

// ---- replies ----------------------------------------------------------------------------------

// Anthropic's stop_reason; cancelled and failed generations have none (nullptr).
inline const char* anthropic_stop_reason(smol::FinishReason reason) {
    switch (reason) {
        case smol::FinishReason::end_of_generation: return "end_turn";
        case smol::FinishReason::stop_string: return "stop_sequence";
        case smol::FinishReason::max_tokens:
        case smol::FinishReason::context_full: return "max_tokens";
        case smol::FinishReason::tool_calls: return "tool_use";
        case smol::FinishReason::cancelled:
        case smol::FinishReason::error: return nullptr;
    }
    return nullptr;
}

// A call's arguments as the `input` object; the tool-call parser passes on only calls whose
// arguments are a JSON object, so anything else is a bug worth seeing, not a silent {}.
inline json tool_input(const smol::ToolCall& call) {
    const std::optional<json> input = smol::try_parse_json(call.arguments);
    if (!input || !input->is_object()) throw smol::Error("tool call '" + call.name + "' has arguments that are not a JSON object");
    return *input;
}

inline json tool_use_block(const smol::ToolCall& call) {
    return json{{"type", "tool_use"}, {"id", prefixed_id("toolu_")}, {"name", call.name}, {"input", tool_input(call)}};
}

// Usage as Anthropic counts it: input_tokens are the prompt tokens run, and prompt tokens
// reused from a slot's KV cache are cache reads (smol-server never writes a cache on request,
// so cache_creation_input_tokens is 0); the three add up to the whole prompt.
inline json anthropic_usage(const smol::GenerationUsage& usage) {
    return json{{"input_tokens", usage.prompt_tokens - usage.cached_tokens},
                {"cache_creation_input_tokens", 0},
                {"cache_read_input_tokens", usage.cached_tokens},
                {"output_tokens", usage.completion_tokens}};
}

// The Message object of a reply that finished (not cancelled, not failed): a thinking block,
// a text block and the tool_use blocks, each only when it has something.
inline json message_json(const ReplyIds& ids, const std::string& reasoning, const std::string& text,
                         const std::vector<smol::ToolCall>& calls, smol::FinishReason finish,
                         const std::string& stop_sequence, const smol::GenerationUsage& usage) {
    json content = json::array();
    if (!reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", reasoning}, {"signature", ""}});
    if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
    for (const smol::ToolCall& call : calls) content.push_back(tool_use_block(call));
    return json{{"id", ids.id},
                {"type", "message"},
                {"role", "assistant"},
                {"model", ids.model},
                {"content", std::move(content)},
                {"stop_reason", anthropic_stop_reason(finish)},
                {"stop_sequence", finish == smol::FinishReason::stop_string ? json(stop_sequence) : json()},
                {"usage", anthropic_usage(usage)}};
}

// The stream of one reply as Anthropic's events. start() opens it (message_start); render()
// turns each generation event into content blocks: reasoning into a thinking block, answer
// text into a text block, each tool call into its own tool_use block with its whole input in
// one input_json_delta. A block closes when another kind begins, so thinking never lands in
// a text block; the last event closes the open block and ends the message.
class MessagesStream {
public:
    MessagesStream() = default;
    MessagesStream(ReplyIds ids, int input_tokens) : ids_(std::move(ids)), input_tokens_(input_tokens) {}

    std::string start() const {
        const json message = {{"id", ids_.id},
                              {"type", "message"},
                              {"role", "assistant"},
                              {"model", ids_.model},
                              {"content", json::array()},
                              {"stop_reason", nullptr},
                              {"stop_sequence", nullptr},
                              // The whole prompt: what of it was cached is known once it ran,
                              // and message_delta then gives the split (as Anthropic's totals).
                              {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}};
        return named_sse(json{{"type", "message_start"}, {"message", message}}) +
               named_sse(json{{"type", "ping"}});
    }

    // The events for one generation event; for a failed or cancelled generation, `error` is
    // the error event that ends the stream instead of message_delta.
    std::string render(const smol::StreamEvent& event, const ApiError* error = nullptr) {
        std::string out;
        if (!event.reasoning.empty()) {
            out += open(Block::thinking, json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
            out += delta(json{{"type", "thinking_delta"}, {"thinking", event.reasoning}});
        }
        if (!event.content.empty()) {
            out += open(Block::text, json{{"type", "text"}, {"text", ""}});
            out += delta(json{{"type", "text_delta"}, {"text", event.content}});
        }
        for (const smol::ToolCall& call : event.tool_calls) {
            json block = tool_use_block(call);
            const std::string input = to_wire(block["input"]);
            block["input"] = json::object();
            out += open(Block::tool_use, std::move(block));
            out += delta(json{{"type", "input_json_delta"}, {"partial_json", input}});
            out += close();
        }
        if (!event.finished) return out;
        out += close();
        if (error) return out + named_sse(anthropic_error_body(*error));
        json stop = {{"stop_reason", anthropic_stop_reason(event.finish)},
                     {"stop_sequence",
                      event.finish == smol::FinishReason::stop_string ? json(event.stop_string) : json()}};
        out += named_sse(json{{"type", "message_delta"},
                                  {"delta", std::move(stop)},
                                  {"usage", anthropic_usage(event.usage)}});
        out += named_sse(json{{"type", "message_stop"}});
        return out;
    }

private:
    enum class Block { none, thinking, text, tool_use };

    // Starts a block of `kind` unless one is open already (tool_use blocks always start anew).
    std::string open(Block kind, json content_block) {
        if (open_ == kind && kind != Block::tool_use) return "";
        std::string out = close();
        open_ = kind;
        out += named_sse(
            json{{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(content_block)}});
        return out;
    }

    std::string delta(json d) const {
        return named_sse(json{{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}});
    }

    std::string close() {
        if (open_ == Block::none) return "";
        open_ = Block::none;
        return named_sse(json{{"type", "content_block_stop"}, {"index", index_++}});
    }

    ReplyIds ids_;
    int input_tokens_ = 0;
    Block open_ = Block::none;
    int index_ = 0;  // the open block's index, or the next one's when none is open
};

}  // namespace smol_server
