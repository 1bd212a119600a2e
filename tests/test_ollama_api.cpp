// smol-server's ollama mapping (examples/server/ollama_request.hpp, ollama_replies.hpp and
// ollama_model_info.hpp) without HTTP: what a /api/chat or
// /api/generate body turns into (the same request the chat route builds for the same
// conversation), which bodies are refused and how, the objects a reply is made of, and what
// /api/show and /api/tags say of a model.

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "ollama_model_info.hpp"
#include "ollama_replies.hpp"
#include "ollama_request.hpp"
#include "openai_chat_request.hpp"
#include "server_api_helpers.hpp"
#include "smol/smol.hpp"
#include "tiny_fixture.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_ollama_api {

namespace {

using smol_server::ApiError;
using smol_server::json;
using smol_test::chat_weather_tools;
using smol_test::with;

const smol::text::Tokenizer& tokenizer() { return smol_test::tiny_tokenizer(); }

json hello() { return json{{"model", "smol"}, {"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})}}; }
json prompt(const std::string& text) { return json{{"model", "smol"}, {"prompt", text}}; }

smol_server::ApiRequest parse(const json& body, int context = 4096) {
    return smol_server::parse_ollama_chat_request(body, tokenizer(), context);
}
smol_server::ApiRequest parse_generate(const json& body, int context = 4096) {
    return smol_server::parse_ollama_generate_request(body, tokenizer(), context);
}
smol_server::ApiRequest parse_chat(const json& body) { return smol_server::parse_chat_request(body, tokenizer(), 4096); }

ApiError refusal(const json& body, int context = 4096) {
    return smol_test::refusal_of(body, [&](const json& b) { parse(b, context); });
}
ApiError generate_refusal(const json& body, int context = 4096) {
    return smol_test::refusal_of(body, [&](const json& b) { parse_generate(b, context); });
}

// A refusal's status and code, and that its message names `field`.
void check_refused(const ApiError& e, const std::string& code, const std::string& field) {
    CAPTURE(e.message);
    CHECK(e.status == 400);
    CHECK(e.code == code);
    CHECK(e.message.find(field) != std::string::npos);
}

}  // namespace

TEST_CASE("ollama: text is text in every message, tool results and calls, tool definitions, prompt and system") {
    using Make = std::function<json(const std::string&)>;
    const auto turns = [](json messages) { return json{{"model", "smol"}, {"messages", std::move(messages)}}; };
    const auto user = [](const std::string& content) { return json{{"role", "user"}, {"content", content}}; };
    const std::vector<Make> makers = {
        [&](const std::string& t) { return turns({{{"role", "system"}, {"content", t}}, user("q")}); },
        [&](const std::string& t) { return turns({user("q"), {{"role", "system"}, {"content", t}}, user("q")}); },
        [&](const std::string& t) { return turns({user(t)}); },
        [&](const std::string& t) { return turns({user("q"), {{"role", "assistant"}, {"content", t}}, user("q")}); },
        [&](const std::string& t) {
            return turns({user("q"),
                          {{"role", "assistant"},
                           {"content", ""},
                           {"tool_calls", json::array({{{"function", {{"name", "f"}, {"arguments", {{"x", t}}}}}}})}},
                          {{"role", "tool"}, {"content", t}, {"tool_name", "f"}}});
        },
        [&](const std::string& t) {
            return with(turns({user("q")}), "tools",
                        json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"description", t}}}}}));
        },
    };
    smol_test::check_text_stays_text(makers, [](const json& b) { return parse(b); }, tokenizer());
    const std::vector<Make> generate_makers = {
        [](const std::string& t) { return prompt(t); },
        [](const std::string& t) { return with(prompt("q"), "system", t); },
    };
    smol_test::check_text_stays_text(generate_makers, [](const json& b) { return parse_generate(b); }, tokenizer());
}

