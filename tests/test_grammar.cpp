// GBNF grammars (text/grammar.hpp): parsing, the byte-level matcher with UTF-8, and the
// built-in JSON grammar against texts that are and are not JSON.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>

#include "smol/text/grammar.hpp"

using smol::text::Grammar;
using smol::text::GrammarMatcher;
using smol::text::GrammarState;

namespace {

// How far the matcher takes `text`: the number of bytes it accepted, and whether all of them
// form a whole sentence.
struct Walk {
    std::size_t bytes = 0;
    bool complete = false;
};

Walk walk(const Grammar& g, std::string_view text) {
    GrammarMatcher m(g);
    GrammarState s = m.start();
    Walk w;
    for (const char c : text) {
        if (!m.step(s, static_cast<std::uint8_t>(c))) return w;
        ++w.bytes;
    }
    w.complete = m.accepting(s);
    return w;
}

bool matches(const Grammar& g, std::string_view text) {
    const Walk w = walk(g, text);
    return w.bytes == text.size() && w.complete;
}

// Whether `text` can still be continued into a sentence.
bool viable(const Grammar& g, std::string_view text) { return walk(g, text).bytes == text.size(); }

}  // namespace

TEST_CASE("GBNF: literals, classes, groups and repetition") {
    const Grammar g = Grammar::parse(R"(
        root ::= greeting " " name ("!" | "?")?   # a comment
        greeting ::= "hi" | "hello"
        name ::= [A-Z] [a-z]{1,3}
    )");
    CHECK(matches(g, "hi Bob"));
    CHECK(matches(g, "hello Anna!"));
    CHECK(matches(g, "hi Al?"));
    CHECK_FALSE(matches(g, "hi B"));         // at least one lower-case letter
    CHECK_FALSE(matches(g, "hi Bobby"));     // at most three
    CHECK_FALSE(matches(g, "hey Bob"));
    CHECK(viable(g, "hel"));
    CHECK_FALSE(matches(g, "hel"));

    const Grammar star = Grammar::parse("root ::= \"a\"* \"b\"+ [^xy]\n");
    CHECK(matches(star, "bz"));
    CHECK(matches(star, "aaabbb."));
    CHECK_FALSE(matches(star, "aaz"));
    CHECK_FALSE(matches(star, "abx"));

    const Grammar multi = Grammar::parse("root ::= \"a\"\n    | \"b\"\n");  // an alternative on its own line
    CHECK(matches(multi, "a"));
    CHECK(matches(multi, "b"));
}

TEST_CASE("GBNF: UTF-8 is matched by code point, and invalid UTF-8 never") {
    const Grammar g = Grammar::parse(R"(root ::= [a-zé] "→" [^a-z]+)");
    CHECK(matches(g, "é→€"));
    CHECK(matches(g, "a→Ω1"));
    CHECK_FALSE(matches(g, "a→b"));
    CHECK(viable(g, "\xc3"));          // the first byte of é
    CHECK_FALSE(viable(g, "\xc3\xa8"));  // è is not in [a-zé]
    CHECK_FALSE(viable(g, "\xd0"));    // no Cyrillic letter is in [a-zé]: refused at its first byte
    const Grammar any = Grammar::parse("root ::= [^\"]*");
    CHECK(matches(any, "日本"));
    CHECK_FALSE(viable(any, "\x80"));          // a continuation byte with no lead
    CHECK_FALSE(viable(any, "\xc3("));         // a lead byte without its continuation
    CHECK_FALSE(viable(any, "\xc0\x80"));      // an overlong NUL
    const Grammar brace = Grammar::parse("root ::= \"{\"");
    CHECK_FALSE(viable(brace, "\xe0"));  // 3-byte sequences start at U+0800: none is '{'
    CHECK_FALSE(viable(brace, "\xf0"));
    CHECK_FALSE(viable(any, "\xed\xa0\x80"));  // a surrogate
    CHECK_FALSE(viable(any, "\xf5\x80\x80\x80"));
    CHECK_FALSE(viable(any, "\xf4\x90"));  // past U+10FFFF already after two bytes
    CHECK_FALSE(viable(any, "\xed\xa0"));  // a surrogate already after two bytes
}

