// JSON Schema to GBNF (text/json_schema.hpp): the grammar takes the instances a schema accepts
// and refuses the others; texts it generates at random are JSON with the schema's shape; what
// it cannot express is refused by name.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <cmath>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "smol/text/grammar.hpp"
#include "smol/text/json_schema.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_json_schema {

using nlohmann::ordered_json;
using smol::text::Grammar;
using smol::text::GrammarMatcher;
using smol::text::GrammarState;

namespace {

Grammar compile(const char* schema) { return Grammar::parse(smol::text::json_schema_to_gbnf(ordered_json::parse(schema))); }

bool matches(const Grammar& g, std::string_view text) {
    GrammarMatcher m(g);
    GrammarState s = m.start();
    for (const char c : text)
        if (!m.step(s, static_cast<std::uint8_t>(c))) return false;
    return m.accepting(s);
}

// A random sentence of the grammar: random printable bytes while it is short, then only bytes
// that bring the end closer.
std::string random_sentence(const Grammar& g, std::mt19937& rng) {
    GrammarMatcher m(g);
    GrammarState s = m.start();
    std::string text;
    while (!(m.accepting(s) && (text.size() > 40 || rng() % 4 == 0))) {
        const bool closing = text.size() > 60;
        const std::uint32_t need = m.chars_to_finish(s);
        bool moved = false;
        for (int attempt = 0; attempt < 2000 && !moved; ++attempt) {
            const auto byte = static_cast<std::uint8_t>(attempt < 1900 ? 32 + rng() % 95 : attempt % 128);
            GrammarState next = s;
            if (!m.step(next, byte)) continue;
            if (closing && m.chars_to_finish(next) >= need) continue;
            s = next;
            text += char(byte);
            moved = true;
        }
        if (!moved && m.accepting(s)) break;  // a whole sentence nothing may follow (a string)
        REQUIRE_MESSAGE(moved, "stuck after: " << text);
    }
    return text;
}

}  // namespace

TEST_CASE("JSON schema: objects with required and optional properties, in order") {
    const Grammar g = compile(R"({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 5},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 2}},
        "required": ["name"], "additionalProperties": false})");
    CHECK(matches(g, R"({"name": "Bo"})"));
    CHECK(matches(g, R"({"name": "Alice", "age": 150, "tags": ["a", 3]})"));
    CHECK(matches(g, R"({ "name":"x" , "tags" : [ ] })"));
    CHECK_FALSE(matches(g, R"({})"));                              // name is required
    CHECK_FALSE(matches(g, R"({"name": ""})"));                    // minLength 1
    CHECK_FALSE(matches(g, R"({"name": "Alexander"})"));           // maxLength 5
    CHECK_FALSE(matches(g, R"({"name": "Bo", "age": 151})"));      // maximum
    CHECK_FALSE(matches(g, R"({"name": "Bo", "age": -1})"));       // minimum
    CHECK_FALSE(matches(g, R"({"name": "Bo", "age": 1.5})"));      // integer
    CHECK_FALSE(matches(g, R"({"name": "Bo", "tags": ["c"]})"));   // enum
    CHECK_FALSE(matches(g, R"({"name": "Bo", "tags": ["a", "b", "a"]})"));  // maxItems
    CHECK_FALSE(matches(g, R"({"name": "Bo", "other": 1})"));      // additionalProperties false
    CHECK_FALSE(matches(g, R"({"age": 3, "name": "Bo"})"));        // the schema's order

    const Grammar open = compile(R"({"type": "object", "properties": {"id": {"type": "integer"}},
                                     "additionalProperties": {"type": "boolean"}})");
    CHECK(matches(open, R"({"id": 1, "x": true, "y": false})"));
    CHECK(matches(open, R"({"x": true})"));
    CHECK_FALSE(matches(open, R"({"id": 1, "x": 2})"));
}

