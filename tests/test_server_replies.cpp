// smol-server's reply adapters (examples/server/reply_adapters.hpp) without HTTP: a scripted
// source of generation events and a fake sink stand in for the scheduler and httplib, so each
// test sees exactly which bytes a reply writes, in which order, and when it gives up.

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reply_adapters.hpp"
#include "server_api_helpers.hpp"
#include "smol/smol.hpp"
#include "tiny_fixture.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_server_replies {

namespace {

using smol_server::Endpoint;
using smol_server::json;
using smol_test::finished;
using smol_test::named_events;
using smol_test::split_sse;
using smol_test::SseEvent;

const smol::text::Tokenizer& tokenizer() { return smol_test::tiny_tokenizer(); }

// httplib's DataSink as the adapters see it, recording what they do.
struct FakeSink final : smol_server::ReplySink {
    std::string written;
    int write_attempts = 0;
    int failing_write = 0;            // the 1-based write attempt from which writes fail; 0: none fail
    int writable_checks_left = 1000;  // is_writable() answers false once these are used up (the client left)
    int done_calls = 0;

    bool write(std::string_view bytes) override {
        ++write_attempts;
        if (failing_write > 0 && write_attempts >= failing_write) return false;
        written += bytes;
        return true;
    }
    bool is_writable() override {
        if (writable_checks_left == 0) return false;
        --writable_checks_left;
        return true;
    }
    void done() override { ++done_calls; }
};

// The scheduler's stream as the adapters see it: the scripted events one per call, then nothing.
struct FakeSource final : smol_server::ReplySource {
    std::deque<smol::StreamEvent> script;
    int next_calls = 0;
    bool cancelled = false;

    std::optional<smol::StreamEvent> next(std::chrono::milliseconds) override {
        ++next_calls;
        if (script.empty()) return std::nullopt;
        smol::StreamEvent event = std::move(script.front());
        script.pop_front();
        return event;
    }
    void cancel() override { cancelled = true; }
};

smol::StreamEvent reasoning(std::string text) {
    smol::StreamEvent e;
    e.reasoning = std::move(text);
    return e;
}

smol::StreamEvent content(std::string text) {
    smol::StreamEvent e;
    e.content = std::move(text);
    return e;
}

smol::StreamEvent failed(std::string error, bool request_past_limit) {
    smol::StreamEvent e = finished(smol::FinishReason::error);
    e.error = std::move(error);
    e.request_past_limit = request_past_limit;
    return e;
}

// Gives a reply state its scripted source and ids; returns the source to look at afterwards.
FakeSource& script(smol_server::ReplyState& st, Endpoint endpoint, std::vector<smol::StreamEvent> events,
                   smol_server::Metrics* metrics = nullptr) {
    auto source = std::make_unique<FakeSource>();
    for (smol::StreamEvent& e : events) source->script.push_back(std::move(e));
    FakeSource& kept = *source;
    st.source = std::move(source);
    st.endpoint = endpoint;
    st.ids = {endpoint == Endpoint::chat        ? "chatcmpl-test"
              : endpoint == Endpoint::messages  ? "msg_test"
              : endpoint == Endpoint::responses ? "resp_test"
                                                : "cmpl-test",
              "tiny-model", 1700000000};
    st.tokenizer = &tokenizer();
    st.metrics = metrics;
    return kept;
}

// Runs a reply as httplib's chunked content provider does: steps until one returns false (the
// response ends early) or the reply is done, then the releaser. Whether it ended early.
template <class State, class Step>
bool run_reply(State& st, FakeSink& sink, Step step) {
    bool ended_early = false;
    for (int i = 0; i < 100 && sink.done_calls == 0; ++i) {
        if (!step(st, sink)) {
            ended_early = true;
            break;
        }
    }
    smol_server::end_reply(st);
    return ended_early;
}

// The data of each event (and each comment whole), for the chat and text streams, which name no events.
std::vector<std::string> sse_events(const std::string& text) {
    std::vector<std::string> data;
    for (const SseEvent& e : split_sse(text)) {
        CHECK((e.name.empty() || e.name == ":"));
        data.push_back(e.data);
    }
    return data;
}

json delta_of(const std::string& event) { return json::parse(event)["choices"][0]["delta"]; }

TEST_CASE("a streamed chat reply: role, reasoning, content, a tool call, the finish, usage and [DONE] in order") {
    smol_server::StreamState st;
    smol::StreamEvent first = reasoning("thinking");  // one step's reasoning and answer: in that order
    first.content = "Hello";
    smol::StreamEvent last = content(" world");
    last.tool_calls.push_back({"get_weather", R"({"city":"Paris"})"});
    FakeSource& source = script(st, Endpoint::chat, {first, finished(smol::FinishReason::tool_calls, last)});
    st.include_usage = true;
    FakeSink sink;
    CHECK_FALSE(run_reply(st, sink, smol_server::stream_step));
    CHECK(sink.done_calls == 1);
    CHECK(source.script.empty());

    const std::vector<std::string> events = sse_events(sink.written);
    REQUIRE(events.size() == 8);
    CHECK(delta_of(events[0]) == json{{"role", "assistant"}, {"content", ""}});
    CHECK(delta_of(events[1]) == json{{"reasoning_content", "thinking"}});
    CHECK(delta_of(events[2]) == json{{"content", "Hello"}});
    CHECK(delta_of(events[3]) == json{{"content", " world"}});
    const json call = delta_of(events[4])["tool_calls"];
    REQUIRE(call.size() == 1);
    CHECK(call[0]["index"] == 0);
    CHECK(call[0]["function"] == json{{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}});
    const json finish = json::parse(events[5]);
    CHECK(finish["choices"][0]["delta"] == json::object());
    CHECK(finish["choices"][0]["finish_reason"] == "tool_calls");
    CHECK(finish["timings"]["predicted_n"] == 5);
    const json usage = json::parse(events[6]);
    CHECK(usage["choices"] == json::array());
    CHECK(usage["usage"]["total_tokens"] == 12);
    CHECK(usage["usage"]["prompt_tokens_details"]["cached_tokens"] == 2);
    CHECK(events[7] == "[DONE]");
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
        const json chunk = json::parse(events[i]);
        CHECK(chunk["object"] == "chat.completion.chunk");
        CHECK(chunk["id"] == "chatcmpl-test");
        CHECK(chunk["model"] == "tiny-model");
        if (i < 5) {
            CHECK(chunk["choices"][0]["finish_reason"].is_null());
        }
    }
}

