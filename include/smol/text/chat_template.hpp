#pragma once
// The SmolLM3 chat template, hand-written. It mirrors the official Jinja template embedded in
// the released GGUF (tests/data/chat/smollm3-official.jinja) branch for branch, as transformers
// renders it (trim_blocks, lstrip_blocks), so render_chat() gives the exact bytes the model was
// trained on. It is deliberately not a Jinja engine: one template, one reading of it.
//
// Python semantics the template relies on and that are reproduced here:
//   - `"/think" in s`, `s.replace(a, "")`, `s.rstrip()` (Unicode whitespace), `s.lstrip("\n")`;
//   - `tool | string`, i.e. Python str() of a tool definition: repr() of dicts and lists with
//     single quotes, True/False/None, Python float repr and Python string escaping.
//
// Tool definitions are printed with their keys in the caller's order, which is why the tools
// are nlohmann::ordered_json: a plain nlohmann::json sorts keys on parse and would change the
// prompt. A nlohmann::json converts implicitly (keys then come out sorted).

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "smol/core/error.hpp"
#include "smol/text/text_span.hpp"
#include "smol/text/thinking.hpp"
#include "smol/text/tool_calls.hpp"

namespace smol {

struct ChatOptions {
    // Default reasoning mode; "/think" or "/no_think" in the system message overrides it.
    bool enable_thinking = true;
    // Ends the prompt with the assistant header (plus an empty think block in no-think mode).
    bool add_generation_prompt = true;
    // The last message is an assistant reply to continue (a prefill): its turn is left open
    // instead of closed, and no generation prompt follows (Hugging Face's
    // continue_final_message). Requires add_generation_prompt = false.
    bool continue_final_message = false;
    // "Today Date" in the system block, e.g. "21 November 2026". Empty means today in local
    // time, as the template's strftime_now("%d %B %Y") would give (see today_for_template()).
    std::string date;
    // Null or arrays of tool definitions; each element is printed like Python's str().
    nlohmann::ordered_json xml_tools;
    nlohmann::ordered_json python_tools;
};

namespace chat_detail {

// ---- UTF-8 helpers -------------------------------------------------------------------------

// Decodes the code point starting at text[pos]; returns false on a malformed sequence (then
// the byte is treated as an opaque non-space, non-printable-check character by callers).
inline bool decode_utf8(std::string_view text, size_t pos, char32_t& code_point, size_t& length) {
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(pos);
    if (lead < 0x80) {
        code_point = lead;
        length = 1;
        return true;
    }
    size_t n = 0;
    char32_t value = 0;
    if ((lead & 0xE0) == 0xC0) {
        n = 2;
        value = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
        n = 3;
        value = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
        n = 4;
        value = lead & 0x07;
    } else {
        return false;
    }
    if (pos + n > text.size()) return false;
    for (size_t i = 1; i < n; ++i) {
        if ((byte(pos + i) & 0xC0) != 0x80) return false;
        value = (value << 6) | (byte(pos + i) & 0x3F);
    }
    code_point = value;
    length = n;
    return true;
}

// Python's str.isspace(): the characters rstrip() removes when called without arguments.
inline bool is_python_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.rstrip() with no arguments.
inline std::string python_rstrip(std::string_view text) {
    size_t end = text.size();
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
            --start;
        }
        char32_t code_point = 0;
        size_t length = 0;
        if (!decode_utf8(text, start, code_point, length) || start + length != end ||
            !is_python_space(code_point)) {
            break;
        }
        end = start;
    }
    return std::string(text.substr(0, end));
}

// Python's str.lstrip("\n").
inline std::string_view lstrip_newlines(std::string_view text) {
    const size_t first = text.find_first_not_of('\n');
    return first == std::string_view::npos ? std::string_view{} : text.substr(first);
}

// Python's str.replace(needle, "").
inline std::string remove_all(std::string text, std::string_view needle) {
    for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos)) {
        text.erase(pos, needle.size());
    }
    return text;
}

// ---- Python repr ---------------------------------------------------------------------------