TEST_CASE("JSON schema: integer and number bounds are exact") {
    const Grammar small = compile(R"({"type": "integer", "minimum": -12, "exclusiveMaximum": 105})");
    for (int v = -40; v <= 140; ++v) {
        CAPTURE(v);
        CHECK(matches(small, std::to_string(v)) == (v >= -12 && v < 105));
    }
    CHECK_FALSE(matches(small, "007"));
    CHECK_FALSE(matches(small, "-0"));
    const Grammar big = compile(R"({"type": "integer", "minimum": 1999})");
    CHECK(matches(big, "1999"));
    CHECK(matches(big, "123456789"));
    CHECK_FALSE(matches(big, "1998"));
    CHECK_FALSE(matches(big, "-5000"));

    const Grammar unit = compile(R"({"type": "number", "minimum": -1, "maximum": 2})");
    for (const char* ok : {"-1", "-0.5", "0", "0.25", "1.999", "2", "-0.0"}) CHECK(matches(unit, ok));
    for (const char* bad : {"-1.5", "2.5", "3", "-2", "1e3", ".5"}) CHECK_FALSE(matches(unit, bad));

    // Unbounded, a number is still one that parses to a finite double (kJsonNumberRule).
    const Grammar any = compile(R"({"type": "number"})");
    for (const std::string ok : {"-9999999999999999.9999999999999999e+99", "1E-99", "0.5e7"}) {
        CAPTURE(ok);
        CHECK(matches(any, ok));
        CHECK(std::isfinite(nlohmann::json::parse(ok).get<double>()));
    }
    for (const std::string bad : {"1e400", "1e100", "12345678901234567", "0.12345678901234567"}) {
        CAPTURE(bad);
        CHECK_FALSE(matches(any, bad));
    }
}

TEST_CASE("JSON schema: anyOf, type lists, const, nullable and recursive $defs") {
    const Grammar g = compile(R"({"$defs": {"node": {"type": "object", "properties": {
            "value": {"type": ["integer", "null"]},
            "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"const": "end"}]}},
            "required": ["value", "next"]}},
        "$ref": "#/$defs/node"})");
    CHECK(matches(g, R"({"value": 1, "next": "end"})"));
    CHECK(matches(g, R"({"value": null, "next": {"value": 2, "next": "end"}})"));
    CHECK_FALSE(matches(g, R"({"value": 1, "next": "stop"})"));
    CHECK_FALSE(matches(g, R"({"value": "1", "next": "end"})"));
}

TEST_CASE("JSON schema: random sentences of the grammar are JSON of the schema's shape") {
    const Grammar g = compile(R"({"type": "object", "properties": {
        "id": {"type": "integer", "minimum": 10, "maximum": 20},
        "label": {"type": "string", "maxLength": 3},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "kind": {"enum": ["x", "y"]},
        "items": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3}},
        "required": ["id", "kind", "items"]})");
    std::mt19937 rng(5);
    for (int i = 0; i < 200; ++i) {
        const std::string text = random_sentence(g, rng);
        CAPTURE(text);
        const ordered_json v = ordered_json::parse(text, nullptr, false);
        REQUIRE(v.is_object());
        CHECK(v["id"].is_number_integer());
        CHECK(v["id"].get<int>() >= 10);
        CHECK(v["id"].get<int>() <= 20);
        if (v.contains("label")) CHECK(v["label"].get<std::string>().size() <= 3);
        if (v.contains("score")) CHECK((v["score"].get<double>() >= 0.0 && v["score"].get<double>() <= 1.0));
        CHECK((v["kind"] == "x" || v["kind"] == "y"));
        CHECK(v["items"].size() >= 1);
        CHECK(v["items"].size() <= 3);
        for (const auto& b : v["items"]) CHECK(b.is_boolean());
        for (const auto& [key, value] : v.items())
            CHECK(std::string("id label score kind items").find(key) != std::string::npos);
    }
}