TEST_CASE("a streamed text completion: log-probabilities of held-back text ride on the next chunk") {
    const std::vector<std::int32_t> ids = tokenizer().encode("Hello world", false);
    REQUIRE(ids.size() >= 2);
    const std::string first = tokenizer().token_bytes(ids[0]);
    const std::string second = tokenizer().token_bytes(ids[1]);
    smol::StreamEvent held;  // a token whose text is held back (it could start a stop string)
    held.logprobs.push_back({ids[0], -0.5f, {}});
    smol::StreamEvent shown = content(first + second);
    shown.logprobs.push_back({ids[1], -1.5f, {}});
    smol_server::StreamState st;
    script(st, Endpoint::text, {held, shown, finished(smol::FinishReason::stop_string)});
    st.logprobs = true;
    FakeSink sink;
    CHECK_FALSE(run_reply(st, sink, smol_server::stream_step));

    const std::vector<std::string> events = sse_events(sink.written);
    REQUIRE(events.size() == 3);
    const json text = json::parse(events[0]);
    CHECK(text["object"] == "text_completion");
    CHECK(text["choices"][0]["text"] == first + second);
    CHECK(text["choices"][0]["logprobs"]["tokens"] == json{first, second});
    CHECK(text["choices"][0]["logprobs"]["token_logprobs"] == json{-0.5, -1.5});
    CHECK(text["choices"][0]["logprobs"]["text_offset"] == json{0, first.size()});
    const json finish = json::parse(events[1]);
    CHECK(finish["choices"][0]["text"] == "");
    CHECK(finish["choices"][0]["finish_reason"] == "stop");
    CHECK(finish["choices"][0]["logprobs"]["tokens"] == json::array());
    CHECK(events[2] == "[DONE]");
}