// Code points >= 0x80 that Python's str.isprintable() rejects and repr() therefore escapes:
// categories Cc, Cf, Zs, Zl, Zp, Cs, Co (Unicode 14, Python 3.11). Unassigned code points (Cn)
// are escaped by Python too, but which ones are unassigned depends on the Unicode version of
// whichever Python renders the template, so they pass through unescaped here.
inline bool is_python_unprintable(char32_t c) {
    static constexpr std::array<std::array<char32_t, 2>, 27> ranges{{
        {0x80, 0xA0},       {0xAD, 0xAD},       {0x600, 0x605},     {0x61C, 0x61C},
        {0x6DD, 0x6DD},     {0x70F, 0x70F},     {0x890, 0x891},     {0x8E2, 0x8E2},
        {0x1680, 0x1680},   {0x180E, 0x180E},   {0x2000, 0x200F},   {0x2028, 0x202F},
        {0x205F, 0x2064},   {0x2066, 0x206F},   {0x3000, 0x3000},   {0xD800, 0xF8FF},
        {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
        {0x13430, 0x13438}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001},
        {0xE0020, 0xE007F}, {0xF0000, 0xFFFFD}, {0x100000, 0x10FFFD},
    }};
    for (const auto& range : ranges) {
        if (c < range[0]) return false;
        if (c <= range[1]) return true;
    }
    return false;
}

inline void append_hex_escape(std::string& out, char prefix, char32_t value, int digits) {
    static constexpr char hex[] = "0123456789abcdef";
    out += '\\';
    out += prefix;
    for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out += hex[(value >> shift) & 0xF];
}

// Python's repr() of a str: single quotes unless the text has a ' and no ", then double.
inline void append_python_string_repr(std::string& out, std::string_view text) {
    const bool has_single = text.find('\'') != std::string_view::npos;
    const bool has_double = text.find('"') != std::string_view::npos;
    const char quote = (has_single && !has_double) ? '"' : '\'';
    out += quote;
    for (size_t pos = 0; pos < text.size();) {
        char32_t c = 0;
        size_t length = 0;
        if (!decode_utf8(text, pos, c, length)) {
            // Not UTF-8, so not something Python could hold in a str; keep the byte as is.
            out += text[pos++];
            continue;
        }
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7F) {
            append_hex_escape(out, 'x', c, 2);
        } else if (c < 0x7F || !is_python_unprintable(c)) {
            out.append(text.substr(pos, length));
        } else if (c <= 0xFF) {
            append_hex_escape(out, 'x', c, 2);
        } else if (c <= 0xFFFF) {
            append_hex_escape(out, 'u', c, 4);
        } else {
            append_hex_escape(out, 'U', c, 8);
        }
        pos += length;
    }
    out += quote;
}

// Python's repr() of a float: the shortest digits that round-trip, positional notation when
// the decimal exponent is in [-4, 16), otherwise d.ddde+XX; integral values get ".0".
inline void append_python_float_repr(std::string& out, double value) {
    if (std::isnan(value)) {
        out += "nan";
        return;
    }
    if (std::isinf(value)) {
        out += value < 0 ? "-inf" : "inf";
        return;
    }
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
    if (result.ec != std::errc{}) fail("chat template: cannot format float ", value);
    const std::string_view formatted(buffer, static_cast<size_t>(result.ptr - buffer));  // "-d.ddde+XX"

    std::string_view mantissa = formatted.substr(0, formatted.find('e'));
    const int exponent = std::stoi(std::string(formatted.substr(formatted.find('e') + 1)));
    if (!mantissa.empty() && mantissa.front() == '-') {
        out += '-';
        mantissa.remove_prefix(1);
    }
    std::string digits;  // significant digits without the point
    for (char ch : mantissa) {
        if (ch != '.') digits += ch;
    }

    const int point = exponent + 1;  // digits[0 .. point) is the integer part
    if (exponent < -4 || exponent >= 16) {
        out += digits[0];
        if (digits.size() > 1) {
            out += '.';
            out.append(digits, 1);
        }
        out += exponent < 0 ? "e-" : "e+";
        const int magnitude = exponent < 0 ? -exponent : exponent;
        if (magnitude < 10) out += '0';
        out += std::to_string(magnitude);
    } else if (point <= 0) {
        out += "0.";
        out.append(static_cast<size_t>(-point), '0');
        out += digits;
    } else if (static_cast<size_t>(point) < digits.size()) {
        out.append(digits, 0, static_cast<size_t>(point));
        out += '.';
        out.append(digits, static_cast<size_t>(point));
    } else {
        out += digits;
        out.append(static_cast<size_t>(point) - digits.size(), '0');
        out += ".0";
    }
}