TEST_CASE("JSON schema: what cannot be expressed is refused by name, malformed schemas too") {
    const auto unsupported = [](const char* schema, const char* keyword) {
        CAPTURE(schema);
        try {
            smol::text::json_schema_to_gbnf(ordered_json::parse(schema));
            FAIL("compiled");
        } catch (const smol::text::UnsupportedSchema& e) {
            CHECK(std::string(e.what()).find(keyword) != std::string::npos);
        }
    };
    unsupported(R"({"type": "array", "uniqueItems": true})", "'uniqueItems'");
    unsupported(R"x({"type": "string", "pattern": "^a(?=b)"})x", "lookahead");  // only right after a top-level ^
    unsupported(R"({"type": "string", "pattern": "^(?<=a)b"})", "lookbehind");
    unsupported(R"({"type": "string", "pattern": "^(a)\\1$"})", "backreference");
    unsupported(R"({"type": "string", "pattern": "\\bword"})", "word boundary");
    unsupported(R"({"type": "string", "pattern": "^\\p{L}$"})", "Unicode property");
    unsupported(R"({"type": "string", "pattern": "a(^b)c"})", "anchor");
    unsupported(R"({"type": "string", "pattern": "^(a?)*$"})", "can match nothing");
    unsupported(R"({"type": "string", "format": "hostname"})", "'hostname'");
    unsupported(R"({"type": "string", "format": "date", "pattern": "^x"})", "no string matches");
    unsupported(R"({"type": "string", "pattern": "^(?=a)b"})", "no string matches");
    unsupported(R"({"type": "string", "pattern": "^a{2,}$", "maxLength": 1})", "no string matches");
    unsupported(R"({"type": "string", "format": "ipv6", "pattern": "^[0-9a-f:]+$"})", "'ipv6'");  // defined, not enforced
    unsupported(R"({"type": "string", "format": "cuid"})", "only beside a pattern");
    unsupported(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})", "may both match");
    unsupported(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})", "'type' in an allOf");
    unsupported(R"({"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"a": {"type": "integer"}}}]})",
                "different schemas");
    unsupported(R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false}, {"properties": {"b": {}}}]})",
                "additionalProperties false");
    unsupported(R"({"type": "number", "minimum": 0.5})", "not a whole number");
    unsupported(R"({"$ref": "https://example.com/schema.json"})", "https://example.com/schema.json");
    unsupported(R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?!x)y"}}})", "#/properties/a/pattern");
    const auto malformed = [](const char* schema) {
        CAPTURE(schema);
        CHECK_THROWS_AS(smol::text::json_schema_to_gbnf(ordered_json::parse(schema)), smol::Error);
    };
    malformed(R"({"type": "wood"})");
    malformed(R"({"enum": []})");
    malformed(R"({"type": "object", "required": ["a"]})");
    malformed(R"({"type": "object", "required": [1]})");
    malformed(R"({"type": "integer", "minimum": 5, "maximum": 1})");
    malformed(R"({"$ref": "#/$defs/missing"})");
    malformed(R"({"type": "string", "maxLength": -1})");
    malformed(R"({"type": "string", "pattern": "^(ab$"})");
    malformed(R"({"type": "string", "pattern": "^[a-$"})");
    malformed(R"({"type": "string", "pattern": "*a"})");
    malformed(R"({"type": "string", "pattern": "^[z-a]$"})");
    malformed(R"({"type": "string", "pattern": "^a{2,1}$"})");
    malformed(R"({"type": "string", "pattern": "\\q"})");
    malformed(R"({"type": "string", "pattern": 5})");
    malformed(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})");
    malformed(R"({"oneOf": []})");
}

TEST_CASE("JSON schema: compiling is bounded in depth and in subschemas visited") {
    const auto refusal = [](const ordered_json& schema) {
        try {
            (void)smol::text::json_schema_to_gbnf(schema);
        } catch (const smol::text::GrammarTooComplex& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    // A 'type' list compiles the subtree once per type: two a level, 30 levels, 2^30 visits.
    ordered_json doubling = {{"type", "string"}};
    for (int i = 0; i < 30; ++i)
        doubling = {{"type", ordered_json::array({"object", "object"})}, {"properties", {{"a", doubling}}}};
    CHECK(refusal(doubling).find("visits more than") != std::string::npos);
    // Ten levels of the same are 2^10 visits: fine, and the grammar is right.
    ordered_json ten = {{"type", "integer"}};
    for (int i = 0; i < 10; ++i) ten = {{"type", ordered_json::array({"object", "null"})}, {"properties", {{"a", ten}}}};
    CHECK(refusal(ten).empty());
    const Grammar g = Grammar::parse(smol::text::json_schema_to_gbnf(ten));
    CHECK(matches(g, "{\"a\": {\"a\": null}}"));
    // Subschemas nested past the cap (a library caller may build any value).
    ordered_json deep = {{"type", "string"}};
    for (int i = 0; i < 100; ++i) deep = {{"type", "array"}, {"items", deep}};
    CHECK(refusal(deep).find("nest more than") != std::string::npos);
}

namespace {

// Whether `value` (a string's decoded value) is accepted as the JSON string of a schema with
// this pattern: the grammar is matched against the value's JSON text.
bool pattern_matches(const Grammar& g, const std::string& value) { return matches(g, ordered_json(value).dump()); }

Grammar string_schema(const std::string& keyword, const std::string& value) {
    return Grammar::parse(smol::text::json_schema_to_gbnf({{"type", "string"}, {keyword, value}}));
}

}  // namespace

TEST_CASE("JSON schema: pattern takes the strings the regular expression matches") {
    struct Case {
        const char* pattern;
        std::vector<std::string> match, no_match;
    };
    const std::vector<Case> cases = {
        {"^abc$", {"abc"}, {"ab", "abcd", "xabc", ""}},
        {"abc", {"abc", "xxabcyy", "abcabc"}, {"ab", "acb", ""}},  // unanchored: anywhere
        {"^ab", {"ab", "abzzz"}, {"zab"}},
        {"b$", {"b", "aab"}, {"ba"}},
        {"^a|b$", {"a", "axx", "xxb"}, {"xa", "bx"}},
        {"^[a-c]+[^a-c]$", {"abz", "c9"}, {"ab", "abc", "z"}},
        {"^\\d{3}-\\d{2,4}$", {"123-45", "123-4567"}, {"12-45", "123-4", "123-45678", "abc-12"}},
        {"^\\w+\\s\\W$", {"hi !", "a_1\t."}, {"hi  !", "hi a"}},
        {"^(?:ab|cd){2,}$", {"abab", "abcdab"}, {"ab", "abc"}},
        {"^(x)?y*z+$", {"z", "xyyzz", "yz"}, {"xx", "y", ""}},
        {"^a{3}$", {"aaa"}, {"aa", "aaaa"}},
        {"^a{2,}?$", {"aa", "aaaaa"}, {"a"}},
        {"^.$", {"a", "\"", "\\", "\t", "\xC3\xA9"}, {"\n", "ab", ""}},
        {"^[^\"\\\\]+$", {"plain"}, {"a\"b", "a\\b"}},
        {"^[\"\\\\\\n]+$", {"\"\\\n"}, {"a"}},
        {"^\\x41\\u0042\\u{43}\\n\\.\\*$", {"ABC\n.*"}, {"ABC\n.a"}},
        {"^(?<year>\\d{4})-(?<month>0[1-9]|1[0-2])$", {"2024-01", "1999-12"}, {"2024-13", "2024-1"}},
        {"^[\\d\\s-]+$", {"1 2-3"}, {"1a"}},
        {"^[^\\d]$", {"a"}, {"5"}},
        {"^\\D\\S$", {"ab"}, {"1b", "a "}},
        {"^\\u00e9+$", {"\xC3\xA9\xC3\xA9"}, {"e"}},
        {"^[\\b]$", {"\b"}, {"b"}},
        {"", {"", "anything"}, {}},
        {"^$", {""}, {"a"}},
        {"^(a|)b$", {"ab", "b"}, {"aab"}},
    };
    for (const Case& c : cases) {
        CAPTURE(c.pattern);
        const Grammar g = string_schema("pattern", c.pattern);
        for (const std::string& s : c.match) {
            CAPTURE(s);
            CHECK(pattern_matches(g, s));
        }
        for (const std::string& s : c.no_match) {
            CAPTURE(s);
            CHECK_FALSE(pattern_matches(g, s));
        }
    }
    // A pattern whose lengths lie within minLength and maxLength keeps them; a string it does
    // not match stays out whatever its length.
    const Grammar sized = compile(R"({"type": "string", "pattern": "^[a-z]{2,4}$", "minLength": 1, "maxLength": 4})");
    CHECK(pattern_matches(sized, "abc"));
    CHECK_FALSE(pattern_matches(sized, "abcde"));
    CHECK_FALSE(pattern_matches(sized, "AB"));
}

TEST_CASE("JSON schema: formats take their strings and refuse near misses") {
    struct Case {
        const char* format;
        std::vector<std::string> valid, invalid;
    };
    const std::vector<Case> cases = {
        {"date", {"2024-02-29", "2000-02-29", "1999-12-31", "2023-04-30", "0000-02-29"},
         {"2023-02-29", "1900-02-29", "2024-04-31", "2024-13-01", "2024-00-10", "2024-1-01", "24-01-01", "2024-01-32"}},
        {"time", {"23:59:59Z", "00:00:00+02:00", "12:30:15.123-11:45"}, {"24:00:00Z", "12:60:00Z", "12:00:00", "12:00Z", "1:00:00Z"}},
        {"date-time", {"2024-05-06T07:08:09Z", "1999-12-31T23:59:59.5+01:00"}, {"2024-05-06 07:08:09", "2024-05-06T07:08:09", "2024-02-30T00:00:00Z"}},
        {"email", {"a@b.co", "first.last+tag@mail.example.org", "x_y@a-b.io"}, {"a@b", "@b.co", "a..b@c.de", "a@-b.co", "a b@c.de"}},
        {"uuid", {"123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-ABCD-EF0123456789"},
         {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "g23e4567-e89b-12d3-a456-426614174000"}},
        {"uri", {"https://example.com", "http://a.b:8080/path/x?q=1&r=%20#frag", "ftp://host/"},
         {"example.com", "https://", "http://a b", "http://a/%zz", "1http://a"}},
        {"ipv4", {"0.0.0.0", "192.168.1.255", "255.255.255.255"}, {"256.1.1.1", "1.2.3", "01.2.3.4", "1.2.3.4.5", "a.b.c.d"}},
    };
    for (const Case& c : cases) {
        CAPTURE(c.format);
        const Grammar g = string_schema("format", c.format);
        for (const std::string& s : c.valid) {
            CAPTURE(s);
            CHECK(pattern_matches(g, s));
        }
        for (const std::string& s : c.invalid) {
            CAPTURE(s);
            CHECK_FALSE(pattern_matches(g, s));
        }
    }
    // Without a type, a format's keywords still make the value a string of that format.
    const Grammar typeless = compile(R"({"format": "ipv4"})");
    CHECK(matches(typeless, R"("10.0.0.1")"));
    CHECK_FALSE(matches(typeless, "3"));
}

TEST_CASE("JSON schema: oneOf of disjoint branches, allOf merged, $ref through definitions") {
    // Pydantic's discriminated union: branches told apart by a required const property.
    const Grammar pets = compile(R"({"$defs": {
            "Cat": {"type": "object", "properties": {"pet_type": {"const": "cat", "type": "string"}, "lives": {"type": "integer"}},
                    "required": ["pet_type", "lives"]},
            "Dog": {"type": "object", "properties": {"pet_type": {"enum": ["dog", "wolf"]}, "barks": {"type": "boolean"}},
                    "required": ["pet_type", "barks"]}},
        "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/definitions/Dog"}, {"type": "null"}],
        "definitions": {"Dog": {"$ref": "#/$defs/Dog"}},
        "discriminator": {"propertyName": "pet_type"}})");
    CHECK(matches(pets, R"({"pet_type": "cat", "lives": 9})"));
    CHECK(matches(pets, R"({"pet_type": "wolf", "barks": false})"));
    CHECK(matches(pets, "null"));
    CHECK_FALSE(matches(pets, R"({"pet_type": "cat", "barks": true})"));
    CHECK_FALSE(matches(pets, R"({"pet_type": "dog", "lives": 1})"));
    const Grammar kinds = compile(R"({"oneOf": [{"type": "string", "format": "uuid"}, {"type": "integer"}, {"enum": [true]}]})");
    CHECK(matches(kinds, "12"));
    CHECK(matches(kinds, "true"));
    CHECK_FALSE(matches(kinds, "false"));
    CHECK_FALSE(matches(kinds, R"("not-a-uuid")"));

    // allOf: a model inheriting another's fields, with the schema's own properties beside it.
    const Grammar merged = compile(R"({"$defs": {"Base": {"type": "object", "properties": {"id": {"type": "integer"}},
                                                           "required": ["id"]}},
        "type": "object", "properties": {"name": {"type": "string", "pattern": "^[A-Z]"}}, "required": ["name"],
        "allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"tag": {"enum": ["a", "b"]}}, "description": "extra"}]})");
    CHECK(matches(merged, R"({"name": "Ann", "id": 1})"));
    CHECK(matches(merged, R"({"name": "Ann", "id": 1, "tag": "b"})"));
    CHECK_FALSE(matches(merged, R"({"name": "Ann"})"));
    CHECK_FALSE(matches(merged, R"({"id": 1})"));
    CHECK_FALSE(matches(merged, R"({"name": "ann", "id": 1})"));
    CHECK_FALSE(matches(merged, R"({"name": "Ann", "id": 1, "tag": "c"})"));
    // A single part, as Pydantic writes a field with a description around a $ref.
    const Grammar single = compile(R"({"$defs": {"Color": {"enum": ["red", "blue"]}},
        "type": "object", "properties": {"c": {"allOf": [{"$ref": "#/$defs/Color"}], "description": "the color"}}, "required": ["c"]})");
    CHECK(matches(single, R"({"c": "red"})"));
    CHECK_FALSE(matches(single, R"({"c": "green"})"));
}