TEST_CASE("a streamed native /completion: chunks whose tokens ride with their text, the final object, no [DONE]") {
    const std::vector<std::int32_t> ids = tokenizer().encode("Hello world", false);
    REQUIRE(ids.size() >= 2);
    const std::string first = tokenizer().token_bytes(ids[0]);
    const std::string second = tokenizer().token_bytes(ids[1]);
    smol::StreamEvent held;  // a token whose text is held back (it could start a stop string)
    held.tokens.push_back(ids[0]);
    held.logprobs.push_back({ids[0], -0.5f, {}});
    smol::StreamEvent shown = content(first + second + "\n");
    shown.tokens.push_back(ids[1]);
    shown.logprobs.push_back({ids[1], -1.5f, {}});
    smol::StreamEvent last = finished(smol::FinishReason::stop_string);
    last.stop_string = "x";
    last.slot = 1;
    smol_server::StreamState st;
    script(st, Endpoint::llama_completion, {held, shown, last});
    st.logprobs = true;
    st.llama.return_tokens = true;
    st.llama.prompt_tokens = 7;
    st.llama.prompt = "Say";
    st.llama_stream = smol_server::LlamaCompletionStream(st.ids, st.llama, st.logprobs);
    FakeSink sink;
    CHECK_FALSE(run_reply(st, sink, smol_server::stream_step));
    CHECK(sink.done_calls == 1);

    const std::vector<std::string> events = sse_events(sink.written);
    REQUIRE(events.size() == 2);  // no opening event, nothing for the held-back token, no [DONE]
    const json chunk = json::parse(events[0]);
    CHECK(chunk["content"] == first + second + "\n");
    CHECK(chunk["tokens"] == json{ids[0], ids[1]});
    CHECK(chunk["stop"] == false);
    CHECK(chunk["tokens_predicted"] == 2);
    CHECK(chunk["tokens_evaluated"] == 7);
    REQUIRE(chunk["completion_probabilities"].size() == 2);
    CHECK(chunk["completion_probabilities"][0]["logprob"] == -0.5);
    CHECK(chunk["completion_probabilities"][1]["id"] == ids[1]);
    const json final_object = json::parse(events[1]);
    CHECK(final_object["stop"] == true);
    CHECK(final_object["content"] == "");  // streamed: the text went out in the chunks
    CHECK(final_object["stop_type"] == "word");
    CHECK(final_object["stopping_word"] == "x");
    CHECK(final_object["id_slot"] == 1);
    CHECK(final_object["has_new_line"] == true);
    CHECK(final_object["prompt"] == "Say");

    SUBCASE("an error mid-stream: an error event, no final object") {
        smol_server::Metrics metrics;
        smol_server::StreamState failing;
        script(failing, Endpoint::llama_completion, {content("partial"), failed("the model produced NaN", false)}, &metrics);
        failing.llama_stream = smol_server::LlamaCompletionStream(failing.ids, failing.llama, false);
        FakeSink failing_sink;
        CHECK_FALSE(run_reply(failing, failing_sink, smol_server::stream_step));
        const std::vector<std::string> failed_events = sse_events(failing_sink.written);
        REQUIRE(failed_events.size() == 2);
        CHECK(json::parse(failed_events[0])["content"] == "partial");
        CHECK(json::parse(failed_events[1])["error"]["code"] == "generation_failed");
        CHECK(metrics.http_server_errors.load() == 1);
    }
}

TEST_CASE("an error mid-stream ends the reply with an error event and [DONE], counted by whose it was") {
    smol_server::Metrics metrics;
    smol_server::StreamState st;
    std::string code, type;
    SUBCASE("the generation failed: the server's error") {
        script(st, Endpoint::chat, {content("partial"), failed("the model produced NaN", false)}, &metrics);
        code = "generation_failed";
        type = "server_error";
    }
    SUBCASE("the request's grammar went past a token's budget: the client's error") {
        script(st, Endpoint::chat, {content("partial"), failed("a token took too long", true)}, &metrics);
        code = "grammar_too_complex";
        type = "invalid_request_error";
    }
    SUBCASE("the server is shutting down") {
        script(st, Endpoint::chat, {content("partial"), finished(smol::FinishReason::cancelled)}, &metrics);
        code = "server_shutting_down";
        type = "unavailable_error";
    }
    FakeSink sink;
    CHECK_FALSE(run_reply(st, sink, smol_server::stream_step));
    CHECK(sink.done_calls == 1);
    const std::vector<std::string> events = sse_events(sink.written);
    REQUIRE(events.size() == 4);
    CHECK(delta_of(events[0])["role"] == "assistant");
    CHECK(delta_of(events[1]) == json{{"content", "partial"}});
    const json error = json::parse(events[2]);
    CHECK(error["error"]["code"] == code);
    CHECK(error["error"]["type"] == type);
    CHECK_FALSE(error.contains("choices"));  // no finish chunk: the reply did not finish
    CHECK(events[3] == "[DONE]");
    CHECK(metrics.http_server_errors.load() == (type == "server_error" ? 1u : 0u));
    CHECK(metrics.http_client_errors.load() == (type == "invalid_request_error" ? 1u : 0u));
}

