// SmolLM3's tool-call format: the streaming parser that takes <tool_call> blocks out of the
// answer, and the writer that puts calls back into assistant history.

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "smol/text/tool_calls.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_tool_calls {

using smol::ToolCallParser;
using smol::ToolCallPiece;

namespace {

// Feeds `pieces` one by one and collects everything, finish included.
ToolCallPiece parse(const std::vector<std::string_view>& pieces) {
    ToolCallParser parser;
    ToolCallPiece all;
    auto take = [&](ToolCallPiece p) {
        all.text += p.text;
        for (auto& c : p.calls) all.calls.push_back(std::move(c));
    };
    for (std::string_view p : pieces) take(parser.push(p));
    take(parser.finish());
    return all;
}

// Every way of cutting `text` into two pieces gives the same result as the whole.
void check_every_split(std::string_view text) {
    const ToolCallPiece whole = parse({text});
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
        CAPTURE(cut);
        const ToolCallPiece split = parse({text.substr(0, cut), text.substr(cut)});
        CHECK(split.text == whole.text);
        REQUIRE(split.calls.size() == whole.calls.size());
        for (std::size_t i = 0; i < whole.calls.size(); ++i) {
            CHECK(split.calls[i].name == whole.calls[i].name);
            CHECK(split.calls[i].arguments == whole.calls[i].arguments);
        }
    }
}

}  // namespace

TEST_CASE("tool calls: blocks become calls, the text around them stays") {
    const std::string text =
        "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
        "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n";
    const ToolCallPiece got = parse({text});
    CHECK(got.text == "Let me check.");
    REQUIRE(got.calls.size() == 2);
    CHECK(got.calls[0].name == "get_weather");
    CHECK(got.calls[0].arguments == R"({"city":"Paris","days":2})");  // keys in the model's order
    CHECK(got.calls[1].name == "get_time");
    CHECK(got.calls[1].arguments == "{}");
    check_every_split(text);
}

TEST_CASE("tool calls: whitespace is held back, never lost between words") {
    CHECK(parse({"a ", " ", "b\n"}).text == "a  b\n");    // no call: trailing whitespace is kept
    CHECK(parse({"<tool_call>{\"name\": \"f\"}</tool_call>", "\n\n"}).text == "");  // after the last call: dropped
    CHECK(parse({"<tool_call>{\"name\": \"f\"}</tool_call>", "\nthen more"}).text == "\nthen more");
    const ToolCallPiece no_arguments = parse({"<tool_call>{\"name\": \"f\"}</tool_call>"});
    REQUIRE(no_arguments.calls.size() == 1);
    CHECK(no_arguments.calls[0].arguments == "{}");
    check_every_split("x <tool_call>{\"name\": \"f\"}</tool_call> y");
}

TEST_CASE("tool calls: what is not a valid call comes out as text") {
    SUBCASE("bad JSON") {
        const ToolCallPiece got = parse({"<tool_call>{\"name\": oops}</tool_call>"});
        CHECK(got.calls.empty());
        CHECK(got.text == "<tool_call>{\"name\": oops}</tool_call>");
    }
    SUBCASE("no name, or arguments that are not an object") {
        CHECK(parse({"<tool_call>{\"arguments\": {}}</tool_call>"}).calls.empty());
        CHECK(parse({"<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>"}).calls.empty());
        CHECK(parse({"<tool_call>{\"name\": \"\"}</tool_call>"}).calls.empty());
    }
    SUBCASE("cut off by the end of generation") {
        const ToolCallPiece got = parse({"Sure <tool_call>\n{\"name\": \"f\", \"argu"});
        CHECK(got.calls.empty());
        CHECK(got.text == "Sure<tool_call>\n{\"name\": \"f\", \"argu");
    }
    SUBCASE("a partial tag at the end is text") {
        CHECK(parse({"a <tool_ca"}).text == "a <tool_ca");
    }
    SUBCASE("arguments nested past the JSON caps (a model can write brackets for a whole context)") {
        const std::string deep = "{\"name\": \"f\", \"arguments\": {\"a\": " + std::string(200000, '[') +
                                 std::string(200000, ']') + "}}";
        const ToolCallPiece got = parse({"<tool_call>" + deep + "</tool_call>"});
        CHECK(got.calls.empty());
        CHECK(got.text.size() == deep.size() + 23);
        const std::string fits = "{\"name\": \"f\", \"arguments\": {\"a\": " + std::string(60, '[') +
                                 std::string(60, ']') + "}}";
        CHECK(parse({"<tool_call>" + fits + "</tool_call>"}).calls.size() == 1);
    }
}

TEST_CASE("format_tool_call writes a call as the model does, arguments given as JSON or as text") {
    const nlohmann::ordered_json args = nlohmann::ordered_json::parse(R"({"city": "Zürich", "units": ["c", 1]})");
    const std::string expected = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", "
                                 "\"units\": [\"c\", 1]}}\n</tool_call>";
    CHECK(smol::format_tool_call("get_weather", args) == expected);
    CHECK(smol::format_tool_call("get_weather", args.dump()) == expected);  // the OpenAI API's string form
    CHECK(smol::format_tool_call("f", "not json") == "<tool_call>\n{\"name\": \"f\", \"arguments\": \"not json\"}\n</tool_call>");
    // What the writer writes, the parser reads back.
    const ToolCallPiece back = parse({expected});
    REQUIRE(back.calls.size() == 1);
    CHECK(back.calls[0].name == "get_weather");
    CHECK(nlohmann::ordered_json::parse(back.calls[0].arguments) == args);
}

}  // namespace test_tool_calls