TEST_CASE("JSON schema: hostile patterns are refused with a clear error, never a crash") {
    const auto refusal = [](const ordered_json& schema) -> std::string {
        try {
            (void)Grammar::parse(smol::text::json_schema_to_gbnf(schema));
        } catch (const smol::text::GrammarTooComplex& e) {
            return e.what();
        }
        return "";
    };
    const auto with_pattern = [](const std::string& p) { return ordered_json{{"type", "string"}, {"pattern", p}}; };
    CHECK(refusal(with_pattern(std::string(5000, 'a'))).find("bytes long") != std::string::npos);
    CHECK(refusal(with_pattern("^" + std::string(40, '(') + "a" + std::string(40, ')') + "$")).find("nest more than") != std::string::npos);
    CHECK(refusal(with_pattern("^a{1001}$")).find("above 1000") != std::string::npos);
    CHECK(refusal(with_pattern("^((a{1000}){1000}){1000}$")).find("grammar elements") != std::string::npos);
    CHECK(refusal(with_pattern("^(((a|b){100}){100}){100}$")).find("grammar elements") != std::string::npos);
    // Just within the caps: compiles, and the grammar is right.
    const std::string deep = "^" + std::string(30, '(') + "a" + std::string(30, ')') + "$";
    CHECK(refusal(with_pattern(deep)).empty());
    CHECK(pattern_matches(string_schema("pattern", deep), "a"));
    CHECK(refusal(with_pattern("^[0-9a-f]{1000}$")).empty());
    // A oneOf with too many branches to check pair by pair.
    ordered_json many = ordered_json::array();
    for (int i = 0; i < 100; ++i) many.push_back({{"const", i}});
    CHECK(refusal({{"oneOf", many}}).find("branches") != std::string::npos);
    // Random bytes as patterns: each compiles to a grammar that parses, or is refused with an error.
    std::mt19937 rng(11);
    const std::string alphabet = "ab()[]{}|?*+.^$\\-,0123dwsSDWux:<>=!";
    for (int i = 0; i < 3000; ++i) {
        std::string p;
        const int length = int(rng() % 16);
        for (int k = 0; k < length; ++k) p += alphabet[rng() % alphabet.size()];
        CAPTURE(p);
        try {
            (void)Grammar::parse(smol::text::json_schema_to_gbnf(with_pattern(p)));
        } catch (const smol::Error&) {
        }
    }
}