TEST_CASE("a non-streaming reply is one JSON body written at the end") {
    smol_server::Metrics metrics;
    smol_server::CompletionState st;
    FakeSink sink;
    SUBCASE("chat") {
        script(st, Endpoint::chat,
               {reasoning("hmm"), content("Hello"), finished(smol::FinishReason::end_of_generation, content(" world"))},
               &metrics);
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        CHECK(sink.write_attempts == 1);
        const json body = json::parse(sink.written);
        CHECK(body["object"] == "chat.completion");
        CHECK(body["choices"][0]["message"]["content"] == "Hello world");
        CHECK(body["choices"][0]["message"]["reasoning_content"] == "hmm");
        CHECK(body["choices"][0]["finish_reason"] == "stop");
        CHECK(body["usage"]["completion_tokens"] == 5);
    }
    SUBCASE("text") {
        script(st, Endpoint::text, {content("Once"), finished(smol::FinishReason::max_tokens, content(" upon"))}, &metrics);
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        CHECK(body["object"] == "text_completion");
        CHECK(body["choices"][0]["text"] == "Once upon");
        CHECK(body["choices"][0]["finish_reason"] == "length");
        CHECK(body["usage"]["prompt_tokens"] == 7);
    }
    SUBCASE("llama-server's native completion") {
        smol::StreamEvent once = content("Once");
        once.tokens = {11, 12};
        script(st, Endpoint::llama_completion, {once, finished(smol::FinishReason::max_tokens, content(" upon"))}, &metrics);
        st.llama.return_tokens = true;
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        CHECK(body["content"] == "Once upon");
        CHECK(body["tokens"] == json{11, 12});
        CHECK(body["stop_type"] == "limit");
        CHECK(body["tokens_predicted"] == 5);
        CHECK_FALSE(body.contains("completion_probabilities"));  // not asked for
    }
    SUBCASE("a failed generation: the error object is the body") {
        script(st, Endpoint::chat, {content("partial"), failed("out of memory", false)}, &metrics);
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        CHECK(body["error"]["code"] == "generation_failed");
        CHECK_FALSE(body.contains("choices"));
        CHECK(metrics.http_server_errors.load() == 1);
    }
    CHECK(sink.done_calls == 1);
}

TEST_CASE("a client that disconnects stops its generation") {
    FakeSink sink;
    SUBCASE("streaming: a write that fails ends the reply before the next token") {
        smol_server::StreamState st;
        FakeSource& source =
            script(st, Endpoint::chat, {content("Hello"), content(" there"), finished(smol::FinishReason::stop_string)});
        sink.failing_write = 2;  // the role chunk goes out, the first content chunk does not
        CHECK(run_reply(st, sink, smol_server::stream_step));
        CHECK(source.cancelled);
        CHECK(source.next_calls == 1);      // nothing more was waited for after the failed write
        CHECK(source.script.size() == 2);  // the generation had more to say
        CHECK(sink.done_calls == 0);
    }
    SUBCASE("streaming: a client that hung up is noticed before a token is waited for") {
        smol_server::StreamState st;
        FakeSource& source = script(st, Endpoint::chat, {content("Hello"), finished(smol::FinishReason::stop_string)});
        sink.writable_checks_left = 1;  // gone after the first token
        CHECK(run_reply(st, sink, smol_server::stream_step));
        CHECK(source.cancelled);
        CHECK(source.next_calls == 1);
        CHECK(source.script.size() == 1);
        CHECK(sink.done_calls == 0);
    }
    SUBCASE("streaming: the keep-alive comment of a quiet stream finds the client gone") {
        smol_server::StreamState st;
        FakeSource& source = script(st, Endpoint::chat, {});  // still waiting for a slot
        REQUIRE(smol_server::stream_step(st, sink));           // the role chunk; nothing else yet
        REQUIRE(smol_server::stream_step(st, sink));           // written just now: no comment
        CHECK(sse_events(sink.written).size() == 1);
        st.last_write -= std::chrono::seconds(3);
        REQUIRE(smol_server::stream_step(st, sink));
        const std::vector<std::string> events = sse_events(sink.written);
        REQUIRE(events.size() == 2);
        CHECK(events[1] == ": waiting");
        st.last_write -= std::chrono::seconds(3);
        sink.failing_write = sink.write_attempts + 1;
        CHECK_FALSE(smol_server::stream_step(st, sink));
        smol_server::end_reply(st);
        CHECK(source.cancelled);
    }
    SUBCASE("not streaming: a client that hung up is noticed between tokens, with nothing written") {
        smol_server::CompletionState st;
        FakeSource& source = script(st, Endpoint::chat,
                                    {content("Hello"), content(" there"), finished(smol::FinishReason::stop_string)});
        sink.writable_checks_left = 2;  // gone after two tokens
        CHECK(run_reply(st, sink, smol_server::completion_step));
        CHECK(source.cancelled);
        CHECK(source.next_calls == 2);
        CHECK(source.script.size() == 1);
        CHECK(sink.write_attempts == 0);
        CHECK(sink.done_calls == 0);
    }
    SUBCASE("not streaming: the body's write fails") {
        smol_server::CompletionState st;
        FakeSource& source = script(st, Endpoint::chat, {finished(smol::FinishReason::stop_string, content("Hi"))});
        sink.failing_write = 1;
        CHECK(run_reply(st, sink, smol_server::completion_step));
        CHECK(source.cancelled);
        CHECK(sink.done_calls == 0);
    }
}

