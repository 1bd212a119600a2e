// The hand-written SmolLM3 chat template against renders of the official Jinja template:
// tests/data/chat/cases.json (the shared fixtures) and extra_cases.json (corner cases rendered
// by make_extra_cases.py with Python's jinja2, which also re-checks the fixtures).

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <clocale>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "smol/text/chat_template.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_chat_template {

namespace {

using Json = nlohmann::ordered_json;

Json load_cases(const std::string& file) {
    const std::string path = std::string(SMOL_TEST_DATA_DIR) + "/chat/" + file;
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot open ", path);
    // ordered_json keeps the tool definitions' key order, which the rendered prompt shows.
    return Json::parse(in);
}

// Non-printable bytes made visible so a failure message shows exactly what differs.
std::string visible(std::string_view text) {
    std::string out;
    for (const char ch : text) {
        if (ch == '\n') {
            out += "\\n";
        } else if (ch == '\t') {
            out += "\\t";
        } else if (ch == '\r') {
            out += "\\r";
        } else {
            out += ch;
        }
    }
    return out;
}

// "" when equal, otherwise the first differing byte offset with context from both sides.
std::string describe_difference(const std::string& expected, const std::string& got) {
    if (expected == got) return {};
    const auto mismatch = std::mismatch(expected.begin(), expected.end(), got.begin(), got.end());
    const size_t at = static_cast<size_t>(mismatch.first - expected.begin());
    const size_t from = at > 40 ? at - 40 : 0;
    std::ostringstream out;
    out << "first difference at byte " << at << " (expected " << expected.size() << " bytes, got " << got.size()
        << ")\n  expected: ..." << visible(std::string_view(expected).substr(from, 80)) << "\n  got:      ..."
        << visible(std::string_view(got).substr(from, 80));
    return out.str();
}

smol::ChatOptions options_for(const Json& test_case) {
    smol::ChatOptions options;
    options.enable_thinking = test_case.value("enable_thinking", true);
    options.add_generation_prompt = test_case.at("add_generation_prompt").get<bool>();
    options.date = test_case.at("date").get<std::string>();
    if (test_case.contains("xml_tools")) options.xml_tools = test_case["xml_tools"];
    if (test_case.contains("python_tools")) options.python_tools = test_case["python_tools"];
    return options;
}

void check_all_cases(const std::string& file, size_t expected_count) {
    const Json cases = load_cases(file);
    CHECK(cases.size() == expected_count);
    for (const Json& test_case : cases) {
        const std::string name = test_case.at("name").get<std::string>();
        const std::string expected = test_case.at("expected").get<std::string>();
        std::string got;
        try {
            got = smol::render_chat(test_case.at("messages"), options_for(test_case)).text;
        } catch (const smol::Error& error) {
            FAIL_CHECK(file, " case ", name, " threw: ", error.what());
            continue;
        }
        const std::string difference = describe_difference(expected, got);
        CHECK_MESSAGE(difference.empty(), file, " case ", name, ": ", difference);
    }
}

// The smol::Error message render_chat throws, or "" when it does not throw.
std::string render_error(const Json& messages, const smol::ChatOptions& options = {}) {
    try {
        smol::render_chat(messages, options);
    } catch (const smol::Error& error) {
        return error.what();
    }
    return {};
}

bool contains(const std::string& text, std::string_view needle) {
    return text.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("chat template matches every official fixture byte for byte") {
    check_all_cases("cases.json", 21);
}

TEST_CASE("chat template matches jinja2 on the corner cases") {
    check_all_cases("extra_cases.json", 11);
}

TEST_CASE("the difference report points at the first differing byte") {
    const std::string report = describe_difference("abc\ndef", "abc\nxef");
    CHECK(contains(report, "byte 4"));
    CHECK(contains(report, "abc\\ndef"));
    CHECK(describe_difference("same", "same").empty());
}

TEST_CASE("malformed messages throw smol::Error naming the message") {
    const Json user = {{"role", "user"}, {"content", "Hi"}};

    SUBCASE("messages must be a non-empty array") {
        CHECK(contains(render_error(Json::object()), "expected messages to be an array, found object"));
        CHECK(contains(render_error(Json::array()), "messages is empty"));
    }
    SUBCASE("each message must be an object") {
        const std::string error = render_error(Json::array({user, "hello"}));
        CHECK(contains(error, "chat message 1"));
        CHECK(contains(error, "found string"));
    }
    SUBCASE("role is required and must be a known string") {
        CHECK(contains(render_error(Json::array({user, {{"content", "x"}}})), "chat message 1: missing \"role\""));
        CHECK(contains(render_error(Json::array({{{"role", 3}, {"content", "x"}}})),
                       "chat message 0: expected \"role\" to be a string, found number"));
        const std::string unknown =
            render_error(Json::array({user, user, {{"role", "developer"}, {"content", "x"}}}));
        CHECK(contains(unknown, "chat message 2"));
        CHECK(contains(unknown, "unknown role \"developer\""));
    }
    SUBCASE("content is required and must be a string or null") {
        CHECK(contains(render_error(Json::array({{{"role", "user"}}})), "chat message 0 (user): missing \"content\""));
        CHECK(contains(render_error(Json::array({user, {{"role", "assistant"}, {"content", 7}}})),
                       "chat message 1 (assistant): expected \"content\" to be a string or null, found number"));
        const Json parts = Json::array({{{"type", "text"}, {"text", "Hi"}}});
        CHECK(contains(render_error(Json::array({{{"role", "user"}, {"content", parts}}})),
                       "chat message 0 (user): \"content\" is a list of parts"));
    }
    SUBCASE("a leading system message needs string content") {
        // Jinja fails here too: `"/no_think" in None` is a TypeError.
        CHECK(contains(render_error(Json::array({{{"role", "system"}, {"content", nullptr}}, user})),
                       "chat message 0 (system): expected \"content\" to be a string, found null"));
    }
    SUBCASE("tools must be null or arrays") {
        smol::ChatOptions options;
        options.python_tools = Json::object({{"name", "f"}});
        CHECK(contains(render_error(Json::array({user}), options),
                       "ChatOptions::python_tools: expected null or an array of tool definitions, found object"));
    }
    SUBCASE("null content is rendered as empty, like the template") {
        CHECK(render_error(Json::array({user, {{"role", "assistant"}, {"content", nullptr}}})).empty());
    }
}

TEST_CASE("the injected date is the only thing a different date changes") {
    const Json messages = Json::array({{{"role", "user"}, {"content", "Hi"}}});
    smol::ChatOptions first;
    first.date = "21 November 2026";
    smol::ChatOptions second;
    second.date = "05 January 2027";
    const std::string a = smol::render_chat(messages, first).text;
    const std::string b = smol::render_chat(messages, second).text;
    CHECK(contains(a, "\nToday Date: 21 November 2026\n"));
    CHECK(contains(b, "\nToday Date: 05 January 2027\n"));
    std::string a_swapped = a;
    a_swapped.replace(a_swapped.find("21 November 2026"), 16, "05 January 2027");
    CHECK(a_swapped == b);
}

TEST_CASE("an empty date means today, as strftime_now(\"%d %B %Y\") gives it") {
    // strftime in the C locale is an independent source for the same string.
    const auto strftime_today = [] {
        std::setlocale(LC_TIME, "C");
        const std::time_t now = std::time(nullptr);
        std::tm local{};
        localtime_r(&now, &local);
        char buffer[64];
        const size_t n = std::strftime(buffer, sizeof(buffer), "%d %B %Y", &local);
        return std::string(buffer, n);
    };
    const std::string before = strftime_today();
    const std::string today = smol::today_for_template();
    const std::string rendered = smol::render_chat(Json::array({{{"role", "user"}, {"content", "Hi"}}}), {}).text;
    const std::string after = strftime_today();

    CHECK((today == before || today == after));  // midnight may pass between the calls
    CHECK((contains(rendered, "\nToday Date: " + before + "\n") || contains(rendered, "\nToday Date: " + after + "\n")));
    REQUIRE(today.size() >= 11);
    CHECK(std::isdigit(static_cast<unsigned char>(today[0])));
    CHECK(std::isdigit(static_cast<unsigned char>(today[1])));
    CHECK(today[2] == ' ');
}

TEST_CASE("plain nlohmann::json input renders the same as ordered_json") {
    const nlohmann::json messages = nlohmann::json::parse(
        R"([{"role": "system", "content": "Be brief. /no_think"}, {"role": "user", "content": "Hi"}])");
    const Json ordered = Json::parse(messages.dump());
    smol::ChatOptions options;
    options.date = "21 November 2026";
    const std::string from_plain = smol::render_chat(messages, options).text;
    CHECK(from_plain == smol::render_chat(ordered, options).text);
    CHECK(contains(from_plain, "Reasoning Mode: /no_think\n\n## Custom Instructions\n\nBe brief.\n\n<|im_start|>user"));
}

TEST_CASE("render_chat says where generation starts: assistant prefix and reasoning state") {
    const Json user = {{"role", "user"}, {"content", "Hi"}};
    smol::ChatOptions options;
    options.date = "21 November 2026";
    SUBCASE("thinking mode: the bare assistant header; the model opens <think> itself") {
        const smol::ChatPrompt p = smol::render_chat(Json::array({user}), options);
        CHECK(p.text.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
        CHECK(p.assistant_prefix == "");
        CHECK_FALSE(p.starts_in_reasoning);
    }
    SUBCASE("no-think mode: the empty think block is the prefix") {
        options.enable_thinking = false;
        const smol::ChatPrompt p = smol::render_chat(Json::array({user}), options);
        CHECK(p.text.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n"));
        CHECK(p.assistant_prefix == "<think>\n\n</think>\n");
        CHECK_FALSE(p.starts_in_reasoning);
    }
    SUBCASE("a system /no_think overrides enable_thinking") {
        const Json system = {{"role", "system"}, {"content", "Be brief. /no_think"}};
        const smol::ChatPrompt p = smol::render_chat(Json::array({system, user}), options);
        CHECK(p.assistant_prefix == "<think>\n\n</think>\n");
    }
    SUBCASE("continue_final_message leaves the assistant turn open and reports its text") {
        options.add_generation_prompt = false;
        options.continue_final_message = true;
        const Json prefill = {{"role", "assistant"}, {"content", "<think>\nLet me see"}};
        const smol::ChatPrompt p = smol::render_chat(Json::array({user, prefill}), options);
        CHECK(p.text.ends_with("<|im_start|>assistant\n<think>\nLet me see"));
        CHECK(p.assistant_prefix == "<think>\nLet me see");
        CHECK(p.starts_in_reasoning);
        // The same turn closed is exactly this text plus the end of turn.
        options.continue_final_message = false;
        CHECK(smol::render_chat(Json::array({user, prefill}), options).text == p.text + "<|im_end|>\n");

        options.continue_final_message = true;
        options.enable_thinking = false;  // no-think history carries the empty block before the answer
        const Json answer = {{"role", "assistant"}, {"content", "Sure,"}};
        const smol::ChatPrompt q = smol::render_chat(Json::array({user, answer}), options);
        CHECK(q.assistant_prefix == "<think>\n\n</think>\nSure,");
        CHECK_FALSE(q.starts_in_reasoning);
    }
    SUBCASE("continue_final_message needs a final assistant message and no generation prompt") {
        options.continue_final_message = true;
        CHECK(contains(render_error(Json::array({user}), options), "exclude each other"));
        options.add_generation_prompt = false;
        CHECK(contains(render_error(Json::array({user}), options),
                       "continue_final_message expects the last message (0) to be an assistant reply, found role \"user\""));
    }
}

TEST_CASE("assistant tool_calls render into the turn as the model writes them; tool results as user turns") {
    smol::ChatOptions options;
    options.date = "21 November 2026";
    const Json messages = Json::parse(R"([
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}
    ])");
    const std::string text = smol::render_chat(messages, options).text;
    CHECK(contains(text, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                         "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n{\"temp\": 21}<|im_end|>\n"));

    Json with_text = messages;
    with_text[1]["content"] = "Let me look.";
    CHECK(contains(smol::render_chat(with_text, options).text, "<|im_start|>assistant\nLet me look.\n<tool_call>\n"));

    Json bad = messages;
    bad[1]["tool_calls"] = Json::array({{{"type", "function"}}});
    CHECK(contains(render_error(bad, options), "chat message 1 (assistant): tool_calls[0]: expected"));
    bad[1]["tool_calls"] = "get_weather";
    CHECK(contains(render_error(bad, options), "tool_calls: expected an array, found string"));
}

}  // namespace test_chat_template
