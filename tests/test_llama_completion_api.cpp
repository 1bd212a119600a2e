// llama-server's native completion API in smol-server (examples/server/llama_completion_request.hpp,
// llama_completion_replies.hpp) without HTTP: what a /completion body turns into (the request
// /v1/completions builds for the same prompt), which bodies are refused and how, llama-server's
// logit_bias pairs on every API, and the objects and chunks a reply is made of.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "llama_completion_replies.hpp"
#include "llama_completion_request.hpp"
#include "openai_chat_request.hpp"
#include "openai_text_request.hpp"
#include "reply_adapters.hpp"
#include "server_api_helpers.hpp"
#include "smol/smol.hpp"
#include "tiny_fixture.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_llama_completion_api {

namespace {

using smol_server::ApiError;
using smol_server::json;
using smol_test::with;

const smol::text::Tokenizer& tokenizer() { return smol_test::tiny_tokenizer(); }

smol_server::ApiRequest parse(const json& body, int context = 4096) {
    return smol_server::parse_llama_completion_request(body, tokenizer(), context);
}

ApiError refusal(const json& body) {
    return smol_test::refusal_of(body, [&](const json& b) { parse(b); });
}

// A refusal's status and code, and that its message names `field`.
void check_refused(const ApiError& e, const std::string& code, const std::string& field) {
    CAPTURE(e.message);
    CHECK(e.status == 400);
    CHECK(e.code == code);
    CHECK(e.message.find(field) != std::string::npos);
}

std::vector<std::int32_t> encode(const std::string& text) { return tokenizer().encode(text, /*parse_special=*/true); }

}  // namespace

TEST_CASE("a native completion is the text completion of its prompt, with token ids listed and no length limit") {
    const json body = {{"prompt", "Once upon a time"}, {"temperature", 0}, {"stop", {"\n"}}};
    const smol_server::ApiRequest native = parse(body);
    const smol_server::ApiRequest openai = smol_server::parse_text_request(body, tokenizer(), 4096);
    CHECK(native.generation.prompt == openai.generation.prompt);
    CHECK(native.generation.params.stop == openai.generation.params.stop);
    CHECK(native.generation.params.sampling.temperature == 0.0f);
    CHECK_FALSE(native.generation.params.split_reasoning);  // <think> stays in the text
    CHECK(native.generation.params.max_tokens == -1);       // llama-server's n_predict default
    CHECK(native.generation.params.token_ids);              // for tokens_predicted and return_tokens
    CHECK_FALSE(openai.generation.params.token_ids);
    CHECK(native.generation.params.logprobs == -1);  // probabilities only when asked for
    CHECK(parse(with(body, "n_predict", 12)).generation.params.max_tokens == 12);
    const smol_server::ApiRequest probs = parse(with(body, "n_probs", 3));
    CHECK(probs.logprobs);
    CHECK(probs.generation.params.logprobs == 3);
}

TEST_CASE("a native prompt: a string, token ids, llama-server's mix of both, or one of them in a list") {
    const std::vector<std::int32_t> once = encode("Once upon");
    const std::vector<std::int32_t> whole = encode("Once upon a time");
    REQUIRE(whole.size() > once.size());
    json ids = json::array();
    for (const std::int32_t id : once) ids.push_back(id);
    json mixed = ids;
    mixed.push_back(" a time");
    CHECK(parse({{"prompt", "Once upon a time"}}).generation.prompt == whole);
    CHECK(parse({{"prompt", mixed}}).generation.prompt == whole);
    CHECK(parse({{"prompt", json::array({mixed})}}).generation.prompt == whole);
    CHECK(parse({{"prompt", json::array({"Once upon a time"})}}).generation.prompt == whole);
    // Special tokens in a raw prompt are parsed, as llama-server does (the caller writes the turns).
    CHECK(parse({{"prompt", "<|im_start|>user"}}).generation.prompt.front() == encode("<|im_start|>").front());
    // Several prompts (strings alone, or lists) are refused by name, as are bad ids and types.
    check_refused(refusal({{"prompt", {"a", "b"}}}), "unsupported_parameter", "'prompt'");
    check_refused(refusal({{"prompt", json::array({ids, ids})}}), "unsupported_parameter", "'prompt'");
    check_refused(refusal({{"prompt", {1, -2}}}), "invalid_value", "'prompt[1]'");
    check_refused(refusal({{"prompt", {1, 1 << 30}}}), "invalid_value", "'prompt[1]'");
    check_refused(refusal({{"prompt", {1, 2.5}}}), "invalid_value", "'prompt[1]'");
    check_refused(refusal({{"prompt", {1, json::object()}}}), "unsupported_parameter", "'prompt'");
    check_refused(refusal({{"prompt", 7}}), "invalid_type", "'prompt'");
    check_refused(refusal({{"prompt", json::array()}}), "invalid_value", "'prompt'");
    check_refused(refusal({{"n_predict", 4}}), "missing_prompt", "'prompt'");
}

