// The programs' comma-separated list flags (smol/core/comma_list.hpp), and what smol-cli makes of
// the text typed into a chat (examples/cli/chat_input.hpp): what they accept, what they reject
// and what the error says.

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_input.hpp"
#include "smol/core/comma_list.hpp"

namespace {

using Ints = std::vector<std::int64_t>;
using Strings = std::vector<std::string>;

// The message parse_int_list throws for `text`, or "" when it parses.
std::string error_of(const std::string& text, std::int64_t min_value = 0, std::int64_t max_value = 100) {
    try {
        smol::parse_int_list("-p", text, min_value, max_value);
    } catch (const smol::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("split_commas keeps empty items so callers see stray commas") {
    CHECK(smol::split_commas("a.gguf,b.gguf") == Strings{"a.gguf", "b.gguf"});
    CHECK(smol::split_commas("one") == Strings{"one"});
    CHECK(smol::split_commas("") == Strings{""});
    CHECK(smol::split_commas("a,,b,") == Strings{"a", "", "b", ""});
    CHECK(smol::split_commas(",") == Strings{"", ""});
}

TEST_CASE("parse_int_list reads every item in order, bounds included") {
    CHECK(smol::parse_int_list("-p", "512", 0, 1000) == Ints{512});
    CHECK(smol::parse_int_list("-p", "0,128,1000", 0, 1000) == Ints{0, 128, 1000});
    CHECK(smol::parse_int_list("-t", "-3,-1", -3, -1) == Ints{-3, -1});
    CHECK(smol::parse_int_list("--tokens", "2147483647", 0, INT32_MAX) == Ints{INT32_MAX});
    CHECK(smol::parse_int_list("-p", "007", 0, 10) == Ints{7});
}

TEST_CASE("parse_int_list rejects malformed and out-of-range items, naming flag and item") {
    // Each bad item is reported by itself, so a long list points at the culprit.
    CHECK(error_of("1,x,3") == "-p: expected comma-separated integers from 0 to 100, found 'x' in '1,x,3'");
    CHECK(error_of("") == "-p: expected comma-separated integers from 0 to 100, found '' in ''");
    CHECK(error_of("1,,2").find("found '' in '1,,2'") != std::string::npos);
    CHECK(error_of("1,2,").find("found '' in '1,2,'") != std::string::npos);
    CHECK(error_of("12abc").find("found '12abc'") != std::string::npos);
    CHECK(error_of(" 5").find("found ' 5'") != std::string::npos);
    CHECK(error_of("5 ").find("found '5 '") != std::string::npos);
    CHECK(error_of("+5").find("found '+5'") != std::string::npos);
    CHECK(error_of("1.5").find("found '1.5'") != std::string::npos);
    CHECK(error_of("101").find("found '101'") != std::string::npos);
    CHECK(error_of("0", 1).find("from 1 to 100, found '0'") != std::string::npos);
    CHECK(error_of("-1").find("found '-1'") != std::string::npos);
    // Beyond int64: from_chars reports out of range instead of wrapping into the accepted range.
    CHECK(error_of("18446744073709551621").find("found '18446744073709551621'") != std::string::npos);
    CHECK(error_of("2147483648", 0, INT32_MAX).find("found '2147483648'") != std::string::npos);
}

TEST_CASE("parse_int_list names what the items are when the caller says") {
    try {
        smol::parse_int_list("--tokens", "1,-2", 0, INT32_MAX, "token ids");
        FAIL("a negative token id was accepted");
    } catch (const smol::Error& e) {
        CHECK(std::string(e.what()) == "--tokens: expected comma-separated token ids from 0 to 2147483647, found '-2' in '1,-2'");
    }
}

namespace {

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
