// JSON Schema to GBNF (text/json_schema.hpp): the grammar takes the instances a schema accepts
// and refuses the others; texts it generates at random are JSON with the schema's shape; what
// it cannot express is refused by name.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "smol/text/grammar.hpp"
#include "smol/text/json_schema.hpp"

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
    unsupported(R"({"type": "string", "pattern": "^a+$"})", "'pattern'");
    unsupported(R"({"type": "string", "format": "date-time"})", "'format'");
    unsupported(R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})", "'oneOf'");
    unsupported(R"({"allOf": [{"type": "string"}]})", "'allOf'");
    unsupported(R"({"type": "array", "uniqueItems": true})", "'uniqueItems'");
    unsupported(R"({"type": "number", "minimum": 0.5})", "not a whole number");
    unsupported(R"({"$ref": "https://example.com/schema.json"})", "https://example.com/schema.json");
    unsupported(R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}})", "#/properties/a/pattern");
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