// Python's repr() of the value json.loads() would have produced.
inline void append_python_repr(std::string& out, const nlohmann::ordered_json& value) {
    using Type = nlohmann::ordered_json::value_t;
    switch (value.type()) {
        case Type::null: out += "None"; return;
        case Type::boolean: out += value.get<bool>() ? "True" : "False"; return;
        case Type::number_integer: out += std::to_string(value.get<std::int64_t>()); return;
        case Type::number_unsigned: out += std::to_string(value.get<std::uint64_t>()); return;
        case Type::number_float: append_python_float_repr(out, value.get<double>()); return;
        case Type::string: append_python_string_repr(out, value.get_ref<const std::string&>()); return;
        case Type::array: {
            out += '[';
            bool first = true;
            for (const auto& item : value) {
                if (!first) out += ", ";
                first = false;
                append_python_repr(out, item);
            }
            out += ']';
            return;
        }
        case Type::object: {
            out += '{';
            bool first = true;
            for (const auto& [key, item] : value.items()) {
                if (!first) out += ", ";
                first = false;
                append_python_string_repr(out, key);
                out += ": ";
                append_python_repr(out, item);
            }
            out += '}';
            return;
        }
        case Type::binary:
        case Type::discarded: break;
    }
    fail("chat template: a tool definition holds a JSON ", value.type_name(),
         " value, which has no Python equivalent");
}

// Jinja's `value | string`: Python str(), which is repr() except that a str prints bare.
inline std::string python_str(const nlohmann::ordered_json& value) {
    if (value.is_string()) return value.get<std::string>();
    std::string out;
    append_python_repr(out, value);
    return out;
}

// ---- message validation --------------------------------------------------------------------

struct Turn {
    std::string_view role;
    std::string content;  // the template's `message.content if message.content is string else ""`
};

inline Turn read_turn(const nlohmann::ordered_json& message, size_t index) {
    if (!message.is_object()) {
        fail("chat message ", index, ": expected an object {role, content}, found ", message.type_name());
    }
    const auto role = message.find("role");
    if (role == message.end()) fail("chat message ", index, ": missing \"role\"");
    if (!role->is_string()) {
        fail("chat message ", index, ": expected \"role\" to be a string, found ", role->type_name());
    }
    const std::string& role_name = role->get_ref<const std::string&>();
    if (role_name != "system" && role_name != "user" && role_name != "assistant" && role_name != "tool") {
        fail("chat message ", index, ": unknown role \"", role_name,
             "\"; the SmolLM3 template knows system, user, assistant and tool");
    }
    const auto content = message.find("content");
    if (content == message.end()) fail("chat message ", index, " (", role_name, "): missing \"content\"");
    Turn turn{role_name, {}};
    if (content->is_string()) {
        turn.content = content->get<std::string>();
    } else if (content->is_null()) {
        // An assistant turn that only made tool calls has null content; the template prints "".
    } else if (content->is_array()) {
        // The template prints non-string content as "", which would silently drop the text.
        fail("chat message ", index, " (", role_name,
             "): \"content\" is a list of parts, but the SmolLM3 template only renders string "
             "content (it would drop these parts); join the text parts into one string first");
    } else {
        fail("chat message ", index, " (", role_name, "): expected \"content\" to be a string or null, found ",
             content->type_name());
    }
    // The official template ignores an assistant turn's tool_calls; the model would then see
    // an empty turn where it made calls. They are written back into the content the way the
    // model writes them, after any text, one per line.
    const auto calls = message.find("tool_calls");
    if (role_name == "assistant" && calls != message.end() && !calls->is_null()) {
        const std::string where = "chat message " + std::to_string(index) + " (assistant): tool_calls";
        if (!calls->is_array()) fail(where, ": expected an array, found ", calls->type_name());
        for (size_t i = 0; i < calls->size(); ++i) {
            const auto& call = (*calls)[i];
            const auto function = call.is_object() ? call.find("function") : call.end();
            if (!call.is_object() || function == call.end() || !function->is_object() || !function->contains("name") ||
                !(*function)["name"].is_string())
                fail(where, "[", i, "]: expected {\"type\": \"function\", \"function\": {\"name\": ..., \"arguments\": ...}}");
            const auto arguments = function->find("arguments");
            if (!turn.content.empty()) turn.content += "\n";
            turn.content += format_tool_call((*function)["name"].get<std::string>(),
                                             arguments == function->end() ? nlohmann::ordered_json::object() : *arguments);
        }
    }
    return turn;
}

