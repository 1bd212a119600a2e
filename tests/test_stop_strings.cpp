// StopStringMatcher tests: matches inside one piece and across pieces, held-back prefixes
// that turn out not to match, several stop strings, and the invariant that any split of a
// text into pieces gives the same output as feeding it whole.

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "smol/generate/stop_strings.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_stop_strings {

namespace {

struct Streamed {
    std::string text;               // everything emitted, finish() included
    std::vector<std::string> emits;  // per push()
    bool stopped = false;
    std::size_t stopped_at_piece = 0;
};

Streamed run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
    smol::StopStringMatcher matcher(stops);
    Streamed out;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const auto result = matcher.push(pieces[i]);
        out.emits.push_back(result.emit);
        out.text += result.emit;
        if (result.stopped) {
            out.stopped = true;
            out.stopped_at_piece = i;
            break;  // the generation loop stops here
        }
    }
    out.text += matcher.finish();
    return out;
}

}  // namespace

TEST_CASE("a stop string inside one piece cuts it there") {
    const Streamed s = run({"###"}, {"Hello", " world### and more"});
    CHECK(s.stopped);
    CHECK(s.stopped_at_piece == 1);
    CHECK(s.text == "Hello world");
    CHECK(s.emits[0] == "Hello");
}

TEST_CASE("a stop string spanning several pieces") {
    const Streamed s = run({"<|user|>"}, {"Sure", "!<", "|us", "er", "|>", "never shown"});
    CHECK(s.stopped);
    CHECK(s.stopped_at_piece == 4);
    CHECK(s.text == "Sure!");
    CHECK(s.emits[1] == "!");  // "<" is held back
    CHECK(s.emits[2].empty());
    CHECK(s.emits[3].empty());
    CHECK(s.emits[4].empty());
}

TEST_CASE("a prefix that turns out not to match is emitted in full and in order") {
    const Streamed s = run({"STOP"}, {"a ST", "OR", "Y b S", "T", "x"});
    CHECK_FALSE(s.stopped);
    CHECK(s.emits == std::vector<std::string>{"a ", "STOR", "Y b ", "", "STx"});
    CHECK(s.text == "a STORY b STx");

    // A held prefix still pending at the end of generation comes out of finish().
    smol::StopStringMatcher matcher({"STOP"});
    CHECK(matcher.push("end ST").emit == "end ");
    CHECK(matcher.finish() == "ST");
}

TEST_CASE("several stop strings: the earliest match wins") {
    CHECK(run({"\n\n", "User:"}, {"one\ntwo User: x\n\ny"}).text == "one\ntwo ");
    CHECK(run({"User:", "\n\n"}, {"one\n", "\nUser:"}).text == "one");
    // "abcd" could still complete at 0 when "c" completes at 2: generation stops on "c".
    CHECK(run({"abcd", "c"}, {"ab", "c", "d"}).text == "ab");
    // Both complete within one piece: the one starting first cuts.
    CHECK(run({"c", "abcd"}, {"xabcd"}).text == "x");
    // Overlapping partial prefixes of different stops are held back together.
    const Streamed s = run({"<end>", "<eos>"}, {"hi <e", "n", "d>"});
    CHECK(s.stopped);
    CHECK(s.text == "hi ");
}

TEST_CASE("the matcher tells which stop string ended the text") {
    smol::StopStringMatcher matcher({"\n\n", "User:", "Use"});
    CHECK(matcher.matched().empty());
    CHECK_FALSE(matcher.push("one Us").stopped);
    CHECK(matcher.matched().empty());  // a held-back prefix is no match yet
    CHECK(matcher.push("er: two\n\n").stopped);
    // "User:" and "Use" both start first; the first listed of them is reported.
    CHECK(matcher.matched() == "User:");
    smol::StopStringMatcher later({"User:", "\n\n"});
    CHECK(later.push("a\n\nUser:").stopped);
    CHECK(later.matched() == "\n\n");  // the one starting earliest, whatever its place in the list
}

TEST_CASE("after stopping nothing more comes out") {
    smol::StopStringMatcher matcher({"!"});
    auto first = matcher.push("hey! you");
    CHECK(first.stopped);
    CHECK(first.emit == "hey");
    auto second = matcher.push("more");
    CHECK(second.stopped);
    CHECK(second.emit.empty());
    CHECK(matcher.finish().empty());
    CHECK(matcher.stopped());
}

TEST_CASE("no stop strings passes everything through at once") {
    const Streamed s = run({}, {"a", "<", "b"});
    CHECK(s.emits == std::vector<std::string>{"a", "<", "b"});
    CHECK_FALSE(s.stopped);
}

TEST_CASE("an empty stop string is rejected") {
    CHECK_THROWS_AS(smol::StopStringMatcher({"ok", ""}), smol::Error);
}

TEST_CASE("any split into pieces gives the same output as one piece") {
    const std::vector<std::string> stops = {"</s>", "\nUser:", "aab"};
    const std::vector<std::string> texts = {
        "Hello </b> there </ s> and then</s> hidden",
        "line\nUse\nUser is \nUser: hidden",
        "aaaab tail",
        "a a aa ab aa",
        "\xE2\x82\xAC </s",
    };
    std::mt19937 rng(7);
    for (const std::string& text : texts) {
        const Streamed whole = run(stops, {text});
        for (int trial = 0; trial < 300; ++trial) {
            std::vector<std::string> pieces;
            std::size_t at = 0;
            while (at < text.size()) {
                const std::size_t length = std::uniform_int_distribution<std::size_t>(1, 4)(rng);
                pieces.push_back(text.substr(at, length));
                at += length;
            }
            const Streamed split = run(stops, pieces);
            INFO("text: ", text);
            CHECK(split.text == whole.text);
            CHECK(split.stopped == whole.stopped);
        }
    }
    // The single-piece results, worked out by hand.
    CHECK(run(stops, {texts[0]}).text == "Hello </b> there </ s> and then");
    CHECK(run(stops, {texts[1]}).text == "line\nUse\nUser is ");
    CHECK(run(stops, {texts[2]}).text == "aa");
    CHECK(run(stops, {texts[3]}).text == "a a aa ab aa");
    CHECK_FALSE(run(stops, {texts[3]}).stopped);
    CHECK(run(stops, {texts[4]}).text == "\xE2\x82\xAC </s");
}

}  // namespace test_stop_strings