TEST_CASE("ollama: a chat request becomes the request the chat route builds for the same conversation") {
    const json ollama = {
        {"model", "smol"},
        {"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                  {{"role", "user"}, {"content", "Weather in Paris?"}},
                                  {{"role", "assistant"},
                                   {"content", ""},
                                   {"thinking", "a call"},
                                   {"tool_calls", json::array({{{"function",
                                                                 {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}})}},
                                  {{"role", "tool"}, {"content", "sunny"}, {"tool_name", "get_weather"}},
                                  {{"role", "system"}, {"content", "Be kind."}},
                                  {{"role", "user"}, {"content", "And tomorrow?"}}})},
        {"tools", chat_weather_tools},
        {"think", false},
        {"stream", false},
        {"keep_alive", "5m"},
        {"options", {{"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 20}, {"min_p", 0.1}, {"seed", 7},
                     {"num_predict", 50}, {"stop", json::array({"END", "STOP"})}, {"repeat_penalty", 1.1},
                     {"presence_penalty", 0.5}, {"frequency_penalty", 0.25}, {"repeat_last_n", 32}}}};
    const json openai = {
        {"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 20}, {"min_p", 0.1}, {"seed", 7}, {"max_tokens", 50},
        {"stop", json::array({"END", "STOP"})}, {"repeat_penalty", 1.1}, {"presence_penalty", 0.5},
        {"frequency_penalty", 0.25}, {"tools", chat_weather_tools},
        {"chat_template_kwargs", {{"enable_thinking", false}}},
        {"messages",
         json::array({{{"role", "system"}, {"content", "Be brief.\n\nBe kind."}},
                      {{"role", "user"}, {"content", "Weather in Paris?"}},
                      {{"role", "assistant"},
                       {"content", ""},
                       {"tool_calls", json::array({{{"type", "function"},
                                                    {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}})}},
                      {{"role", "tool"}, {"content", "sunny"}},
                      {{"role", "user"}, {"content", "And tomorrow?"}}})}};
    const smol_server::ApiRequest o = parse(ollama);
    const smol_server::ApiRequest c = parse_chat(openai);
    CHECK(o.generation.prompt == c.generation.prompt);
    CHECK(o.generation.assistant_prefix == c.generation.assistant_prefix);
    const smol::SamplerParams& s = o.generation.params.sampling;
    const smol::SamplerParams& t = c.generation.params.sampling;
    CHECK(s.temperature == t.temperature);
    CHECK(s.top_p == t.top_p);
    CHECK(s.top_k == t.top_k);
    CHECK(s.min_p == t.min_p);
    CHECK(s.seed == t.seed);
    CHECK(s.repeat_penalty == t.repeat_penalty);
    CHECK(s.presence_penalty == t.presence_penalty);
    CHECK(s.frequency_penalty == t.frequency_penalty);
    CHECK(s.penalty_last_n == 32);
    CHECK(o.generation.params.max_tokens == 50);
    CHECK(o.generation.params.stop == c.generation.params.stop);
    CHECK(o.generation.params.parse_tool_calls);
    CHECK_FALSE(o.stream);
    CHECK(o.prompt_tokens == int(o.generation.prompt.size()));
}

TEST_CASE("ollama: streaming is on unless stream is false; think and format choose reasoning and the grammar") {
    CHECK(parse(hello()).stream);
    CHECK(parse(with(hello(), "stream", true)).stream);
    CHECK(parse_generate(prompt("Hi")).stream);
    CHECK_FALSE(parse_generate(with(prompt("Hi"), "stream", false)).stream);

    // think: absent leaves the template's default (on), as the chat route without kwargs.
    const json plain_chat = {{"messages", hello()["messages"]}};
    CHECK(parse(hello()).generation.prompt == parse_chat(plain_chat).generation.prompt);
    const json no_think = with(plain_chat, "chat_template_kwargs", {{"enable_thinking", false}});
    CHECK(parse(with(hello(), "think", false)).generation.prompt == parse_chat(no_think).generation.prompt);
    CHECK(parse(with(hello(), "think", true)).generation.prompt == parse(hello()).generation.prompt);
    check_refused(refusal(with(hello(), "think", "high")), "unsupported_parameter", "'think'");
    check_refused(refusal(with(hello(), "think", 1)), "invalid_type", "'think'");

    // format: "json" is the json_object grammar, a schema the json_schema one, after any reasoning.
    const json schema = {{"type", "object"}, {"properties", {{"age", {{"type", "integer"}}}}}, {"required", {"age"}}};
    const smol_server::ApiRequest json_mode = parse(with(hello(), "format", "json"));
    const smol_server::ApiRequest chat_json = parse_chat(with(plain_chat, "response_format", {{"type", "json_object"}}));
    CHECK(json_mode.grammar == chat_json.grammar);
    CHECK(json_mode.generation.prompt == chat_json.generation.prompt);
    const smol_server::ApiRequest schema_mode = parse(with(hello(), "format", schema));
    CHECK(schema_mode.grammar ==
          parse_chat(with(no_think, "response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}})).grammar);
    CHECK(parse(with(hello(), "format", "")).grammar.empty());
    check_refused(refusal(with(hello(), "format", "yaml")), "invalid_value", "'format'");
    check_refused(refusal(with(hello(), "format", 3)), "invalid_type", "'format'");
    CHECK(parse(with(with(hello(), "format", "json"), "think", true)).grammar == json_mode.grammar);
    // The server's --reasoning-budget applies; 0 turns thinking off unless think is true.
    CHECK(smol_server::parse_ollama_chat_request(hello(), tokenizer(), 4096, {64, {}}).generation.params.reasoning_budget == 64);
    CHECK(smol_server::parse_ollama_chat_request(hello(), tokenizer(), 4096, {0, {}}).generation.prompt ==
          parse(with(hello(), "think", false)).generation.prompt);
    CHECK(smol_server::parse_ollama_chat_request(with(hello(), "think", true), tokenizer(), 4096, {0, {}}).generation.prompt ==
          parse(hello()).generation.prompt);
    check_refused(refusal(with(hello(), "format", {{"type", "object"}, {"patternProperties", json::object()}})),
                  "unsupported_parameter", "'format'");
}

TEST_CASE("ollama: options map onto the sampler and limits; every other option is a 400 naming it") {
    // num_predict -1 and -2 run until the end or a full context; num_ctx caps prompt and reply.
    CHECK(parse(with(hello(), "options", {{"num_predict", -1}})).generation.params.max_tokens < 0);
    CHECK(parse(with(hello(), "options", {{"num_predict", -2}})).generation.params.max_tokens < 0);
    const smol_server::ApiRequest capped = parse(with(hello(), "options", {{"num_ctx", 1000}}));
    CHECK(capped.generation.params.max_tokens == 1000 - capped.prompt_tokens);
    const smol_server::ApiRequest short_reply = parse(with(hello(), "options", {{"num_ctx", 1000}, {"num_predict", 5}}));
    CHECK(short_reply.generation.params.max_tokens == 5);
    check_refused(refusal(with(hello(), "options", {{"num_ctx", 8192}})), "unsupported_parameter", "options.num_ctx");
    check_refused(refusal(with(hello(), "options", {{"num_ctx", 20}})), "context_length_exceeded", "options.num_ctx");
    check_refused(refusal(with(hello(), "options", {{"num_predict", 0}})), "invalid_value", "options.num_predict");
    check_refused(refusal(with(hello(), "options", {{"num_predict", "ten"}})), "invalid_type", "num_predict");
    CHECK(parse(with(hello(), "options", {{"repeat_last_n", -1}})).generation.params.sampling.penalty_last_n == 4096);
    CHECK(parse(with(hello(), "options", {{"repeat_last_n", 0}})).generation.params.sampling.penalty_last_n == 0);

    // The sampler's own checks, said to be in 'options'.
    const ApiError hot = refusal(with(hello(), "options", {{"temperature", "hot"}}));
    check_refused(hot, "invalid_type", "'temperature'");
    CHECK(hot.message.find("in 'options'") != std::string::npos);
    check_refused(refusal(with(hello(), "options", {{"top_p", 1.5}})), "invalid_value", "'top_p'");
    check_refused(refusal(with(hello(), "options", {{"stop", json::array({""})}})), "invalid_value", "'stop'");
    check_refused(refusal(with(hello(), "options", "fast")), "invalid_type", "'options'");

    check_refused(refusal(with(hello(), "options", {{"mirostat", 3}})), "invalid_value", "'mirostat'");
    check_refused(refusal(with(hello(), "options", {{"typical_p", 0}})), "invalid_value", "'typical_p'");

    for (const char* option : {"tfs_z", "num_keep", "num_gpu", "num_thread",
                               "num_batch", "use_mmap", "penalize_newline", "max_tokens", "stream", "logit_bias"}) {
        CAPTURE(option);
        check_refused(refusal(with(hello(), "options", {{option, 1}})), "unsupported_parameter",
                      std::string("'options.") + option + "'");
    }
}

TEST_CASE("ollama: mirostat, mirostat_tau, mirostat_eta and typical_p options reach the sampler") {
    const smol::SamplerParams s =
        parse(with(hello(), "options",
                   {{"mirostat", 2}, {"mirostat_tau", 3.5}, {"mirostat_eta", 0.25}, {"typical_p", 0.7}}))
            .generation.params.sampling;
    CHECK(s.mirostat == 2);
    CHECK(s.mirostat_tau == doctest::Approx(3.5));
    CHECK(s.mirostat_eta == doctest::Approx(0.25));
    CHECK(s.typical_p == doctest::Approx(0.7));
    const smol::SamplerParams defaults = parse(hello()).generation.params.sampling;
    CHECK(defaults.mirostat == 0);
    CHECK(defaults.typical_p == 1.0f);
}

TEST_CASE("ollama: fields, messages and values smol-server cannot honour are 400s that name them") {
    for (const char* field : {"logprobs", "top_logprobs", "tool_choice", "temperature", "prompt", "truncate"}) {
        CAPTURE(field);
        check_refused(refusal(with(hello(), field, true)), "unsupported_parameter", std::string("'") + field + "'");
    }
    check_refused(generate_refusal(with(prompt("Hi"), "messages", json::array())), "unsupported_parameter", "'messages'");

    // Images: a clear refusal wherever they may come; an empty list asks for nothing.
    json pictured = hello();
    pictured["messages"][0]["images"] = json::array({"iVBORw0KGgo="});
    const ApiError image = refusal(pictured);
    check_refused(image, "unsupported_parameter", "messages[0].images");
    CHECK(image.message.find("text only") != std::string::npos);
    pictured["messages"][0]["images"] = json::array();
    CHECK(parse(pictured).generation.prompt == parse(hello()).generation.prompt);
    check_refused(generate_refusal(with(prompt("Hi"), "images", json::array({"AA=="}))), "unsupported_parameter", "'images'");

    json odd_message = hello();
    odd_message["messages"][0]["name"] = "bob";
    check_refused(refusal(odd_message), "unsupported_parameter", "messages[0].name");
    odd_message = hello();
    odd_message["messages"][0]["role"] = "wizard";
    CHECK(refusal(odd_message).code == "invalid_role");
    odd_message["messages"][0] = {{"role", "user"}, {"content", json::array({"parts"})}};
    CHECK(refusal(odd_message).code == "invalid_type");
    odd_message["messages"][0] = {{"role", "user"}, {"content", "x"}, {"tool_calls", json::array()}};
    CHECK(refusal(odd_message).code == "invalid_value");  // calls are the assistant's
    const json string_arguments = {{"role", "assistant"},
                                   {"tool_calls", json::array({{{"function", {{"name", "f"}, {"arguments", "{}"}}}}})}};
    check_refused(refusal(with(hello(), "messages", json::array({hello()["messages"][0], string_arguments}))),
                  "invalid_value", "arguments must be an object");
    CHECK(refusal(with(hello(), "messages", json::array())).code == "invalid_value");
    for (const char* system_text : {"", "Be brief."}) {
        CAPTURE(system_text);
        check_refused(refusal(with(hello(), "messages", json::array({{{"role", "system"}, {"content", system_text}}}))),
                      "invalid_value", "only system messages");
    }
    CHECK(refusal(with(hello(), "messages", "Hello")).code == "invalid_type");
    CHECK(refusal(json{{"model", "smol"}}).code == "missing_messages");
    CHECK(refusal(with(hello(), "model", 7)).code == "invalid_type");

    // keep_alive: seconds or a Go duration, accepted and checked.
    for (const json& ok : {json(0), json(-1), json(300), json(2.5), json("5m"), json("1h30m"), json("-1"), json("0"),
                           json("10s"), json("1.5h"), json("500ms")}) {
        CAPTURE(ok.dump());
        CHECK(parse(with(hello(), "keep_alive", ok)).generation.prompt == parse(hello()).generation.prompt);
    }
    for (const json& bad : {json("soon"), json("5 minutes"), json(""), json("5x"), json("m5"), json(true), json::array()}) {
        CAPTURE(bad.dump());
        check_refused(refusal(with(hello(), "keep_alive", bad)), "invalid_value", "'keep_alive'");
    }
    smol_test::check_speculative_field(hello(), [](const json& b) { return parse(b); });
}

TEST_CASE("ollama: /api/generate renders system and prompt through the template, or with raw continues the prompt") {
    const json chat = {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                                 {{"role", "user"}, {"content", "Why is the sky blue?"}}})}};
    const smol_server::ApiRequest templated = parse_generate(with(prompt("Why is the sky blue?"), "system", "Be brief."));
    CHECK(templated.generation.prompt == parse_chat(chat).generation.prompt);
    CHECK(templated.generation.params.split_reasoning);

    const std::string text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    const smol_server::ApiRequest raw = parse_generate(with(prompt(text), "raw", true));
    CHECK(raw.generation.prompt == tokenizer().encode(text, /*parse_special=*/true));
    CHECK_FALSE(raw.generation.params.split_reasoning);
    check_refused(generate_refusal(with(with(prompt(text), "raw", true), "system", "x")), "invalid_value", "'system'");
    check_refused(generate_refusal(with(with(prompt(text), "raw", true), "think", true)), "invalid_value", "'think'");

    CHECK(generate_refusal(prompt("")).code == "missing_prompt");
    check_refused(generate_refusal(with(prompt("Hi"), "suffix", "end")), "unsupported_parameter", "'suffix'");
    check_refused(generate_refusal(with(prompt("Hi"), "template", "{{ .Prompt }}")), "unsupported_parameter", "'template'");
    check_refused(generate_refusal(with(prompt("Hi"), "context", json::array({1, 2, 3}))), "unsupported_parameter",
                  "'context'");
    CHECK(parse_generate(with(prompt("Hi"), "context", json::array())).generation.prompt == parse_generate(prompt("Hi")).generation.prompt);
    CHECK(parse_generate(with(prompt("Hi"), "suffix", "")).generation.prompt == parse_generate(prompt("Hi")).generation.prompt);

    // A prompt longer than the context.
    std::string long_text;
    for (int i = 0; i < 400; ++i) long_text += "word" + std::to_string(i) + " ";
    CHECK(generate_refusal(prompt(long_text), 256).code == "context_length_exceeded");
}

TEST_CASE("ollama: an empty messages list or no prompt only loads the model, its fields still checked") {
    using smol_server::OllamaEndpoint;
    CHECK(smol_server::is_load_request(with(hello(), "messages", json::array()), OllamaEndpoint::chat));
    CHECK_FALSE(smol_server::is_load_request(hello(), OllamaEndpoint::chat));
    CHECK(smol_server::is_load_request(json{{"model", "smol"}, {"keep_alive", 0}}, OllamaEndpoint::generate));
    CHECK(smol_server::is_load_request(prompt(""), OllamaEndpoint::generate));
    CHECK_FALSE(smol_server::is_load_request(prompt("Hi"), OllamaEndpoint::generate));
    const ApiError bad = smol_test::refusal_of(json{{"model", "smol"}, {"keep_alive", "later"}}, [](const json& b) {
        smol_server::is_load_request(b, OllamaEndpoint::generate);
    });
    CHECK(bad.code == "invalid_value");
    const json loaded = smol_server::ollama_load_reply(OllamaEndpoint::chat, "tiny");
    CHECK(loaded["done"] == true);
    CHECK(loaded["done_reason"] == "load");
    CHECK(loaded["message"] == json{{"role", "assistant"}, {"content", ""}});
}

TEST_CASE("ollama: reply objects carry text, thinking, calls with object arguments, and the closing statistics") {
    using smol_server::OllamaEndpoint;
    const std::vector<smol::ToolCall> calls = {{"get_weather", R"({"city":"Paris"})"}};
    const json piece = smol_server::ollama_object(OllamaEndpoint::chat, "tiny", "hmm", "Hi", calls);
    CHECK(piece["model"] == "tiny");
    CHECK(piece["done"] == false);
    CHECK(piece["message"] == json{{"role", "assistant"},
                                   {"content", "Hi"},
                                   {"thinking", "hmm"},
                                   {"tool_calls", json::array({{{"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}})}});
    const std::string created = piece["created_at"];
    CHECK(created.size() == 30);  // 2026-11-28T06:07:39.084327844Z
    CHECK(created[10] == 'T');
    CHECK(created.back() == 'Z');

    smol::StreamEvent end = smol_test::finished(smol::FinishReason::max_tokens);
    end.usage.queue_ms = 1.0;
    end.usage.prompt_ms = 2.5;
    end.usage.generation_ms = 10.0;
    const json last = smol_server::ollama_object(OllamaEndpoint::generate, "tiny", "", "All", {}, &end);
    CHECK(last["response"] == "All");
    CHECK_FALSE(last.contains("thinking"));
    CHECK(last["done"] == true);
    CHECK(last["done_reason"] == "length");
    CHECK(last["total_duration"] == 13'500'000);
    CHECK(last["load_duration"] == 0);
    CHECK(last["prompt_eval_count"] == 7);  // the whole prompt, the 2 cached tokens included
    CHECK(last["prompt_eval_duration"] == 2'500'000);
    CHECK(last["eval_count"] == 5);
    CHECK(last["eval_duration"] == 10'000'000);
    CHECK_FALSE(last.contains("context"));
    CHECK(std::string(smol_server::ollama_done_reason(smol::FinishReason::tool_calls)) == "stop");
    CHECK(std::string(smol_server::ollama_done_reason(smol::FinishReason::stop_string)) == "stop");
    CHECK(std::string(smol_server::ollama_done_reason(smol::FinishReason::context_full)) == "length");
    CHECK(smol_server::ollama_done_reason(smol::FinishReason::error) == nullptr);

    // Errors, before a reply began or in one, are {"error": "..."} on ollama's paths only.
    const smol_server::ApiError e{400, "'x' is bad", "invalid_request_error", "invalid_value"};
    CHECK(smol_server::error_body_for_path("/api/chat", e) == json{{"error", "'x' is bad"}});
    CHECK(smol_server::error_body_for_path("/api/anything", e) == json{{"error", "'x' is bad"}});
    CHECK(smol_server::error_body_for_path("/v1/chat/completions", e)["error"]["code"] == "invalid_value");
    CHECK(smol_server::error_body_for_path("/v1/messages", e)["type"] == "error");
}

TEST_CASE("ollama: /api/show and /api/tags describe the model from its file, bounded") {
    const smol::Engine& engine = smol_test::float_engine();
    const json details = smol_server::ollama_model_details(engine);
    CHECK(details["format"] == "gguf");
    CHECK(details["family"] == engine.info().architecture);
    CHECK(details["families"] == json::array({engine.info().architecture}));
    CHECK(details["parameter_size"] == smol_server::parameter_size(engine.info().n_params));
    CHECK(smol_server::parameter_size(3'075'098'624) == "3.1B");
    CHECK(smol_server::parameter_size(137'000'000) == "137.0M");
    CHECK(smol_server::parameter_size(512) == "512");

    const json info = smol_server::ollama_model_info(engine);
    CHECK(info["general.architecture"] == engine.info().architecture);
    CHECK(info["general.parameter_count"].is_number_unsigned());
    CHECK_FALSE(info.contains("tokenizer.chat_template"));  // it is /api/show's template
    REQUIRE(info.contains("tokenizer.ggml.tokens"));
    CHECK(info["tokenizer.ggml.tokens"] == json::array());  // the vocabulary is left out
    CHECK(smol_server::to_wire(info).size() < 64 * 1024);

    const std::string parameters = smol_server::ollama_parameters(2048);
    CHECK(parameters.find("num_ctx 2048\n") == 0);
    CHECK(parameters.find("temperature 0.6") != std::string::npos);

    smol_server::check_show_request(json{{"model", "smol"}});
    smol_server::check_show_request(json{{"name", "smol"}, {"verbose", false}});
    const auto show_refusal = [](const json& body) {
        return smol_test::refusal_of(body, [](const json& b) { smol_server::check_show_request(b); });
    };
    check_refused(show_refusal(json{{"model", "smol"}, {"verbose", true}}), "unsupported_parameter", "'verbose'");
    check_refused(show_refusal(json{{"model", "smol"}, {"system", "x"}}), "unsupported_parameter", "'system'");
}

}  // namespace test_ollama_api