inline const nlohmann::ordered_json& checked_tools(const nlohmann::ordered_json& tools, const char* field) {
    if (!tools.is_null() && !tools.is_array()) {
        fail("ChatOptions::", field, ": expected null or an array of tool definitions, found ", tools.type_name());
    }
    return tools;
}

inline constexpr std::string_view kThinkPersona =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant "
    "involves thoroughly exploring questions through a systematic thinking process before providing the "
    "final precise and accurate solutions. This requires engaging in a comprehensive cycle of analysis, "
    "summarizing, exploration, reassessment, reflection, backtracking, and iteration to develop "
    "well-considered thinking process. Please structure your response into two main sections: Thought and "
    "Solution using the specified format: <think> Thought section </think> Solution section. In the "
    "Thought section, detail your reasoning process in steps. Each step should include detailed "
    "considerations such as analysing questions, summarizing relevant findings, brainstorming new ideas, "
    "verifying the accuracy of the current steps, refining any errors, and revisiting previous steps. In "
    "the Solution section, based on various attempts, explorations, and reflections from the Thought "
    "section, systematically present the final solution that you deem correct. The Solution section "
    "should be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.";

inline constexpr std::string_view kNoThinkPersona =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face.";

inline constexpr std::string_view kXmlToolsIntro =
    "You may call one or more functions to assist with the user query.\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n\n<tools>\n";

inline constexpr std::string_view kXmlToolsOutro =
    "</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call>";

inline constexpr std::string_view kPythonToolsIntro =
    "When you send a message containing Python code between '<code>' and '</code>' tags, it will be "
    "executed in a stateful Jupyter notebook environment, and you will then be given the output to "
    "continued reasoning in an agentic loop.\n\nYou can use the following tools in your python code like "
    "regular functions:\n<tools>\n";

inline constexpr std::string_view kPythonToolsOutro =
    "</tools>\n\nThe state persists between code executions: so variables that you define in one step "
    "are still available thereafter.";

inline bool contains(std::string_view text, std::string_view needle) {
    return text.find(needle) != std::string_view::npos;
}

}  // namespace chat_detail

// The date string the template's strftime_now("%d %B %Y") gives today: local time, English
// month names whatever the C locale ("21 November 2026").
inline std::string today_for_template() {
    static constexpr std::array<const char*, 12> months{"January", "February", "March",     "April",
                                                        "May",     "June",     "July",      "August",
                                                        "September", "October", "November", "December"};
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    if (localtime_r(&now, &local) == nullptr) fail("today_for_template: localtime_r failed");
    char day[4];
    std::snprintf(day, sizeof(day), "%02d", local.tm_mday);
    return std::string(day) + " " + months[static_cast<size_t>(local.tm_mon)] + " " +
           std::to_string(local.tm_year + 1900);
}

