// libFuzzer target for what smol-server does with a request body before any token is
// generated: JSON parsing, the OpenAI mapping of both completion endpoints (fields, messages,
// tools, response_format, logit_bias, stop strings), the Anthropic Messages mapping of
// /v1/messages and its count_tokens (blocks, tools, thinking), the OpenAI Responses mapping of
// /v1/responses and its input_tokens (items, tools, text.format, reasoning, and the settings a
// Response repeats), ollama's /api/chat and /api/generate (messages, raw prompts, think, format,
// options, keep_alive, load requests), llama-server's native /completion (its prompt forms,
// logit_bias pairs, its own fields, and the settings and final object its reply repeats), the
// chat template's rendering and the tokenizer, on the real SmolLM3 vocabulary (SMOL_FUZZ_VOCAB). For any input bytes:
//   - the body is accepted, or refused with an ApiError whose status is a 4xx;
//   - an accepted request has a non-empty prompt of in-vocabulary ids that fits the context (a
//     count_tokens or input_tokens request may count past it) and
//     valid sampling parameters (smol::Sampler accepts them); a grammar the mapping generated
//     (from response_format, text.format, a JSON schema, tool_choice, a format beside tools) parses, while one the client wrote in
//     `grammar` may be refused later (smol-server's 400 invalid_grammar);
//   - the error body and the request's messages serialise (invalid UTF-8 as U+FFFD).
// Any other exception (it would be a 500), a sanitizer report or a broken property is a finding.
//
// Hostile sizes: a short input can stand for a long body. The byte 0x01 followed by a count
// byte c and a byte x expands to x repeated 16 * c * c times (up to about a million), so the
// fuzzer reaches nesting a million deep ("\x01\xff[") and grammars with huge counts or
// literals within -max_len; a client grammar that parses is then compiled with the server's
// limits and matched under the decoding budget (GrammarTooComplex is the server's 400). The
// -timeout of scripts/fuzz.sh makes any input that takes seconds a finding too.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "api_request.hpp"
#include "llama_completion_replies.hpp"
#include "llama_completion_request.hpp"
#include "messages_api.hpp"
#include "ollama_replies.hpp"
#include "ollama_request.hpp"
#include "openai_chat_request.hpp"
#include "openai_text_request.hpp"
#include "responses_replies.hpp"
#include "responses_request.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/text/grammar.hpp"
#include "smol/text/tokenizer.hpp"

