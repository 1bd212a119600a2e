// smol-server's OpenAI mapping (examples/server/openai_chat_request.hpp, openai_text_request.hpp,
// openai_replies.hpp and the api_request.hpp they build on) without HTTP: what a request
// body turns into, which bodies are refused and how, and the shape of every reply object.

#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "api_keys.hpp"
#include "api_request.hpp"
#include "openai_chat_request.hpp"
#include "openai_replies.hpp"
#include "openai_text_request.hpp"
#include "reply_ids.hpp"
#include "server_api_helpers.hpp"
#include "smol/smol.hpp"
#include "tiny_fixture.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_openai_api {

namespace {

using smol_server::ApiError;
using smol_server::json;
using smol_test::with;

const smol::text::Tokenizer& tokenizer() { return smol_test::tiny_tokenizer(); }

json hello() { return json{{"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})}}; }

smol_server::ApiRequest parse(const json& body, int context = 4096) {
    return smol_server::parse_chat_request(body, tokenizer(), context);
}

// The ApiError a body is refused with; fails the test when it is accepted.
ApiError refusal(const json& body, int context = 4096) {
    return smol_test::refusal_of(body, [&](const json& b) { parse(b, context); });
}

}  // namespace

TEST_CASE("the OpenAI finish_reason of each way a generation ends") {
    using smol::FinishReason;
    using smol_server::openai_finish_reason;
    CHECK(std::string(openai_finish_reason(FinishReason::end_of_generation)) == "stop");
    CHECK(std::string(openai_finish_reason(FinishReason::stop_string)) == "stop");
    CHECK(std::string(openai_finish_reason(FinishReason::max_tokens)) == "length");
    CHECK(std::string(openai_finish_reason(FinishReason::context_full)) == "length");
    CHECK(std::string(openai_finish_reason(FinishReason::tool_calls)) == "tool_calls");
    CHECK(openai_finish_reason(FinishReason::cancelled) == nullptr);
    CHECK(openai_finish_reason(FinishReason::error) == nullptr);
}

TEST_CASE("API keys are compared in full: equal only when every byte and the length agree") {
    using smol_server::equal_in_constant_time;
    CHECK(equal_in_constant_time("Bearer abc", "Bearer abc"));
    CHECK(equal_in_constant_time("", ""));
    CHECK_FALSE(equal_in_constant_time("Bearer abd", "Bearer abc"));
    CHECK_FALSE(equal_in_constant_time("Bearer ab", "Bearer abc"));
    CHECK_FALSE(equal_in_constant_time(std::string_view("Bearer abc\0", 11), "Bearer abc"));  // a trailing NUL is not equal
    CHECK_FALSE(equal_in_constant_time("", "Bearer abc"));
    CHECK_FALSE(equal_in_constant_time("xearer abc", "Bearer abc"));
}

TEST_CASE("a chat request becomes the prompt the template renders and the sampling it asks for") {
    json body = hello();
    body["temperature"] = 0.5;
    body["top_p"] = 0.9;
    body["top_k"] = 7;
    body["min_p"] = 0.05;
    body["seed"] = 42;
    body["max_tokens"] = 100;
    body["max_completion_tokens"] = 12;  // the newer name wins
    body["stop"] = json::array({"a", "bc"});
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    const smol_server::ApiRequest request = parse(body);
    const smol::SamplerParams& s = request.generation.params.sampling;
    CHECK(s.temperature == doctest::Approx(0.5));
    CHECK(s.top_p == doctest::Approx(0.9));
    CHECK(s.top_k == 7);
    CHECK(s.min_p == doctest::Approx(0.05));
    CHECK(s.seed == 42u);
    CHECK(request.generation.params.max_tokens == 12);
    CHECK(request.generation.params.stop == std::vector<std::string>{"a", "bc"});
    CHECK(request.stream);
    CHECK(request.include_usage);
    CHECK_FALSE(request.generation.params.parse_tool_calls);

    smol::ChatOptions options;
    const smol::ChatPrompt rendered = smol::render_chat(hello()["messages"], options);
    CHECK(request.generation.prompt == tokenizer().encode(rendered.text, true));
    CHECK(request.prompt_tokens == int(request.generation.prompt.size()));
    CHECK(request.generation.assistant_prefix == rendered.assistant_prefix);

    // A single stop string, and text parts joined into one message.
    json parts = with(hello(), "stop", "x");
    parts["messages"][0]["content"] = json::array({{{"type", "text"}, {"text", "Hel"}}, {{"type", "text"}, {"text", "lo"}}});
    const smol_server::ApiRequest joined = parse(parts);
    CHECK(joined.generation.prompt == request.generation.prompt);
    CHECK(joined.generation.params.stop == std::vector<std::string>{"x"});
}

TEST_CASE("llama-server's sampler fields: DRY, XTC, typical-p, top-n-sigma, mirostat and the order") {
    json body = hello();
    body["dry_multiplier"] = 0.8;
    body["dry_base"] = 2.0;
    body["dry_allowed_length"] = 3;
    body["dry_penalty_last_n"] = 256;
    body["dry_sequence_breakers"] = json::array({"\n", "User:"});
    body["xtc_probability"] = 0.5;
    body["xtc_threshold"] = 0.2;
    body["typical_p"] = 0.9;
    body["top_n_sigma"] = 1.5;
    body["mirostat"] = 2;
    body["mirostat_tau"] = 4.0;
    body["mirostat_eta"] = 0.2;
    body["samplers"] = json::array({"dry", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"});
    const smol::SamplerParams s = parse(body).generation.params.sampling;
    CHECK(s.dry_multiplier == doctest::Approx(0.8));
    CHECK(s.dry_base == doctest::Approx(2.0));
    CHECK(s.dry_allowed_length == 3);
    CHECK(s.dry_penalty_last_n == 256);
    CHECK(s.dry_sequence_breakers == std::vector<std::string>{"\n", "User:"});
    CHECK(s.xtc_probability == doctest::Approx(0.5));
    CHECK(s.xtc_threshold == doctest::Approx(0.2));
    CHECK(s.typical_p == doctest::Approx(0.9));
    CHECK(s.top_n_sigma == doctest::Approx(1.5));
    CHECK(s.mirostat == 2);
    CHECK(s.mirostat_tau == doctest::Approx(4.0));
    CHECK(s.mirostat_eta == doctest::Approx(0.2));
    using Stage = smol::SamplerStage;
    CHECK(s.samplers == std::vector<Stage>{Stage::dry, Stage::top_k, Stage::typical_p, Stage::top_p, Stage::min_p,
                                           Stage::xtc, Stage::temperature});
    // The order as a string of letters, as llama-server also takes it.
    CHECK(parse(with(hello(), "samplers", "kxt")).generation.params.sampling.samplers ==
          std::vector<Stage>{Stage::top_k, Stage::xtc, Stage::temperature});
    // Fields left out keep llama.cpp's defaults (everything new off, its order).
    const smol::SamplerParams d = parse(hello()).generation.params.sampling;
    CHECK(d.dry_multiplier == 0.0f);
    CHECK(d.xtc_probability == 0.0f);
    CHECK(d.mirostat == 0);
    CHECK(d.samplers == std::vector<Stage>(std::begin(smol::kDefaultSamplerOrder), std::end(smol::kDefaultSamplerOrder)));

    const std::pair<const char*, json> bad[] = {
        {"dry_multiplier", -1},
        {"dry_base", 0.5},
        {"dry_allowed_length", 0},
        {"dry_penalty_last_n", -2},
        {"dry_penalty_last_n", 1 << 20},
        {"dry_sequence_breakers", json::array()},
        {"dry_sequence_breakers", json::array({""})},
        {"dry_sequence_breakers", json::array({std::string(41, 'a')})},
        {"dry_sequence_breakers", json::array({1})},
        {"dry_sequence_breakers", json(std::vector<std::string>(17, "a"))},
        {"dry_sequence_breakers", "\n"},
        {"xtc_probability", 1.5},
        {"xtc_threshold", -0.1},
        {"typical_p", 0},
        {"top_n_sigma", 101},
        {"mirostat", 3},
        {"mirostat_tau", -1},
        {"mirostat_eta", 11},
        {"samplers", json::array({"top_k", "bogus"})},
        {"samplers", json::array({"infill"})},
        {"samplers", "kq"},
        {"samplers", json(std::vector<std::string>(17, "top_k"))},
        {"samplers", 3},
    };
    for (const auto& entry : bad) {
        const char* field = entry.first;
        const std::string value = entry.second.dump();
        CAPTURE(field);
        CAPTURE(value);
        const ApiError e = refusal(with(hello(), field, entry.second));
        CHECK(e.status == 400);
        CHECK(e.message.find(std::string("'") + field + "'") != std::string::npos);
    }
}

TEST_CASE("a request starts from the server's sampling defaults (its flags) and its fields win") {
    smol_server::RequestDefaults defaults;
    defaults.sampling.mirostat = 2;
    defaults.sampling.dry_multiplier = 0.5f;
    defaults.sampling.temperature = 0.3f;
    const smol::SamplerParams s =
        smol_server::parse_chat_request(with(hello(), "temperature", 0.9), tokenizer(), 4096, defaults).generation.params.sampling;
    CHECK(s.mirostat == 2);
    CHECK(s.dry_multiplier == 0.5f);
    CHECK(s.temperature == doctest::Approx(0.9));
}

TEST_CASE("tools become the template's xml_tools and turn on the tool-call parser") {
    const json tool = {{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}};
    const json tooled = with(hello(), "tools", json::array({tool}));
    const smol_server::ApiRequest request = parse(tooled);
    CHECK(request.generation.params.parse_tool_calls);
    CHECK(request.prompt_tokens > parse(hello()).prompt_tokens);  // the tool list is in the prompt

    const smol_server::ApiRequest declined = parse(with(tooled, "tool_choice", "none"));
    CHECK_FALSE(declined.generation.params.parse_tool_calls);
    CHECK(declined.generation.prompt == parse(hello()).generation.prompt);

    json both = tooled;
    both["chat_template_kwargs"] = {{"xml_tools", json::array({tool["function"]})}};
    CHECK(refusal(both).code == "invalid_value");
    CHECK(refusal(with(hello(), "tools", json::array({{{"type", "retrieval"}}}))).code == "invalid_value");
    CHECK(refusal(with(hello(), "tools", "get_weather")).code == "invalid_type");
}

TEST_CASE("every field smol-server does not implement is a 400 unsupported_parameter naming it") {
    const std::pair<const char*, json> unsupported[] = {
        {"store", true},
        {"metadata", {{"team", "a"}}},
        {"parallel_tool_calls", false},
        {"audio", {{"voice", "alloy"}}},
        {"modalities", json::array({"text", "audio"})},
        {"prediction", {{"type", "content"}, {"content", "x"}}},
        {"web_search_options", json::object()},
        {"functions", json::array()},
        {"tfs_z", 0.9},
    };
    for (const auto& entry : unsupported) {  // no structured binding: clang 14 cannot CAPTURE one
        const char* field = entry.first;
        CAPTURE(field);
        const ApiError e = refusal(with(hello(), field, entry.second));
        CHECK(e.status == 400);
        CHECK(e.code == "unsupported_parameter");
        CHECK(e.message.find(std::string("'") + field) != std::string::npos);
    }
    const ApiError option = refusal(with(hello(), "stream_options", {{"include_obfuscation", true}}));
    CHECK(option.code == "unsupported_parameter");
    CHECK(option.message.find("stream_options.include_obfuscation") != std::string::npos);

    // Their neutral values ask for nothing smol-server lacks.
    const std::pair<const char*, json> neutral[] = {
        {"store", false},          {"logprobs", false},       {"response_format", {{"type", "text"}}},
        {"parallel_tool_calls", true}, {"user", "u-17"},      {"metadata", json::object()},
        {"logit_bias", json::object()}, {"cache_prompt", false}, {"model", "anything"},
        {"n", 1},                  {"top_logprobs", nullptr}, {"tool_choice", "auto"},
    };
    for (const auto& entry : neutral) {
        const char* field = entry.first;
        CAPTURE(field);
        CHECK_NOTHROW(parse(with(hello(), field, entry.second)));
    }
}

TEST_CASE("logit_bias maps token ids to biases, checked against the vocabulary") {
    const auto biases = parse(with(hello(), "logit_bias", {{"15", 3}, {"4000", -100}})).generation.params.sampling.logit_bias;
    CHECK(biases == std::vector<std::pair<std::int32_t, float>>{{15, 3.0f}, {4000, -100.0f}});
    CHECK(parse(hello()).generation.params.sampling.logit_bias.empty());
    const std::string n_vocab = std::to_string(tokenizer().n_vocab());
    for (const json& bad : {json{{n_vocab, 1}}, json{{"-1", 1}}, json{{"1x", 1}}, json{{"", 1}}, json{{"5", 101}},
                            json{{"5", "high"}}}) {
        CAPTURE(bad.dump());
        const ApiError e = refusal(with(hello(), "logit_bias", bad));
        CHECK(e.code == "invalid_value");
        CHECK(e.message.find("logit_bias") != std::string::npos);
    }
    // A list is llama-server's form, of [token, bias] pairs (test_llama_completion_api has it whole).
    CHECK(refusal(with(hello(), "logit_bias", json::array({1, 2}))).code == "invalid_value");
    CHECK(refusal(with(hello(), "logit_bias", "7")).code == "invalid_type");
    const json text = {{"prompt", "x"}, {"logit_bias", {{"7", -2.5}}}};
    CHECK(smol_server::parse_text_request(text, tokenizer(), 4096).generation.params.sampling.logit_bias ==
          std::vector<std::pair<std::int32_t, float>>{{7, -2.5f}});
}

TEST_CASE("logprobs and top_logprobs ask the pipeline for log-probabilities, shaped as OpenAI's") {
    CHECK(parse(hello()).generation.params.logprobs < 0);
    CHECK_FALSE(parse(hello()).logprobs);
    const smol_server::ApiRequest plain = parse(with(hello(), "logprobs", true));
    CHECK(plain.logprobs);
    CHECK(plain.generation.params.logprobs == 0);
    json five = with(hello(), "logprobs", true);
    five["top_logprobs"] = 5;
    CHECK(parse(five).generation.params.logprobs == 5);
    CHECK(refusal(with(hello(), "top_logprobs", 2)).code == "invalid_value");  // needs logprobs: true
    five["top_logprobs"] = 21;
    CHECK(refusal(five).code == "invalid_value");
    CHECK(refusal(with(hello(), "logprobs", "yes")).code == "invalid_type");

    // A token that holds part of a character keeps its exact bytes.
    const std::int32_t hello_id = tokenizer().encode("Hello", false).at(0);
    // Byte-level BPE spells byte 0xC3 (the first byte of "é") as the vocabulary entry "Ã".
    const std::optional<std::int32_t> lead_byte = tokenizer().find("\xc3\x83");
    REQUIRE(lead_byte.has_value());
    REQUIRE(tokenizer().token_bytes(*lead_byte) == "\xc3");
    const std::vector<smol::TokenLogprob> entries{{hello_id, -0.25f, {{hello_id, -0.25f}, {7, -2.0f}}},
                                                  {*lead_byte, -1.5f, {}}};
    const json content = smol_server::logprobs_json(entries, tokenizer());
    REQUIRE(content.size() == entries.size());
    const std::string& bytes = tokenizer().token_bytes(hello_id);
    CHECK(content[0]["token"] == bytes);
    CHECK(content[0]["logprob"] == -0.25f);
    CHECK(content[0]["bytes"].size() == bytes.size());
    CHECK(content[0]["bytes"][0] == int(static_cast<unsigned char>(bytes[0])));
    REQUIRE(content[0]["top_logprobs"].size() == 2);
    CHECK(content[0]["top_logprobs"][1]["token"] == tokenizer().token_bytes(7));
    CHECK(content[0]["top_logprobs"][1]["logprob"] == -2.0f);
    CHECK_FALSE(content[0]["top_logprobs"][1].contains("top_logprobs"));
    CHECK(content[1]["bytes"] == json::array({0xc3}));
    CHECK(content[1]["top_logprobs"] == json::array());
    CHECK(smol_server::choice_logprobs(false, content).is_null());
    CHECK(smol_server::choice_logprobs(true, content) == json{{"content", content}, {"refusal", nullptr}});
}

TEST_CASE("speculative: true or false chooses drafting for the request, null leaves --spec, else a 400") {
    smol_test::check_speculative_field(hello(), [](const json& b) { return parse(b); });
    smol_test::check_speculative_field(json{{"prompt", "x"}}, [](const json& b) {
        return smol_server::parse_text_request(b, tokenizer(), 4096);
    });
}

TEST_CASE("a text completion continues its prompt as given: a string or token ids, no template") {
    const std::string text = "<|im_start|>user\nOnce upon a time";
    json body = {{"prompt", text}, {"max_tokens", 5}, {"temperature", 0}, {"logprobs", 2}, {"stop", "\n"}};
    const smol_server::ApiRequest request = smol_server::parse_text_request(body, tokenizer(), 4096);
    const auto ids = tokenizer().encode(text, /*parse_special=*/true);
    CHECK(request.generation.prompt == ids);
    CHECK(request.generation.assistant_prefix.empty());
    CHECK(request.prompt_tokens == int(ids.size()));
    CHECK_FALSE(request.generation.params.split_reasoning);
    CHECK(request.generation.params.max_tokens == 5);
    CHECK(request.generation.params.stop == std::vector<std::string>{"\n"});
    CHECK(request.logprobs);
    CHECK(request.generation.params.logprobs == 2);

    json as_ids = body;
    as_ids["prompt"] = ids;
    CHECK(smol_server::parse_text_request(as_ids, tokenizer(), 4096).generation.prompt == ids);
    as_ids["prompt"] = json::array({text});  // one prompt in a list
    CHECK(smol_server::parse_text_request(as_ids, tokenizer(), 4096).generation.prompt == ids);
    CHECK_FALSE(smol_server::parse_text_request(json{{"prompt", "x"}}, tokenizer(), 4096).logprobs);

    const auto text_refusal = [](const json& b, int context = 4096) {
        try {
            smol_server::parse_text_request(b, tokenizer(), context);
        } catch (const ApiError& e) {
            return e;
        }
        FAIL("accepted: " << b.dump());
        return ApiError{};
    };
    CHECK(text_refusal(json::object()).code == "missing_prompt");
    CHECK(text_refusal(json{{"prompt", ""}}).code == "invalid_value");
    CHECK(text_refusal(json{{"prompt", 7}}).code == "invalid_type");
    CHECK(text_refusal(json{{"prompt", json::array({1, -2})}}).code == "invalid_value");
    CHECK(text_refusal(json{{"prompt", json::array({int(tokenizer().n_vocab())})}}).code == "invalid_value");
    CHECK(text_refusal(json{{"prompt", json::array({"a", "b"})}}).code == "unsupported_parameter");
    CHECK(text_refusal(json{{"prompt", "x"}, {"echo", true}}).code == "unsupported_parameter");
    CHECK(text_refusal(json{{"prompt", "x"}, {"suffix", "y"}}).code == "unsupported_parameter");
    CHECK(text_refusal(json{{"prompt", "x"}, {"best_of", 3}}).code == "unsupported_parameter");
    CHECK(text_refusal(json{{"prompt", "x"}, {"messages", json::array()}}).code == "unsupported_parameter");
    CHECK(text_refusal(json{{"prompt", "x"}, {"logprobs", 21}}).code == "invalid_value");
    CHECK(text_refusal(json{{"prompt", "x"}, {"logprobs", true}}).code == "invalid_type");
    CHECK(text_refusal(json{{"prompt", text}}, 4).code == "context_length_exceeded");
    CHECK_NOTHROW(smol_server::parse_text_request(json{{"prompt", "x"}, {"echo", false}, {"suffix", ""}, {"best_of", 1}},
                                                  tokenizer(), 4096));
    // Chat-only fields are not text-completion fields.
    CHECK(text_refusal(json{{"prompt", "x"}, {"tools", json::array()}}).code == "unsupported_parameter");

    const smol_server::ReplyIds ids_{"cmpl-1", "tiny.gguf", 5};
    const std::int32_t once = tokenizer().encode(" once", false).at(0);
    const json logprobs = smol_server::text_logprobs_json(
        std::vector<smol::TokenLogprob>{{once, -0.5f, {{once, -0.5f}}}, {once, -1.0f, {}}}, tokenizer(), 10);
    const std::string& piece = tokenizer().token_bytes(once);
    CHECK(logprobs["tokens"] == json::array({piece, piece}));
    CHECK(logprobs["token_logprobs"] == json::array({-0.5f, -1.0f}));
    CHECK(logprobs["top_logprobs"][0] == json{{piece, -0.5f}});
    CHECK(logprobs["text_offset"] == json::array({10, 10 + piece.size()}));
    const json reply = smol_server::text_completion_json(ids_, " upon", "length", logprobs);
    CHECK(reply["object"] == "text_completion");
    CHECK(reply["choices"][0]["text"] == " upon");
    CHECK(reply["choices"][0]["finish_reason"] == "length");
    CHECK(reply["choices"][0]["logprobs"] == logprobs);
    CHECK(smol_server::text_completion_json(ids_, "", nullptr)["choices"][0]["finish_reason"].is_null());
}

TEST_CASE("response_format json_object and grammar give the answer a grammar, after the reasoning") {
    CHECK(parse(hello()).grammar.empty());
    const smol_server::ApiRequest json_reply = parse(with(hello(), "response_format", {{"type", "json_object"}}));
    CHECK(json_reply.grammar == smol::text::kJsonObjectGrammar);
    CHECK(json_reply.generation.params.grammar_trigger.empty());  // it holds the whole answer
    // The template's thinking mode stays: the pipeline starts the grammar after </think>.
    CHECK(json_reply.generation.prompt == parse(hello()).generation.prompt);
    CHECK(parse(with(hello(), "response_format", {{"type", "text"}})).grammar.empty());

    const smol_server::ApiRequest gbnf = parse(with(hello(), "grammar", "root ::= \"yes\" | \"no\""));
    CHECK(gbnf.grammar == "root ::= \"yes\" | \"no\"");
    json both = with(hello(), "grammar", "root ::= \"a\"");
    both["response_format"] = {{"type", "json_object"}};
    CHECK(refusal(both).code == "invalid_value");
    json thinking = with(hello(), "response_format", {{"type", "json_object"}});
    thinking["chat_template_kwargs"] = {{"enable_thinking", true}};
    CHECK(parse(thinking).grammar == smol::text::kJsonObjectGrammar);
    CHECK(refusal(with(hello(), "grammar", 5)).code == "invalid_type");
    CHECK(refusal(with(hello(), "grammar", "")).code == "invalid_value");
    CHECK(refusal(with(hello(), "response_format", {{"type", "xml"}})).code == "invalid_value");
    const json text = {{"prompt", "x"}, {"grammar", "root ::= [0-9]+"}};
    CHECK(smol_server::parse_text_request(text, tokenizer(), 4096).grammar == "root ::= [0-9]+");
}

namespace {

// Whether the GBNF matches `text` whole.
bool grammar_matches(const std::string& gbnf, std::string_view text) {
    const smol::text::Grammar g = smol::text::Grammar::parse(gbnf);
    smol::text::GrammarMatcher m(g);
    smol::text::GrammarState state = m.start();
    for (const char c : text)
        if (!m.step(state, static_cast<std::uint8_t>(c))) return false;
    return m.accepting(state);
}

}  // namespace

TEST_CASE("response_format json_schema and forced tool calls become grammars; what they cannot express is a 400") {
    const json schema = {{"type", "object"},
                         {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}, {"minimum", 1}}}}},
                         {"required", {"city"}}};
    const smol_server::ApiRequest structured =
        parse(with(hello(), "response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "w"}, {"schema", schema}}}}));
    CHECK(grammar_matches(structured.grammar, R"({"city": "Paris", "days": 3})"));
    CHECK_FALSE(grammar_matches(structured.grammar, R"({"days": 3})"));
    CHECK(parse(with(hello(), "response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "w"}}}})).grammar ==
          smol::text::kJsonObjectGrammar);
    json pattern = schema;
    pattern["properties"]["city"]["pattern"] = "^[A-Z](?=[a-z])";  // a lookahead not right after the ^
    const ApiError refused =
        refusal(with(hello(), "response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "w"}, {"schema", pattern}}}}));
    CHECK(refused.code == "unsupported_parameter");
    CHECK(refused.message.find("lookahead") != std::string::npos);
    CHECK(refused.message.find("#/properties/city/pattern") != std::string::npos);
    CHECK(refused.message.find("response_format.json_schema.schema") != std::string::npos);
    CHECK(refusal(with(hello(), "response_format", {{"type", "json_schema"}})).code == "invalid_value");

    const json tools = json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", schema}}}},
                                    {{"type", "function"}, {"function", {{"name", "now"}}}}});
    json required = with(hello(), "tools", tools);
    required["tool_choice"] = "required";
    const smol_server::ApiRequest forced = parse(required);
    CHECK(forced.generation.params.parse_tool_calls);
    CHECK(grammar_matches(forced.grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
    CHECK(grammar_matches(forced.grammar, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
    CHECK_FALSE(grammar_matches(forced.grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
    CHECK_FALSE(grammar_matches(forced.grammar, "Sure!"));
    json named = required;
    named["tool_choice"] = {{"type", "function"}, {"function", {{"name", "now"}}}};
    const std::string only_now = parse(named).grammar;
    CHECK(grammar_matches(only_now, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
    CHECK_FALSE(grammar_matches(only_now, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
    named["tool_choice"]["function"]["name"] = "later";
    CHECK(refusal(named).code == "invalid_value");
    CHECK(refusal(with(hello(), "tool_choice", "required")).code == "invalid_value");  // no tools to call
    json both = required;
    both["response_format"] = {{"type", "json_object"}};
    CHECK(refusal(both).code == "invalid_value");
    CHECK(forced.generation.params.grammar_trigger.empty());  // a forced call holds the whole answer

    // Under "auto" the same call grammar is lazy: <tool_call> starts it, the text before is free.
    for (const json& choice : {json("auto"), json()}) {
        const smol_server::ApiRequest lazy = parse(with(with(hello(), "tools", tools), "tool_choice", choice));
        CHECK(lazy.grammar == forced.grammar);
        CHECK(lazy.generation.params.grammar_trigger == "<tool_call>");
    }
    const smol_server::ApiRequest none = parse(with(with(hello(), "tools", tools), "tool_choice", "none"));
    CHECK(none.grammar.empty());
    // With a response_format the format holds the answer, and calls are not constrained.
    const smol_server::ApiRequest formatted =
        parse(with(with(hello(), "tools", tools), "response_format", {{"type", "json_object"}}));
    CHECK(formatted.grammar == smol::text::kJsonObjectGrammar);
    CHECK(formatted.generation.params.grammar_trigger.empty());
}

TEST_CASE("reasoning_effort names a thinking budget; none and minimal turn thinking off") {
    CHECK(parse(hello()).generation.params.reasoning_budget == -1);
    const std::pair<const char*, int> efforts[] = {{"low", smol_server::kLowEffortBudget},
                                                   {"medium", smol_server::kMediumEffortBudget},
                                                   {"high", smol_server::kHighEffortBudget}};
    for (const auto& [effort, budget] : efforts) {
        CAPTURE(effort);
        const smol_server::ApiRequest r = parse(with(hello(), "reasoning_effort", effort));
        CHECK(r.generation.params.reasoning_budget == budget);
        CHECK(r.generation.prompt == parse(hello()).generation.prompt);
    }
    smol::ChatOptions no_thinking;
    no_thinking.enable_thinking = false;
    const auto off_prompt = tokenizer().encode(smol::render_chat(hello()["messages"], no_thinking).text, true);
    for (const char* effort : {"none", "minimal"}) {
        CAPTURE(effort);
        const smol_server::ApiRequest r = parse(with(hello(), "reasoning_effort", effort));
        CHECK(r.generation.params.reasoning_budget == 0);
        CHECK(r.generation.prompt == off_prompt);
    }
    const ApiError bad = refusal(with(hello(), "reasoning_effort", "extreme"));
    CHECK(bad.code == "invalid_value");
    CHECK(bad.message.find("reasoning_effort") != std::string::npos);
    CHECK(refusal(with(hello(), "reasoning_effort", 3)).message.find("reasoning_effort") != std::string::npos);
    json both = with(hello(), "reasoning_effort", "none");
    both["chat_template_kwargs"] = {{"enable_thinking", true}};
    CHECK(refusal(both).message.find("reasoning_effort") != std::string::npos);
    // The server's --reasoning-budget for requests that name none: 0 renders the no-think prompt.
    CHECK(smol_server::parse_chat_request(hello(), tokenizer(), 4096, {77, {}}).generation.params.reasoning_budget == 77);
    const smol_server::ApiRequest server_off = smol_server::parse_chat_request(hello(), tokenizer(), 4096, {0, {}});
    CHECK(server_off.generation.prompt == off_prompt);
    CHECK(smol_server::parse_chat_request(with(hello(), "reasoning_effort", "low"), tokenizer(), 4096, {0, {}})
              .generation.params.reasoning_budget == smol_server::kLowEffortBudget);
}

TEST_CASE("malformed chat requests get a 400 that says what was expected and found") {
    const auto code_of = [](const json& body) { return refusal(body).code; };
    CHECK(code_of(json::object()) == "missing_messages");
    CHECK(code_of(json{{"messages", "hi"}}) == "invalid_type");
    CHECK(code_of(json{{"messages", json::array()}}) == "invalid_value");
    CHECK(code_of(json{{"messages", json::array({{{"role", "bot"}, {"content", "x"}}})}}) == "invalid_role");
    CHECK(code_of(json{{"messages", json::array({{{"content", "x"}}})}}) == "missing_role");
    CHECK(code_of(json{{"messages", json::array({{{"role", "user"}}})}}) == "missing_content");
    CHECK(code_of(json{{"messages", json::array({{{"role", "user"}, {"content", 5}}})}}) == "invalid_type");
    CHECK(code_of(with(hello(), "temperature", "hot")) == "invalid_type");
    CHECK(code_of(with(hello(), "temperature", 101)) == "invalid_value");
    CHECK(code_of(with(hello(), "top_p", 0)) == "invalid_value");
    CHECK(code_of(with(hello(), "max_tokens", 0)) == "invalid_value");
    CHECK(code_of(with(hello(), "seed", 1.5)) == "invalid_type");
    CHECK(code_of(with(hello(), "n", 2)) == "invalid_value");
    CHECK(code_of(with(hello(), "stop", json::array({"a", 1}))) == "invalid_type");
    CHECK(code_of(with(hello(), "stop", "")) == "invalid_value");
    json many_stops = json::array();
    for (int i = 0; i < 17; ++i) many_stops.push_back("s" + std::to_string(i));
    CHECK(code_of(with(hello(), "stop", many_stops)) == "invalid_value");
    CHECK(code_of(with(hello(), "stream", "yes")) == "invalid_type");
    CHECK(code_of(with(hello(), "response_format", "json")) == "invalid_value");

    const ApiError too_long = refusal(hello(), 8);
    CHECK(too_long.code == "context_length_exceeded");
    CHECK(too_long.message.find("holds 8") != std::string::npos);

    CHECK(refusal(json::object()).status == 400);
    try {
        smol_server::parse_json_body("{\"messages\": [");
        FAIL("parsed a truncated body");
    } catch (const ApiError& e) {
        CHECK(e.code == "invalid_json");
    }
    try {
        smol_server::parse_json_body("{\"max_tokens\": 8e999}");  // found by fuzz_request: a 500 before
        FAIL("parsed a number beyond double");
    } catch (const ApiError& e) {
        CHECK(e.status == 400);
        CHECK(e.code == "invalid_json");
    }
    try {
        smol_server::parse_json_body("[1, 2]");
        FAIL("accepted an array as the body");
    } catch (const ApiError& e) {
        CHECK(e.code == "invalid_request");
    }
}

TEST_CASE("request bodies past the JSON caps are refused before parsing, with the cap and where") {
    const auto code_of = [](const std::string& text) {
        try {
            (void)smol_server::parse_json_body(text);
        } catch (const ApiError& e) {
            return e.code + ": " + e.message;
        }
        return std::string("parsed");
    };
    const std::string deep = std::string(1500000, '[') + std::string(1500000, ']');
    const std::string refused = code_of("{\"prompt\": " + deep + "}");
    CHECK(refused.rfind("json_too_complex", 0) == 0);
    CHECK(refused.find("more than 64 deep (at byte 74)") != std::string::npos);  // the 64th '[', at depth 65
    CHECK(code_of("{\"a\": " + std::string(63, '[') + std::string(63, ']') + "}") == "parsed");
    CHECK(code_of("{\"a\": " + std::string(64, '[') + std::string(64, ']') + "}").rfind("json_too_complex", 0) == 0);
    // Brackets, braces and commas inside strings (escaped quotes too) are text.
    CHECK(code_of("{\"a\": \"" + std::string(1000, '[') + "\\\"" + std::string(300000, ',') + "\"}") == "parsed");
    // Values: a body of many small ones would parse to 20 times its size.
    std::string many = "{\"a\": [0";
    for (int i = 0; i < 300000; ++i) many += ",0";
    CHECK(code_of(many + "]}").find("more than 262144 values") != std::string::npos);
    CHECK(smol::json_over_limits("[[1], {\"x\": [2]}]", "t", {2, 100}).find("more than 2 deep (at byte 12)") !=
          std::string::npos);
    CHECK(smol::json_over_limits("[1, 2, 3]", "t", {8, 2}).find("more than 2 values (at byte 2)") != std::string::npos);
}

TEST_CASE("chat completions: message text is text in every role, a raw completion prompt still parses markers") {
    using Make = std::function<json(const std::string&)>;
    const auto turns = [](json messages) { return json{{"messages", std::move(messages)}}; };
    const std::vector<Make> makers = {
        [&](const std::string& t) { return turns({{{"role", "system"}, {"content", t}}, {{"role", "user"}, {"content", "q"}}}); },
        [&](const std::string& t) { return turns({{{"role", "user"}, {"content", t}}}); },
        [&](const std::string& t) {
            return turns({{{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", t}}})}}});
        },
        [&](const std::string& t) {
            return turns({{{"role", "user"}, {"content", "q"}}, {{"role", "assistant"}, {"content", t}},
                          {{"role", "user"}, {"content", "q"}}});
        },
        [&](const std::string& t) {
            return turns({{{"role", "user"}, {"content", "q"}},
                          {{"role", "assistant"},
                           {"content", nullptr},
                           {"tool_calls", json::array({{{"id", "c"}, {"type", "function"},
                                                        {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}},
                          {{"role", "tool"}, {"tool_call_id", "c"}, {"content", t}}});
        },
        [&](const std::string& t) {
            json body = turns({{{"role", "user"}, {"content", "q"}}});
            body["tools"] = json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"description", t}}}}});
            return body;
        },
    };
    smol_test::check_text_stays_text(makers, [](const json& b) { return parse(b); }, tokenizer());
    // /v1/completions: the caller writes the whole prompt, markers included, as llama-server takes it.
    const auto raw = smol_server::parse_text_request(json{{"prompt", "<|im_start|>user\nhi<|im_end|>\n"}}, tokenizer(), 4096);
    CHECK(smol_test::control_tokens(raw.generation.prompt, tokenizer()) == 2);
}

TEST_CASE("parse_json, the one entry for JSON text: caps first, then the parser, and errors that say which") {
    CHECK(smol::parse_json("{\"a\": [1, 2]}", "t") == json{{"a", {1, 2}}});
    const auto error_of = [](std::string_view text, smol::JsonLimits limits = {}) {
        try {
            (void)smol::parse_json(text, "the thing", limits);
        } catch (const smol::JsonError& e) {
            return std::make_pair(std::string(e.what()), e.over_limits);
        }
        FAIL("accepted: " << text);
        return std::make_pair(std::string(), false);
    };
    const auto [deep, deep_over] = error_of("[[[]]]", {2, 100});
    CHECK(deep_over);
    CHECK(deep.find("the thing nests arrays and objects more than 2 deep (at byte 2)") == 0);
    const auto [broken, broken_over] = error_of("{\"a\": }");
    CHECK_FALSE(broken_over);
    CHECK(broken.find("the thing is not valid JSON") == 0);
    CHECK_FALSE(error_of("[1e999]").second);  // out of double's range: an error, not infinity
    CHECK(smol::try_parse_json("[1, 2]") == json{1, 2});
    CHECK_FALSE(smol::try_parse_json("[1, 2").has_value());
    CHECK_FALSE(smol::try_parse_json(std::string(100, '[') + std::string(100, ']')).has_value());
    CHECK(smol::try_parse_json<nlohmann::ordered_json>("{\"b\": 1, \"a\": 2}")->begin().key() == "b");
}

TEST_CASE("replies, chunks, tool calls and errors have OpenAI's shape") {
    const smol_server::ReplyIds ids{"chatcmpl-1", "tiny.gguf", 1700000000};
    smol::GenerationUsage usage;
    usage.prompt_tokens = 9;
    usage.cached_tokens = 4;
    usage.completion_tokens = 3;

    const json answer = smol_server::completion_json(ids, "mulling", "Hi!", json::array(), smol::FinishReason::max_tokens, usage);
    CHECK(answer["object"] == "chat.completion");
    CHECK(answer["id"] == "chatcmpl-1");
    CHECK(answer["created"] == 1700000000);
    CHECK(answer["choices"][0]["message"] == json{{"role", "assistant"}, {"content", "Hi!"}, {"reasoning_content", "mulling"}});
    CHECK(answer["choices"][0]["finish_reason"] == "length");
    CHECK(answer["choices"][0]["logprobs"].is_null());
    CHECK(answer["usage"]["total_tokens"] == 12);
    CHECK(answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 4);
    CHECK(answer["timings"]["prompt_n"] == 5);

    const json call = smol_server::tool_call_json({"get_weather", "{\"city\": \"Paris\"}"});
    CHECK(call["type"] == "function");
    CHECK(call["id"].get<std::string>().rfind("call_", 0) == 0);
    CHECK(call["function"] == json{{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}});
    const json called = smol_server::completion_json(ids, "", "", json::array({call}), smol::FinishReason::tool_calls, usage);
    CHECK(called["choices"][0]["message"]["content"].is_null());
    CHECK(called["choices"][0]["message"]["tool_calls"][0] == call);
    CHECK(called["choices"][0]["finish_reason"] == "tool_calls");

    const json chunk = smol_server::chunk_json(ids, json{{"content", "H"}}, nullptr);
    CHECK(chunk["object"] == "chat.completion.chunk");
    CHECK(chunk["choices"][0]["delta"] == json{{"content", "H"}});
    CHECK(chunk["choices"][0]["finish_reason"].is_null());
    CHECK(smol_server::chunk_json(ids, json::object(), "stop")["choices"][0]["finish_reason"] == "stop");

    const json error = smol_server::error_body({400, "bad", "invalid_request_error", "invalid_value"});
    CHECK(error == json{{"error", {{"message", "bad"}, {"type", "invalid_request_error"}, {"code", "invalid_value"}}}});
}

TEST_CASE("uuid_v7 ids are RFC 9562 version 7 and differ") {
    const std::string a = smol_server::uuid_v7(), b = smol_server::uuid_v7();
    CHECK(a != b);
    REQUIRE(a.size() == 36);
    CHECK(a[8] == '-');
    CHECK(a[14] == '7');  // version
    CHECK(std::string("89ab").find(a[19]) != std::string::npos);  // variant 10
}

TEST_CASE("llama-server's request fields: n_predict, n_probs, id_slot, ignore_eos, json_schema, cache_prompt, n_keep") {
    const auto text = [](json body) { return smol_server::parse_text_request(body, tokenizer(), 4096); };
    const json prompt = {{"prompt", "Once upon"}};
    // n_predict is max_tokens where that is absent; -1 is no limit, 0 asks for nothing.
    CHECK(parse(with(hello(), "n_predict", 7)).generation.params.max_tokens == 7);
    CHECK(text(with(prompt, "n_predict", 9)).generation.params.max_tokens == 9);
    CHECK(parse(with(hello(), "n_predict", -1)).generation.params.max_tokens == smol::GenerationParams{}.max_tokens);
    CHECK(parse(with(with(hello(), "n_predict", 7), "max_tokens", 3)).generation.params.max_tokens == 3);
    CHECK(parse(with(with(hello(), "n_predict", 7), "max_completion_tokens", 4)).generation.params.max_tokens == 4);
    for (const json& bad : {json(0), json(-2), json("5"), json(1.5)}) {
        CAPTURE(bad.dump());
        const ApiError e = refusal(with(hello(), "n_predict", bad));
        CHECK(e.status == 400);
        CHECK(e.message.find("'n_predict'") != std::string::npos);
    }

    // n_probs: alternatives per token, as top_logprobs (chat) or logprobs (completions), bounded.
    const smol_server::ApiRequest probs = parse(with(hello(), "n_probs", 3));
    CHECK(probs.logprobs);
    CHECK(probs.generation.params.logprobs == 3);
    CHECK(text(with(prompt, "n_probs", 2)).generation.params.logprobs == 2);
    CHECK(parse(with(hello(), "n_probs", 0)).generation.params.logprobs == -1);
    CHECK(parse(with(with(with(hello(), "n_probs", 3), "logprobs", true), "top_logprobs", 3)).generation.params.logprobs == 3);
    CHECK(refusal(with(hello(), "n_probs", smol::kMaxTopLogprobs + 1)).message.find("'n_probs'") != std::string::npos);
    CHECK(refusal(with(hello(), "n_probs", -1)).status == 400);
    CHECK(refusal(with(with(hello(), "n_probs", 3), "logprobs", false)).message.find("'n_probs'") != std::string::npos);
    CHECK(refusal(with(with(with(hello(), "n_probs", 3), "logprobs", true), "top_logprobs", 2)).status == 400);
    CHECK_THROWS_AS(text(with(with(prompt, "n_probs", 3), "logprobs", 2)), ApiError);

    // id_slot names the slot (the scheduler checks it against --parallel); -1 is any.
    CHECK(parse(hello()).generation.slot == -1);
    CHECK(parse(with(hello(), "id_slot", 2)).generation.slot == 2);
    CHECK(text(with(prompt, "id_slot", -1)).generation.slot == -1);
    for (const json& bad : {json(-2), json("1"), json(1 << 21), json(0.5)}) {
        CAPTURE(bad.dump());
        CHECK(refusal(with(hello(), "id_slot", bad)).message.find("'id_slot'") != std::string::npos);
    }

    // ignore_eos: every end-of-generation token is biased out of reach; not with a grammar.
    const smol_server::ApiRequest endless = parse(with(hello(), "ignore_eos", true));
    for (const std::int32_t id : tokenizer().end_of_generation_ids()) {
        CAPTURE(id);
        const auto& biases = endless.generation.params.sampling.logit_bias;
        const auto it = std::find_if(biases.begin(), biases.end(), [&](const auto& b) { return b.first == id; });
        REQUIRE(it != biases.end());
        CHECK(it->second < -1e29f);
    }
    CHECK(parse(with(hello(), "ignore_eos", false)).generation.params.sampling.logit_bias.empty());
    CHECK(refusal(with(hello(), "ignore_eos", "yes")).message.find("'ignore_eos'") != std::string::npos);
    CHECK(refusal(with(with(hello(), "ignore_eos", true), "grammar", "root ::= \"a\"")).message.find("'ignore_eos'") !=
          std::string::npos);

    // json_schema: the schema itself, the same grammar as response_format's.
    const json schema = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}};
    const std::string from_format =
        parse(with(hello(), "response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}})).grammar;
    CHECK(parse(with(hello(), "json_schema", schema)).grammar == from_format);
    CHECK(text(with(prompt, "json_schema", schema)).grammar == from_format);
    CHECK(refusal(with(hello(), "json_schema", "x")).message.find("'json_schema'") != std::string::npos);
    CHECK(refusal(with(with(hello(), "json_schema", schema), "grammar", "root ::= \"a\"")).status == 400);
    CHECK(refusal(with(with(hello(), "json_schema", schema), "response_format", {{"type", "json_object"}})).status == 400);

    // cache_prompt is accepted either way (smol always reuses a slot's prefix; the reply is the
    // same); n_keep only where it describes what smol does: it never shifts the context.
    CHECK_NOTHROW(parse(with(hello(), "cache_prompt", true)));
    CHECK_NOTHROW(parse(with(hello(), "n_keep", 0)));
    CHECK_NOTHROW(text(with(prompt, "n_keep", -1)));
    const ApiError keep = refusal(with(hello(), "n_keep", 16));
    CHECK(keep.code == "unsupported_parameter");
    CHECK(keep.message.find("'n_keep'") != std::string::npos);
}

TEST_CASE("/apply-template renders the prompt a chat request would run, and checks the body as one") {
    const json body = with(hello(), "chat_template_kwargs", {{"enable_thinking", false}});
    const std::string prompt = smol_server::apply_template(body)["prompt"];
    CHECK(tokenizer().encode(prompt, /*parse_special=*/true) == parse(body).generation.prompt);
    CHECK(prompt.find("Hello") != std::string::npos);
    const auto refused = [](const json& b) {
        return smol_test::refusal_of(b, [](const json& x) { smol_server::apply_template(x); });
    };
    CHECK(refused(with(hello(), "temperature", 0.5)).code == "unsupported_parameter");
    CHECK(refused(json{{"messages", json::array()}}).status == 400);
    CHECK(refused(json::object()).code == "missing_messages");
}

}  // namespace test_openai_api