namespace {

std::size_t code_points(const std::string& s) {
    return std::size_t(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// The reference for a string schema with Zod's keywords: std::regex's ECMAScript grammar
// (lookaheads included) for each pattern (a format by smol's pattern for it), searching anywhere
// in the string as JSON Schema does, then the lengths. Only ASCII patterns are given to it.
class Reference {
public:
    explicit Reference(const ordered_json& schema) {
        std::vector<ordered_json> parts{schema};
        if (schema.contains("allOf"))
            for (const auto& part : schema["allOf"]) parts.push_back(part);
        const auto& formats = smol::text::json_schema_detail::format_patterns();
        for (const ordered_json& part : parts) {
            if (part.contains("pattern")) patterns_.emplace_back(part["pattern"].get<std::string>(), std::regex::ECMAScript);
            if (part.contains("format"))
                if (const auto known = formats.find(part["format"].get<std::string>()); known != formats.end())
                    patterns_.emplace_back(known->second, std::regex::ECMAScript);
            if (part.contains("minLength")) min_ = std::max(min_, part["minLength"].get<std::size_t>());
            if (part.contains("maxLength")) max_ = std::min(max_, part["maxLength"].get<std::size_t>());
        }
    }
    bool takes(const std::string& value) const {
        for (const std::regex& p : patterns_)
            if (!std::regex_search(value, p)) return false;
        return code_points(value) >= min_ && code_points(value) <= max_;
    }

private:
    std::vector<std::regex> patterns_;
    std::size_t min_ = 0, max_ = std::size_t(-1);
};

bool satisfies(const ordered_json& schema, const std::string& value) { return Reference(schema).takes(value); }

}  // namespace

TEST_CASE("JSON schema: Zod's strings, with a format and a pattern side by side, satisfy both") {
    // As zod 4.1's z.toJSONSchema writes them (and zod-to-json-schema with emailStrategy
    // "pattern:zod", whose email pattern has lookaheads), with valid and invalid values.
    struct Case {
        const char* schema;
        std::vector<std::string> valid, invalid;
    };
    const std::vector<Case> cases = {
        {R"z({"$schema":"https://json-schema.org/draft/2020-12/schema","type":"string","format":"email","pattern":"^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"})z",
         {"a@b.co", "first.last+tag@mail.example.org"},
         {"a@b.c", "a.@b.co", "a@b-.co", "a..b@c.de", "'@b.co"}},  // TLD of one letter; the pattern's and the format's misses
        {R"z({"type":"string","minLength":3,"maxLength":12,"format":"email","pattern":"^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"})z",
         {"a@b.co", "abcde@fgh.ij"},
         {"abcdef@ghi.jk", "a@b"}},
        {R"z({"type":"string","pattern":"^(?!\\.)(?!.*\\.\\.)([a-zA-Z0-9_'+\\-\\.]*)[a-zA-Z0-9_+-]@([a-zA-Z0-9][a-zA-Z0-9\\-]*\\.)+[a-zA-Z]{2,}$","$schema":"http://json-schema.org/draft-07/schema#"})z",
         {"a.b@c.de", "x@y.zz"},
         {".a@c.de", "a..b@c.de", "a@c.d"}},
        {R"z({"type":"string","format":"email","pattern":"^(?!\\.)(?!.*\\.\\.)([a-zA-Z0-9_'+\\-\\.]*)[a-zA-Z0-9_+-]@([a-zA-Z0-9][a-zA-Z0-9\\-]*\\.)+[a-zA-Z]{2,}$","maxLength":20})z",
         {"a.b@c.de"},
         {".a@c.de", "a.@c.de", "abcdefghijklmn@cde.fg"}},
        {R"z({"type":"string","format":"uuid","pattern":"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$"})z",
         {"123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000"},
         {"123e4567-e89b-02d3-a456-426614174000", "123e4567-e89b-12d3-c456-426614174000"}},
        {R"z({"type":"string","format":"date-time","pattern":"^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z))$"})z",
         {"2024-02-29T12:00:00Z", "1999-12-31T23:59:59.123456789Z"},
         {"2024-02-29T12:00:00+01:00", "2024-02-29T12:00:00.1234567890Z", "2023-02-29T12:00:00Z"}},  // Zod: Z only; format: 9 digits at most
        {R"z({"type":"string","format":"date","pattern":"^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))$"})z",
         {"2000-02-29", "2023-11-30"},
         {"1900-02-29", "2023-11-31"}},
        {R"z({"type":"string","format":"ipv4","pattern":"^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$"})z",
         {"192.168.0.1", "0.0.0.0"},
         {"256.0.0.1", "01.2.3.4"}},
        {R"z({"type":"string","maxLength":8,"pattern":"^[a-z]+$"})z", {"abc", "abcdefgh"}, {"abcdefghi", ""}},
        {R"z({"type":"string","format":"nanoid","pattern":"^[a-zA-Z0-9_-]{21}$"})z", {"V1StGXR8_Z5jdHi6B-myT"}, {"V1StGXR8_Z5jdHi6B-my"}},
        {R"z({"type":"string","format":"cuid","pattern":"^[cC][0-9a-z]{6,}$","maxLength":10})z", {"cjld2cjxh0"}, {"cjld2cjxh00", "xjld2cjxh0"}},
        {R"z({"type":"string","format":"ends_with","allOf":[{"pattern":"^ab.*"},{"pattern":".*z$"}]})z", {"abz", "ab-z"}, {"az", "abzz!"}},
    };
    std::mt19937 rng(17);
    for (const Case& c : cases) {
        CAPTURE(c.schema);
        const ordered_json schema = ordered_json::parse(c.schema);
        const Grammar g = Grammar::parse(smol::text::json_schema_to_gbnf(schema));
        for (const std::string& s : c.valid) {
            CAPTURE(s);
            REQUIRE(satisfies(schema, s));  // the examples themselves are right
            CHECK(pattern_matches(g, s));
        }
        for (const std::string& s : c.invalid) {
            CAPTURE(s);
            REQUIRE_FALSE(satisfies(schema, s));
            CHECK_FALSE(pattern_matches(g, s));
        }
        for (int i = 0; i < 60; ++i) {
            const std::string text = random_sentence(g, rng);
            CAPTURE(text);
            const ordered_json value = ordered_json::parse(text, nullptr, false);
            REQUIRE(value.is_string());
            CHECK(satisfies(schema, value.get<std::string>()));
        }
    }
}

TEST_CASE("JSON schema: intersected patterns take exactly the strings the reference takes") {
    // Random small patterns over "ab" (lookaheads after ^, counts, classes, alternation),
    // each beside a second pattern or lengths, so they compile as automata: over every string
    // of up to five characters of "abc", the grammar and std::regex agree exactly.
    std::mt19937 rng(23);
    const auto pattern = [&](auto&& self, int depth) -> std::string {
        const int pick = int(rng() % (depth > 2 ? 4 : 9));
        if (pick == 0) return "a";
        if (pick == 1) return "b";
        if (pick == 2) return rng() % 2 ? "." : "[^a]";
        if (pick == 3) return "[ab]";
        const std::string inner = self(self, depth + 1);
        if (pick == 4) return "(" + inner + "|" + self(self, depth + 1) + ")";
        if (pick == 5) return "(?:" + inner + ")" + (rng() % 2 ? "+" : "*");
        if (pick == 6) return inner + "?";
        if (pick == 7) return "(?:" + inner + "){1,2}";
        return inner + self(self, depth + 1);
    };
    const auto top = [&]() {
        std::string p = rng() % 3 ? "^" : "";
        if (!p.empty())
            for (int k = int(rng() % 3); k > 0; --k) p += std::string(rng() % 2 ? "(?!" : "(?=") + pattern(pattern, 1) + ")";
        p += pattern(pattern, 0);
        return p + (rng() % 2 ? "$" : "");
    };
    std::vector<std::string> strings{""};
    for (std::size_t i = 0; i < strings.size() && strings[i].size() < 5; ++i)
        for (const char c : std::string("abc")) strings.push_back(strings[i] + c);
    int compiled = 0, with_lookaheads = 0;
    for (int i = 0; i < 200; ++i) {
        ordered_json schema = {{"type", "string"}, {"pattern", top()}};
        if (rng() % 2) schema["allOf"] = ordered_json::array({{{"pattern", top()}}});
        if (rng() % 2) schema["minLength"] = rng() % 3;
        if (rng() % 2) schema["maxLength"] = 2 + rng() % 3;
        if (schema.value("maxLength", 9) < schema.value("minLength", 0)) schema.erase("minLength");
        CAPTURE(schema.dump());
        std::string gbnf;
        try {
            gbnf = smol::text::json_schema_to_gbnf(schema);
        } catch (const smol::Error&) {
            continue;  // a * over something empty, a quantifier after a lazy one, or no string both take
        }
        ++compiled;
        with_lookaheads += smol::text::pattern_detail::mentions_lookahead(schema.dump());
        const Grammar g = Grammar::parse(gbnf);
        const Reference reference(schema);
        for (const std::string& s : strings) {
            CAPTURE(s);
            CHECK(pattern_matches(g, s) == reference.takes(s));
        }
    }
    CHECK(compiled > 100);
    CHECK(with_lookaheads > 25);
}

TEST_CASE("JSON schema: intersections are bounded in states and refused by path, never a crash") {
    const auto refusal = [](const ordered_json& schema) -> std::string {
        try {
            (void)Grammar::parse(smol::text::json_schema_to_gbnf(schema));
        } catch (const smol::text::GrammarTooComplex& e) {
            return e.what();
        }
        return "";
    };
    // "An a twelve characters before the end" needs 2^13 states to remember the last 13.
    const ordered_json exponential = {{"type", "object"}, {"properties", {{"s", {{"type", "string"}, {"pattern", "a[ab]{12}$"}, {"maxLength", 40}}}}}};
    const std::string message = refusal(exponential);
    CHECK(message.find("automaton states") != std::string::npos);
    CHECK(message.find("#/properties/s") != std::string::npos);
    // Lengths past the cap multiply the states; the pattern caps hold as before.
    CHECK(refusal({{"type", "string"}, {"format", "email"}, {"maxLength", 100000}}).find("automaton states") != std::string::npos);
    CHECK(refusal({{"type", "string"}, {"pattern", "^((a{1000}){1000}){1000}$"}, {"format", "uuid"}}).find("grammar elements") != std::string::npos);
    CHECK(refusal({{"type", "string"}, {"pattern", "^(?!" + std::string(40, '(') + "a" + std::string(40, ')') + ")"}})
              .find("nest more than") != std::string::npos);
    // Few states but large ones (a thousand optional characters, against a lookahead of as
    // many): the step budget ends it.
    CHECK(refusal({{"type", "string"}, {"pattern", "^(?!(?:.?){1000}a)(?:.?){1000}$"}, {"maxLength", 4000}}).find("steps") !=
          std::string::npos);
    // Within the caps: a long count beside a format, and an email of up to 320 characters.
    CHECK(refusal({{"type", "string"}, {"pattern", "^[0-9a-f-]{36}$"}, {"format", "uuid"}}).empty());
    CHECK(refusal({{"type", "string"}, {"format", "email"}, {"minLength", 3}, {"maxLength", 320}}).empty());
    // Random patterns beside a format and lengths: a grammar that parses, or an error.
    std::mt19937 rng(29);
    const std::string alphabet = "ab()[]{}|?*+.^$\\-,0123dwsSDWux:<>=!";
    for (int i = 0; i < 1500; ++i) {
        std::string p;
        const int length = int(rng() % 16);
        for (int k = 0; k < length; ++k) p += alphabet[rng() % alphabet.size()];
        CAPTURE(p);
        ordered_json schema = {{"type", "string"}, {"pattern", p}, {"maxLength", 1 + rng() % 6}};
        if (rng() % 2) schema["format"] = rng() % 2 ? "ipv4" : "date";
        try {
            (void)Grammar::parse(smol::text::json_schema_to_gbnf(schema));
        } catch (const smol::Error&) {
        }
    }
}

}  // namespace test_json_schema