TEST_CASE("a streamed Messages reply: message_start, a block per kind and per call, message_delta, message_stop") {
    smol_server::StreamState st;
    smol::StreamEvent first = reasoning("thinking");
    first.content = "Hello";
    smol::StreamEvent last = content(" world");
    last.tool_calls.push_back({"get_weather", R"({"city":"Paris"})"});
    last.tool_calls.push_back({"get_time", R"({"zone":"UTC"})"});
    FakeSource& source = script(st, Endpoint::messages, {first, finished(smol::FinishReason::tool_calls, last)});
    st.messages = smol_server::MessagesStream(st.ids, 7);
    FakeSink sink;
    CHECK_FALSE(run_reply(st, sink, smol_server::stream_step));
    CHECK(sink.done_calls == 1);
    CHECK(source.script.empty());
    CHECK(source.cancelled);  // end_reply() always cancels; a no-op once finished

    const auto events = named_events(sink.written);
    std::vector<std::string> names;
    for (const auto& e : events) names.push_back(e.first);
    CHECK(names == std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                            "content_block_stop", "content_block_start", "content_block_delta",
                                            "content_block_delta", "content_block_stop", "content_block_start",
                                            "content_block_delta", "content_block_stop", "content_block_start",
                                            "content_block_delta", "content_block_stop", "message_delta",
                                            "message_stop"});
    REQUIRE(events.size() == 17);
    CHECK(events[0].second["message"]["id"] == "msg_test");
    CHECK(events[0].second["message"]["usage"]["input_tokens"] == 7);
    CHECK(events[2].second["content_block"]["type"] == "thinking");
    CHECK(events[3].second["delta"] == json{{"type", "thinking_delta"}, {"thinking", "thinking"}});
    CHECK(events[5].second["content_block"] == json{{"type", "text"}, {"text", ""}});
    CHECK(events[6].second["delta"]["text"] == "Hello");
    CHECK(events[7].second["delta"]["text"] == " world");
    CHECK(events[9].second["index"] == 2);
    CHECK(events[9].second["content_block"]["name"] == "get_weather");
    CHECK(json::parse(events[10].second["delta"]["partial_json"].get<std::string>()) == json{{"city", "Paris"}});
    CHECK(events[12].second["index"] == 3);
    CHECK(events[12].second["content_block"]["name"] == "get_time");
    CHECK(events[15].second["delta"]["stop_reason"] == "tool_use");
    CHECK(events[15].second["usage"]["output_tokens"] == 5);
}

