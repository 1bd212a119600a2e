// smol-server's Anthropic Messages mapping (examples/server/messages_api.hpp) without HTTP: what a
// /v1/messages body turns into (the same request the chat route builds for the same
// conversation), which bodies are refused and how, and the Message object and SSE events a
// generation's events render as.

#include <doctest/doctest.h>

#include <functional>

#include <string>
#include <vector>

#include "messages_api.hpp"
#include "openai_chat_request.hpp"
#include "server_api_helpers.hpp"
#include "smol/smol.hpp"
#include "tiny_fixture.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_messages_api {

namespace {

using smol_server::ApiError;
using smol_server::json;
using smol_test::chat_weather_tools;
using smol_test::named_events;
using smol_test::weather_schema;
using smol_test::with;

const smol::text::Tokenizer& tokenizer() { return smol_test::tiny_tokenizer(); }

json hello() {
    return json{{"model", "smol"}, {"max_tokens", 64}, {"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})}};
}

smol_server::ApiRequest parse(const json& body, int context = 4096) {
    return smol_server::parse_messages_request(body, tokenizer(), context);
}

// The same conversation through the chat route, thinking off as the Messages API defaults to.
smol_server::ApiRequest parse_chat(json body) {
    if (!body.contains("chat_template_kwargs")) body["chat_template_kwargs"] = {{"enable_thinking", false}};
    return smol_server::parse_chat_request(body, tokenizer(), 4096);
}

ApiError refusal(const json& body, int context = 4096) {
    return smol_test::refusal_of(body, [&](const json& b) { parse(b, context); });
}

const json anthropic_tools = json::array({{{"name", "get_weather"}, {"description", "Weather"}, {"input_schema", weather_schema}}});

}  // namespace

TEST_CASE("Messages: text is text in the system prompt, user and assistant text, tool results and tool definitions") {
    using Make = std::function<json(const std::string&)>;
    const auto turns = [](json messages) { return json{{"model", "smol"}, {"max_tokens", 8}, {"messages", std::move(messages)}}; };
    const auto user = [](const json& content) { return json{{"role", "user"}, {"content", content}}; };
    const std::vector<Make> makers = {
        [&](const std::string& t) { return with(turns({user("q")}), "system", t); },
        [&](const std::string& t) {
            return with(turns({user("q")}), "system", json::array({{{"type", "text"}, {"text", t}}}));
        },
        [&](const std::string& t) { return turns({user(t)}); },
        [&](const std::string& t) { return turns({user(json::array({{{"type", "text"}, {"text", t}}}))}); },
        [&](const std::string& t) {
            return turns({user("q"), {{"role", "assistant"}, {"content", t}}, user("q")});
        },
        [&](const std::string& t) {
            return turns({user("q"),
                          {{"role", "assistant"},
                           {"content", json::array({{{"type", "tool_use"}, {"id", "t1"}, {"name", "f"}, {"input", json::object()}}})}},
                          user(json::array({{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", t}}}))});
        },
        [&](const std::string& t) {
            return with(turns({user("q")}), "tools",
                        json::array({{{"name", "f"}, {"description", t}, {"input_schema", {{"type", "object"}}}}}));
        },
    };
    smol_test::check_text_stays_text(makers, [](const json& b) { return parse(b); }, tokenizer());
}

TEST_CASE("a Messages request becomes the same request the chat route builds for the same conversation") {
    const json anthropic = {
        {"model", "smol"},
        {"max_tokens", 50},
        {"system", json::array({{{"type", "text"}, {"text", "Be brief."}}, {{"type", "text"}, {"text", "Be kind."}}})},
        {"temperature", 0.5},
        {"top_p", 0.9},
        {"top_k", 20},
        {"stop_sequences", json::array({"END", "STOP"})},
        {"metadata", {{"user_id", "u-17"}}},
        {"tools", anthropic_tools},
        {"messages",
         json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "Weather in Paris?"}}})}},
                      {{"role", "assistant"},
                       {"content", json::array({{{"type", "thinking"}, {"thinking", "a call"}, {"signature", "s"}},
                                                {{"type", "text"}, {"text", "Let me look."}},
                                                {{"type", "tool_use"},
                                                 {"id", "toolu_1"},
                                                 {"name", "get_weather"},
                                                 {"input", {{"city", "Paris"}}}}})}},
                      {{"role", "user"},
                       {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "sunny"}},
                                                {{"type", "text"}, {"text", "And tomorrow?"}}})}}})}};
    const json openai = {
        {"max_tokens", 50},
        {"temperature", 0.5},
        {"top_p", 0.9},
        {"top_k", 20},
        {"stop", json::array({"END", "STOP"})},
        {"tools", chat_weather_tools},
        {"messages",
         json::array({{{"role", "system"}, {"content", "Be brief.\nBe kind."}},
                      {{"role", "user"}, {"content", "Weather in Paris?"}},
                      {{"role", "assistant"},
                       {"content", "Let me look."},
                       {"tool_calls",
                        json::array({{{"type", "function"},
                                      {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}})}},
                      {{"role", "tool"}, {"content", "sunny"}},
                      {{"role", "user"}, {"content", "And tomorrow?"}}})}};
    const smol_server::ApiRequest a = parse(anthropic);
    const smol_server::ApiRequest o = parse_chat(openai);
    CHECK(a.generation.prompt == o.generation.prompt);
    CHECK(a.generation.assistant_prefix == o.generation.assistant_prefix);
    CHECK(a.prompt_tokens == int(a.generation.prompt.size()));
    const smol::GenerationParams& p = a.generation.params;
    CHECK(p.max_tokens == 50);
    CHECK(p.sampling.temperature == doctest::Approx(0.5));
    CHECK(p.sampling.top_p == doctest::Approx(0.9));
    CHECK(p.sampling.top_k == 20);
    CHECK(p.stop == std::vector<std::string>{"END", "STOP"});
    CHECK(p.parse_tool_calls);
    CHECK(a.grammar == o.grammar);  // tool_choice auto: the same lazy call grammar
    CHECK(p.grammar_trigger == o.generation.params.grammar_trigger);
    CHECK_FALSE(a.stream);
    CHECK(parse(with(hello(), "stream", true)).stream);
}

