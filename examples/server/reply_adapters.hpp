#pragma once
// The reply adapters: a generation's stream of events turned into an HTTP reply, either
// Server-Sent Events (stream: true) or one JSON body at the end. They write to a ReplySink and
// read from a ReplySource, two small interfaces: in the server those are httplib's DataSink
// (completion_routes.hpp) and the scheduler's GenerationStream; the unit test
// (tests/test_server_replies.cpp) drives them with a fake of each.
//
// httplib calls a step function between tokens until it returns false or the reply is done, then
// its releaser calls end_reply(). Each step looks at the connection first, so a client that hung
// up stops its generation within a token instead of the server computing for nobody.

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api_request.hpp"
#include "live_generations.hpp"
#include "llama_completion_replies.hpp"
#include "messages_api.hpp"
#include "metrics.hpp"
#include "ollama_replies.hpp"
#include "openai_replies.hpp"
#include "outgoing_text.hpp"
#include "reply_ids.hpp"
#include "responses_replies.hpp"
#include "smol/smol.hpp"

namespace smol_server {

using Clock = std::chrono::steady_clock;

// Where a reply's bytes go.
class ReplySink {
public:
    virtual ~ReplySink() = default;
    // False when the bytes could not be sent (the connection failed or was closed).
    virtual bool write(std::string_view bytes) = 0;
    // False once the client hung up (or shut down its sending side): peeks at the connection.
    virtual bool is_writable() = 0;
    // The reply is complete.
    virtual void done() = 0;
};

// Where a reply's events come from.
class ReplySource {
public:
    virtual ~ReplySource() = default;
    // Everything produced since the last call, waiting up to `timeout`; nullopt if nothing came.
    virtual std::optional<smol::StreamEvent> next(std::chrono::milliseconds timeout) = 0;
    // Asks the generation to stop; it frees its slot before its next token. Any number of times.
    virtual void cancel() = 0;
};

// The source of every reply in the server: a request's stream from the scheduler.
class GenerationSource final : public ReplySource {
public:
    explicit GenerationSource(std::shared_ptr<smol::GenerationStream> stream) : stream_(std::move(stream)) {}
    std::optional<smol::StreamEvent> next(std::chrono::milliseconds timeout) override { return stream_->next(timeout); }
    void cancel() override { stream_->cancel(); }

private:
    std::shared_ptr<smol::GenerationStream> stream_;
};

// The completion endpoints: OpenAI's chat messages through the template or a raw text prompt,
// Anthropic's messages, OpenAI's responses, ollama's chat and generate, and llama-server's native
// completion (a raw text prompt too). All read the same generation events; only the rendering
// differs.
enum class Endpoint { chat, text, messages, responses, ollama_chat, ollama_generate, llama_completion };

inline bool is_ollama(Endpoint endpoint) { return endpoint == Endpoint::ollama_chat || endpoint == Endpoint::ollama_generate; }
inline OllamaEndpoint ollama_endpoint(Endpoint endpoint) {
    return endpoint == Endpoint::ollama_chat ? OllamaEndpoint::chat : OllamaEndpoint::generate;
}

// What both kinds of reply carry between steps.
struct ReplyState {
    Endpoint endpoint = Endpoint::chat;
    std::unique_ptr<ReplySource> source;
    ReplyIds ids;
    const smol::text::Tokenizer* tokenizer = nullptr;
    bool logprobs = false;
    Metrics* metrics = nullptr;
    std::unique_ptr<LiveGenerations::Listing> listing;
    ResponseSettings response;  // Endpoint::responses: what its Response objects repeat
    LlamaCompletionSettings llama;  // Endpoint::llama_completion: what its reply repeats
};

// What a streaming response needs besides.
struct StreamState : ReplyState {
    // Log-probabilities of tokens whose text is still held back (a possible stop string or
    // tag): they ride on the next chunk that goes out, so the chunks carry each token once.
    std::vector<smol::TokenLogprob> pending_logprobs;
    std::size_t text_offset = 0;  // bytes of text sent so far (the completions API's text_offset)
    bool include_usage = false;
    bool sent_role = false;  // the opening event went out (the role chunk, message_start, response.created)
    MessagesStream messages;    // Endpoint::messages: which content block is open
    ResponsesStream responses;  // Endpoint::responses: which output item is open
    OllamaStream ollama;        // Endpoint::ollama_*: newline-delimited JSON
    LlamaCompletionStream llama_stream;  // Endpoint::llama_completion: its chunks, then its final object
    int tool_calls_sent = 0;
    bool done = false;
    Clock::time_point last_write = Clock::now();
};

// The one way a client can see its generation cancelled: the server is stopping (a client that
// hung up is no longer read from).
inline ApiError shutting_down_error() {
    return ApiError{503, "generation was cancelled: the server is shutting down", "unavailable_error",
                    "server_shutting_down"};
}

// The error a generation that did not finish ends with, in the body (the 200 status went out
// before generation began); nullopt for one that finished.
inline std::optional<ApiError> generation_error(const smol::StreamEvent& event, Metrics* metrics) {
    if (event.finish == smol::FinishReason::error && event.request_past_limit) {
        // The request's own doing (its grammar went past a token's budget): a client error.
        if (metrics) metrics->http_client_errors++;
        std::fprintf(stderr, "smol-server: generation stopped, the request went past a limit: %s\n", event.error.c_str());
        return ApiError{400, "generation stopped: " + event.error, "invalid_request_error", "grammar_too_complex"};
    }
    if (event.finish == smol::FinishReason::error) {
        if (metrics) metrics->http_server_errors++;
        std::fprintf(stderr, "smol-server: generation failed: %s\n", event.error.c_str());
        return ApiError{500, "generation failed: " + event.error, "server_error", "generation_failed"};
    }
    if (event.finish == smol::FinishReason::cancelled) return shutting_down_error();
    return std::nullopt;
}

// The SSE lines of one event of an OpenAI stream (chat or text completions), ending with
// [DONE] after the last; marks the stream done then.
inline std::string openai_stream_text(StreamState& st, const smol::StreamEvent& event) {
    const bool chat = st.endpoint == Endpoint::chat;
    std::string out;
    st.pending_logprobs.insert(st.pending_logprobs.end(), event.logprobs.begin(), event.logprobs.end());
    // A chunk of this endpoint's kind, with the log-probabilities waiting so far when asked for.
    const auto chunk = [&](json delta, const char* finish_reason) {
        json c;
        if (chat) {
            c = chunk_json(st.ids, std::move(delta), finish_reason);
            if (st.logprobs) c["choices"][0]["logprobs"] = choice_logprobs(true, logprobs_json(st.pending_logprobs, *st.tokenizer));
        } else {
            const std::string text = delta.value("content", "");
            json logprobs = st.logprobs ? text_logprobs_json(st.pending_logprobs, *st.tokenizer, st.text_offset) : json();
            st.text_offset += text.size();
            c = text_completion_json(st.ids, text, finish_reason, std::move(logprobs));
        }
        st.pending_logprobs.clear();
        return c;
    };
    if (!event.reasoning.empty()) out += sse(chunk(json{{"reasoning_content", event.reasoning}}, nullptr));
    if (!event.content.empty()) out += sse(chunk(json{{"content", event.content}}, nullptr));
    // A call is complete when it arrives, so each goes out whole in one chunk (name and all
    // of its arguments), which clients that concatenate argument fragments read the same way.
    for (const smol::ToolCall& call : event.tool_calls) {
        json entry = tool_call_json(call);
        entry["index"] = st.tool_calls_sent++;
        out += sse(chunk_json(st.ids, json{{"tool_calls", json::array({std::move(entry)})}}, nullptr));
    }
    if (event.finished) {
        if (const auto error = generation_error(event, st.metrics)) {
            out += sse(error_body(*error));
        } else {
            json last = chunk(json::object(), openai_finish_reason(event.finish));
            last["timings"] = timings_json(event.usage);
            out += sse(last);
            if (st.include_usage) {
                json usage = last;
                usage.erase("timings");
                usage["choices"] = json::array();
                usage["usage"] = usage_json(event.usage);
                out += sse(usage);
            }
        }
        out += "data: [DONE]\n\n";
        st.done = true;
    }
    return out;
}

// One step of a streamed reply: waits briefly for output and writes it as SSE. Returning false
// (after a failed write, or when the client left) ends the response, and end_reply() cancels
// the generation.
inline bool stream_step(StreamState& st, ReplySink& sink) {
    auto write = [&](const std::string& text) {
        st.last_write = Clock::now();
        return sink.write(text);
    };
    if (st.done) {
        sink.done();
        return true;
    }
    const bool messages = st.endpoint == Endpoint::messages;
    const bool responses = st.endpoint == Endpoint::responses;
    const bool ollama = is_ollama(st.endpoint);
    const bool llama = st.endpoint == Endpoint::llama_completion;
    if (!st.sent_role && st.endpoint != Endpoint::text && !ollama && !llama) {
        st.sent_role = true;
        if (!write(messages    ? st.messages.start()
                   : responses ? st.responses.start()
                               : sse(chunk_json(st.ids, json{{"role", "assistant"}, {"content", ""}}, nullptr))))
            return false;
    }
    // A client that hung up stops its generation here, before another token is waited for.
    if (!sink.is_writable()) return false;
    auto event = st.source->next(std::chrono::milliseconds(100));
    if (!event) {
        // A comment line (an empty object in NDJSON) now and then finds out whether a client
        // waiting in the queue left.
        if (Clock::now() - st.last_write > std::chrono::seconds(2)) return write(ollama ? st.ollama.idle() : ": waiting\n\n");
        return true;
    }
    std::string out;
    // The named-event streams, ollama's and llama-server's native one render themselves,
    // errors included.
    if (messages || responses || ollama || llama) {
        const std::optional<ApiError> error = event->finished ? generation_error(*event, st.metrics) : std::nullopt;
        const ApiError* error_or_null = error ? &*error : nullptr;
        out = messages    ? st.messages.render(*event, error_or_null)
              : responses ? st.responses.render(*event, error_or_null)
              : ollama    ? st.ollama.render(*event, error_or_null)
                          : st.llama_stream.render(*event, *st.tokenizer, error_or_null);
        st.done = event->finished;
        if (!out.empty() && !write(out)) return false;
        if (st.done) sink.done();
        return true;
    }
    out = openai_stream_text(st, *event);
    if (!out.empty() && !write(out)) return false;
    if (st.done) sink.done();
    return true;
}

// What a non-streaming response collects besides.
struct CompletionState : ReplyState {
    std::vector<smol::TokenLogprob> token_logprobs;
    std::string reasoning;
    std::string content;
    json tool_calls = json::array();    // OpenAI's shape (chat)
    std::vector<smol::ToolCall> calls;  // as generated (Endpoint::messages, ::responses and ::ollama_* render them)
    std::vector<std::int32_t> tokens;   // the generated ids (Endpoint::llama_completion)
};

// One step of a non-streaming reply: waits briefly for output and keeps it; at the end writes
// the whole chat.completion (or text_completion) object. The reply is chunked only so that the
// server looks at the connection between tokens: a client that hung up stops its generation
// here (sink.is_writable() peeks the socket), where waiting for the whole text in the handler
// would compute for nobody until max_tokens. A client that only shuts down its sending side
// after the request looks the same as one that left, as on the streaming path.
inline bool completion_step(CompletionState& st, ReplySink& sink) {
    if (!sink.is_writable()) return false;
    auto event = st.source->next(std::chrono::milliseconds(100));
    if (!event) return true;
    st.reasoning += event->reasoning;
    st.content += event->content;
    for (const smol::ToolCall& call : event->tool_calls) {
        if (st.endpoint == Endpoint::chat) st.tool_calls.push_back(tool_call_json(call));
        else st.calls.push_back(call);
    }
    st.token_logprobs.insert(st.token_logprobs.end(), event->logprobs.begin(), event->logprobs.end());
    st.tokens.insert(st.tokens.end(), event->tokens.begin(), event->tokens.end());
    if (!event->finished) return true;
    json body;
    if (const auto error = generation_error(*event, st.metrics)) {
        body = st.endpoint == Endpoint::messages ? anthropic_error_body(*error)
               : is_ollama(st.endpoint)          ? ollama_error_body(*error)
                                                 : error_body(*error);
    } else if (is_ollama(st.endpoint)) {
        body = ollama_object(ollama_endpoint(st.endpoint), st.ids.model, st.reasoning, st.content, st.calls, &*event);
    } else if (st.endpoint == Endpoint::messages) {
        body = message_json(st.ids, st.reasoning, st.content, st.calls, event->finish, event->stop_string, event->usage);
    } else if (st.endpoint == Endpoint::responses) {
        // Reasoning tokens are not counted apart while generating; its text is tokenized again.
        const int reasoning_tokens = st.reasoning.empty() ? 0 : int(st.tokenizer->encode(st.reasoning, false).size());
        body = response_object(st.ids, st.response, st.reasoning, reasoning_tokens, st.content, st.calls, event->finish,
                               event->usage);
    } else if (st.endpoint == Endpoint::llama_completion) {
        body = llama_completion_final(st.ids, st.llama, {st.content, st.tokens}, st.content.find('\n') != std::string::npos,
                                      *event, st.logprobs ? llama_probabilities_json(st.token_logprobs, *st.tokenizer) : json());
    } else if (st.endpoint == Endpoint::chat) {
        st.ids.created = unix_seconds();
        body = completion_json(st.ids, st.reasoning, st.content, std::move(st.tool_calls), event->finish, event->usage,
                               choice_logprobs(st.logprobs, logprobs_json(st.token_logprobs, *st.tokenizer)));
    } else {
        st.ids.created = unix_seconds();
        body = text_completion_json(st.ids, st.content, openai_finish_reason(event->finish),
                                    st.logprobs ? text_logprobs_json(st.token_logprobs, *st.tokenizer, 0) : json());
        body["usage"] = usage_json(event->usage);
        body["timings"] = timings_json(event->usage);
    }
    const std::string text = to_wire(body);
    if (!sink.write(text)) return false;
    sink.done();
    return true;
}

// The end of a reply, for any reason (finished, client gone, a write failed): cancels its
// generation, which frees the slot before the next token (a no-op once it finished).
inline void end_reply(ReplyState& st) { st.source->cancel(); }

}  // namespace smol_server
