// GBNF grammars (text/grammar.hpp): parsing, the byte-level matcher with UTF-8, and the
// built-in JSON grammar against texts that are and are not JSON.

#include <cmath>
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>

#include "smol/text/grammar.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_grammar {

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
    // Numbers stay finite doubles: a model allowed "1E400" writes it (nlohmann refuses it).
    for (const std::string number : {"-9999999999999999.9999999999999999e+99", "1E-99", "0", "-0.5"}) {
        CAPTURE(number);
        const std::string text = R"({"n": )" + number + "}";
        CHECK(matches(g, text));
        CHECK(std::isfinite(nlohmann::json::parse(text).at("n").get<double>()));
    }
    for (const std::string number : {"1e400", "1E100", "12345678901234567", "0.12345678901234567"}) {
        CAPTURE(number);
        CHECK_FALSE(matches(g, R"({"n": )" + number + "}"));
    }

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

// ---- hostile grammars: every cost bounded ---------------------------------------------------

namespace {

// The GrammarTooComplex message a grammar is refused with ("" when it compiles).
std::string too_complex(const std::string& text, const smol::text::GrammarLimits& limits = {}) {
    try {
        Grammar::parse(text, "root", limits);
    } catch (const smol::text::GrammarTooComplex& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("GBNF: counted repetition up to 100,000 compiles, in linear time, and means what it says") {
    // 100,000 nested optional rules: naming them, the left-recursion check and the fewest
    // characters to finish were each quadratic in them (the request this came from stalled).
    const Grammar g = Grammar::parse("root ::= \"a\"{0,100000} \"b\"");
    CHECK(matches(g, "b"));
    CHECK(matches(g, std::string(100000, 'a') + "b"));
    CHECK_FALSE(matches(g, std::string(100001, 'a') + "b"));
    const Grammar exact = Grammar::parse("root ::= [xy]{5000}");
    CHECK(matches(exact, std::string(5000, 'x')));
    CHECK_FALSE(matches(exact, std::string(4999, 'y')));
    GrammarMatcher m(exact);
    CHECK(m.chars_to_finish(m.start()) == 5000);
}

TEST_CASE("GBNF: generated rule names skip names the grammar took, and the fewest characters to finish are exact") {
    // Groups in `root` get names a grammar cannot write, so its own root-0 and root-2 stay its own.
    const Grammar g = Grammar::parse("root ::= (\"a\" | \"b\") root-0 (\"c\")+ root-2\nroot-0 ::= \"x\"\nroot-2 ::= \"yz\" | \"w\"\n");
    CHECK(matches(g, "axcw"));
    CHECK(matches(g, "bxccyz"));
    CHECK_FALSE(matches(g, "axw"));
    GrammarMatcher m(g);
    CHECK(m.chars_to_finish(m.start()) == 4);  // a x c w
    // A rule's shortest alternative counts, through references and recursion.
    const Grammar nested = Grammar::parse("root ::= item item\nitem ::= \"[\" item \"]\" | \"long-word\" | \"()\"\n");
    GrammarMatcher n(nested);
    CHECK(n.chars_to_finish(n.start()) == 4);
    // A rule that can never finish (it always needs itself) counts as never.
    const Grammar never = Grammar::parse("root ::= \"a\" | loop\nloop ::= \"b\" loop\n");
    GrammarMatcher v(never);
    GrammarState s = v.start();
    REQUIRE(v.step(s, 'b'));
    CHECK(v.chars_to_finish(s) == Grammar::kNever);
}

TEST_CASE("GBNF: left recursion is found through chains and rules that match empty, in linear time") {
    std::string chain = "root ::= r0\n";
    for (int i = 0; i < 20000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
    std::string closed = chain + "r20000 ::= r0 \"y\"\n";
    try {
        Grammar::parse(closed);
        FAIL("a left-recursive chain of 20,000 rules was accepted");
    } catch (const smol::Error& e) {
        CHECK(std::string(e.what()).find("left-recursive") != std::string::npos);
    }
    // Without the cycle it is a grammar (the matcher refuses to nest 20,000 rules deep without a
    // character, so a shorter chain is matched).
    std::string open = "root ::= r0\n";
    for (int i = 0; i < 5000; ++i) open += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
    CHECK(matches(Grammar::parse(open + "r5000 ::= \"y\"\n"), "y" + std::string(5000, 'x')));
    // Through a rule that can match nothing.
    const auto refused = [](const std::string& text) {
        try {
            Grammar::parse(text);
        } catch (const smol::Error& e) {
            return std::string(e.what()).find("left-recursive") != std::string::npos;
        }
        return false;
    };
    CHECK(refused("root ::= empty root \"a\" | \"b\"\nempty ::= \"\" | \"e\"\n"));
    CHECK(refused("root ::= x\nx ::= [a]* y\ny ::= x \"b\" | \"c\"\n"));
    CHECK_FALSE(refused("root ::= \"a\" root | \"b\"\n"));  // right recursion is fine
    CHECK_FALSE(refused("root ::= x x\nx ::= \"\" | \"a\"\n"));
}

TEST_CASE("GBNF: grammars past the limits are refused with the limit, before the work") {
    // A 40 KB literal repeated 100,000 times would be 4 billion elements.
    CHECK(too_complex("root ::= \"" + std::string(40000, 'x') + "\"{100000}").find("elements") != std::string::npos);
    CHECK(too_complex("root ::= (\"ab\"{1000}){1000}") == "");  // the group is one element
    CHECK(too_complex("root ::= \"" + std::string(1000, 'x') + "\"{1000}") == "");  // a million: within
    // Groups inside groups.
    CHECK(too_complex("root ::= " + std::string(129, '(') + "\"a\"" + std::string(129, ')')).find("nest") != std::string::npos);
    CHECK(too_complex("root ::= " + std::string(1000000, '(') + "\"a\"" + std::string(1000000, ')')).find("nest") !=
          std::string::npos);
    CHECK(too_complex("root ::= " + std::string(128, '(') + "\"a\"" + std::string(128, ')')) == "");
    // Rules, with a smaller limit to keep the test quick.
    smol::text::GrammarLimits few;
    few.max_rules = 100;
    std::string many = "root ::= r0\n";
    for (int i = 0; i < 200; ++i) many += "r" + std::to_string(i) + " ::= \"a\" r" + std::to_string(i + 1) + "\n";
    CHECK(too_complex(many + "r200 ::= \"b\"\n", few).find("rules") != std::string::npos);
}

TEST_CASE("GBNF matcher: ambiguity that multiplies stacks or branches stops at its budget") {
    // 2^40 ways to expand one reference without a character: the budget stops it.
    std::string branching = "root ::= r0\n";
    for (int i = 0; i < 40; ++i)
        branching += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " | r" + std::to_string(i + 1) + "\n";
    const Grammar wide = Grammar::parse(branching + "r40 ::= \"a\"\n");
    GrammarMatcher m(wide);
    m.set_budget(std::uint64_t(1) << 20);
    CHECK_THROWS_AS(m.start(), smol::text::GrammarTooComplex);
    // Each "a" doubles the distinct stacks (a "b" or a "c" to close each): past 1024 the
    // matcher refuses rather than carry them all.
    const Grammar doubling = Grammar::parse("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"d\"\n");
    GrammarMatcher d(doubling);
    GrammarState s = d.start();
    int steps = 0;
    CHECK_THROWS_AS(
        [&] {
            for (; steps < 30; ++steps) d.step(s, 'a');
        }(),
        smol::text::GrammarTooComplex);
    CHECK(steps == 8);  // k a's leave 3 * 2^k stacks: 768 after the 8th, the 9th would make 1536
    // The same grammar, followed a few levels, works as before.
    CHECK(matches(doubling, "aadcb"));
}

TEST_CASE("GBNF matcher: stacks as deep as the text is long are compacted without recursion") {
    const Grammar g = Grammar::parse("root ::= \"(\" root \")\" | \"x\"\n");
    GrammarMatcher m(g);
    GrammarState s = m.start();
    for (int i = 0; i < 300000; ++i) REQUIRE(m.step(s, '('));
    m.compact(s);  // recursion 300,000 frames deep would overflow the stack
    REQUIRE(m.step(s, 'x'));
    CHECK(m.chars_to_finish(s) == 300000);
}

}  // namespace test_grammar
