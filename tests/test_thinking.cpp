// ThinkingParser tests: tags as whole pieces, tags split across pieces, no-think mode,
// unclosed blocks, text before <think>, and the invariant that any split of a text into
// pieces gives the same reasoning and answer as feeding it whole.

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "smol/text/thinking.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_thinking {

namespace {

struct Streamed {
    std::string reasoning;
    std::string answer;
    std::vector<smol::ThinkingPiece> pieces;  // what each push() returned, then finish()
};

Streamed run(bool thinking_enabled, const std::vector<std::string>& pieces) {
    smol::ThinkingParser parser(thinking_enabled);
    Streamed out;
    for (const std::string& piece : pieces) out.pieces.push_back(parser.push(piece));
    out.pieces.push_back(parser.finish());
    for (const auto& p : out.pieces) {
        out.reasoning += p.reasoning;
        out.answer += p.answer;
    }
    return out;
}

bool shows_partial_tag(const std::string& text) {
    for (const char* fragment : {"<t", "<th", "<thi", "<thin", "<think", "</", "</t", "</th", "</thi", "</thin", "</think"})
        if (text.find(fragment) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("think mode with the tags as whole pieces") {
    const Streamed s = run(true, {"<think>", "\n", "Let", " me", " think", ".", "\n", "</think>", "\n\n", "The",
                                  " answer", " is", " 4", "."});
    CHECK(s.reasoning == "Let me think.\n");
    CHECK(s.answer == "The answer is 4.");
    // Streaming: the reasoning arrives as it is generated, not at the end.
    CHECK(s.pieces[2].reasoning == "Let");
    CHECK(s.pieces[3].reasoning == " me");
    CHECK(s.pieces[9].answer == "The");
}

TEST_CASE("in_reasoning follows the tags") {
    smol::ThinkingParser parser(true);
    CHECK_FALSE(parser.in_reasoning());
    parser.push("<think>");
    CHECK(parser.in_reasoning());
    parser.push("hmm");
    CHECK(parser.in_reasoning());
    parser.push("</think>");
    CHECK_FALSE(parser.in_reasoning());
}

TEST_CASE("tags split across pieces are never shown partially") {
    const Streamed s = run(true, {"<thi", "nk>\nStep", " one", ".\n</", "thi", "nk", ">", "\nDone", "."});
    CHECK(s.reasoning == "Step one.\n");
    CHECK(s.answer == "Done.");
    for (const auto& p : s.pieces) {
        CHECK_FALSE(shows_partial_tag(p.reasoning));
        CHECK_FALSE(shows_partial_tag(p.answer));
    }
    // "<thi" is held back until it is known to be a tag.
    CHECK(s.pieces[0].reasoning.empty());
    CHECK(s.pieces[0].answer.empty());
}

TEST_CASE("held-back text that turns out not to be a tag is emitted in order") {
    const Streamed s = run(true, {"a <th", "ing> b <", "<", "think", "er> c"});
    CHECK(s.reasoning.empty());
    CHECK(s.answer == "a <thing> b <<thinker> c");

    // Inside reasoning a lone "<" or "</th" that never becomes </think> stays reasoning.
    const Streamed r = run(true, {"<think>", "x < y </th", "is> z"});
    CHECK(r.reasoning == "x < y </this> z");
    CHECK(r.answer.empty());
}

TEST_CASE("no-think mode: everything is answer, leading whitespace dropped") {
    const Streamed s = run(false, {"\n", "Hello", " there", ".\n"});
    CHECK(s.reasoning.empty());
    CHECK(s.answer == "Hello there.\n");

    // A think block the model writes anyway is still parsed.
    const Streamed t = run(false, {"<think>", "\n\n", "</think>", "\n", "Hi"});
    CHECK(t.reasoning.empty());
    CHECK(t.answer == "Hi");
}

TEST_CASE("an unclosed think block stays reasoning at finish") {
    smol::ThinkingParser parser(true);
    std::string reasoning, answer;
    for (const char* piece : {"<think>", "\nstill", " going", " </thi"}) {
        const auto p = parser.push(piece);
        reasoning += p.reasoning;
        answer += p.answer;
    }
    CHECK(reasoning == "still going ");
    const auto tail = parser.finish();
    CHECK(tail.reasoning == "</thi");  // held-back text is flushed to the open channel
    CHECK(tail.answer.empty());
    CHECK(answer.empty());
    CHECK(parser.in_reasoning());
}

TEST_CASE("text before <think> is answer") {
    const Streamed s = run(true, {"Sure. ", "<think>", "\nok\n", "</think>", "  Fine"});
    CHECK(s.answer == "Sure. Fine");
    CHECK(s.reasoning == "ok\n");
}

TEST_CASE("whitespace-only pieces after a tag are dropped across pieces, later whitespace kept") {
    const Streamed s = run(true, {"<think>", "\n", "\n", " ", "a\n\nb", "</think>", "\n", " ", "\n", "x  y\n", "\n"});
    CHECK(s.reasoning == "a\n\nb");
    CHECK(s.answer == "x  y\n\n");
}

TEST_CASE("bytes pass through exactly, including split UTF-8") {
    // "é" (C3 A9) and an emoji split across pieces, next to the tags.
    const Streamed s = run(true, {"<think>\n\xC3", "\xA9t\xC3\xA9", "</think>\xF0\x9F", "\x98\x80"});
    CHECK(s.reasoning == "\xC3\xA9t\xC3\xA9");
    CHECK(s.answer == "\xF0\x9F\x98\x80");
}

TEST_CASE("any split into pieces gives the same result as one piece") {
    const std::vector<std::string> texts = {
        "<think>\nFirst I add 2 and 2.\nThat is 4 < 5 </thin.\n</think>\n\nThe answer is **4**.",
        "pre <think>\n\n</think>\n post <thin <think>x</think>y</think>",
        "<<think>>a</think></think>\n\n",
        "no tags at all, just <b>html</b> and </ things",
        "<think>\nunclosed reasoning with </thi",
    };
    std::mt19937 rng(123);
    for (bool thinking_enabled : {true, false}) {
        for (const std::string& text : texts) {
            const Streamed whole = run(thinking_enabled, {text});
            for (int trial = 0; trial < 200; ++trial) {
                std::vector<std::string> pieces;
                std::size_t at = 0;
                while (at < text.size()) {
                    const std::size_t length = std::uniform_int_distribution<std::size_t>(1, 5)(rng);
                    pieces.push_back(text.substr(at, length));
                    at += length;
                }
                const Streamed split = run(thinking_enabled, pieces);
                INFO("text: ", text);
                CHECK(split.reasoning == whole.reasoning);
                CHECK(split.answer == whole.answer);
            }
        }
    }
    // And the single-piece results themselves, worked out by hand.
    CHECK(run(true, {texts[0]}).reasoning == "First I add 2 and 2.\nThat is 4 < 5 </thin.\n");
    CHECK(run(true, {texts[0]}).answer == "The answer is **4**.");
    CHECK(run(true, {texts[1]}).answer == "pre post <thin y</think>");
    CHECK(run(true, {texts[1]}).reasoning == "x");
    CHECK(run(true, {texts[2]}).reasoning == ">a");
    CHECK(run(true, {texts[2]}).answer == "<</think>\n\n");
}

TEST_CASE("strip_reasoning drops the think block for chat history") {
    CHECK(smol::strip_reasoning("<think>\nLet me see.\n</think>\n\nParis.") == "Paris.");
    CHECK(smol::strip_reasoning("Paris.") == "Paris.");
    CHECK(smol::strip_reasoning("<think>\n\n</think>\nHi") == "Hi");
    CHECK(smol::strip_reasoning("Before <think>x</think> after") == "Before after");
    CHECK(smol::strip_reasoning("<think>\nnever closed") == "");
    CHECK(smol::strip_reasoning("a < b and c <thi") == "a < b and c <thi");
}

}  // namespace test_thinking