// A rendered conversation and what generation after it starts from.
struct ChatPrompt {
    std::string text;  // the prompt, special tokens spelled out
    // Where the request's own text stands in `text` (message content, system instructions, tool
    // definitions, the date), in order: tokenize with Tokenizer::encode(text, message_text), so
    // that only the template's markers become control tokens.
    std::vector<text::TextSpan> message_text;
    // The assistant text the prompt ends with, which generation continues: "" after the
    // thinking-mode generation prompt, "<think>\n\n</think>\n" after the no-think one, or a
    // prefilled reply (continue_final_message).
    std::string assistant_prefix;
    bool starts_in_reasoning = false;  // generation starts inside an open <think> block
};

namespace chat_detail {

// The checked turns of a conversation, and the options that must agree with them.
inline std::vector<Turn> read_turns(const nlohmann::ordered_json& messages, const ChatOptions& options) {
    if (!messages.is_array()) fail("render_chat: expected messages to be an array, found ", messages.type_name());
    // The template reads messages[0] unconditionally; Jinja fails on an empty list.
    if (messages.empty()) fail("render_chat: messages is empty; the SmolLM3 template needs at least one message");
    std::vector<Turn> turns;
    turns.reserve(messages.size());
    for (size_t i = 0; i < messages.size(); ++i) turns.push_back(read_turn(messages[i], i));
    if (options.continue_final_message) {
        if (options.add_generation_prompt)
            fail("render_chat: continue_final_message and add_generation_prompt exclude each other; set one");
        if (turns.back().role != "assistant")
            fail("render_chat: continue_final_message expects the last message (", messages.size() - 1,
                 ") to be an assistant reply, found role \"", turns.back().role, "\"");
    }
    return turns;
}

// What a leading system message sets: the reasoning mode (its /think or /no_think, else the
// options'), and its text without those flags. Later system messages are dropped by the loop.
struct SystemSettings {
    std::string_view reasoning_mode;
    std::string system_message;
    std::string custom_instructions;
    bool think() const { return reasoning_mode == "/think"; }
};

inline SystemSettings read_system(const nlohmann::ordered_json& messages, const std::vector<Turn>& turns,
                                  const ChatOptions& options) {
    SystemSettings settings;
    settings.reasoning_mode = options.enable_thinking ? "/think" : "/no_think";
    if (turns.front().role != "system") return settings;
    if (!messages[0]["content"].is_string()) {
        fail("chat message 0 (system): expected \"content\" to be a string, found ",
             messages[0]["content"].type_name());
    }
    settings.system_message = turns.front().content;
    if (contains(settings.system_message, "/no_think")) {
        settings.reasoning_mode = "/no_think";
    } else if (contains(settings.system_message, "/think")) {
        settings.reasoning_mode = "/think";
    }
    settings.custom_instructions =
        python_rstrip(remove_all(remove_all(settings.system_message, "/no_think"), "/think"));
    return settings;
}

// The prompt as it is written: the template's own text, and text that came with the request,
// whose place is remembered (ChatPrompt::message_text).
struct PromptWriter {
    std::string out;
    std::vector<text::TextSpan> message_text;