TEST_CASE("a non-streamed Messages reply is one Message object; a failed one an Anthropic error") {
    FakeSink sink;
    smol_server::Metrics metrics;
    SUBCASE("finished at a stop sequence") {
        smol_server::CompletionState st;
        smol::StreamEvent last = finished(smol::FinishReason::stop_string, content(" there"));
        last.stop_string = "END";
        script(st, Endpoint::messages, {reasoning("hmm"), content("Hello"), last});
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        CHECK(body["id"] == "msg_test");
        CHECK(body["type"] == "message");
        CHECK(body["content"] == json::array({{{"type", "thinking"}, {"thinking", "hmm"}, {"signature", ""}},
                                              {{"type", "text"}, {"text", "Hello there"}}}));
        CHECK(body["stop_reason"] == "stop_sequence");
        CHECK(body["stop_sequence"] == "END");
        CHECK(body["usage"] == json{{"input_tokens", 5},
                                    {"cache_creation_input_tokens", 0},
                                    {"cache_read_input_tokens", 2},
                                    {"output_tokens", 5}});
    }
    SUBCASE("with tool calls") {
        smol_server::CompletionState st;
        smol::StreamEvent call = content("");
        call.tool_calls.push_back({"get_weather", R"({"city":"Paris"})"});
        script(st, Endpoint::messages, {call, finished(smol::FinishReason::tool_calls)});
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        REQUIRE(body["content"].size() == 1);
        CHECK(body["content"][0]["type"] == "tool_use");
        CHECK(body["content"][0]["input"] == json{{"city", "Paris"}});
        CHECK(body["stop_reason"] == "tool_use");
    }
    SUBCASE("failed") {
        smol_server::CompletionState st;
        script(st, Endpoint::messages, {failed("boom", false)}, &metrics);
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        CHECK(body == json{{"type", "error"}, {"error", {{"type", "api_error"}, {"message", "generation failed: boom"}}}});
        CHECK(metrics.http_server_errors.load() == 1);
    }
    SUBCASE("failed while streaming: an error event ends the stream") {
        smol_server::StreamState st;
        script(st, Endpoint::messages, {content("Hi"), failed("past the grammar's budget", true)}, &metrics);
        st.messages = smol_server::MessagesStream(st.ids, 7);
        CHECK_FALSE(run_reply(st, sink, smol_server::stream_step));
        const auto events = named_events(sink.written);
        REQUIRE(events.size() == 6);
        CHECK(events[4].first == "content_block_stop");
        CHECK(events[5].first == "error");
        CHECK(events[5].second["error"]["type"] == "invalid_request_error");
        CHECK(metrics.http_client_errors.load() == 1);
    }
    CHECK(sink.done_calls == 1);
}

TEST_CASE("a Messages client that disconnects stops its generation") {
    FakeSink sink;
    smol_server::StreamState st;
    FakeSource& source =
        script(st, Endpoint::messages, {content("Hello"), content(" there"), finished(smol::FinishReason::end_of_generation)});
    st.messages = smol_server::MessagesStream(st.ids, 7);
    sink.failing_write = 2;  // message_start goes out, the first block does not
    CHECK(run_reply(st, sink, smol_server::stream_step));
    CHECK(source.cancelled);
    CHECK(source.next_calls == 1);
    CHECK(source.script.size() == 2);
    CHECK(sink.done_calls == 0);
}

TEST_CASE("a streamed Responses reply: numbered events, one item per kind and per call, their indices, then completed") {
    smol_server::StreamState st;
    smol::StreamEvent first = reasoning("thinking");
    first.content = "Hello";
    smol::StreamEvent last = content(" world");
    last.tool_calls.push_back({"get_weather", R"({"city":"Paris"})"});
    last.tool_calls.push_back({"get_time", R"({"zone":"UTC"})"});
    FakeSource& source = script(st, Endpoint::responses, {first, finished(smol::FinishReason::tool_calls, last)});
    st.responses = smol_server::ResponsesStream(st.ids, st.response, &tokenizer());
    FakeSink sink;
    CHECK_FALSE(run_reply(st, sink, smol_server::stream_step));
    CHECK(sink.done_calls == 1);
    CHECK(source.script.empty());

    const auto events = named_events(sink.written);
    std::vector<std::string> names;
    for (const auto& e : events) names.push_back(e.first);
    CHECK(names == std::vector<std::string>{
                       "response.created", "response.in_progress", "response.output_item.added",
                       "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.done",
                       "response.content_part.done", "response.output_item.done", "response.output_item.added",
                       "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
                       "response.output_text.done", "response.content_part.done", "response.output_item.done",
                       "response.output_item.added", "response.function_call_arguments.delta",
                       "response.function_call_arguments.done", "response.output_item.done",
                       "response.output_item.added", "response.function_call_arguments.delta",
                       "response.function_call_arguments.done", "response.output_item.done", "response.completed"});
    REQUIRE(events.size() == 24);
    for (std::size_t i = 0; i < events.size(); ++i) CHECK(events[i].second["sequence_number"] == i);
    // Each item's events carry its output_index, and its item_id where they name one.
    const int expected_index[] = {-1, -1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, -1};
    for (std::size_t i = 0; i < events.size(); ++i) {
        const json& data = events[i].second;
        CAPTURE(i);
        if (expected_index[i] < 0) {
            CHECK_FALSE(data.contains("output_index"));
            continue;
        }
        CHECK(data["output_index"] == expected_index[i]);
        const std::size_t added = expected_index[i] == 0 ? 2 : expected_index[i] == 1 ? 8 : expected_index[i] == 2 ? 15 : 19;
        if (data.contains("item_id")) CHECK(data["item_id"] == events[added].second["item"]["id"]);
        if (data.contains("content_index")) CHECK(data["content_index"] == 0);
    }
    CHECK(events[0].second["response"]["id"] == "resp_test");
    CHECK(events[4].second["delta"] == "thinking");
    CHECK(events[10].second["delta"] == "Hello");
    CHECK(events[11].second["delta"] == " world");
    CHECK(events[15].second["item"]["name"] == "get_weather");
    CHECK(events[19].second["item"]["name"] == "get_time");
    const json& done = events[23].second["response"];
    CHECK(done["status"] == "completed");
    CHECK(done["output_text"] == "Hello world");
    CHECK(done["output"].size() == 4);
    CHECK(done["usage"]["input_tokens"] == 7);
    CHECK(done["usage"]["input_tokens_details"]["cached_tokens"] == 2);
}

