// smol-server's OpenAI Responses mapping (examples/server/responses_request.hpp and responses_replies.hpp) without HTTP: what a
// /v1/responses body turns into (the same request the chat route builds for the same
// conversation), which bodies are refused and how, and the Response object and SSE events a
// generation's events render as.

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "openai_chat_request.hpp"
#include "responses_replies.hpp"
#include "responses_request.hpp"
#include "server_api_helpers.hpp"
#include "smol/smol.hpp"
#include "tiny_fixture.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_responses_api {

namespace {

using smol_server::ApiError;
using smol_server::json;
using smol_test::chat_weather_tools;
using smol_test::finished;
using smol_test::weather_schema;
using smol_test::with;

const smol::text::Tokenizer& tokenizer() { return smol_test::tiny_tokenizer(); }

json hello() { return json{{"model", "smol"}, {"input", "Hello"}}; }

smol_server::ApiRequest parse(const json& body, int context = 4096) {
    return smol_server::parse_responses_request(body, tokenizer(), context);
}

smol_server::ApiRequest parse_chat(const json& body) { return smol_server::parse_chat_request(body, tokenizer(), 4096); }

ApiError refusal(const json& body, int context = 4096,
                 smol_server::ResponsesEndpoint endpoint = smol_server::ResponsesEndpoint::create) {
    return smol_test::refusal_of(
        body, [&](const json& b) { smol_server::parse_responses_request(b, tokenizer(), context, endpoint); });
}

const json response_tools = json::array(
    {{{"type", "function"}, {"name", "get_weather"}, {"description", "Weather"}, {"parameters", weather_schema},
      {"strict", true}}});

// Whether the grammar takes `text` whole.
bool matches(const std::string& gbnf, std::string_view text) {
    const smol::text::Grammar g = smol::text::Grammar::parse(gbnf);
    smol::text::GrammarMatcher m(g);
    smol::text::GrammarState s = m.start();
    for (const char c : text)
        if (!m.step(s, static_cast<std::uint8_t>(c))) return false;
    return m.accepting(s);
}

// The SSE text split into (event name, data) pairs, checking each event's framing and that the
// sequence numbers count up from 0.
std::vector<std::pair<std::string, json>> events_of(const std::string& sse) {
    const auto events = smol_test::named_events(sse);
    for (std::size_t i = 0; i < events.size(); ++i) CHECK(events[i].second["sequence_number"] == i);
    return events;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, json>>& events) {
    std::vector<std::string> names;
    for (const auto& e : events) names.push_back(e.first);
    return names;
}

smol::StreamEvent step(std::string reasoning, std::string content, std::vector<smol::ToolCall> calls = {}) {
    smol::StreamEvent e;
    e.reasoning = std::move(reasoning);
    e.content = std::move(content);
    e.tool_calls = std::move(calls);
    return e;
}

// Some 3000 tokens: past a 2048-token context.
std::string long_text() {
    std::string text;
    for (int i = 0; i < 3000; ++i) text += "word ";
    return text;
}

const smol_server::ReplyIds ids{"resp_test", "tiny-model", 1700000000};

}  // namespace

