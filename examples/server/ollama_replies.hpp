#pragma once
// ollama's native API as smol-server writes it, without HTTP: the scheduler's events rendered as
// ollama's newline-delimited JSON objects (streamed, OllamaStream) or as one object (stream:
// false), and errors in ollama's shape, with error_body_for_path picking each API's error shape.
// reply_adapters.hpp carries them over HTTP; tests/test_ollama_api.cpp calls them directly.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api_request.hpp"
#include "messages_api.hpp"
#include "ollama_request.hpp"
#include "outgoing_text.hpp"
#include "smol/smol.hpp"

namespace smol_server {

// ---- errors -----------------------------------------------------------------------------------

// {"error": "message"}: what ollama answers with, and what its clients read (the npm client
// throws a ResponseError holding the string).
inline json ollama_error_body(const ApiError& e) { return json{{"error", e.message}}; }

// Whether a request path belongs to ollama's API, whose errors take ollama's shape.
inline bool is_ollama_path(std::string_view path) { return path.starts_with("/api/"); }

// An error in the shape of the API `path` (no query string) belongs to: Anthropic's on the
// Messages API's paths, ollama's under /api/, OpenAI's everywhere else. The routes and the
// connection gate both use it.
inline json error_body_for_path(std::string_view path, const ApiError& e) {
    if (is_messages_path(path)) return anthropic_error_body(e);
    if (is_ollama_path(path)) return ollama_error_body(e);
    return error_body(e);
}

// ---- replies ----------------------------------------------------------------------------------

// A time (nanoseconds since the Unix epoch) as RFC 3339 in UTC with nanoseconds, as ollama's
// created_at and modified_at.
inline std::string rfc3339(std::int64_t ns) {
    const std::time_t seconds = std::time_t(ns / 1'000'000'000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[64];
    std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                  utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<long long>(ns % 1'000'000'000));
    return text;
}

inline std::string rfc3339_now() {
    return rfc3339(std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count());
}

// ollama's done_reason: "stop" for a natural end, a stop string or a turn of tool calls, "length"
// when a limit cut the reply short. Cancelled and failed generations have none (nullptr).
inline const char* ollama_done_reason(smol::FinishReason reason) {
    switch (reason) {
        case smol::FinishReason::end_of_generation:
        case smol::FinishReason::stop_string:
        case smol::FinishReason::tool_calls: return "stop";
        case smol::FinishReason::max_tokens:
        case smol::FinishReason::context_full: return "length";
        case smol::FinishReason::cancelled:
        case smol::FinishReason::error: return nullptr;
    }
    return nullptr;
}

// Calls as ollama gives them: [{"function": {"name", "arguments": {...}}}], arguments an object.
inline json ollama_tool_calls(const std::vector<smol::ToolCall>& calls) {
    json out = json::array();
    for (const smol::ToolCall& call : calls) out.push_back({{"function", {{"name", call.name}, {"arguments", tool_input(call)}}}});
    return out;
}

inline std::int64_t nanoseconds(double ms) { return std::int64_t(std::llround(ms * 1e6)); }

// One object of a reply: a piece of it (done: false) or, with `usage`, the end (done: true, its
// reason and the counts and durations, in nanoseconds). The model was loaded before the request
// (load_duration 0); prompt_eval_count is the whole prompt, cached tokens included.
inline json ollama_object(OllamaEndpoint endpoint, const std::string& model, const std::string& reasoning,
                          const std::string& content, const std::vector<smol::ToolCall>& calls,
                          const smol::StreamEvent* end = nullptr) {
    json out = {{"model", model}, {"created_at", rfc3339_now()}};
    if (endpoint == OllamaEndpoint::chat) {
        json message = {{"role", "assistant"}, {"content", content}};
        if (!reasoning.empty()) message["thinking"] = reasoning;
        if (!calls.empty()) message["tool_calls"] = ollama_tool_calls(calls);
        out["message"] = std::move(message);
    } else {
        out["response"] = content;
        if (!reasoning.empty()) out["thinking"] = reasoning;
    }
    out["done"] = end != nullptr;
    if (!end) return out;
    const smol::GenerationUsage& u = end->usage;
    out["done_reason"] = ollama_done_reason(end->finish);
    out["total_duration"] = nanoseconds(u.queue_ms + u.prompt_ms + u.generation_ms);
    out["load_duration"] = 0;
    out["prompt_eval_count"] = u.prompt_tokens;
    out["prompt_eval_duration"] = nanoseconds(u.prompt_ms);
    out["eval_count"] = u.completion_tokens;
    out["eval_duration"] = nanoseconds(u.generation_ms);
    return out;
}

// A reply that answers at once with nothing generated (a load request, is_load_request).
inline json ollama_load_reply(OllamaEndpoint endpoint, const std::string& model) {
    json out = ollama_object(endpoint, model, "", "", {});
    out["done"] = true;
    out["done_reason"] = "load";
    return out;
}

// A streamed reply as newline-delimited JSON: each generation event one object (done: false), the
// last event's text followed by the closing object (done: true, with the statistics), or for a
// failed or cancelled generation an {"error"} object, which ollama's clients raise.
class OllamaStream {
public:
    OllamaStream() = default;
    OllamaStream(OllamaEndpoint endpoint, std::string model) : endpoint_(endpoint), model_(std::move(model)) {}

    std::string render(const smol::StreamEvent& event, const ApiError* error = nullptr) const {
        std::string out;
        if (!event.reasoning.empty() || !event.content.empty() || !event.tool_calls.empty())
            out += line(ollama_object(endpoint_, model_, event.reasoning, event.content, event.tool_calls));
        if (!event.finished) return out;
        if (error) return out + line(ollama_error_body(*error));
        return out + line(ollama_object(endpoint_, model_, "", "", {}, &event));
    }

    // An object with no text, written while the request waits (for a slot, or a long prompt):
    // writing is how a client that left is noticed, and ollama's clients parse every line as
    // JSON, so a comment such as the SSE streams send would break them.
    std::string idle() const { return line(ollama_object(endpoint_, model_, "", "", {})); }

private:
    static std::string line(const json& object) { return to_wire(object) + "\n"; }

    OllamaEndpoint endpoint_ = OllamaEndpoint::chat;
    std::string model_;
};

}  // namespace smol_server