TEST_CASE("a non-streamed Responses reply is one Response object; a failed one an OpenAI error, streamed or not") {
    FakeSink sink;
    smol_server::Metrics metrics;
    SUBCASE("cut short by max_output_tokens") {
        smol_server::CompletionState st;
        script(st, Endpoint::responses, {reasoning("hmm"), content("Hello"), finished(smol::FinishReason::max_tokens, content(" there"))});
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        CHECK(body["id"] == "resp_test");
        CHECK(body["object"] == "response");
        CHECK(body["status"] == "incomplete");
        CHECK(body["incomplete_details"]["reason"] == "max_output_tokens");
        REQUIRE(body["output"].size() == 2);
        CHECK(body["output"][0]["content"][0]["text"] == "hmm");
        CHECK(body["output"][1]["content"][0]["text"] == "Hello there");
        CHECK(body["output_text"] == "Hello there");
        CHECK(body["usage"]["output_tokens_details"]["reasoning_tokens"] == int(tokenizer().encode("hmm", false).size()));
    }
    SUBCASE("with tool calls, each its own item") {
        smol_server::CompletionState st;
        smol::StreamEvent call = content("");
        call.tool_calls.push_back({"get_weather", R"({"city":"Paris"})"});
        call.tool_calls.push_back({"get_weather", R"({"city":"Oslo"})"});
        script(st, Endpoint::responses, {call, finished(smol::FinishReason::tool_calls)});
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        REQUIRE(body["output"].size() == 2);
        CHECK(body["output"][0]["type"] == "function_call");
        CHECK(body["output"][1]["arguments"] == R"({"city":"Oslo"})");
        CHECK(body["status"] == "completed");
    }
    SUBCASE("failed") {
        smol_server::CompletionState st;
        script(st, Endpoint::responses, {failed("boom", false)}, &metrics);
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        CHECK(body["error"]["code"] == "generation_failed");
        CHECK(metrics.http_server_errors.load() == 1);
    }
    SUBCASE("failed while streaming: an error event, then response.failed") {
        smol_server::StreamState st;
        script(st, Endpoint::responses, {content("Hi"), failed("past the grammar's budget", true)}, &metrics);
        st.responses = smol_server::ResponsesStream(st.ids, st.response, &tokenizer());
        CHECK_FALSE(run_reply(st, sink, smol_server::stream_step));
        const auto events = named_events(sink.written);
        REQUIRE(events.size() == 10);
        CHECK(events[7].first == "response.output_item.done");
        CHECK(events[8].first == "error");
        CHECK(events[8].second["code"] == "grammar_too_complex");
        CHECK(events[9].first == "response.failed");
        CHECK(events[9].second["response"]["error"]["code"] == "invalid_prompt");
        CHECK(metrics.http_client_errors.load() == 1);
    }
    CHECK(sink.done_calls == 1);
}

TEST_CASE("the server's source passes a cancel on to the scheduler's stream") {
    auto stream = std::make_shared<smol::GenerationStream>(1);
    smol_server::GenerationSource source(stream);
    CHECK_FALSE(source.next(std::chrono::milliseconds(1)));
    CHECK_FALSE(stream->cancel_requested());
    source.cancel();
    CHECK(stream->cancel_requested());
}

}  // namespace