TEST_CASE("a Responses request becomes the same request the chat route builds for the same conversation") {
    const json responses = {
        {"model", "smol"},
        {"instructions", "Be brief."},
        {"max_output_tokens", 50},
        {"temperature", 0.5},
        {"top_p", 0.9},
        {"tools", response_tools},
        {"metadata", {{"run", "17"}}},
        {"user", "u-17"},
        {"store", false},
        {"truncation", "disabled"},
        {"include", json::array()},
        {"parallel_tool_calls", true},
        {"input",
         json::array({{{"type", "message"}, {"role", "developer"}, {"content", "Be kind."}},
                      {{"role", "user"}, {"content", json::array({{{"type", "input_text"}, {"text", "Weather in Paris?"}}})}},
                      {{"type", "reasoning"}, {"id", "rs_1"}, {"summary", json::array()},
                       {"content", json::array({{{"type", "reasoning_text"}, {"text", "a call"}}})}},
                      {{"type", "message"}, {"id", "msg_1"}, {"status", "completed"}, {"role", "assistant"},
                       {"content", json::array({{{"type", "output_text"}, {"text", "Let me look."},
                                                 {"annotations", json::array()}}})}},
                      {{"type", "function_call"}, {"id", "fc_1"}, {"call_id", "call_1"}, {"name", "get_weather"},
                       {"arguments", "{\"city\":\"Paris\"}"}, {"status", "completed"}},
                      {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "sunny"}},
                      {{"role", "user"}, {"content", "And tomorrow?"}}})}};
    const json chat = {
        {"max_tokens", 50},
        {"temperature", 0.5},
        {"top_p", 0.9},
        {"tools", chat_weather_tools},
        {"messages",
         json::array({{{"role", "system"}, {"content", "Be brief.\n\nBe kind."}},
                      {{"role", "user"}, {"content", "Weather in Paris?"}},
                      {{"role", "assistant"},
                       {"content", "Let me look."},
                       {"tool_calls",
                        json::array({{{"type", "function"},
                                      {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}})}},
                      {{"role", "tool"}, {"content", "sunny"}},
                      {{"role", "user"}, {"content", "And tomorrow?"}}})}};
    const smol_server::ApiRequest r = parse(responses);
    const smol_server::ApiRequest c = parse_chat(chat);
    CHECK(r.generation.prompt == c.generation.prompt);
    CHECK(r.generation.assistant_prefix == c.generation.assistant_prefix);
    CHECK(r.prompt_tokens == int(r.generation.prompt.size()));
    const smol::GenerationParams& p = r.generation.params;
    CHECK(p.max_tokens == 50);
    CHECK(p.sampling.temperature == doctest::Approx(0.5));
    CHECK(p.sampling.top_p == doctest::Approx(0.9));
    CHECK(p.parse_tool_calls);
    CHECK(r.grammar == c.grammar);  // tool_choice auto: the same lazy call grammar
    CHECK(p.grammar_trigger == c.generation.params.grammar_trigger);
    CHECK_FALSE(r.stream);
    CHECK(parse(with(hello(), "stream", true)).stream);

    // A string input is one user turn; several calls in a row are one assistant turn.
    CHECK(parse(hello()).generation.prompt ==
          parse_chat(json{{"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})}}).generation.prompt);
    const json call = {{"type", "function_call"}, {"call_id", "c"}, {"name", "get_weather"}, {"arguments", "{\"city\":\"A\"}"}};
    const json two_calls = with(hello(), "input", json::array({{{"role", "user"}, {"content", "Hi"}}, call, call,
                                                               {{"type", "function_call_output"}, {"call_id", "c"}, {"output", "1"}},
                                                               {{"type", "function_call_output"}, {"call_id", "c"}, {"output", "2"}}}));
    const json chat_call = {{"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"A\"}"}}}};
    CHECK(parse(two_calls).generation.prompt ==
          parse_chat(json{{"messages", json::array({{{"role", "user"}, {"content", "Hi"}},
                                                    {{"role", "assistant"}, {"content", ""}, {"tool_calls", {chat_call, chat_call}}},
                                                    {{"role", "tool"}, {"content", "1"}},
                                                    {{"role", "tool"}, {"content", "2"}}})}})
              .generation.prompt);
}

TEST_CASE("system text is joined as the Messages API joins it: in order, a blank line apart, empty parts adding nothing") {
    const json system_and_developer = json::array({{{"role", "developer"}, {"content", ""}},
                                                   {{"role", "system"}, {"content", "Be kind."}},
                                                   {{"role", "user"}, {"content", "Hello"}}});
    const json joined = json::array({{{"role", "user"}, {"content", "Hello"}}});
    CHECK(parse(with(with(hello(), "instructions", "Be brief."), "input", system_and_developer)).generation.prompt ==
          parse(with(with(hello(), "instructions", "Be brief.\n\nBe kind."), "input", joined)).generation.prompt);
    // Empty instructions are as none: the template writes its default persona for both.
    CHECK(parse(with(hello(), "instructions", "")).generation.prompt == parse(hello()).generation.prompt);
}

TEST_CASE("reasoning.effort: none and minimal turn thinking off, low to high on, absent leaves the default (on)") {
    const std::string off_prefix = "<think>\n\n</think>\n";  // the empty think block of no-think mode
    CHECK(parse(hello()).generation.assistant_prefix != off_prefix);
    for (const char* effort : {"none", "minimal"}) {
        CAPTURE(effort);
        CHECK(parse(with(hello(), "reasoning", {{"effort", effort}})).generation.assistant_prefix == off_prefix);
    }
    const std::pair<const char*, int> efforts[] = {{"low", smol_server::kLowEffortBudget},
                                                   {"medium", smol_server::kMediumEffortBudget},
                                                   {"high", smol_server::kHighEffortBudget}};
    for (const auto& [effort, budget] : efforts) {
        CAPTURE(effort);
        const smol_server::ApiRequest r = parse(with(hello(), "reasoning", {{"effort", effort}, {"summary", "auto"}}));
        CHECK(r.generation.assistant_prefix == parse(hello()).generation.assistant_prefix);
        CHECK(r.generation.params.reasoning_budget == budget);
    }
    CHECK(parse(hello()).generation.params.reasoning_budget == -1);
    CHECK(refusal(with(hello(), "reasoning", {{"effort", "xhigh"}})).message.find("reasoning.effort") != std::string::npos);
    CHECK(refusal(with(hello(), "reasoning", {{"generate_summary", "auto"}})).message.find("reasoning.generate_summary") !=
          std::string::npos);
    // A JSON format holds the answer after the reasoning: thinking stays as asked.
    const json json_format = {{"format", {{"type", "json_object"}}}};
    CHECK(parse(with(hello(), "text", json_format)).generation.assistant_prefix == parse(hello()).generation.assistant_prefix);
    json both = with(hello(), "text", json_format);
    both["reasoning"] = {{"effort", "high"}};
    CHECK(parse(both).generation.params.reasoning_budget == smol_server::kHighEffortBudget);
    CHECK_FALSE(parse(both).grammar.empty());
}

TEST_CASE("tool_choice required and a named function force one call through the chat route's grammar") {
    const json tooled = with(hello(), "tools", response_tools);
    const json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})}, {"tools", chat_weather_tools}};
    CHECK(parse(tooled).generation.prompt == parse_chat(chat).generation.prompt);
    const smol_server::ApiRequest required = parse(with(tooled, "tool_choice", "required"));
    CHECK_FALSE(required.grammar.empty());
    CHECK(required.grammar == parse_chat(with(chat, "tool_choice", "required")).grammar);
    CHECK(parse(with(tooled, "tool_choice", {{"type", "function"}, {"name", "get_weather"}})).grammar ==
          parse_chat(with(chat, "tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}})).grammar);
    const smol_server::ApiRequest none = parse(with(tooled, "tool_choice", "none"));
    CHECK_FALSE(none.generation.params.parse_tool_calls);
    CHECK(none.generation.prompt == parse(hello()).generation.prompt);
    CHECK(parse(with(tooled, "parallel_tool_calls", false)).generation.prompt == parse(tooled).generation.prompt);

    CHECK(refusal(with(tooled, "tool_choice", {{"type", "function"}, {"name", "get_time"}})).message.find("get_time") !=
          std::string::npos);
    CHECK(refusal(with(tooled, "tool_choice", "any")).code == "invalid_value");
    CHECK(refusal(with(hello(), "tool_choice", "required")).message.find("'tools' is empty") != std::string::npos);
    for (const char* hosted : {"web_search", "file_search", "code_interpreter", "computer_use_preview", "mcp", "custom"}) {
        CAPTURE(hosted);
        const ApiError tool = refusal(with(hello(), "tools", json::array({{{"type", hosted}, {"name", "x"}}})));
        CHECK(tool.code == "unsupported_parameter");
        CHECK(tool.message.find("tools[0].type") != std::string::npos);
        const ApiError choice = refusal(with(tooled, "tool_choice", {{"type", hosted}}));
        CHECK(choice.message.find("tool_choice.type") != std::string::npos);
    }
    CHECK(refusal(with(hello(), "tools", json::array({{{"type", "function"}, {"name", "a b"}}}))).message.find("tools[0].name") !=
          std::string::npos);
    CHECK(refusal(with(hello(), "tools", json::array({{{"type", "function"}, {"name", "f"}, {"defer_loading", true}}})))
              .message.find("tools[0].defer_loading") != std::string::npos);
    json many = json::array();
    for (int i = 0; i < 129; ++i) many.push_back({{"type", "function"}, {"name", std::string(std::size_t(i) + 1, 'f')}});
    CHECK(refusal(with(hello(), "tools", many)).message.find("at most 128") != std::string::npos);
}

TEST_CASE("text.format: json_schema as the chat route's response_format; with tools a JSON answer or a call both hold") {
    const json schema = {{"type", "object"},
                         {"properties", {{"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}}}}},
                         {"required", json::array({"n"})},
                         {"additionalProperties", false}};
    const json format = {{"format", {{"type", "json_schema"}, {"name", "digit"}, {"schema", schema}, {"strict", true}}}};
    const json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})},
                       {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "digit"}, {"schema", schema}}}}}};
    const smol_server::ApiRequest formatted = parse(with(hello(), "text", format));
    CHECK(formatted.grammar == parse_chat(chat).grammar);
    CHECK(parse(with(hello(), "text", {{"format", {{"type", "json_object"}}}})).grammar == smol::text::kJsonObjectGrammar);
    CHECK(parse(with(hello(), "text", {{"format", {{"type", "text"}}}, {"verbosity", "medium"}})).grammar.empty());

    json tooled = with(hello(), "text", format);
    tooled["tools"] = response_tools;
    const std::string both = parse(tooled).grammar;
    CHECK(matches(both, R"({"n": 7})"));
    CHECK(matches(both, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
    // The answer keeps to its schema, and the call to its tool's.
    CHECK_FALSE(matches(both, R"({"n": 12})"));
    CHECK_FALSE(matches(both, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
    CHECK_FALSE(matches(both, "Sure!"));
    CHECK(parse(tooled).generation.params.parse_tool_calls);
    // A forced call is not an answer: the format does not apply to it.
    const json forced = with(with(hello(), "tools", response_tools), "tool_choice", "required");
    CHECK(parse(with(tooled, "tool_choice", "required")).grammar == parse(forced).grammar);

    CHECK(refusal(with(hello(), "text", {{"format", {{"type", "json_schema"}, {"name", "x"}}}})).message.find("text.format.schema") !=
          std::string::npos);
    CHECK(refusal(with(hello(), "text", {{"format", {{"type", "grammar"}}}})).message.find("text.format.type") != std::string::npos);
    CHECK(refusal(with(hello(), "text", {{"verbosity", "high"}})).message.find("text.verbosity") != std::string::npos);
    CHECK(refusal(with(hello(), "text", {{"format", {{"type", "json_schema"}, {"schema", {{"type", "string"}, {"pattern", "^a(?=b)"}}}}}}))
              .message.find("pattern") != std::string::npos);
}

TEST_CASE("prefix_rule_names renames rules, never literals, classes, counts or comments") {
    CHECK(smol_server::prefix_rule_names("root ::= a \"b c\" [d-e]{1,2} # f g\na ::= \"\\\"x\" | [\\]y]", "p-") ==
          "p-root ::= p-a \"b c\" [d-e]{1,2} # f g\np-a ::= \"\\\"x\" | [\\]y]");
}

TEST_CASE("every field and item smol does not implement is a 400 naming it") {
    for (const char* field : {"background", "previous_response_id", "conversation", "prompt", "service_tier",
                              "stream_options", "top_logprobs", "safety_identifier", "context_management", "max_tool_calls",
                              "max_tokens", "seed"}) {
        CAPTURE(field);
        const ApiError e = refusal(with(hello(), field, 1));
        CHECK(e.status == 400);
        CHECK(e.code == "unsupported_parameter");
        CHECK(e.message.find(std::string("'") + field + "'") != std::string::npos);
        CHECK(e.message.find("smol-server's Responses API") != std::string::npos);
    }
    CHECK(refusal(with(hello(), "store", true)).message.find("'store'") != std::string::npos);
    CHECK(refusal(with(hello(), "truncation", "auto")).message.find("'truncation'") != std::string::npos);
    CHECK(refusal(with(hello(), "include", json::array({"reasoning.encrypted_content", "message.output_text.logprobs"})))
              .message.find("include[1]") != std::string::npos);
    // What Codex CLI sends on every request changes no output: accepted.
    json codex = with(hello(), "include", json::array({"reasoning.encrypted_content"}));
    codex["client_metadata"] = {{"x-codex-installation-id", "abc"}};
    codex["prompt_cache_key"] = "01a21841-0733-7822-a81e-8ad5e78e3a9a";
    CHECK(parse(codex).generation.prompt == parse(hello()).generation.prompt);
    CHECK(refusal(with(hello(), "client_metadata", "x")).code == "invalid_type");
    const auto item_refusal = [](json item) { return refusal(with(hello(), "input", json::array({std::move(item)}))); };
    CHECK(item_refusal({{"type", "item_reference"}, {"id", "msg_1"}}).message.find("input[0].type") != std::string::npos);
    CHECK(item_refusal({{"type", "computer_call_output"}, {"call_id", "c"}}).code == "unsupported_parameter");
    CHECK(item_refusal({{"role", "user"}, {"content", json::array({{{"type", "input_image"}, {"image_url", "x"}}})}})
              .message.find("input[0].content[0]") != std::string::npos);
    CHECK(item_refusal({{"role", "user"}, {"content", "hi"}, {"name", "bob"}}).message.find("input[0].name") != std::string::npos);
    CHECK(item_refusal({{"role", "user"}, {"content", json::array({{{"type", "input_text"}, {"text", "a"}, {"x", 1}}})}})
              .message.find("input[0].content[0].x") != std::string::npos);
    CHECK(refusal(with(hello(), "metadata", {{"k", 1}})).message.find("metadata.k") != std::string::npos);
}

TEST_CASE("Responses: text is text in instructions, input text of every role, function outputs and tools") {
    using Make = std::function<json(const std::string&)>;
    const auto input = [](json items) { return json{{"model", "smol"}, {"input", std::move(items)}}; };
    const std::vector<Make> makers = {
        [&](const std::string& t) { return with(hello(), "instructions", t); },
        [&](const std::string& t) { return with(hello(), "input", t); },
        [&](const std::string& t) { return input({{{"role", "developer"}, {"content", t}}, {{"role", "user"}, {"content", "q"}}}); },
        [&](const std::string& t) {
            return input({{{"role", "user"}, {"content", json::array({{{"type", "input_text"}, {"text", t}}})}}});
        },
        [&](const std::string& t) {
            return input({{{"role", "user"}, {"content", "q"}},
                          {{"type", "message"}, {"role", "assistant"},
                           {"content", json::array({{{"type", "output_text"}, {"text", t}}})}},
                          {{"role", "user"}, {"content", "q"}}});
        },
        [&](const std::string& t) {
            return input({{{"role", "user"}, {"content", "q"}},
                          {{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", "{}"}},
                          {{"type", "function_call_output"}, {"call_id", "c"}, {"output", t}}});
        },
        [&](const std::string& t) {
            return with(hello(), "tools", json::array({{{"type", "function"}, {"name", "f"}, {"description", t},
                                                         {"parameters", {{"type", "object"}}}}}));
        },
    };
    smol_test::check_text_stays_text(makers, [](const json& b) { return parse(b); }, tokenizer());
}

TEST_CASE("JSON inside a string is held to the body's caps: deep or huge arguments are a 400, not a crash") {
    // A function_call's arguments are JSON text in a string: the body's own caps never see the
    // brackets in it. Nested a million deep this once overflowed the stack of whatever recursed
    // over the parsed value; 2 million values passed the value cap.
    const auto call_with = [](std::string arguments) {
        return with(hello(), "input", json::array({{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"},
                                                    {"arguments", "{\"a\": " + std::move(arguments) + "}"}},
                                                   {{"type", "function_call_output"}, {"call_id", "c"}, {"output", "x"}}}));
    };
    const std::size_t deep = 1'000'000;
    const smol_server::ApiError nested = refusal(call_with(std::string(deep, '[') + std::string(deep, ']')));
    CHECK(nested.status == 400);
    CHECK(nested.code == "json_too_complex");
    CHECK(nested.message.find("input[0].arguments") != std::string::npos);
    CHECK(nested.message.find("deep") != std::string::npos);

    std::string flat = "[0";
    for (int i = 1; i < 2'000'000; ++i) flat += ",0";
    flat += "]";
    const smol_server::ApiError wide = refusal(call_with(flat));
    CHECK(wide.code == "json_too_complex");
    CHECK(wide.message.find("values") != std::string::npos);

    // Within the caps the same shape is accepted.
    CHECK_NOTHROW(parse(call_with(std::string(32, '[') + std::string(32, ']'))));
}

TEST_CASE("malformed Responses requests get a 400 that says what was expected and where") {
    CHECK(refusal(json{{"model", "smol"}}).code == "missing_input");
    CHECK(refusal(with(hello(), "input", json::array())).message.find("no user, assistant or tool turn") != std::string::npos);
    CHECK(refusal(with(hello(), "input", 7)).code == "invalid_type");
    CHECK(refusal(with(hello(), "input", json::array({{{"role", "tool"}, {"content", "x"}}}))).message.find("input[0].role") !=
          std::string::npos);
    CHECK(refusal(with(hello(), "input", json::array({{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"},
                                                       {"arguments", "[1]"}}})))
              .message.find("input[0].arguments") != std::string::npos);
    CHECK(refusal(with(hello(), "input", json::array({{{"type", "function_call_output"}, {"output", "x"}}})))
              .message.find("input[0].call_id") != std::string::npos);
    CHECK(refusal(with(hello(), "instructions", 3)).message.find("'instructions'") != std::string::npos);
    CHECK(refusal(with(hello(), "max_output_tokens", 0)).message.find("'max_output_tokens'") != std::string::npos);
    CHECK(refusal(with(hello(), "temperature", "hot")).code == "invalid_type");
    CHECK(refusal(with(hello(), "parallel_tool_calls", "yes")).code == "invalid_type");
    CHECK(refusal(with(hello(), "input", long_text()), 2048).code == "context_length_exceeded");
}

TEST_CASE("speculative, smol's extension, is read as on the chat route; input_tokens refuses it") {
    smol_test::check_speculative_field(hello(), [](const json& b) { return parse(b); });
    CHECK(refusal(with(hello(), "speculative", true), 4096, smol_server::ResponsesEndpoint::input_tokens).code ==
          "unsupported_parameter");
}

TEST_CASE("input_tokens counts the prompt /v1/responses would run, past the context too") {
    const json body = {{"model", "smol"}, {"instructions", "Be brief."}, {"input", "Hello there"}, {"tools", response_tools}};
    const smol_server::ApiRequest counted =
        smol_server::parse_responses_request(body, tokenizer(), 4096, smol_server::ResponsesEndpoint::input_tokens);
    CHECK(counted.prompt_tokens == parse(body).prompt_tokens);
    CHECK(smol_server::parse_responses_request(with(body, "input", long_text()), tokenizer(), 2048,
                                               smol_server::ResponsesEndpoint::input_tokens)
              .prompt_tokens > 2048);
    for (const char* create_only : {"max_output_tokens", "stream", "temperature", "metadata", "store"}) {
        CAPTURE(create_only);
        CHECK(refusal(with(body, create_only, 1), 4096, smol_server::ResponsesEndpoint::input_tokens).code ==
              "unsupported_parameter");
    }
}

TEST_CASE("the Response object: reasoning, message and one item per call; reasoning never in output_text") {
    smol::GenerationUsage usage;
    usage.prompt_tokens = 7;
    usage.cached_tokens = 2;
    usage.completion_tokens = 5;
    const json body = with(with(hello(), "tools", response_tools), "metadata", {{"run", "1"}});
    const smol_server::ResponseSettings settings = smol_server::response_settings(body);
    const std::vector<smol::ToolCall> calls{{"get_weather", R"({"city":"Paris"})"}, {"get_weather", R"({"city":"Oslo"})"}};
    const json r = smol_server::response_object(ids, settings, "hmm", 1, "Let me look.", calls,
                                                smol::FinishReason::tool_calls, usage);
    CHECK(r["id"] == "resp_test");
    CHECK(r["object"] == "response");
    CHECK(r["created_at"] == 1700000000);
    CHECK(r["status"] == "completed");
    CHECK(r["incomplete_details"].is_null());
    CHECK(r["error"].is_null());
    CHECK(r["model"] == "tiny-model");
    REQUIRE(r["output"].size() == 4);
    CHECK(r["output"][0]["type"] == "reasoning");
    CHECK(r["output"][0]["content"] == json::array({{{"type", "reasoning_text"}, {"text", "hmm"}}}));
    CHECK(r["output"][0]["summary"] == json::array());
    CHECK(r["output"][1]["type"] == "message");
    CHECK(r["output"][1]["role"] == "assistant");
    CHECK(r["output"][1]["content"] ==
          json::array({{{"type", "output_text"}, {"text", "Let me look."}, {"annotations", json::array()}}}));
    CHECK(r["output_text"] == "Let me look.");
    for (int i : {2, 3}) {
        const json& item = r["output"][i];
        CHECK(item["type"] == "function_call");
        CHECK(item["name"] == "get_weather");
        CHECK(item["id"].get<std::string>().starts_with("fc_"));
        CHECK(item["call_id"].get<std::string>().starts_with("call_"));
        CHECK(item["status"] == "completed");
    }
    CHECK(r["output"][2]["arguments"] == R"({"city":"Paris"})");
    CHECK(r["output"][3]["arguments"] == R"({"city":"Oslo"})");
    CHECK(r["output"][2]["call_id"] != r["output"][3]["call_id"]);
    CHECK(r["usage"] == json{{"input_tokens", 7},
                             {"input_tokens_details", {{"cached_tokens", 2}}},
                             {"output_tokens", 5},
                             {"output_tokens_details", {{"reasoning_tokens", 1}}},
                             {"total_tokens", 12}});
    // The request's settings, as the SDK's types expect them.
    CHECK(r["store"] == false);
    CHECK(r["tool_choice"] == "auto");
    CHECK(r["parallel_tool_calls"] == true);
    CHECK(r["metadata"] == json{{"run", "1"}});
    CHECK(r["text"] == json{{"format", {{"type", "text"}}}});
    CHECK(r["tools"][0] == json{{"type", "function"}, {"name", "get_weather"}, {"description", "Weather"},
                                {"parameters", weather_schema}, {"strict", true}});
    CHECK(r["temperature"].is_null());

    // parallel_tool_calls false: the first call only. A reply cut short is incomplete.
    const json one = smol_server::response_object(ids, smol_server::response_settings(with(body, "parallel_tool_calls", false)),
                                                  "", 0, "", calls, smol::FinishReason::tool_calls, usage);
    REQUIRE(one["output"].size() == 1);
    CHECK(one["output"][0]["arguments"] == R"({"city":"Paris"})");
    const json cut = smol_server::response_object(ids, settings, "a long thought", 3, "", {}, smol::FinishReason::max_tokens, usage);
    CHECK(cut["status"] == "incomplete");
    CHECK(cut["incomplete_details"] == json{{"reason", "max_output_tokens"}});
    REQUIRE(cut["output"].size() == 2);  // the reasoning, and the (empty) message
    CHECK(cut["output"][0]["status"] == "incomplete");
    CHECK(cut["output"][1]["content"][0]["text"] == "");
    CHECK(cut["output_text"] == "");
}

TEST_CASE("the SSE events: created, in_progress, one item per kind and per call, indices, then completed") {
    smol_server::ResponsesStream stream(ids, smol_server::response_settings(hello()), &tokenizer());
    std::string sse = stream.start();
    sse += stream.render(step("think", ""));
    sse += stream.render(step(" more", "Hel"));
    sse += stream.render(step("", "lo", {{"get_weather", R"({"city":"Paris"})"}, {"get_weather", R"({"city":"Oslo"})"}}));
    sse += stream.render(finished(smol::FinishReason::tool_calls));
    const auto events = events_of(sse);
    CHECK(names_of(events) == std::vector<std::string>{
                                  "response.created", "response.in_progress",
                                  // the reasoning item
                                  "response.output_item.added", "response.content_part.added",
                                  "response.reasoning_text.delta", "response.reasoning_text.delta",
                                  "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
                                  // the message
                                  "response.output_item.added", "response.content_part.added", "response.output_text.delta",
                                  "response.output_text.delta", "response.output_text.done", "response.content_part.done",
                                  "response.output_item.done",
                                  // two calls, each its own item
                                  "response.output_item.added", "response.function_call_arguments.delta",
                                  "response.function_call_arguments.done", "response.output_item.done",
                                  "response.output_item.added", "response.function_call_arguments.delta",
                                  "response.function_call_arguments.done", "response.output_item.done",
                                  "response.completed"});
    REQUIRE(events.size() == 25);
    CHECK(events[0].second["response"]["status"] == "in_progress");
    CHECK(events[0].second["response"]["output"] == json::array());
    CHECK(events[2].second["output_index"] == 0);
    CHECK(events[2].second["item"]["type"] == "reasoning");
    const json reasoning_id = events[2].second["item"]["id"];
    for (int i = 3; i <= 8; ++i) {
        CHECK(events[std::size_t(i)].second["output_index"] == 0);
        if (i < 8) CHECK(events[std::size_t(i)].second["item_id"] == reasoning_id);
    }
    CHECK(events[3].second["part"] == json{{"type", "reasoning_text"}, {"text", ""}});
    CHECK(events[5].second["delta"] == " more");
    CHECK(events[6].second["text"] == "think more");
    CHECK(events[8].second["item"]["content"][0]["text"] == "think more");
    CHECK(events[9].second["output_index"] == 1);
    CHECK(events[9].second["item"]["type"] == "message");
    CHECK(events[9].second["item"]["status"] == "in_progress");
    const json message_id = events[9].second["item"]["id"];
    CHECK(events[10].second["part"]["type"] == "output_text");
    CHECK(events[11].second["item_id"] == message_id);
    CHECK(events[11].second["content_index"] == 0);
    CHECK(events[11].second["delta"] == "Hel");
    CHECK(events[13].second["text"] == "Hello");
    CHECK(events[15].second["item"]["content"][0]["text"] == "Hello");
    CHECK(events[15].second["item"]["status"] == "completed");
    CHECK(events[16].second["output_index"] == 2);
    CHECK(events[16].second["item"]["arguments"] == "");
    CHECK(events[17].second["item_id"] == events[16].second["item"]["id"]);
    CHECK(events[17].second["delta"] == R"({"city":"Paris"})");
    CHECK(events[18].second["name"] == "get_weather");
    CHECK(events[20].second["output_index"] == 3);
    CHECK(events[22].second["arguments"] == R"({"city":"Oslo"})");
    const json& done = events[24].second["response"];
    CHECK(done["status"] == "completed");
    REQUIRE(done["output"].size() == 4);
    CHECK(done["output"][0] == events[8].second["item"]);
    CHECK(done["output"][1] == events[15].second["item"]);
    CHECK(done["output"][3] == events[23].second["item"]);
    CHECK(done["output_text"] == "Hello");  // reasoning never reaches the answer
    CHECK(done["usage"]["output_tokens"] == 5);
    CHECK(done["usage"]["output_tokens_details"]["reasoning_tokens"] ==
          int(tokenizer().encode("think more", false).size()));
}

TEST_CASE("the SSE stream ends incomplete at the limit, with an empty message when nothing was said, or failed") {
    SUBCASE("cut short while reasoning") {
        smol_server::ResponsesStream stream(ids, smol_server::response_settings(hello()), nullptr);
        std::string sse = stream.start();  // not start() + render(): the operands of + are unordered
        sse += stream.render(finished(smol::FinishReason::max_tokens, step("hmm", "")));
        const auto events = events_of(sse);
        REQUIRE(events.size() == 14);
        CHECK(events[7].first == "response.output_item.done");
        CHECK(events[7].second["item"]["status"] == "incomplete");
        CHECK(events[8].second["item"]["type"] == "message");  // the empty message every reply without calls has
        CHECK(events[10].second["text"] == "");
        CHECK(events[13].first == "response.incomplete");
        CHECK(events[13].second["response"]["incomplete_details"] == json{{"reason", "max_output_tokens"}});
        CHECK(events[13].second["response"]["output"].size() == 2);
    }
    SUBCASE("failed: an error event, then response.failed") {
        smol_server::ResponsesStream stream(ids, smol_server::response_settings(hello()), nullptr);
        const ApiError error{500, "generation failed: boom", "server_error", "generation_failed"};
        std::string sse = stream.start();
        sse += stream.render(step("", "Hi"));
        sse += stream.render(finished(smol::FinishReason::error), &error);
        const auto events = events_of(sse);
        REQUIRE(events.size() == 10);
        CHECK(events[7].second["item"]["status"] == "incomplete");
        CHECK(events[8].second == json{{"type", "error"}, {"code", "generation_failed"}, {"message", "generation failed: boom"},
                                       {"param", nullptr}, {"sequence_number", 8}});
        CHECK(events[9].first == "response.failed");
        CHECK(events[9].second["response"]["status"] == "failed");
        CHECK(events[9].second["response"]["error"] == json{{"code", "server_error"}, {"message", "generation failed: boom"}});
        CHECK(events[9].second["response"]["output"].size() == 1);
    }
    SUBCASE("parallel_tool_calls false: the first call only") {
        smol_server::ResponsesStream stream(ids, smol_server::response_settings(with(hello(), "parallel_tool_calls", false)),
                                            nullptr);
        std::string sse = stream.start();
        sse += stream.render(finished(smol::FinishReason::tool_calls, step("", "", {{"a", "{}"}, {"b", "{}"}})));
        const auto events = events_of(sse);
        REQUIRE(events.size() == 7);
        CHECK(events[2].second["item"]["name"] == "a");
        CHECK(events[6].second["response"]["output"].size() == 1);
    }
}

}  // namespace test_responses_api
