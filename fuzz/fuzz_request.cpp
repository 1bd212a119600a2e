// libFuzzer target for what smol-server does with a request body before any token is
// generated: JSON parsing, the OpenAI mapping of both completion endpoints (fields, messages,
// tools, response_format, logit_bias, stop strings), the chat template's rendering and the
// tokenizer, on the real SmolLM3 vocabulary (SMOL_FUZZ_VOCAB). For any input bytes:
//   - the body is accepted, or refused with an ApiError whose status is a 4xx;
//   - an accepted request has a non-empty prompt of in-vocabulary ids that fits the context and
//     valid sampling parameters (smol::Sampler accepts them); a grammar the mapping generated
//     (from response_format, a JSON schema, tool_choice) parses, while one the client wrote in
//     `grammar` may be refused later (smol-server's 400 invalid_grammar);
//   - the error body and the request's messages serialise (invalid UTF-8 as U+FFFD).
// Any other exception (it would be a 500), a sanitizer report or a broken property is a finding.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "openai_api.hpp"
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

void check_accepted(const smol_server::ApiRequest& request, bool client_grammar) {
    const auto& prompt = request.generation.prompt;
    if (prompt.empty()) finding("accepted request", "empty prompt");
    if (int(prompt.size()) >= kContext) finding("accepted request", "prompt does not fit the context");
    for (const std::int32_t id : prompt)
        if (id < 0 || std::size_t(id) >= tokenizer().n_vocab()) finding("accepted request", "prompt id out of range");
    try {
        smol::Sampler sampler(request.generation.params.sampling, int(tokenizer().n_vocab()));
    } catch (const std::exception& e) {
        finding("accepted sampling parameters fail later", e.what());
    }
    if (request.grammar.empty()) return;
    try {
        (void)smol::text::Grammar::parse(request.grammar);
    } catch (const smol::Error& e) {
        if (!client_grammar) finding("a generated grammar does not parse", std::string(e.what()) + "\n" + request.grammar);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    // The first byte picks the endpoint, so one corpus covers both.
    const bool chat = size == 0 || (data[0] & 1) == 0;
    const std::string body_text = size == 0 ? text : text.substr(1);
    try {
        const smol_server::json body = smol_server::parse_json_body(body_text);
        const smol_server::ApiRequest request = chat ? smol_server::parse_chat_request(body, tokenizer(), kContext)
                                                     : smol_server::parse_text_request(body, tokenizer(), kContext);
        check_accepted(request, body.contains("grammar"));
        (void)body.dump(-1, ' ', false, smol_server::json::error_handler_t::replace);
    } catch (const smol_server::ApiError& e) {
        if (e.status < 400 || e.status > 499) finding("refusal is not a 4xx", std::to_string(e.status) + " " + e.message);
        (void)smol_server::error_body(e).dump(-1, ' ', false, smol_server::json::error_handler_t::replace);
    } catch (const std::exception& e) {
        finding("an exception other than ApiError (a 500)", e.what());
    }
    return 0;
}