    void message(std::string_view part) {
        if (part.empty()) return;
        message_text.push_back({out.size(), out.size() + part.size()});
        out += part;
    }
};

// The tools section of the system turn: each tool's definition between the intro and outro of
// its kind (XML function calls, Python code).
inline void write_tools(PromptWriter& w, const nlohmann::ordered_json& xml_tools,
                        const nlohmann::ordered_json& python_tools) {
    // Jinja truthiness: null and [] are both false.
    const bool with_xml = !xml_tools.empty();
    const bool with_python = !python_tools.empty();
    if (!with_xml && !with_python) return;
    // Each definition as Python's str() writes it, one per line, between its kind's intro and outro.
    const auto write_kind = [&](std::string_view intro, const nlohmann::ordered_json& tools, std::string_view outro) {
        w.out += intro;
        for (const auto& tool : tools) {
            w.message(python_str(tool));
            w.out += "\n";
        }
        w.out += outro;
    };
    w.out += "### Tools\n\n";
    if (with_xml) write_kind(kXmlToolsIntro, xml_tools, kXmlToolsOutro);
    if (with_python) write_kind(kPythonToolsIntro, python_tools, kPythonToolsOutro);
    w.out += "\n\n<|im_end|>\n";
}

// The system turn: the caller's own with /system_override, else the metadata, the custom
// instructions (or the persona of the reasoning mode) and the tools.
inline void write_system_turn(PromptWriter& w, const SystemSettings& system, const ChatOptions& options,
                              const nlohmann::ordered_json& xml_tools, const nlohmann::ordered_json& python_tools) {
    w.out += "<|im_start|>system\n";
    if (contains(system.system_message, "/system_override")) {
        w.message(python_rstrip(remove_all(system.custom_instructions, "/system_override")));
        w.out += "<|im_end|>\n";
        return;
    }
    w.out += "## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: ";
    if (options.date.empty()) w.out += today_for_template();
    else w.message(options.date);
    w.out += "\nReasoning Mode: ";
    w.out += system.reasoning_mode;
    w.out += "\n\n## Custom Instructions\n\n";
    if (!system.custom_instructions.empty()) {
        w.message(system.custom_instructions);
    } else {
        w.out += system.think() ? kThinkPersona : kNoThinkPersona;
    }
    w.out += "\n\n";
    write_tools(w, xml_tools, python_tools);
    // Without tools the system turn stays open (no <|im_end|>): that is what the official
    // template does and what the model saw in training.
}

// The conversation's turns after the system one (system messages are not repeated).
inline void write_turns(PromptWriter& w, const std::vector<Turn>& turns, bool think) {
    for (const Turn& turn : turns) {
        if (turn.role == "user" || turn.role == "tool") {
            // Tool results go back to the model as user turns.
            w.out += "<|im_start|>user\n";
            w.message(turn.content);
            w.out += "<|im_end|>\n";
        } else if (turn.role == "assistant") {
            w.out += "<|im_start|>assistant\n";
            if (!think) w.out += "<think>\n\n</think>\n";
            w.message(lstrip_newlines(turn.content));
            w.out += "<|im_end|>\n";
        }
    }
}

}  // namespace chat_detail

// Renders an OpenAI-style message array ({role, content} objects; roles system, user,
// assistant, tool) into the SmolLM3 prompt. Throws smol::Error naming the message index
// for unknown roles, missing fields or content that is neither a string nor null.
inline ChatPrompt render_chat(const nlohmann::ordered_json& messages, const ChatOptions& options) {
    using namespace chat_detail;
    const std::vector<Turn> turns = read_turns(messages, options);
    const auto& xml_tools = checked_tools(options.xml_tools, "xml_tools");
    const auto& python_tools = checked_tools(options.python_tools, "python_tools");
    const SystemSettings system = read_system(messages, turns, options);

    PromptWriter w;
    write_system_turn(w, system, options, xml_tools, python_tools);
    write_turns(w, turns, system.think());

    // How generation starts: a fresh assistant turn, or the last one reopened.
    ChatPrompt prompt;
    constexpr std::string_view assistant_header = "<|im_start|>assistant\n";
    if (options.add_generation_prompt) {
        w.out += assistant_header;
        if (!system.think()) prompt.assistant_prefix = "<think>\n\n</think>\n";
        w.out += prompt.assistant_prefix;
    } else if (options.continue_final_message) {
        constexpr std::string_view turn_end = "<|im_end|>\n";
        w.out.resize(w.out.size() - turn_end.size());  // the last turn is the assistant's, closed above
        prompt.assistant_prefix = w.out.substr(w.out.rfind(assistant_header) + assistant_header.size());
    }
    ThinkingParser state(/*thinking_enabled=*/true);
    (void)state.push(prompt.assistant_prefix);
    prompt.starts_in_reasoning = state.in_reasoning();
    prompt.text = std::move(w.out);
    prompt.message_text = std::move(w.message_text);
    return prompt;
}

}  // namespace smol