namespace {

constexpr int kContext = 4096;

const smol::text::Tokenizer& tokenizer() {
    static const smol::gguf::File file = smol::gguf::File::open(SMOL_FUZZ_VOCAB);
    static const smol::text::Tokenizer tok = smol::text::Tokenizer::from_gguf(file);
    return tok;
}

[[noreturn]] void finding(const char* what, const std::string& detail) {
    std::fprintf(stderr, "fuzz_request: %s: %s\n", what, detail.c_str());
    std::abort();
}

void check_accepted(const smol_server::ApiRequest& request, bool client_grammar, bool counting_only = false) {
    const auto& prompt = request.generation.prompt;
    if (prompt.empty()) finding("accepted request", "empty prompt");
    if (request.prompt_tokens != int(prompt.size())) finding("accepted request", "prompt_tokens miscounts the prompt");
    if (!counting_only && int(prompt.size()) >= kContext) finding("accepted request", "prompt does not fit the context");
    for (const std::int32_t id : prompt)
        if (id < 0 || std::size_t(id) >= tokenizer().n_vocab()) finding("accepted request", "prompt id out of range");
    try {
        smol::Sampler sampler(request.generation.params.sampling, int(tokenizer().n_vocab()));
    } catch (const std::exception& e) {
        finding("accepted sampling parameters fail later", e.what());
    }
    if (request.grammar.empty()) return;
    try {
        const smol::text::Grammar grammar = smol::text::Grammar::parse(request.grammar);
        // What decoding does first: the state before any text, then a few characters, each
        // under the per-token budget.
        smol::text::GrammarMatcher matcher(grammar);
        matcher.set_budget(smol::kGrammarStepBudget);
        smol::text::GrammarState state = matcher.start();
        for (const char c : std::string_view("{\"a\": [1, \"x\"]}")) {
            matcher.set_budget(smol::kGrammarStepBudget);
            if (!matcher.step(state, static_cast<std::uint8_t>(c))) break;
        }
        (void)matcher.chars_to_finish(state);
    } catch (const smol::text::GrammarTooComplex& e) {
        // The server's 400 grammar_too_complex, for any grammar.
    } catch (const smol::Error& e) {
        if (!client_grammar) finding("a generated grammar does not parse", std::string(e.what()) + "\n" + request.grammar);
    }
}

// The input with each 0x01 c x replaced by x repeated 16 * c * c times.
std::string expand(std::string_view in) {
    std::string out;
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] == '\x01' && i + 2 < in.size()) {
            const std::size_t count = 16 * std::size_t(static_cast<std::uint8_t>(in[i + 1])) *
                                      std::size_t(static_cast<std::uint8_t>(in[i + 1]));
            if (out.size() + count > (std::size_t(8) << 20)) return out;  // beyond any body the server takes
            out.append(count, in[i + 2]);
            i += 2;
        } else {
            out += in[i];
        }
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text = expand(std::string_view(reinterpret_cast<const char*>(data), size));
    // The first byte picks the endpoint, so one corpus covers all: 0 chat, 1 text completion,
    // 2 Anthropic messages, 3 its count_tokens, 4 OpenAI responses, 5 its input_tokens, 6 ollama
    // chat, 7 ollama generate, 8 llama-server's native completion (modulo 9).
    const int endpoint = text.empty() ? 0 : static_cast<std::uint8_t>(text[0]) % 9;
    const std::string body_text = text.empty() ? text : text.substr(1);
    try {
        const smol_server::json body = smol_server::parse_json_body(body_text);
        using smol_server::MessagesEndpoint;
        using smol_server::ResponsesEndpoint;
        const auto ollama = endpoint == 6 ? smol_server::OllamaEndpoint::chat : smol_server::OllamaEndpoint::generate;
        // A load request is answered without a generation (completion_routes.hpp).
        if (endpoint >= 6 && smol_server::is_load_request(body, ollama)) return 0;
        const smol_server::ApiRequest request =
            endpoint == 6   ? smol_server::parse_ollama_chat_request(body, tokenizer(), kContext)
            : endpoint == 7 ? smol_server::parse_ollama_generate_request(body, tokenizer(), kContext)
            : endpoint == 0 ? smol_server::parse_chat_request(body, tokenizer(), kContext)
            : endpoint == 1 ? smol_server::parse_text_request(body, tokenizer(), kContext)
            : endpoint == 8 ? smol_server::parse_llama_completion_request(body, tokenizer(), kContext)
            : endpoint <= 3 ? smol_server::parse_messages_request(
                                  body, tokenizer(), kContext,
                                  endpoint == 2 ? MessagesEndpoint::create : MessagesEndpoint::count_tokens)
                            : smol_server::parse_responses_request(
                                  body, tokenizer(), kContext,
                                  endpoint == 4 ? ResponsesEndpoint::create : ResponsesEndpoint::input_tokens);
        // What a Response repeats is read from an accepted body only, so it may not throw.
        if (endpoint == 4) (void)smol_server::response_settings(body).echo.dump(-1, ' ', false, smol_server::json::error_handler_t::replace);
        // So is what a native completion's reply repeats, and its final object serialises.
        if (endpoint == 8) {
            const smol_server::LlamaCompletionSettings settings = smol_server::llama_completion_settings(body, request, tokenizer());
            smol::StreamEvent end;
            end.finished = true;
            const std::string text = "x";
            (void)smol_server::llama_completion_final({"cmpl-x", "m", 0}, settings, {text, request.generation.prompt}, false, end,
                                                      nullptr)
                .dump(-1, ' ', false, smol_server::json::error_handler_t::replace);
        }
        check_accepted(request, body.contains("grammar"), endpoint == 3 || endpoint == 5);
        (void)body.dump(-1, ' ', false, smol_server::json::error_handler_t::replace);
    } catch (const smol_server::ApiError& e) {
        if (e.status < 400 || e.status > 499) finding("refusal is not a 4xx", std::to_string(e.status) + " " + e.message);
        (void)smol_server::error_body(e).dump(-1, ' ', false, smol_server::json::error_handler_t::replace);
        (void)smol_server::anthropic_error_body(e).dump(-1, ' ', false, smol_server::json::error_handler_t::replace);
        (void)smol_server::ollama_error_body(e).dump(-1, ' ', false, smol_server::json::error_handler_t::replace);
    } catch (const std::exception& e) {
        finding("an exception other than ApiError (a 500)", e.what());
    }
    return 0;
}