TEST_CASE("llama-server's native fields: neutral values accepted, the rest a 400 naming the field") {
    const json body = {{"prompt", "Hi"}};
    for (const auto& [field, neutral] :
         std::vector<std::pair<std::string, json>>{{"post_sampling_probs", false}, {"timings_per_token", false},
                                                   {"min_keep", 0}, {"dynatemp_range", 0}, {"dynatemp_exponent", 1},
                                                   {"n_indent", 0}, {"t_max_predict_ms", 0}, {"t_max_prompt_ms", 0},
                                                   {"return_tokens", true}, {"cache_prompt", false}, {"n_keep", -1}}) {
        CAPTURE(field);
        CHECK_NOTHROW(parse(with(body, field, neutral)));
        CHECK_NOTHROW(parse(with(body, field, nullptr)));
    }
    for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{{"post_sampling_probs", true},
                                                                                 {"timings_per_token", true},
                                                                                 {"min_keep", 2},
                                                                                 {"dynatemp_range", 0.5},
                                                                                 {"dynatemp_exponent", 2},
                                                                                 {"n_indent", 4},
                                                                                 {"t_max_predict_ms", 500},
                                                                                 {"t_max_prompt_ms", 500},
                                                                                 {"n_keep", 8},
                                                                                 {"echo", true},
                                                                                 {"suffix", "x"},
                                                                                 {"lora", json::array()},
                                                                                 {"image_data", json::array()}}) {
        CAPTURE(field);
        check_refused(refusal(with(body, field, value)), "unsupported_parameter", "'" + field + "'");
    }
    check_refused(refusal(with(body, "return_tokens", "yes")), "invalid_type", "'return_tokens'");
    check_refused(refusal(with(body, "response_fields", "content")), "invalid_value", "'response_fields'");
    check_refused(refusal(with(body, "response_fields", json::array({""}))), "invalid_value", "'response_fields'");
    check_refused(refusal(with(body, "response_fields", json::array({std::string(257, 'a')}))), "invalid_value",
                  "'response_fields'");
    check_refused(refusal(with(body, "response_fields", std::vector<std::string>(65, "content"))), "invalid_value",
                  "'response_fields'");
    smol_test::check_speculative_field(body, [](const json& b) { return parse(b); });
}

TEST_CASE("logit_bias: OpenAI's object, or llama-server's [token or text, bias] pairs with false as a ban, on every API") {
    const std::vector<std::int32_t> hello = tokenizer().encode("Hello there", false);
    REQUIRE(hello.size() >= 2);
    const auto biases_of = [](const smol_server::ApiRequest& r) { return r.generation.params.sampling.logit_bias; };
    const json text = {{"prompt", "Hi"}};
    const json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}};
    for (const bool on_chat : {false, true}) {
        CAPTURE(on_chat);
        const auto parse_any = [&](const json& b) {
            return on_chat ? smol_server::parse_chat_request(b, tokenizer(), 4096) : parse(b);
        };
        const json base = on_chat ? chat : text;
        const auto object = biases_of(parse_any(with(base, "logit_bias", {{std::to_string(hello[0]), 5}})));
        REQUIRE(object.size() == 1);
        CHECK(object[0] == std::pair{hello[0], 5.0f});
        const auto pairs = biases_of(parse_any(with(base, "logit_bias", json::array({{hello[0], -2.5}, {"Hello there", false}}))));
        REQUIRE(pairs.size() == 1 + hello.size());
        CHECK(pairs[0] == std::pair{hello[0], -2.5f});
        for (std::size_t i = 0; i < hello.size(); ++i) {
            CHECK(pairs[1 + i].first == hello[i]);
            CHECK(pairs[1 + i].second < -1e29f);  // banned, yet finite
        }
        const auto bad = [&](const json& bias, const std::string& code, const std::string& field) {
            CAPTURE(bias.dump());
            check_refused(smol_test::refusal_of(with(base, "logit_bias", bias), [&](const json& b) { parse_any(b); }), code,
                          field);
        };
        bad(json::array({{hello[0]}}), "invalid_value", "'logit_bias[0]'");
        bad(json::array({{-1, 1}}), "invalid_value", "'logit_bias[0][0]'");
        bad(json::array({{hello[0], 101}}), "invalid_value", "'logit_bias[0][1]'");
        bad(json::array({{hello[0], true}}), "invalid_value", "'logit_bias[0][1]'");
        bad(json::array({{"", 1}}), "invalid_value", "'logit_bias[0][0]'");
        bad(json::array({{std::string(257, 'a'), 1}}), "invalid_value", "'logit_bias[0][0]'");
        bad(json::array({{json::object(), 1}}), "invalid_value", "'logit_bias[0][0]'");
        bad({{"x", 1}}, "invalid_value", "'logit_bias' keys");
        bad(7, "invalid_type", "'logit_bias'");
        // Texts whose tokens pass the cap together, though each list is short.
        json many = json::array();
        for (int i = 0; i < 8; ++i) many.push_back({std::string(256, 'a' + i % 26), 1});
        for (int i = 0; i < 1024 - 8; ++i) many.push_back({hello[0], 1});
        bad(many, "invalid_value", "at most 1024");
    }
}