TEST_CASE("thinking: off unless enabled, on with {\"type\": \"enabled\"}, as the chat route's enable_thinking") {
    const smol_server::ApiRequest off = parse(hello());
    CHECK(off.generation.assistant_prefix == "<think>\n\n</think>\n");  // the empty think block of no-think mode
    CHECK(parse(with(hello(), "thinking", {{"type", "disabled"}})).generation.prompt == off.generation.prompt);
    const smol_server::ApiRequest on = parse(with(hello(), "thinking", {{"type", "enabled"}, {"budget_tokens", 2048}}));
    CHECK(on.generation.assistant_prefix.empty());
    json chat = hello();
    chat.erase("model");
    chat["chat_template_kwargs"] = {{"enable_thinking", true}};
    CHECK(on.generation.prompt == parse_chat(chat).generation.prompt);

    CHECK(refusal(with(hello(), "thinking", {{"type", "enabled"}})).message.find("budget_tokens") != std::string::npos);
    CHECK(refusal(with(hello(), "thinking", {{"type", "enabled"}, {"budget_tokens", 0}})).code == "invalid_value");
    // "adaptive" (Claude Code's): the model decides how long to think, so reasoning is on.
    CHECK(parse(with(hello(), "thinking", {{"type", "adaptive"}})).generation.prompt == on.generation.prompt);
    // budget_tokens is the reasoning budget; "adaptive" leaves it to the server's --reasoning-budget.
    CHECK(on.generation.params.reasoning_budget == 2048);
    CHECK(parse(with(hello(), "thinking", {{"type", "adaptive"}})).generation.params.reasoning_budget == -1);
    const json adaptive = with(hello(), "thinking", {{"type", "adaptive"}});
    CHECK(smol_server::parse_messages_request(adaptive, tokenizer(), 4096, smol_server::MessagesEndpoint::create, {300, {}})
              .generation.params.reasoning_budget == 300);
    const ApiError too_big =
        refusal(with(hello(), "thinking", {{"type", "enabled"}, {"budget_tokens", smol::kMaxReasoningBudget + 1LL}}));
    CHECK(too_big.code == "invalid_value");
    CHECK(too_big.message.find("budget_tokens") != std::string::npos);
    const ApiError other = refusal(with(hello(), "thinking", {{"type", "interleaved"}}));
    CHECK(other.code == "unsupported_parameter");
    CHECK(other.message.find("thinking.type") != std::string::npos);
    CHECK(refusal(with(hello(), "thinking", "on")).code == "invalid_value");
}

