#pragma once
// Tool calls in SmolLM3's format, both ways.
//
// The model is told (by the template's xml_tools section) to answer a call as
//   <tool_call>
//   {"name": <function-name>, "arguments": <args-json-object>}
//   </tool_call>
// and `<tool_call>` / `</tool_call>` are single tokens of its vocabulary. ToolCallParser takes
// the streamed answer text apart into plain text and calls; format_tool_call() writes a call
// back the same way, for assistant turns in the history.
//
// Like the thinking parser it holds back the shortest tail that could still grow into a tag.
// It also holds back trailing whitespace, so the newlines the model puts around calls do not
// become answer text: whitespace before a call or after the last one is dropped, whitespace
// followed by more text is kept. A block that is not a valid call (bad JSON, no name, or cut
// off by the end of generation) is passed on as text, never lost.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "smol/core/bounded_json.hpp"

namespace smol {

struct ToolCall {
    std::string name;
    std::string arguments;  // a JSON object, as text (the OpenAI API's shape)
};

struct ToolCallPiece {
    std::string text;  // answer text outside calls
    std::vector<ToolCall> calls;
};

class ToolCallParser {
public:
    static constexpr std::string_view open_tag = "<tool_call>";
    static constexpr std::string_view close_tag = "</tool_call>";

    ToolCallPiece push(std::string_view text) {
        ToolCallPiece out;
        std::string buffer = std::move(held_);
        held_.clear();
        buffer.append(text);
        std::string_view rest = buffer;
        while (!rest.empty()) {
            if (in_call_) {
                const std::size_t close = rest.find(close_tag);
                if (close == std::string_view::npos) {
                    held_.assign(rest);  // the call so far; close_tag is searched again with more text
                    return out;
                }
                end_call(rest.substr(0, close), out);
                rest.remove_prefix(close + close_tag.size());
                continue;
            }
            const std::size_t open = rest.find(open_tag);
            if (open != std::string_view::npos) {
                out.text.append(rstrip(rest.substr(0, open)));  // whitespace before a call is not answer text
                rest.remove_prefix(open + open_tag.size());
                in_call_ = true;
                continue;
            }
            std::size_t keep = rest.size() - partial_tag_suffix(rest);
            while (keep > 0 && is_space(rest[keep - 1])) --keep;
            out.text.append(rest.substr(0, keep));
            held_.assign(rest.substr(keep));
            break;
        }
        return out;
    }

    // End of the answer: an unfinished call and held-back text are shown as text; trailing
    // whitespace is dropped after a call.
    ToolCallPiece finish() {
        ToolCallPiece out;
        if (in_call_) {
            out.text = std::string(open_tag) + held_;
            in_call_ = false;
        } else if (!(calls_ > 0 && rstrip(held_).empty())) {
            out.text = held_;
        }
        held_.clear();
        return out;
    }

    int calls() const { return calls_; }

private:
    static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

    static std::string_view rstrip(std::string_view s) {
        while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
        return s;
    }

    static std::size_t partial_tag_suffix(std::string_view text) {
        for (std::size_t length = std::min(text.size(), open_tag.size() - 1); length > 0; --length)
            if (text.substr(text.size() - length) == open_tag.substr(0, length)) return length;
        return 0;
    }

    void end_call(std::string_view body, ToolCallPiece& out) {
        in_call_ = false;
        // ordered_json keeps the arguments' keys in the order the model wrote them. A body
        // nested past the JSON caps (a model can write "[[[[..." for a whole context) stays text.
        const nlohmann::ordered_json call =
            try_parse_json<nlohmann::ordered_json>(body).value_or(nlohmann::ordered_json::value_t::discarded);
        const bool valid = call.is_object() && call.contains("name") && call["name"].is_string() &&
                           !call["name"].get_ref<const std::string&>().empty() &&
                           (!call.contains("arguments") || call["arguments"].is_object());
        if (!valid) {
            out.text.append(open_tag).append(body).append(close_tag);
            return;
        }
        ++calls_;
        out.calls.push_back(ToolCall{call["name"].get<std::string>(),
                                     call.contains("arguments") ? call["arguments"].dump() : std::string("{}")});
    }

    bool in_call_ = false;
    int calls_ = 0;
    std::string held_;  // outside a call: a possible tag and trailing whitespace; inside: the call's text
};

namespace tool_call_detail {

// JSON as Python's json.dumps writes it (", " and ": " separators, non-ASCII kept): the
// spelling of the template's own example call, and of what the model was trained to write.
inline void append_json(std::string& out, const nlohmann::ordered_json& value) {
    if (value.is_object()) {
        out += '{';
        bool first = true;
        for (const auto& [key, item] : value.items()) {
            if (!first) out += ", ";
            first = false;
            out += nlohmann::ordered_json(key).dump();
            out += ": ";
            append_json(out, item);
        }
        out += '}';
    } else if (value.is_array()) {
        out += '[';
        for (std::size_t i = 0; i < value.size(); ++i) {
            if (i > 0) out += ", ";
            append_json(out, value[i]);
        }
        out += ']';
    } else {
        out += value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    }
}

}  // namespace tool_call_detail

// A call as the model writes it. `arguments` is a JSON object or the text of one (as the
// OpenAI API carries it); text that is not JSON is written as a string.
inline std::string format_tool_call(std::string_view name, const nlohmann::ordered_json& arguments) {
    nlohmann::ordered_json args = arguments;
    if (arguments.is_string())
        args = try_parse_json<nlohmann::ordered_json>(arguments.get_ref<const std::string&>()).value_or(arguments);
    nlohmann::ordered_json call = nlohmann::ordered_json::object();
    call["name"] = name;
    call["arguments"] = std::move(args);
    std::string out = "<tool_call>\n";
    tool_call_detail::append_json(out, call);
    out += "\n</tool_call>";
    return out;
}

}  // namespace smol
