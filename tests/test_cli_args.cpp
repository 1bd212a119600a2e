// What smol-cli makes of the text typed into a chat (examples/cli/chat_input.hpp): what it
// accepts, what it rejects and what the error says. The flags themselves are read by
// examples/program_args.hpp (tests/test_program_args.cpp).

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_input.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_cli_args {

namespace {

using Strings = std::vector<std::string>;

// The messages a sequence of typed lines makes, in order.
Strings join_lines(const Strings& lines) {
    smol::cli::MessageJoiner joiner;
    Strings messages;
    for (const std::string& line : lines)
        if (joiner.add(line)) messages.push_back(joiner.take());
    return messages;
}

// The message functions_from_tools throws for `tools`, or "" when it accepts them.
std::string tools_error(const char* tools) {
    try {
        smol::cli::functions_from_tools(nlohmann::ordered_json::parse(tools), "--tools 't.json'");
    } catch (const smol::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("chat input: a line ending in a backslash continues the message on the next line") {
    CHECK(join_lines({"one", "two"}) == Strings{"one", "two"});
    CHECK(join_lines({"first \\", "second\\", "third", "next"}) == Strings{"first \nsecond\nthird", "next"});
    CHECK(join_lines({"\\", "after an empty first line"}) == Strings{"\nafter an empty first line"});
    CHECK(join_lines({"crlf\\\r", "ends\r"}) == Strings{"crlf\nends"});
    CHECK(join_lines({"a backslash \\ inside stays", "x"}) == Strings{"a backslash \\ inside stays", "x"});
    CHECK(join_lines({"unfinished \\"}).empty());

    smol::cli::MessageJoiner joiner;
    CHECK_FALSE(joiner.continuing());
    CHECK_FALSE(joiner.add("a\\"));
    CHECK(joiner.continuing());
    CHECK(joiner.add(""));  // an empty line ends the message, which then ends in a newline
    CHECK_FALSE(joiner.continuing());
    CHECK(joiner.take() == "a\n");
}

TEST_CASE("chat input: a slash and a lowercase word make a command; anything else is a message") {
    using smol::cli::parse_command;
    const auto save = parse_command("/save  my chat.json ");
    REQUIRE(save);
    CHECK(save->name == "/save");
    CHECK(save->argument == "my chat.json");
    const auto regen = parse_command("/regen");
    REQUIRE(regen);
    CHECK(regen->name == "/regen");
    CHECK(regen->argument.empty());
    const auto tool = parse_command("/tool\n{\"temp\": 20}\n");  // joined from continued lines
    REQUIRE(tool);
    CHECK(tool->name == "/tool");
    CHECK(tool->argument == "{\"temp\": 20}");
    const auto no_think = parse_command("/no_think");
    REQUIRE(no_think);
    CHECK(no_think->name == "/no_think");

    CHECK_FALSE(parse_command("hello"));
    CHECK_FALSE(parse_command("/"));
    CHECK_FALSE(parse_command("/etc/hosts holds what?"));
    CHECK_FALSE(parse_command("/Save x"));
    CHECK_FALSE(parse_command(" /save x"));
    CHECK_FALSE(parse_command("/save2 x"));

    // Every command /help lists is known, and the help names each.
    const std::string help = smol::cli::commands_help();
    for (const auto& c : smol::cli::kCommands) {
        CHECK(smol::cli::is_known_command(c.name));
        CHECK(help.find(std::string(c.name)) != std::string::npos);
    }
    CHECK(smol::cli::is_known_command("/quit"));
    CHECK_FALSE(smol::cli::is_known_command("/frobnicate"));
    CHECK(help.find("/save FILE") != std::string::npos);
}

TEST_CASE("chat input: OpenAI tool definitions become the function objects the template lists") {
    const auto functions = smol::cli::functions_from_tools(nlohmann::ordered_json::parse(R"([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "now"}}])"),
                                                           "--tools 't.json'");
    CHECK(functions.dump() ==
          R"([{"name":"get_weather","description":"Weather","parameters":{"type":"object"}},{"name":"now"}])");
    CHECK(smol::cli::functions_from_tools(nlohmann::ordered_json::array(), "x").empty());

    CHECK(tools_error(R"({"type": "function"})") ==
          "--tools 't.json': expected a JSON array of tools [{\"type\": \"function\", \"function\": {...}}], found object");
    CHECK(tools_error(R"([{"name": "f"}])") == "--tools 't.json': tools[0]: expected \"type\": \"function\", found no \"type\"");
    CHECK(tools_error(R"([{"type": "function", "function": {"name": "f"}}, {"type": "retrieval"}])") ==
          "--tools 't.json': tools[1]: expected \"type\": \"function\", found \"retrieval\"");
    CHECK(tools_error(R"([{"type": "function"}])") ==
          "--tools 't.json': tools[0]: expected \"function\" to be an object {name, description, parameters}, found none");
    CHECK(tools_error(R"([{"type": "function", "function": {"name": ""}}])") ==
          "--tools 't.json': tools[0].function: expected \"name\" to be a non-empty string, found \"\"");
    CHECK(tools_error(R"([{"type": "function", "function": {"name": "f", "parameters": []}}])") ==
          "--tools 't.json': tools[0].function.parameters: expected a JSON schema object, found array");
    CHECK(tools_error(R"([{"type": "function", "function": {"name": "f", "description": 3}}])") ==
          "--tools 't.json': tools[0].function.description: expected a string, found number");
}

TEST_CASE("chat input: a tool call is shown as [ tool call: name arguments ]") {
    CHECK(smol::cli::describe_tool_call("get_weather", R"({"city":"Paris"})") == R"([ tool call: get_weather {"city":"Paris"} ])");
    CHECK(smol::cli::describe_tool_call("now", "") == "[ tool call: now {} ]");
}

}  // namespace test_cli_args