TEST_CASE("what Claude Code sends: system-role messages, output_config.effort, context_management clearing thinking") {
    // A system-role message between the turns joins `system`, in order: SmolLM3's template reads
    // only a leading system message.
    json body = with(hello(), "system", "Be brief.");
    body["messages"] = json::array({{{"role", "user"}, {"content", "Hello"}},
                                    {{"role", "system"}, {"content", json::array({{{"type", "text"}, {"text", "Agents: none."}}})}}});
    json same = with(hello(), "system", "Be brief.\n\nAgents: none.");
    CHECK(parse(body).generation.prompt == parse(same).generation.prompt);
    json only_message = hello();
    only_message["messages"] = json::array({{{"role", "system"}, {"content", "Agents: none."}}, {{"role", "user"}, {"content", "Hello"}}});
    CHECK(parse(only_message).generation.prompt == parse(with(hello(), "system", "Agents: none.")).generation.prompt);
    // Empty system text adds nothing between the parts, and alone it is as none.
    json empty_between = with(hello(), "system", "Be brief.");
    empty_between["messages"] = json::array({{{"role", "system"}, {"content", ""}},
                                             {{"role", "system"}, {"content", "Agents: none."}},
                                             {{"role", "user"}, {"content", "Hello"}}});
    CHECK(parse(empty_between).generation.prompt == parse(same).generation.prompt);
    CHECK(parse(with(hello(), "system", "")).generation.prompt == parse(hello()).generation.prompt);
    CHECK(refusal(with(hello(), "messages", json::array({{{"role", "tool"}, {"content", "x"}}}))).code == "invalid_role");

    // Effort changes nothing for SmolLM3; other output_config fields are refused by name.
    CHECK(parse(with(hello(), "output_config", {{"effort", "high"}})).generation.prompt == parse(hello()).generation.prompt);
    CHECK(refusal(with(hello(), "output_config", {{"effort", "extreme"}})).code == "invalid_value");
    CHECK(refusal(with(hello(), "output_config", {{"format", {{"type", "json_schema"}}}})).message.find("output_config.format") !=
          std::string::npos);

    // Clearing earlier thinking is what the template does anyway; clearing tool results is not done.
    const json clear_thinking = {{"edits", json::array({{{"type", "clear_thinking_20251015"}, {"keep", "all"}}})}};
    CHECK(parse(with(hello(), "context_management", clear_thinking)).generation.prompt == parse(hello()).generation.prompt);
    const json clear_tools = {{"edits", json::array({{{"type", "clear_tool_uses_20250919"}}})}};
    const ApiError tools = refusal(with(hello(), "context_management", clear_tools));
    CHECK(tools.code == "unsupported_parameter");
    CHECK(tools.message.find("context_management.edits[0].type") != std::string::npos);
    CHECK(refusal(with(hello(), "context_management", {{"edits", json::array({1})}})).code == "invalid_value");
}