TEST_CASE("GBNF: bad grammars are refused with the line and what was expected") {
    const auto message = [](std::string_view text) {
        try {
            Grammar::parse(text);
        } catch (const smol::Error& e) {
            return std::string(e.what());
        }
        FAIL("accepted: " << text);
        return std::string();
    };
    CHECK(message("root ::= item\n").find("'item' is used but never defined") != std::string::npos);
    CHECK(message("root ::= root \"a\" | \"b\"\n").find("left-recursive") != std::string::npos);
    const std::string syntax = message("root ::= \"a\"\nother ::= \"b\" @\n");
    CHECK(syntax.find("line 2: expected a literal") != std::string::npos);
    CHECK(syntax.find("found '@'") != std::string::npos);
    CHECK(message("start ::= \"a\"\n").find("no rule named 'root'") != std::string::npos);
    CHECK(message("root ::= \"a\"\nroot ::= \"b\"\n").find("defined twice") != std::string::npos);
    CHECK(message("root ::= \"a\"{3,1}\n").find("m <= n") != std::string::npos);
}

TEST_CASE("the JSON object grammar takes JSON objects and nothing else") {
    const Grammar g = Grammar::parse(smol::text::kJsonObjectGrammar);
    for (const char* ok : {R"({})", R"({"a": 1})", R"({"a":[1, -2.5e3, true, false, null, "x\n\u00e9"],"b":{}})",
                           "{\n  \"k\": \"日本\"\n}", R"({"n": 0.5, "m": -0, "o": {"p": [[]]}})"}) {
        CAPTURE(ok);
        CHECK(matches(g, ok));
    }
    for (const char* bad : {R"([])", R"({"a": 01})", R"({"a": 1,})", R"({'a': 1})", R"({"a": tru})", R"({"a" 1})",
                            "{\"a\": \"tab\there\"}", R"({"a": 1}})", R"({"a": .5})", R"({"a": "\x"})"}) {
        CAPTURE(bad);
        CHECK_FALSE(matches(g, bad));
    }
    CHECK(viable(g, R"({"key": [1, {"x)"));

    // Random texts the matcher accepts are JSON that nlohmann parses (the matcher is not looser).
    std::mt19937 rng(3);
    const std::string alphabet = "{}[]\":, 0123456789.-eEtruefalsnl\\ab";
    int accepted = 0;
    for (int trial = 0; trial < 20000; ++trial) {
        GrammarMatcher m(g);
        GrammarState s = m.start();
        std::string text;
        for (int i = 0; i < 24; ++i) {
            const char c = alphabet[rng() % alphabet.size()];
            GrammarState next = s;
            if (m.step(next, static_cast<std::uint8_t>(c))) {
                s = next;
                text += c;
            }
            if (m.accepting(s)) break;
        }
        if (!m.accepting(s)) continue;
        ++accepted;
        CAPTURE(text);
        CHECK(nlohmann::json::accept(text));
    }
    CHECK(accepted > 100);
}

TEST_CASE("the matcher knows the fewest characters that finish a text, and compaction keeps its state") {
    const Grammar g = Grammar::parse(smol::text::kJsonObjectGrammar);
    GrammarMatcher m(g);
    GrammarState s = m.start();
    CHECK(m.chars_to_finish(s) == 2);  // {}
    for (const char c : std::string_view(R"({"a)")) REQUIRE(m.step(s, static_cast<std::uint8_t>(c)));
    CHECK(m.chars_to_finish(s) == 4);  // the quote, the colon, a one-digit number, the brace
    const std::string before = m.signature(s);
    m.compact(s);
    CHECK(m.signature(s) == before);
    for (const char c : std::string_view(R"(": 7})")) REQUIRE(m.step(s, static_cast<std::uint8_t>(c)));
    CHECK(m.accepting(s));
    CHECK(m.chars_to_finish(s) == 0);

    // Inside a character only the ways that can take it count: "\xc3 must become a string
    // character (then the quote and the brace), not the closing quote right away.
    GrammarState partial = m.start();
    for (const char c : std::string_view("{\"k\": \"\xc3")) REQUIRE(m.step(partial, static_cast<std::uint8_t>(c)));
    CHECK(m.chars_to_finish(partial) == 3);
}
