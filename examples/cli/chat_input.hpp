#pragma once
// What smol-cli makes of the text typed into a chat, apart from any terminal or model: lines
// joined into messages, slash commands, and tool definitions in OpenAI's shape. Unit-tested in
// tests/test_cli_args.cpp; main.cpp does the I/O.

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include <smol/smol.hpp>

namespace smol::cli {

// Joins physical lines into one message the way llama-cli does: a line ending in a backslash
// continues on the next one, the backslash replaced by a newline.
class MessageJoiner {
public:
    // Adds one line (without its newline); returns true when it completes the message.
    bool add(std::string_view line) {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // typed on Windows, piped here
        const bool continues = !line.empty() && line.back() == '\\';
        if (continues) line.remove_suffix(1);
        message_.append(line);
        if (continues) message_ += '\n';
        continuing_ = continues;
        return !continues;
    }

    // True after a line that ended in a backslash: the next line belongs to the same message.
    bool continuing() const { return continuing_; }

    // The message so far; the joiner starts over.
    std::string take() {
        continuing_ = false;
        return std::exchange(message_, {});
    }

private:
    std::string message_;
    bool continuing_ = false;
};

struct CommandInfo {
    std::string_view name;      // with its slash
    std::string_view argument;  // what follows it, "" if nothing
    std::string_view help;
};

// Every chat command; /help prints this table.
inline constexpr std::array<CommandInfo, 9> kCommands{{
    {"/help", "", "list these commands"},
    {"/exit", "", "quit (also /quit, Ctrl-D, or Ctrl-C while waiting for input)"},
    {"/clear", "", "forget the conversation (the -sys prompt stays)"},
    {"/regen", "", "drop the last reply and generate it again"},
    {"/save", "FILE", "write the conversation as JSON, the format --messages and /load read"},
    {"/load", "FILE", "replace the conversation with the one in FILE, then chat on"},
    {"/tool", "RESULT", "answer the model's tool calls with RESULT (text or JSON), then let it reply"},
    {"/think", "", "reasoning on"},
    {"/no_think", "", "reasoning off"},
}};

struct ChatCommand {
    std::string name;      // with its slash, e.g. "/save"
    std::string argument;  // the rest of the message, trimmed of surrounding whitespace
};

// A message that starts with a slash and a word ("/save chat.json") is a command; anything
// else, including a path such as "/etc/hosts is ...", is a message for the model.
inline std::optional<ChatCommand> parse_command(std::string_view message) {
    if (message.size() < 2 || message[0] != '/') return std::nullopt;
    std::size_t end = 1;
    while (end < message.size() && (std::islower(static_cast<unsigned char>(message[end])) || message[end] == '_')) ++end;
    if (end == 1 || (end < message.size() && !std::isspace(static_cast<unsigned char>(message[end])))) return std::nullopt;
    std::string_view rest = message.substr(end);
    auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (!rest.empty() && space(rest.front())) rest.remove_prefix(1);
    while (!rest.empty() && space(rest.back())) rest.remove_suffix(1);
    return ChatCommand{std::string(message.substr(0, end)), std::string(rest)};
}

inline bool is_known_command(std::string_view name) {
    if (name == "/quit") return true;
    for (const CommandInfo& c : kCommands)
        if (c.name == name) return true;
    return false;
}

// The /help text: one command a line, the descriptions aligned.
inline std::string commands_help() {
    constexpr std::size_t kUsageWidth = 16;
    std::string out;
    for (const CommandInfo& c : kCommands) {
        std::string usage(c.name);
        if (!c.argument.empty()) {
            usage += ' ';
            usage += c.argument;
        }
        out += "  ";
        out += usage;
        out.append(usage.size() + 2 <= kUsageWidth ? kUsageWidth - usage.size() : 2, ' ');
        out += c.help;
        out += '\n';
    }
    out += "  A line ending in \\ continues on the next line. Ctrl-C stops a reply.\n";
    return out;
}

// OpenAI's tool definitions, [{"type": "function", "function": {name, description, parameters}}],
// as the function objects SmolLM3's template lists (its xml_tools). `source` names the file in
// errors.
inline nlohmann::ordered_json functions_from_tools(const nlohmann::ordered_json& tools, std::string_view source) {
    const std::string where = std::string(source);
    if (!tools.is_array())
        fail(where, ": expected a JSON array of tools [{\"type\": \"function\", \"function\": {...}}], found ",
             tools.type_name());
    nlohmann::ordered_json functions = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < tools.size(); ++i) {
        const nlohmann::ordered_json& tool = tools[i];
        const std::string at = where + ": tools[" + std::to_string(i) + "]";
        if (!tool.is_object()) fail(at, ": expected an object {\"type\": \"function\", \"function\": {...}}, found ", tool.type_name());
        const auto type = tool.find("type");
        if (type == tool.end() || *type != "function")
            fail(at, ": expected \"type\": \"function\", found ", type == tool.end() ? "no \"type\"" : type->dump());
        const auto function = tool.find("function");
        if (function == tool.end() || !function->is_object())
            fail(at, ": expected \"function\" to be an object {name, description, parameters}, found ",
                 function == tool.end() ? std::string("none") : std::string(function->type_name()));
        const auto name = function->find("name");
        if (name == function->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
            fail(at, ".function: expected \"name\" to be a non-empty string, found ",
                 name == function->end() ? std::string("none") : name->dump());
        if (const auto d = function->find("description"); d != function->end() && !d->is_string())
            fail(at, ".function.description: expected a string, found ", d->type_name());
        if (const auto p = function->find("parameters"); p != function->end() && !p->is_object())
            fail(at, ".function.parameters: expected a JSON schema object, found ", p->type_name());
        functions.push_back(*function);
    }
    return functions;
}

// How a tool call is shown in the chat: [ tool call: name {"arg": ...} ].
inline std::string describe_tool_call(std::string_view name, std::string_view arguments) {
    return "[ tool call: " + std::string(name) + " " + std::string(arguments.empty() ? "{}" : arguments) + " ]";
}

}  // namespace smol::cli
