#pragma once
// POST /v1/chat/completions, /v1/completions, /v1/messages, /v1/responses, /api/chat,
// /api/generate and llama-server's /completion: the body checked (openai_chat_request.hpp,
// openai_text_request.hpp, messages_api.hpp, responses_request.hpp, ollama_request.hpp,
// llama_completion_request.hpp), its grammar compiled or found in
// the cache, the request submitted to the scheduler, and its stream handed to a reply adapter
// (reply_adapters.hpp) that httplib runs as the response's content provider.

#include <httplib.h>

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>

#include "api_request.hpp"
#include "llama_completion_request.hpp"
#include "messages_api.hpp"
#include "ollama_replies.hpp"
#include "ollama_request.hpp"
#include "openai_chat_request.hpp"
#include "openai_text_request.hpp"
#include "reply_adapters.hpp"
#include "reply_ids.hpp"
#include "responses_replies.hpp"
#include "responses_request.hpp"
#include "server_state.hpp"
#include "smol/smol.hpp"
#include "tenants.hpp"

namespace smol_server {

// A reply adapter's sink over httplib's.
class HttplibSink final : public ReplySink {
public:
    explicit HttplibSink(httplib::DataSink& sink) : sink_(sink) {}
    bool write(std::string_view bytes) override { return sink_.write(bytes.data(), bytes.size()); }
    bool is_writable() override { return sink_.is_writable(); }
    void done() override { sink_.done(); }

private:
    httplib::DataSink& sink_;
};

// The server's flags every request starts from (its own fields win).
inline RequestDefaults request_defaults(const ServerState& server) {
    return {server.options.reasoning_budget, server.options.sampling};
}

// Any API's body as the one request model; `sampling`: the server's defaults (its flags).
inline ApiRequest parse_api_request(Endpoint endpoint, const json& body, const smol::text::Tokenizer& tokenizer,
                                    int context, const RequestDefaults& defaults = {}) {
    switch (endpoint) {
        case Endpoint::messages: return parse_messages_request(body, tokenizer, context, MessagesEndpoint::create, defaults);
        case Endpoint::responses:
            return parse_responses_request(body, tokenizer, context, ResponsesEndpoint::create, defaults);
        case Endpoint::ollama_chat: return parse_ollama_chat_request(body, tokenizer, context, defaults);
        case Endpoint::ollama_generate: return parse_ollama_generate_request(body, tokenizer, context, defaults);
        case Endpoint::chat: return parse_chat_request(body, tokenizer, context, defaults);
        case Endpoint::llama_completion: return parse_llama_completion_request(body, tokenizer, context, defaults);
        default: return parse_text_request(body, tokenizer, context, defaults);
    }
}

// The generation queued, or the reason it was not as the client's error.
inline std::shared_ptr<smol::GenerationStream> submit_generation(smol::Scheduler& scheduler, smol::GenerationRequest generation) {
    try {
        return scheduler.submit(std::move(generation));
    } catch (const smol::QueueFullError& e) {
        reject(503, e.what(), "server_busy");
    } catch (const smol::PromptTooLongError& e) {
        reject(400, e.what(), "context_length_exceeded");
    } catch (const smol::Error& e) {
        reject(400, e.what(), "invalid_value");
    }
}

// The requests-served counter of an endpoint's API.
inline auto& endpoint_counter(Metrics& metrics, Endpoint endpoint) {
    return endpoint == Endpoint::messages    ? metrics.messages
           : endpoint == Endpoint::responses ? metrics.responses
           : is_ollama(endpoint)             ? metrics.ollama
           : endpoint == Endpoint::chat      ? metrics.chat_completions
                                             : metrics.text_completions;
}

// The id a reply's object carries, in its API's form (ollama's objects carry none).
inline std::string reply_id(Endpoint endpoint) {
    if (endpoint == Endpoint::messages) return prefixed_id("msg_");
    if (endpoint == Endpoint::responses) return prefixed_id("resp_");
    if (is_ollama(endpoint)) return "";
    return (endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + uuid_v7();
}

// Answers one completion request; throws ApiError for what the client got wrong.
inline void complete(ServerState& server, const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    smol::Scheduler& scheduler = server.model.require_scheduler();
    // Under way from here on (a drain waits for this request), unless a drain or shutdown began.
    std::unique_ptr<LiveGenerations::Admission> admission = server.live.admit();
    if (server.live.closing()) reject(503, "the server is shutting down", "server_shutting_down");
    if (!admission)
        reject(503, "this replica is draining (SIGTERM): it finishes the replies under way and takes no new ones; "
                    "retry, and a load balancer sends the request to another replica",
               "server_draining");
    const json body = parse_json_body(req.body);
    // ollama's way to preload the model: answered at once, as it is always loaded here.
    if (is_ollama(endpoint) && is_load_request(body, ollama_endpoint(endpoint))) {
        res.set_content(to_wire(ollama_load_reply(ollama_endpoint(endpoint), server.model.id())), "application/json");
        return;
    }
    const smol::text::Tokenizer& tokenizer = scheduler.tokenizer();
    ApiRequest request =
        parse_api_request(endpoint, body, tokenizer, scheduler.context(), request_defaults(server));
    request.generation.cache_partition = cache_partition(server.options, req, body);
    LlamaCompletionSettings llama;  // read before the generation moves into the scheduler
    if (endpoint == Endpoint::llama_completion) llama = llama_completion_settings(body, request, tokenizer);
    if (!request.grammar.empty())
        request.generation.params.grammar = server.grammars.get(request.grammar, scheduler.engine());
    const std::shared_ptr<smol::GenerationStream> stream = submit_generation(scheduler, std::move(request.generation));
    ++endpoint_counter(server.metrics, endpoint);
    const auto fill = [&](ReplyState& st) {
        st.endpoint = endpoint;
        st.source = std::make_unique<GenerationSource>(stream);
        st.ids = {reply_id(endpoint), server.model.id(), unix_seconds()};
        st.tokenizer = &tokenizer;
        if (endpoint == Endpoint::responses) st.response = response_settings(body);
        st.llama = std::move(llama);  // fill runs once
        st.logprobs = request.logprobs;
        st.metrics = &server.metrics;
        st.listing = server.live.add(stream, std::move(admission));
    };
    // Both kinds of reply are written by a content provider that runs between tokens; when the
    // response ends for any reason (finished, client gone, write failed) its releaser cancels
    // the generation, which frees the slot before the next token (a no-op once it finished).
    if (request.stream) {
        auto st = std::make_shared<StreamState>();
        fill(*st);
        st->include_usage = request.include_usage;
        st->messages = MessagesStream(st->ids, request.prompt_tokens);
        st->responses = ResponsesStream(st->ids, st->response, st->tokenizer);
        if (is_ollama(endpoint)) st->ollama = OllamaStream(ollama_endpoint(endpoint), st->ids.model);
        if (endpoint == Endpoint::llama_completion) st->llama_stream = LlamaCompletionStream(st->ids, st->llama, st->logprobs);
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no");
        res.set_chunked_content_provider(
            is_ollama(endpoint) ? "application/x-ndjson" : "text/event-stream",
            [st](std::size_t, httplib::DataSink& sink) {
                HttplibSink reply_sink(sink);
                return stream_step(*st, reply_sink);
            },
            [st](bool) { end_reply(*st); });
        return;
    }
    auto st = std::make_shared<CompletionState>();
    fill(*st);
    res.set_chunked_content_provider(
        "application/json",
        [st](std::size_t, httplib::DataSink& sink) {
            HttplibSink reply_sink(sink);
            return completion_step(*st, reply_sink);
        },
        [st](bool) { end_reply(*st); });
}

// POST /v1/messages/count_tokens: the prompt the request would run, counted.
inline void count_message_tokens(ServerState& server, const httplib::Request& req, httplib::Response& res) {
    smol::Scheduler& scheduler = server.model.require_scheduler();
    const ApiRequest request = parse_messages_request(parse_json_body(req.body), scheduler.tokenizer(),
                                                      scheduler.context(), MessagesEndpoint::count_tokens,
                                                      request_defaults(server));
    res.set_content(to_wire(json{{"input_tokens", request.prompt_tokens}}), "application/json");
}

// POST /v1/responses/input_tokens: the prompt the request would run, counted.
inline void count_response_tokens(ServerState& server, const httplib::Request& req, httplib::Response& res) {
    smol::Scheduler& scheduler = server.model.require_scheduler();
    const ApiRequest request = parse_responses_request(parse_json_body(req.body), scheduler.tokenizer(),
                                                       scheduler.context(), ResponsesEndpoint::input_tokens,
                                                       request_defaults(server));
    res.set_content(to_wire(json{{"object", "response.input_tokens"}, {"input_tokens", request.prompt_tokens}}),
                    "application/json");
}

}  // namespace smol_server