TEST_CASE("a streamed ollama reply is one JSON object a line: the text, thinking and calls, then done with the statistics") {
    FakeSink sink;
    smol_server::StreamState st;
    smol::StreamEvent call;
    call.tool_calls.push_back({"get_weather", R"({"city":"Paris"})"});
    script(st, Endpoint::ollama_chat, {reasoning("hmm"), content("Hello"), call, finished(smol::FinishReason::tool_calls)});
    st.ollama = smol_server::OllamaStream(smol_server::OllamaEndpoint::chat, "tiny-model");
    CHECK_FALSE(run_reply(st, sink, smol_server::stream_step));
    CHECK(sink.done_calls == 1);
    REQUIRE(sink.written.back() == '\n');
    std::vector<json> lines;
    for (std::size_t at = 0; at < sink.written.size();) {
        const std::size_t end = sink.written.find('\n', at);
        lines.push_back(json::parse(sink.written.substr(at, end - at)));
        at = end + 1;
    }
    REQUIRE(lines.size() == 4);
    CHECK(lines[0]["message"] == json{{"role", "assistant"}, {"content", ""}, {"thinking", "hmm"}});
    CHECK(lines[1]["message"] == json{{"role", "assistant"}, {"content", "Hello"}});
    CHECK(lines[2]["message"]["tool_calls"] ==
          json::array({{{"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}}));
    for (std::size_t i = 0; i < 3; ++i) CHECK(lines[i]["done"] == false);
    CHECK(lines[3]["done"] == true);
    CHECK(lines[3]["done_reason"] == "stop");
    CHECK(lines[3]["eval_count"] == 5);
    CHECK(lines[3]["model"] == "tiny-model");

    SUBCASE("a failure ends the stream with an error object, which ollama's clients raise") {
        FakeSink failed_sink;
        smol_server::StreamState failing;
        smol_server::Metrics metrics;
        script(failing, Endpoint::ollama_generate, {content("Hi"), failed("boom", false)}, &metrics);
        failing.ollama = smol_server::OllamaStream(smol_server::OllamaEndpoint::generate, "tiny-model");
        CHECK_FALSE(run_reply(failing, failed_sink, smol_server::stream_step));
        CHECK(failed_sink.written.find("{\"model\":\"tiny-model\"") == 0);
        CHECK(failed_sink.written.find("\"response\":\"Hi\"") != std::string::npos);
        const std::size_t last_line = failed_sink.written.rfind('\n', failed_sink.written.size() - 2);
        CHECK(json::parse(failed_sink.written.substr(last_line + 1)) == json{{"error", "generation failed: boom"}});
        CHECK(metrics.http_server_errors.load() == 1);
    }
}

TEST_CASE("a non-streamed ollama reply is one object with the whole text; a failed one an {\"error\"}") {
    FakeSink sink;
    SUBCASE("generate") {
        smol_server::CompletionState st;
        script(st, Endpoint::ollama_generate, {reasoning("hmm"), content("Hello"), finished(smol::FinishReason::max_tokens, content(" there"))});
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        CHECK(body["response"] == "Hello there");
        CHECK(body["thinking"] == "hmm");
        CHECK(body["done"] == true);
        CHECK(body["done_reason"] == "length");
        CHECK(body["prompt_eval_count"] == 7);
    }
    SUBCASE("chat with a call") {
        smol_server::CompletionState st;
        smol::StreamEvent call;
        call.tool_calls.push_back({"get_weather", R"({"city":"Paris"})"});
        script(st, Endpoint::ollama_chat, {call, finished(smol::FinishReason::tool_calls)});
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        const json body = json::parse(sink.written);
        CHECK(body["message"]["content"] == "");
        CHECK(body["message"]["tool_calls"][0]["function"]["arguments"] == json{{"city", "Paris"}});
    }
    SUBCASE("failed") {
        smol_server::CompletionState st;
        script(st, Endpoint::ollama_chat, {failed("past the grammar's budget", true)});
        CHECK_FALSE(run_reply(st, sink, smol_server::completion_step));
        CHECK(json::parse(sink.written) == json{{"error", "generation stopped: past the grammar's budget"}});
    }
    CHECK(sink.done_calls == 1);
}

}  // namespace test_server_replies
