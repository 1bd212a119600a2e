#pragma once
// OpenAI's Responses API as smol-server writes it, without HTTP: the scheduler's stream of
// generation events rendered as a Response object (its reasoning, message and function_call
// output items) or as the Responses API's SSE events (ResponsesStream). responses_request.hpp
// reads the bodies; reply_adapters.hpp carries these over HTTP.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api_request.hpp"
#include "outgoing_text.hpp"
#include "reply_ids.hpp"
#include "smol/smol.hpp"

namespace smol_server {

// What a Response object repeats from its request (OpenAI's clients type these fields), and
// the one request field that shapes the output: with parallel_tool_calls false a reply carries
// only the first call the model makes.
struct ResponseSettings {
    json echo = json::object();
    bool parallel_tool_calls = true;
};

// The settings of a body parse_responses_request() accepted.
inline ResponseSettings response_settings(const json& body) {
    const auto field = [&](const char* name, json fallback) {
        const auto it = body.find(name);
        return it == body.end() || it->is_null() ? fallback : *it;
    };
    ResponseSettings s;
    s.parallel_tool_calls = field("parallel_tool_calls", true).get<bool>();
    json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
    if (const auto it = body.find("reasoning"); it != body.end() && it->is_object())
        for (const auto& item : it->items()) reasoning[item.key()] = item.value();
    json tools = json::array();
    for (const json& tool : field("tools", json::array())) {
        json echoed = {{"type", "function"},
                       {"name", tool["name"]},
                       {"description", tool.value("description", json())},
                       {"parameters", tool.value("parameters", json())},
                       {"strict", tool.value("strict", json())}};
        tools.push_back(std::move(echoed));
    }
    json text = field("text", json::object());
    if (!text.contains("format") || text["format"].is_null()) text["format"] = {{"type", "text"}};
    s.echo = {{"instructions", field("instructions", nullptr)},
              {"max_output_tokens", field("max_output_tokens", nullptr)},
              {"parallel_tool_calls", s.parallel_tool_calls},
              {"reasoning", std::move(reasoning)},
              {"store", false},
              {"temperature", field("temperature", nullptr)},
              {"text", std::move(text)},
              {"tool_choice", field("tool_choice", "auto")},
              {"tools", std::move(tools)},
              {"top_p", field("top_p", nullptr)},
              {"truncation", field("truncation", "disabled")},
              {"metadata", field("metadata", json::object())}};
    if (const auto user = body.find("user"); user != body.end() && user->is_string()) s.echo["user"] = *user;
    return s;
}

// A Response's status, and an output item's: a reply cut short by a limit is "incomplete".
inline bool cut_short(smol::FinishReason finish) {
    return finish == smol::FinishReason::max_tokens || finish == smol::FinishReason::context_full;
}

inline json response_usage(const smol::GenerationUsage& u, int reasoning_tokens) {
    return json{{"input_tokens", u.prompt_tokens},
                {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
                {"output_tokens", u.completion_tokens},
                {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
                {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

inline json reasoning_item(const std::string& id, const std::string& text, const char* status) {
    return json{{"type", "reasoning"},
                {"id", id},
                {"summary", json::array()},
                {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})},
                {"status", status}};
}

inline json output_text_part(const std::string& text) {
    return json{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

inline json message_item(const std::string& id, const std::string& text, const char* status) {
    return json{{"type", "message"},
                {"id", id},
                {"status", status},
                {"role", "assistant"},
                {"content", json::array({output_text_part(text)})}};
}

inline json function_call_item(const smol::ToolCall& call) {
    return json{{"type", "function_call"},
                {"id", prefixed_id("fc_")},
                {"call_id", prefixed_id("call_")},
                {"name", call.name},
                {"arguments", call.arguments},
                {"status", "completed"}};
}

// The Response object: `status` "in_progress", "completed", "incomplete" or "failed"; `usage`
// null until known; `error` null unless it failed. output_text joins the messages' text, as
// OpenAI's SDKs compute it.
inline json response_json(const ReplyIds& ids, const ResponseSettings& settings, const char* status, json output,
                          json usage = nullptr, json error = nullptr) {
    std::string output_text;
    for (const json& item : output)
        if (item["type"] == "message")
            for (const json& part : item["content"])
                if (part["type"] == "output_text") output_text += part["text"].get<std::string>();
    json incomplete = nullptr;
    if (std::string_view(status) == "incomplete") incomplete = {{"reason", "max_output_tokens"}};
    json response = {{"id", ids.id},
                     {"object", "response"},
                     {"created_at", ids.created},
                     {"status", status},
                     {"error", std::move(error)},
                     {"incomplete_details", std::move(incomplete)},
                     {"model", ids.model},
                     {"output", std::move(output)},
                     {"output_text", std::move(output_text)}};
    for (const auto& item : settings.echo.items()) response[item.key()] = item.value();
    if (!usage.is_null()) response["usage"] = std::move(usage);
    return response;
}

// The whole Response of a reply that finished (not cancelled, not failed): a reasoning item
// when there was reasoning, a message when there was text (or nothing else to show), and one
// function_call item per call.
inline json response_object(const ReplyIds& ids, const ResponseSettings& settings, const std::string& reasoning,
                            int reasoning_tokens, const std::string& text, const std::vector<smol::ToolCall>& calls,
                            smol::FinishReason finish, const smol::GenerationUsage& usage) {
    const char* status = cut_short(finish) ? "incomplete" : "completed";
    json output = json::array();
    if (!reasoning.empty()) output.push_back(reasoning_item(prefixed_id("rs_"), reasoning, status));
    if (!text.empty() || calls.empty()) output.push_back(message_item(prefixed_id("msg_"), text, status));
    for (std::size_t i = 0; i < calls.size() && (settings.parallel_tool_calls || i == 0); ++i)
        output.push_back(function_call_item(calls[i]));
    return response_json(ids, settings, status, std::move(output), response_usage(usage, reasoning_tokens));
}

// The `error` of a failed Response: OpenAI's codes for it are few; a failure of the server's
// is "server_error", one the request caused (its grammar ran past a budget) "invalid_prompt".
inline json response_error(const ApiError& e) {
    return json{{"code", e.status >= 500 ? "server_error" : "invalid_prompt"}, {"message", e.message}};
}

// The stream of one reply as the Responses API's events, each with the next sequence_number.
// start() opens it (response.created, response.in_progress); render() turns each generation
// event into output items: reasoning into a reasoning item, answer text into a message item,
// each tool call into its own function_call item with its arguments in one delta. An item
// closes when another kind begins, so reasoning never lands in a message; the last event closes
// the open item and ends with response.completed, response.incomplete or, after an `error`
// event, response.failed.
class ResponsesStream {
public:
    ResponsesStream() = default;
    ResponsesStream(ReplyIds ids, ResponseSettings settings, const smol::text::Tokenizer* tokenizer)
        : ids_(std::move(ids)), settings_(std::move(settings)), tokenizer_(tokenizer) {}

    std::string start() {
        const json snapshot = response_json(ids_, settings_, "in_progress", json::array());
        // One statement each: the operands of + are unordered, and the numbers must count up.
        std::string out = emit({{"type", "response.created"}, {"response", snapshot}});
        out += emit({{"type", "response.in_progress"}, {"response", snapshot}});
        return out;
    }

    // The events for one generation event; for a failed or cancelled generation, `error` is
    // what the `error` event and response.failed carry.
    std::string render(const smol::StreamEvent& event, const ApiError* error = nullptr) {
        std::string out;
        if (!event.reasoning.empty()) {
            out += open(Item::reasoning);
            reasoning_ += event.reasoning;
            text_ += event.reasoning;
            out += emit({{"type", "response.reasoning_text.delta"}, {"item_id", item_id_}, {"output_index", output_index()},
                         {"content_index", 0}, {"delta", event.reasoning}});
        }
        if (!event.content.empty()) {
            out += open(Item::message);
            text_ += event.content;
            out += emit({{"type", "response.output_text.delta"}, {"item_id", item_id_}, {"output_index", output_index()},
                         {"content_index", 0}, {"delta", event.content}, {"logprobs", json::array()}});
        }
        for (const smol::ToolCall& call : event.tool_calls) {
            if (!settings_.parallel_tool_calls && calls_ > 0) break;
            out += close("completed");
            ++calls_;
            json item = function_call_item(call);
            const int index = output_index();
            json added = item;
            added["arguments"] = "";
            added["status"] = "in_progress";
            out += emit({{"type", "response.output_item.added"}, {"output_index", index}, {"item", std::move(added)}});
            out += emit({{"type", "response.function_call_arguments.delta"}, {"item_id", item["id"]}, {"output_index", index},
                         {"delta", call.arguments}});
            out += emit({{"type", "response.function_call_arguments.done"}, {"item_id", item["id"]}, {"output_index", index},
                         {"name", call.name}, {"arguments", call.arguments}});
            out += emit({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
            output_.push_back(std::move(item));
        }
        if (!event.finished) return out;
        const char* status = error ? "incomplete" : cut_short(event.finish) ? "incomplete" : "completed";
        out += close(status);
        if (error) {
            out += emit({{"type", "error"}, {"code", error->code}, {"message", error->message}, {"param", nullptr}});
            out += emit({{"type", "response.failed"},
                         {"response", response_json(ids_, settings_, "failed", output_, nullptr, response_error(*error))}});
            return out;
        }
        // A reply with neither text nor calls still has its (empty) message, as response_object() gives it.
        if (!message_sent_ && calls_ == 0) {
            out += open(Item::message);
            out += close(status);
        }
        const int reasoning_tokens = tokenizer_ && !reasoning_.empty() ? int(tokenizer_->encode(reasoning_, false).size()) : 0;
        json response = response_json(ids_, settings_, status, output_, response_usage(event.usage, reasoning_tokens));
        out += emit({{"type", std::string("response.") + status}, {"response", std::move(response)}});
        return out;
    }

private:
    enum class Item { none, reasoning, message };

    std::string emit(json event) {
        event["sequence_number"] = sequence_number_++;
        return named_sse(event);
    }

    int output_index() const { return int(output_.size()); }

    // Starts an item of `kind` unless one is open already; its content part comes with it.
    std::string open(Item kind) {
        if (open_ == kind) return "";
        std::string out = close("completed");
        open_ = kind;
        text_.clear();
        json item, part;
        if (kind == Item::reasoning) {
            item_id_ = prefixed_id("rs_");
            item = reasoning_item(item_id_, "", "in_progress");
            item["content"] = json::array();
            part = {{"type", "reasoning_text"}, {"text", ""}};
        } else {
            item_id_ = prefixed_id("msg_");
            message_sent_ = true;
            item = message_item(item_id_, "", "in_progress");
            item["content"] = json::array();
            part = output_text_part("");
        }
        out += emit({{"type", "response.output_item.added"}, {"output_index", output_index()}, {"item", std::move(item)}});
        out += emit({{"type", "response.content_part.added"}, {"item_id", item_id_}, {"output_index", output_index()},
                     {"content_index", 0}, {"part", std::move(part)}});
        return out;
    }

    // Ends the open item, if any, with its whole text, and keeps it for the final Response.
    std::string close(const char* status) {
        if (open_ == Item::none) return "";
        const bool reasoning = open_ == Item::reasoning;
        open_ = Item::none;
        const int index = output_index();
        json item = reasoning ? reasoning_item(item_id_, text_, status) : message_item(item_id_, text_, status);
        const json part = item["content"][0];
        json text_done = {{"type", reasoning ? "response.reasoning_text.done" : "response.output_text.done"},
                          {"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"text", text_}};
        if (!reasoning) text_done["logprobs"] = json::array();
        std::string out = emit(std::move(text_done));
        out += emit({{"type", "response.content_part.done"}, {"item_id", item_id_}, {"output_index", index},
                     {"content_index", 0}, {"part", part}});
        out += emit({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
        output_.push_back(std::move(item));
        return out;
    }

    ReplyIds ids_;
    ResponseSettings settings_;
    const smol::text::Tokenizer* tokenizer_ = nullptr;  // counts reasoning tokens for usage
    int sequence_number_ = 0;
    json output_ = json::array();  // the items closed so far
    Item open_ = Item::none;
    std::string item_id_;    // the open item's
    std::string text_;       // the open item's text so far
    std::string reasoning_;  // all reasoning text, for usage
    bool message_sent_ = false;
    int calls_ = 0;
};

}  // namespace smol_server