TEST_CASE("tool_choice any and tool force one call through the chat route's grammar; none lists no tools") {
    const json tooled = with(hello(), "tools", anthropic_tools);
    json chat = hello();
    chat.erase("model");
    chat["tools"] = chat_weather_tools;
    CHECK(parse(tooled).generation.prompt == parse_chat(chat).generation.prompt);

    const smol_server::ApiRequest any = parse(with(tooled, "tool_choice", {{"type", "any"}}));
    CHECK(any.grammar == parse_chat(with(chat, "tool_choice", "required")).grammar);
    CHECK_FALSE(any.grammar.empty());
    // "auto" (the default): the same call grammar, started by the model's <tool_call>.
    CHECK(parse(tooled).grammar == any.grammar);
    CHECK(parse(tooled).generation.params.grammar_trigger == "<tool_call>");
    CHECK(any.generation.params.grammar_trigger.empty());
    const smol_server::ApiRequest named = parse(with(tooled, "tool_choice", {{"type", "tool"}, {"name", "get_weather"}}));
    CHECK(named.grammar ==
          parse_chat(with(chat, "tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}})).grammar);
    CHECK(parse(with(tooled, "tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}})).grammar == any.grammar);

    const smol_server::ApiRequest none = parse(with(tooled, "tool_choice", {{"type", "none"}}));
    CHECK_FALSE(none.generation.params.parse_tool_calls);
    CHECK(none.generation.prompt == parse(hello()).generation.prompt);

    CHECK(refusal(with(tooled, "tool_choice", {{"type", "tool"}, {"name", "get_time"}})).message.find("get_time") !=
          std::string::npos);
    CHECK(refusal(with(tooled, "tool_choice", {{"type", "tool"}})).code == "invalid_value");
    CHECK(refusal(with(tooled, "tool_choice", "auto")).code == "invalid_value");
    CHECK(refusal(with(tooled, "tool_choice", {{"type", "required"}})).code == "invalid_value");
    CHECK(refusal(with(hello(), "tool_choice", {{"type", "any"}})).message.find("'tools' is empty") != std::string::npos);
    const ApiError parallel = refusal(with(tooled, "tool_choice", {{"type", "auto"}, {"disable_parallel_tool_use", true}}));
    CHECK(parallel.message.find("tool_choice.disable_parallel_tool_use") != std::string::npos);
    // Reasoning comes first, then the forced call.
    json thinking_forced = with(tooled, "tool_choice", {{"type", "any"}});
    thinking_forced["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
    const smol_server::ApiRequest reasoned = parse(thinking_forced);
    CHECK(reasoned.grammar == any.grammar);
    CHECK(reasoned.generation.params.reasoning_budget == 1024);
    CHECK(reasoned.generation.assistant_prefix.empty());

    // Server tools run on Anthropic's side; only client tools exist here.
    const ApiError server_tool =
        refusal(with(hello(), "tools", json::array({{{"type", "web_search_20250305"}, {"name", "web_search"}}})));
    CHECK(server_tool.code == "unsupported_parameter");
    CHECK(server_tool.message.find("tools[0].type") != std::string::npos);
    CHECK(parse(with(hello(), "tools",
                     json::array({{{"type", "custom"}, {"name", "f"}, {"input_schema", {{"type", "object"}}},
                                   {"cache_control", {{"type", "ephemeral"}}}}})))
              .generation.params.parse_tool_calls);
    CHECK(refusal(with(hello(), "tools", json::array({{{"name", "f"}}}))).message.find("tools[0].input_schema") !=
          std::string::npos);
    CHECK(refusal(with(hello(), "tools", json::array({{{"name", "a b"}, {"input_schema", json::object()}}})))
              .message.find("tools[0].name") != std::string::npos);
    CHECK(refusal(with(hello(), "tools", json::array({{{"name", std::string(300, 'a')}, {"input_schema", json::object()}}})))
              .message.find("256 bytes") != std::string::npos);
    json many = json::array();
    for (int i = 0; i < 129; ++i) many.push_back({{"name", std::string(std::size_t(i) + 1, 'f')}, {"input_schema", json::object()}});
    CHECK(refusal(with(hello(), "tools", many)).message.find("at most 128") != std::string::npos);
    CHECK(refusal(with(hello(), "tools", json::array({{{"name", "f"}, {"input_schema", json::object()}, {"strict", true}}})))
              .message.find("tools[0].strict") != std::string::npos);
}

TEST_CASE("every field and block smol does not implement is a 400 naming it") {
    for (const char* field : {"service_tier", "container", "mcp_servers", "stop", "n", "seed", "logprobs"}) {
        CAPTURE(field);
        const ApiError e = refusal(with(hello(), field, 1));
        CHECK(e.status == 400);
        CHECK(e.code == "unsupported_parameter");
        CHECK(e.message.find(std::string("'") + field + "'") != std::string::npos);
        CHECK(e.message.find("smol-server's Messages API") != std::string::npos);
    }
    const ApiError meta = refusal(with(hello(), "metadata", {{"user_id", "u"}, {"tags", "x"}}));
    CHECK(meta.message.find("metadata.tags") != std::string::npos);
    const json image = {{"role", "user"},
                        {"content", json::array({{{"type", "image"}, {"source", {{"type", "base64"}, {"data", ""}}}}})}};
    const ApiError img = refusal(with(hello(), "messages", json::array({image})));
    CHECK(img.code == "unsupported_parameter");
    CHECK(img.message.find("messages[0].content[0]") != std::string::npos);
    const json cited = {{"role", "user"},
                        {"content", json::array({{{"type", "text"}, {"text", "hi"}, {"citations", json::array()}}})}};
    CHECK(refusal(with(hello(), "messages", json::array({cited}))).message.find("messages[0].content[0].citations") !=
          std::string::npos);
    // cache_control changes no output here (prompt prefixes are reused anyway): accepted.
    const json cached = {{"role", "user"},
                         {"content", json::array({{{"type", "text"}, {"text", "Hello"}, {"cache_control", {{"type", "ephemeral"}}}}})}};
    CHECK(parse(with(hello(), "messages", json::array({cached}))).generation.prompt == parse(hello()).generation.prompt);
}

TEST_CASE("malformed Messages requests get a 400 that says what was expected and where") {
    json no_max = hello();
    no_max.erase("max_tokens");
    CHECK(refusal(no_max).code == "missing_max_tokens");
    CHECK(refusal(with(hello(), "max_tokens", 0)).code == "invalid_value");
    CHECK(refusal(with(hello(), "temperature", "hot")).code == "invalid_type");
    CHECK(refusal(with(hello(), "messages", json::array())).code == "invalid_value");
    CHECK(refusal(with(hello(), "messages", "Hello")).code == "invalid_type");
    const ApiError only_system = refusal(with(hello(), "messages", json::array({{{"role", "system"}, {"content", "x"}}})));
    CHECK(only_system.code == "invalid_value");
    CHECK(only_system.message.find("only system messages") != std::string::npos);
    CHECK(refusal(with(hello(), "messages", json::array({{{"role", "user"}}}))).code == "missing_content");
    CHECK(refusal(with(hello(), "messages", json::array({{{"role", "user"}, {"content", 5}}}))).code == "invalid_type");
    // Blocks in the wrong role: a user cannot call tools, an assistant cannot return results.
    const json user_call = {{"role", "user"},
                            {"content", json::array({{{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", json::object()}}})}};
    CHECK(refusal(with(hello(), "messages", json::array({user_call}))).message.find("messages[0].content[0]") !=
          std::string::npos);
    const json bad_input = {{"role", "assistant"},
                            {"content", json::array({{{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", "[]"}}})}};
    CHECK(refusal(with(hello(), "messages", json::array({bad_input}))).message.find(".input") != std::string::npos);
    const json bad_result = {{"role", "user"},
                             {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "t"}, {"content", 3}}})}};
    CHECK(refusal(with(hello(), "messages", json::array({bad_result}))).code == "invalid_type");
    CHECK(refusal(with(hello(), "system", json::array({{{"type", "image"}}}))).message.find("system[0]") != std::string::npos);
    CHECK(refusal(with(hello(), "stop_sequences", "END")).code == "invalid_type");
    CHECK(refusal(with(hello(), "stop_sequences", json::array({""}))).message.find("'stop_sequences'") != std::string::npos);
    json seventeen = json::array();
    for (int i = 0; i < 17; ++i) seventeen.push_back(std::string(std::size_t(i) + 1, 's'));
    CHECK(refusal(with(hello(), "stop_sequences", seventeen)).message.find("at most 16") != std::string::npos);
    CHECK(refusal(with(hello(), "stop_sequences", json::array({std::string(1025, 'x')}))).code == "invalid_value");
    CHECK(refusal(hello(), /*context=*/8).code == "context_length_exceeded");
}

TEST_CASE("tool results become tool turns in order; an error result says so; a trailing assistant turn is a prefill") {
    const json results = {{"role", "user"},
                          {"content", json::array({{{"type", "text"}, {"text", "first"}},
                                                   {{"type", "tool_result"}, {"tool_use_id", "a"}, {"content", "one"}},
                                                   {{"type", "tool_result"},
                                                    {"tool_use_id", "b"},
                                                    {"content", json::array({{{"type", "text"}, {"text", "two"}}})},
                                                    {"is_error", true}},
                                                   {{"type", "text"}, {"text", "last"}}})}};
    json chat = {{"messages", json::array({{{"role", "user"}, {"content", "first"}},
                                           {{"role", "tool"}, {"content", "one"}},
                                           {{"role", "tool"}, {"content", "Error: two"}},
                                           {{"role", "user"}, {"content", "last"}}})}};
    CHECK(parse(with(hello(), "messages", json::array({results}))).generation.prompt == parse_chat(chat).generation.prompt);

    // An empty block list is an empty turn, as an empty string is.
    CHECK(parse(with(hello(), "messages", json::array({{{"role", "user"}, {"content", json::array()}}}))).generation.prompt ==
          parse(with(hello(), "messages", json::array({{{"role", "user"}, {"content", ""}}}))).generation.prompt);

    const json prefill = json::array({{{"role", "user"}, {"content", "Hello"}}, {{"role", "assistant"}, {"content", "Hi"}}});
    json chat_prefill = {{"messages", json::array({{{"role", "user"}, {"content", "Hello"}}, {{"role", "assistant"}, {"content", "Hi"}}})}};
    CHECK(parse(with(hello(), "messages", prefill)).generation.prompt == parse_chat(chat_prefill).generation.prompt);
}

TEST_CASE("speculative, smol's extension, is read as on the chat route; count_tokens refuses it") {
    smol_test::check_speculative_field(hello(), [](const json& b) { return parse(b); });
    json body = hello();
    body.erase("max_tokens");
    try {
        smol_server::parse_messages_request(with(body, "speculative", true), tokenizer(), 4096,
                                            smol_server::MessagesEndpoint::count_tokens);
        FAIL("speculative accepted by count_tokens, which generates nothing");
    } catch (const ApiError& e) {
        CHECK(e.code == "unsupported_parameter");
        CHECK(e.message.find("'speculative'") != std::string::npos);
    }
}

TEST_CASE("count_tokens counts the prompt /v1/messages would run, without max_tokens and past the context") {
    json body = hello();
    body.erase("max_tokens");
    const smol_server::ApiRequest counted =
        smol_server::parse_messages_request(body, tokenizer(), 8, smol_server::MessagesEndpoint::count_tokens);
    CHECK(counted.prompt_tokens == parse(hello()).prompt_tokens);
    CHECK(counted.prompt_tokens > 8);
    try {
        smol_server::parse_messages_request(with(body, "max_tokens", 5), tokenizer(), 4096,
                                            smol_server::MessagesEndpoint::count_tokens);
        FAIL("max_tokens accepted by count_tokens");
    } catch (const ApiError& e) {
        CHECK(e.message.find("'max_tokens'") != std::string::npos);
    }
}

TEST_CASE("errors have Anthropic's shape and type for each status") {
    const json body = smol_server::anthropic_error_body(ApiError{400, "bad", "invalid_request_error", "x"});
    CHECK(body == json{{"type", "error"}, {"error", {{"type", "invalid_request_error"}, {"message", "bad"}}}});
    CHECK(smol_server::anthropic_error_type(401) == std::string("authentication_error"));
    CHECK(smol_server::anthropic_error_type(403) == std::string("permission_error"));
    CHECK(smol_server::anthropic_error_type(404) == std::string("not_found_error"));
    CHECK(smol_server::anthropic_error_type(413) == std::string("request_too_large"));
    CHECK(smol_server::anthropic_error_type(415) == std::string("invalid_request_error"));
    CHECK(smol_server::anthropic_error_type(500) == std::string("api_error"));
    CHECK(smol_server::anthropic_error_type(503) == std::string("overloaded_error"));
    CHECK(smol_server::is_messages_path("/v1/messages"));
    CHECK(smol_server::is_messages_path("/v1/messages/count_tokens"));
    CHECK_FALSE(smol_server::is_messages_path("/v1/messagesx"));
    CHECK_FALSE(smol_server::is_messages_path("/v1/chat/completions"));
}

TEST_CASE("stop_reason of each way a generation ends") {
    using smol::FinishReason;
    using smol_server::anthropic_stop_reason;
    CHECK(std::string(anthropic_stop_reason(FinishReason::end_of_generation)) == "end_turn");
    CHECK(std::string(anthropic_stop_reason(FinishReason::stop_string)) == "stop_sequence");
    CHECK(std::string(anthropic_stop_reason(FinishReason::max_tokens)) == "max_tokens");
    CHECK(std::string(anthropic_stop_reason(FinishReason::context_full)) == "max_tokens");
    CHECK(std::string(anthropic_stop_reason(FinishReason::tool_calls)) == "tool_use");
    CHECK(anthropic_stop_reason(FinishReason::cancelled) == nullptr);
    CHECK(anthropic_stop_reason(FinishReason::error) == nullptr);
}

TEST_CASE("the Message object: thinking, text and tool_use blocks, stop_reason, stop_sequence and usage") {
    const smol_server::ReplyIds ids{"msg_1", "smol", 0};
    smol::GenerationUsage usage;
    usage.prompt_tokens = 12;
    usage.cached_tokens = 4;
    usage.completion_tokens = 7;
    const std::vector<smol::ToolCall> calls = {{"get_weather", "{\"city\":\"Paris\"}"}, {"get_time", "{}"}};
    const json m = smol_server::message_json(ids, "hmm", "Looking.", calls, smol::FinishReason::tool_calls, "", usage);
    CHECK(m["id"] == "msg_1");
    CHECK(m["type"] == "message");
    CHECK(m["role"] == "assistant");
    CHECK(m["model"] == "smol");
    REQUIRE(m["content"].size() == 4);
    CHECK(m["content"][0] == json{{"type", "thinking"}, {"thinking", "hmm"}, {"signature", ""}});
    CHECK(m["content"][1] == json{{"type", "text"}, {"text", "Looking."}});
    CHECK(m["content"][2]["type"] == "tool_use");
    CHECK(m["content"][2]["name"] == "get_weather");
    CHECK(m["content"][2]["input"] == json{{"city", "Paris"}});
    CHECK(m["content"][3]["input"] == json::object());
    CHECK(m["content"][2]["id"].get<std::string>().starts_with("toolu_"));
    CHECK(m["content"][2]["id"] != m["content"][3]["id"]);
    CHECK(m["stop_reason"] == "tool_use");
    CHECK(m["stop_sequence"].is_null());
    // The prompt tokens run, and those reused from the KV cache as cache reads: 8 + 4 = 12.
    CHECK(m["usage"] == json{{"input_tokens", 8},
                             {"cache_creation_input_tokens", 0},
                             {"cache_read_input_tokens", 4},
                             {"output_tokens", 7}});

    const json stopped = smol_server::message_json(ids, "", "Hi", {}, smol::FinishReason::stop_string, "END", usage);
    CHECK(stopped["content"] == json::array({{{"type", "text"}, {"text", "Hi"}}}));
    CHECK(stopped["stop_reason"] == "stop_sequence");
    CHECK(stopped["stop_sequence"] == "END");
    CHECK(smol_server::prefixed_id("msg_").starts_with("msg_"));
    CHECK(smol_server::prefixed_id("msg_").find('-') == std::string::npos);
}

TEST_CASE("the SSE events: one block per kind, each call its own block, thinking never in a text block") {
    smol_server::MessagesStream stream({"msg_1", "smol", 0}, 12);
    std::string sse = stream.start();
    smol::StreamEvent think;
    think.reasoning = "Let me ";
    sse += stream.render(think);
    think.reasoning = "see.";
    sse += stream.render(think);
    smol::StreamEvent mixed;
    mixed.reasoning = " Done.";
    mixed.content = "Calling";
    sse += stream.render(mixed);
    smol::StreamEvent calls;
    calls.content = " now.";
    calls.tool_calls = {{"get_weather", "{\"city\":\"Paris\"}"}, {"get_time", "{\"zone\":\"UTC\"}"}};
    sse += stream.render(calls);
    smol::StreamEvent last;
    last.finished = true;
    last.finish = smol::FinishReason::tool_calls;
    last.usage.prompt_tokens = 12;
    last.usage.cached_tokens = 5;
    last.usage.completion_tokens = 30;
    sse += stream.render(last);

    const auto events = named_events(sse);
    std::vector<std::string> names;
    for (const auto& e : events) names.push_back(e.first);
    CHECK(names == std::vector<std::string>{"message_start", "ping",
                                            "content_block_start", "content_block_delta", "content_block_delta",
                                            "content_block_delta", "content_block_stop",  // thinking
                                            "content_block_start", "content_block_delta", "content_block_delta",
                                            "content_block_stop",  // text
                                            "content_block_start", "content_block_delta", "content_block_stop",  // call
                                            "content_block_start", "content_block_delta", "content_block_stop",  // call
                                            "message_delta", "message_stop"});
    CHECK(events[0].second["message"]["usage"] == json{{"input_tokens", 12}, {"output_tokens", 0}});
    CHECK(events[0].second["message"]["content"] == json::array());
    // Which text each block got, by index: deltas of one kind only per block.
    std::vector<std::string> kind(4), text(4);
    int open_index = -1;
    for (const auto& event : events) {
        const std::string& name = event.first;
        const json& data = event.second;
        if (name == "content_block_start") {
            CHECK(open_index == -1);  // blocks never overlap
            open_index = data["index"].get<int>();
            kind[open_index] = data["content_block"]["type"];
        } else if (name == "content_block_delta") {
            CHECK(data["index"] == open_index);
            const json& d = data["delta"];
            if (d["type"] == "thinking_delta") { CHECK(kind[open_index] == "thinking"); text[open_index] += d["thinking"].get<std::string>(); }
            if (d["type"] == "text_delta") { CHECK(kind[open_index] == "text"); text[open_index] += d["text"].get<std::string>(); }
            if (d["type"] == "input_json_delta") { CHECK(kind[open_index] == "tool_use"); text[open_index] += d["partial_json"].get<std::string>(); }
        } else if (name == "content_block_stop") {
            CHECK(data["index"] == open_index);
            open_index = -1;
        }
    }
    CHECK(kind == std::vector<std::string>{"thinking", "text", "tool_use", "tool_use"});
    CHECK(text[0] == "Let me see. Done.");
    CHECK(text[1] == "Calling now.");
    CHECK(json::parse(text[2]) == json{{"city", "Paris"}});  // the joined pieces are the input, valid JSON
    CHECK(json::parse(text[3]) == json{{"zone", "UTC"}});
    CHECK(events[17].second["delta"] == json{{"stop_reason", "tool_use"}, {"stop_sequence", nullptr}});
    // message_start gave the whole prompt; the split is known at the end.
    CHECK(events[17].second["usage"] == json{{"input_tokens", 7},
                                             {"cache_creation_input_tokens", 0},
                                             {"cache_read_input_tokens", 5},
                                             {"output_tokens", 30}});
}

TEST_CASE("the SSE stream ends with the stop sequence, or with an error event when generation failed") {
    smol_server::MessagesStream stream({"msg_1", "smol", 0}, 3);
    smol::StreamEvent last;
    last.content = "Hi";
    last.finished = true;
    last.finish = smol::FinishReason::stop_string;
    last.stop_string = "END";
    auto events = named_events(stream.render(last));
    REQUIRE(events.size() == 5);
    CHECK(events[3].second["delta"] == json{{"stop_reason", "stop_sequence"}, {"stop_sequence", "END"}});
    CHECK(events[4].first == "message_stop");

    smol_server::MessagesStream failing({"msg_2", "smol", 0}, 3);
    smol::StreamEvent failed;
    failed.content = "partial";
    failed.finished = true;
    failed.finish = smol::FinishReason::error;
    const ApiError error{500, "generation failed: boom", "server_error", "generation_failed"};
    events = named_events(failing.render(failed, &error));
    REQUIRE(events.size() == 4);
    CHECK(events[2].first == "content_block_stop");  // the open block is closed first
    CHECK(events[3].first == "error");
    CHECK(events[3].second["error"] == json{{"type", "api_error"}, {"message", "generation failed: boom"}});
}

}  // namespace test_messages_api