TEST_CASE("a native reply: its final object, stop types, response_fields and completion_probabilities") {
    const json body = {{"prompt", "Once"}, {"n_predict", 4}, {"return_tokens", true}, {"n_probs", 1}};
    const smol_server::ApiRequest request = parse(body);
    const smol_server::LlamaCompletionSettings settings = smol_server::llama_completion_settings(body, request, tokenizer());
    CHECK(settings.return_tokens);
    CHECK(settings.prompt == "Once");
    CHECK(settings.prompt_tokens == int(request.generation.prompt.size()));
    CHECK(settings.generation_settings["n_predict"] == 4);
    CHECK(settings.generation_settings["n_probs"] == 1);
    CHECK(settings.generation_settings["samplers"].is_array());

    smol::StreamEvent end = smol_test::finished(smol::FinishReason::stop_string);
    end.stop_string = "\n";
    end.slot = 1;
    const std::vector<std::int32_t> ids = tokenizer().encode(" upon a", false);
    const std::string text = " upon a";
    const smol_server::ReplyIds reply_ids{"cmpl-x", "tiny", 1};
    const json probabilities = smol_server::llama_probabilities_json(
        std::vector<smol::TokenLogprob>{{ids[0], -0.25f, {{ids[0], -0.25f}}}}, tokenizer());
    const json reply = smol_server::llama_completion_final(reply_ids, settings, {text, ids}, false, end, probabilities);
    CHECK(reply["content"] == text);
    CHECK(reply["tokens"].size() == ids.size());
    CHECK(reply["stop"] == true);
    CHECK(reply["stop_type"] == "word");
    CHECK(reply["stopping_word"] == "\n");
    CHECK(reply["id_slot"] == 1);
    CHECK(reply["model"] == "tiny");
    CHECK(reply["tokens_predicted"] == 5);
    CHECK(reply["tokens_evaluated"] == 7);
    CHECK(reply["tokens_cached"] == 7 + 4);  // every token sampled but the last was fed
    CHECK(reply["has_new_line"] == false);
    CHECK(reply["completion_probabilities"][0]["id"] == ids[0]);
    CHECK(reply["completion_probabilities"][0]["logprob"] == -0.25);
    CHECK(reply["completion_probabilities"][0]["top_logprobs"][0]["token"] == tokenizer().token_bytes(ids[0]));
    CHECK(reply["timings"]["predicted_n"] == 5);

    CHECK(std::string(smol_server::llama_stop_type(smol::FinishReason::end_of_generation)) == "eos");
    CHECK(std::string(smol_server::llama_stop_type(smol::FinishReason::max_tokens)) == "limit");
    CHECK(std::string(smol_server::llama_stop_type(smol::FinishReason::context_full)) == "limit");
    CHECK(std::string(smol_server::llama_stop_type(smol::FinishReason::cancelled)) == "none");

    CHECK(smol_server::select_response_fields(reply, {"content", "timings/predicted_n", "timings/none", "content/x"}) ==
          json{{"content", text}, {"timings/predicted_n", 5}});
    CHECK(smol_server::select_response_fields(reply, {}) == reply);
}

}  // namespace test_llama_completion_api
