#pragma once
// JSON Schema to GBNF (text/grammar.hpp): the grammar of the JSON texts a schema accepts, for
// response_format json_schema and forced tool calls. Supported: type (one or a list), enum,
// const, properties with required and additionalProperties, items with minItems/maxItems,
// string minLength/maxLength, pattern (text/json_schema_pattern.hpp) and format (date, time,
// date-time, email, uuid, uri, ipv4), all of them at once as Zod writes them (the string must
// satisfy each: they are intersected as automata, text/automaton.hpp; a format JSON Schema does
// not define, such as Zod's cuid, is an annotation beside a pattern), integer minimum/maximum
// (exclusive too), number minimum/maximum when they are whole numbers, anyOf, oneOf (when its
// branches cannot both match: different types, or a required property with different const or
// enum values), allOf (a single schema; objects, merged: properties and required united; or
// string keywords, as Zod writes startsWith and endsWith, all held), and $ref to
// #/$defs/... or #/definitions/...; annotations (title, description, default, examples, $schema,
// $id, strict, discriminator, readOnly, writeOnly, deprecated, contentEncoding,
// contentMediaType) are ignored. Anything else fails
// with a message that names the keyword and where it was found, so a schema is never
// half-enforced.
//
// Properties come out in the schema's order; optional ones may be left out, extra ones only
// where additionalProperties allows them. A format's grammar takes a subset of what the format
// allows where the whole is not regular (uri: scheme://authority with path, query, fragment).
//
// Schemas come from strangers, so compiling one is bounded (GrammarTooComplex past a cap): the
// schema may nest at most kMaxSchemaDepth subschemas deep, and compiling visits at most
// kMaxSchemaVisits of them, since a `type` list compiles its subtree once per type (two types
// a level, twenty levels: a million visits); a oneOf has at most kMaxOneOfBranches branches (each
// pair is checked); patterns have their own caps (text/json_schema_pattern.hpp), and so do the
// automata that intersect them (text/automaton.hpp: states and steps).

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/grammar.hpp"
#include "smol/text/json_schema_pattern.hpp"

namespace smol::text {

namespace json_schema_detail {

using json = nlohmann::ordered_json;

// A GBNF literal for `text` (as it appears in the output).
inline std::string literal(std::string_view text) {
    std::string out = "\"";
    for (const char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else out += c;
    }
    return out + "\"";
}

// Decimal digits of a non-negative number.
inline std::string digits(std::uint64_t v) { return std::to_string(v); }

// Alternatives matching the decimal forms (no leading zeros) of the integers in [lo, hi],
// 0 <= lo <= hi, as a GBNF expression.
inline std::string uint_range(std::uint64_t lo, std::uint64_t hi) {
    std::vector<std::string> alternatives;
    // Same digit count: split on the first digit where lo and hi differ.
    const auto same_length = [&](auto&& self, const std::string& a, const std::string& b, std::string prefix) -> void {
        if (a.empty()) {
            alternatives.push_back(prefix.empty() ? "\"\"" : prefix);
            return;
        }
        const auto piece = [](char from, char to) {
            return from == to ? literal(std::string(1, from)) : "[" + std::string(1, from) + "-" + std::string(1, to) + "]";
        };
        const std::string join = prefix.empty() ? "" : prefix + " ";
        if (a[0] == b[0]) return self(self, a.substr(1), b.substr(1), join + literal(a.substr(0, 1)));
        const std::size_t rest = a.size() - 1;
        const bool a_floor = a.substr(1) == std::string(rest, '0');
        const bool b_ceiling = b.substr(1) == std::string(rest, '9');
        const char first_full = a_floor ? a[0] : char(a[0] + 1);
        const char last_full = b_ceiling ? b[0] : char(b[0] - 1);
        if (!a_floor) self(self, a.substr(1), std::string(rest, '9'), join + literal(a.substr(0, 1)));
        if (first_full <= last_full)
            alternatives.push_back(join + piece(first_full, last_full) + (rest ? " [0-9]{" + std::to_string(rest) + "}" : ""));
        if (!b_ceiling) self(self, std::string(rest, '0'), b.substr(1), join + literal(b.substr(0, 1)));
    };
    std::uint64_t from = lo;
    while (from <= hi) {
        const std::string a = digits(from);
        // The largest number with as many digits as `from`, capped at hi.
        std::uint64_t top = 9;
        for (std::size_t i = 1; i < a.size(); ++i) top = top * 10 + 9;
        const std::uint64_t to = std::min(top, hi);
        same_length(same_length, a, digits(to), "");
        if (to == hi || to == std::numeric_limits<std::uint64_t>::max()) break;
        from = to + 1;
    }
    std::string out = "(";
    for (std::size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : "") + alternatives[i];
    return out + ")";
}

// The integers >= lo (lo >= 0) with no upper bound.
inline std::string uint_from(std::uint64_t lo) {
    const std::string a = digits(lo);
    std::uint64_t top = 9;
    for (std::size_t i = 1; i < a.size(); ++i) top = top * 10 + 9;
    // Those with as many digits as lo, then every longer one.
    return "(" + uint_range(lo, top) + " | [1-9] [0-9]{" + std::to_string(a.size()) + ",})";
}

inline constexpr int kMaxSchemaDepth = 64;
inline constexpr int kMaxSchemaVisits = 20000;
inline constexpr std::size_t kMaxOneOfBranches = 64;

// The formats a string may have, as anchored patterns: exact for date (leap years too), time
// and date-time (RFC 3339, with a time zone), uuid and ipv4; email and uri take the common
// subset Ajv's ajv-formats accepts too.
inline const std::map<std::string, std::string, std::less<>>& format_patterns() {
    static const std::string date =
        R"((?:\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))|)"
        R"((?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29))";
    static const std::string time = R"((?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d))";
    static const std::string uri_char = R"((?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2}))";
    static const std::string uri_query = R"((?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2}))";
    static const std::map<std::string, std::string, std::less<>> formats = {
        {"date", "^" + date + "$"},
        {"time", "^" + time + "$"},
        {"date-time", "^" + date + "T" + time + "$"},
        {"email", R"(^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@)"
                  R"((?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?$)"},
        {"uuid", R"(^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$)"},
        {"uri", R"(^[A-Za-z][A-Za-z0-9+.-]*://(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+(?::\d{1,5})?(?:/)" + uri_char +
                    "*)*(?:\\?" + uri_query + "*)?(?:#" + uri_query + "*)?$"},
        {"ipv4", R"(^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$)"},
    };
    return formats;
}

class Compiler {
public:
    explicit Compiler(const json& root) : root_(root) {}

    std::string compile() {
        const std::string start = rule_for(root_, "#");
        std::string out = "root ::= " + start + "\n";
        for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
        return out;
    }

private:
    const json& root_;
    std::map<std::string, std::string> rules_;  // name -> body
    std::map<std::string, std::string> refs_;   // $ref -> rule name
    std::map<std::string, std::string> shared_;  // body -> rule name, for pieces many rules use
    int counter_ = 0;
    int depth_ = 0;   // subschemas open around the one being compiled
    int visits_ = 0;  // subschemas compiled so far

    // Counts one more subschema, inside the one being compiled, against the caps.
    struct Visit {
        Compiler& c;
        Visit(Compiler& compiler, const std::string& where) : c(compiler) {
            if (++c.visits_ > kMaxSchemaVisits)
                throw GrammarTooComplex("JSON schema: compiling it visits more than " + std::to_string(kMaxSchemaVisits) +
                                        " subschemas (at " + where + "; 'type' lists and anyOf multiply them); the limit is " +
                                        std::to_string(kMaxSchemaVisits));
            if (++c.depth_ > kMaxSchemaDepth)
                throw GrammarTooComplex("JSON schema: subschemas nest more than " + std::to_string(kMaxSchemaDepth) +
                                        " deep (at " + where.substr(0, 200) + "...); the limit is " +
                                        std::to_string(kMaxSchemaDepth));
        }
        ~Visit() { --c.depth_; }
        Visit(const Visit&) = delete;
        Visit& operator=(const Visit&) = delete;
    };

    std::string fresh(const std::string& base) {
        std::string name;
        for (const char c : base) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
        return name + "-" + std::to_string(counter_++);
    }
    std::string add(const std::string& base, std::string body) {
        const std::string name = fresh(base);
        rules_[name] = std::move(body);
        return name;
    }

    // A rule with this body, made once however often it is asked for.
    std::string shared(const std::string& base, const std::string& body) {
        if (const auto it = shared_.find(body); it != shared_.end()) return it->second;
        return shared_[body] = add(base, body);
    }

    [[noreturn]] static void unsupported(const std::string& where, const std::string& what) {
        throw UnsupportedSchema("JSON schema: " + what + " at " + where + " is not supported");
    }

    // The shared pieces of JSON text.
    std::string ws() {
        if (!rules_.count("ws")) rules_["ws"] = "[ \\t\\n]{0,4}";
        return "ws";
    }
    std::string json_string() {
        if (!rules_.count("char"))
            rules_["char"] = "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})";
        if (!rules_.count("string")) rules_["string"] = "\"\\\"\" char* \"\\\"\"";
        return "string";
    }
    std::string any_value() {
        if (!rules_.count("value")) {
            rules_["value"] = "object | array | " + json_string() + " | number | \"true\" | \"false\" | \"null\"";
            rules_["object"] = "\"{\" " + ws() + " (string " + ws() + " \":\" " + ws() + " value " + ws() +
                               " (\",\" " + ws() + " string " + ws() + " \":\" " + ws() + " value " + ws() + ")*)? \"}\"";
            rules_["array"] = "\"[\" " + ws() + " (value " + ws() + " (\",\" " + ws() + " value " + ws() + ")*)? \"]\"";
            number();
        }
        return "value";
    }
    std::string number() {
        if (!rules_.count("number"))
            rules_["number"] = std::string(kJsonNumberRule);  // finite in every parser
        return "number";
    }

    // only_type: compile as if `type` were this one entry of the schema's type list (no copy of
    // the schema per entry).
    std::string rule_for(const json& schema, const std::string& where, const json* only_type = nullptr) {
        const Visit visit(*this, where);
        if (schema.is_boolean()) {
            if (schema.get<bool>()) return any_value();
            unsupported(where, "the schema false (nothing matches)");
        }
        if (!schema.is_object()) fail("JSON schema: expected an object at ", where, ", found ", schema.type_name());
        for (const auto& [key, value] : schema.items())
            if (!annotations().count(key) && !handled().count(key)) unsupported(where + "/" + key, "the keyword '" + key + "'");

        if (const auto ref = schema.find("$ref"); ref != schema.end()) {
            if (schema.size() > 1) {
                for (const auto& [key, value] : schema.items())
                    if (key != "$ref" && !annotations().count(key))
                        unsupported(where + "/" + key, "'" + key + "' beside $ref");
            }
            return reference(*ref, where);
        }
        if (const auto e = schema.find("enum"); e != schema.end()) {
            if (!e->is_array() || e->empty()) fail("JSON schema: 'enum' at ", where, " must be a non-empty array");
            std::string body;
            for (const json& v : *e) body += (body.empty() ? "" : " | ") + literal(v.dump());
            return add("enum", body);
        }
        if (const auto c = schema.find("const"); c != schema.end()) return add("const", literal(c->dump()));
        if (const auto any = schema.find("anyOf"); any != schema.end()) {
            if (!any->is_array() || any->empty()) fail("JSON schema: 'anyOf' at ", where, " must be a non-empty array");
            std::string body;
            for (std::size_t i = 0; i < any->size(); ++i)
                body += (i ? " | " : "") + rule_for((*any)[i], where + "/anyOf/" + std::to_string(i));
            return add("any-of", body);
        }
        if (const auto one = schema.find("oneOf"); one != schema.end()) return one_of(*one, where);
        if (const auto all = schema.find("allOf"); all != schema.end()) {
            if (std::optional<std::string> strings = string_all_of(schema, where)) return *strings;
            const json merged = all_of(schema, where, 0);
            return rule_for(merged, where + "/allOf");
        }
        const json* type = only_type;
        if (!type)
            if (const auto it = schema.find("type"); it != schema.end()) type = &*it;
        if (!type) {
            // No type: what the other keywords say, or any value.
            if (schema.contains("properties")) return object(schema, where);
            if (schema.contains("items")) return array(schema, where);
            // A string's keywords without a type: the grammar writes strings (a subset of what
            // the schema takes, never more).
            if (schema.contains("pattern") || schema.contains("format")) return string(schema, where);
            return any_value();
        }
        if (type->is_array()) {
            std::string body;
            for (std::size_t i = 0; i < type->size(); ++i)
                body += (i ? " | " : "") + rule_for(schema, where + "/type/" + std::to_string(i), &(*type)[i]);
            return add("types", body);
        }
        if (!type->is_string()) fail("JSON schema: 'type' at ", where, " must be a string or a list of strings");
        const std::string t = *type;
        if (t == "object") return object(schema, where);
        if (t == "array") return array(schema, where);
        if (t == "string") return string(schema, where);
        if (t == "integer") return integer(schema, where);
        if (t == "number") return bounded_number(schema, where);
        if (t == "boolean") return add("boolean", "\"true\" | \"false\"");
        if (t == "null") return add("null", "\"null\"");
        fail("JSON schema: unknown type '", t, "' at ", where);
    }

    static const std::set<std::string>& annotations() {
        static const std::set<std::string> keys = {"title",       "description", "default", "examples",  "$schema",
                                                   "$id",         "$comment",    "strict",  "$defs",     "definitions",
                                                   "discriminator", "readOnly",  "writeOnly", "deprecated",
                                                   "contentEncoding", "contentMediaType"};
        return keys;
    }
    // The formats JSON Schema (2020-12) defines.
    static const std::set<std::string>& defined_formats() {
        static const std::set<std::string> names = {
            "date-time", "date",         "time",          "duration", "email",        "idn-email",     "hostname",
            "idn-hostname", "ipv4",      "ipv6",          "uri",      "uri-reference", "iri",          "iri-reference",
            "uuid",      "uri-template", "json-pointer", "relative-json-pointer", "regex"};
        return names;
    }
    static const std::set<std::string>& handled() {
        static const std::set<std::string> keys = {
            "type",     "enum",      "const",   "properties", "required",         "additionalProperties",
            "items",    "minItems",  "maxItems", "minLength", "maxLength",        "minimum",
            "maximum",  "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
            "$ref",     "pattern",   "format"};
        return keys;
    }

    // An allOf whose parts (the schema's own keywords among them) hold only string keywords, as
    // Zod writes startsWith and endsWith: one string matching every part's pattern and format
    // within the tightest lengths; nullopt for any other allOf.
    std::optional<std::string> string_all_of(const json& schema, const std::string& where) {
        const json& all = schema["allOf"];
        if (!all.is_array() || all.empty()) return std::nullopt;
        std::vector<std::pair<const json*, std::string>> parts{{&schema, where}};
        for (std::size_t i = 0; i < all.size(); ++i) {
            const std::string at = where + "/allOf/" + std::to_string(i);
            parts.push_back({&resolved(all[i], at), at});
        }
        bool any_string_keyword = false;
        for (const auto& [part, at] : parts) {
            if (!part->is_object()) return std::nullopt;
            for (const auto& [key, value] : part->items()) {
                if (annotations().count(key) || (key == "allOf" && part == &schema)) continue;
                if (key == "type" && value == "string") continue;
                if (key != "pattern" && key != "format" && key != "minLength" && key != "maxLength") return std::nullopt;
                any_string_keyword = true;
            }
        }
        if (!any_string_keyword) return std::nullopt;
        StringKeywords keywords;
        for (const auto& [part, at] : parts) string_keywords(*part, at, keywords);
        return string_of(keywords, where);
    }

    // The schema a $ref names (following references to references), or `schema` itself.
    const json& resolved(const json& schema, const std::string& where) const {
        const json* s = &schema;
        for (int hops = 0; s->is_object() && s->contains("$ref"); ++hops) {
            if (hops == kMaxSchemaDepth)
                fail("JSON schema: '$ref' at ", where, " leads through more than ", kMaxSchemaDepth, " references (a cycle?)");
            s = &definition((*s)["$ref"], where);
        }
        return *s;
    }

    // The definition `ref` names.
    const json& definition(const json& ref, const std::string& where) const {
        if (!ref.is_string()) fail("JSON schema: '$ref' at ", where, " must be a string");
        const std::string target = ref;
        for (const std::string key : {"$defs", "definitions"}) {
            const std::string prefix = "#/" + key + "/";
            if (target.rfind(prefix, 0) != 0) continue;
            const std::string name = target.substr(prefix.size());
            if (!root_.is_object() || !root_.contains(key) || !root_[key].is_object() || !root_[key].contains(name))
                fail("JSON schema: '$ref' at ", where, " names '", target, "', which the schema does not define");
            return root_[key][name];
        }
        unsupported(where + "/$ref", "the reference '" + target + "' (only #/$defs/... and #/definitions/...)");
    }

    std::string reference(const json& ref, const std::string& where) {
        if (!ref.is_string()) fail("JSON schema: '$ref' at ", where, " must be a string");
        const std::string target = ref;
        if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
        const json& body = definition(ref, where);
        // A definition that is only a reference back to itself would be a rule that is itself.
        (void)resolved(body, target);
        // Named before it is compiled, so a recursive definition refers to itself.
        const std::string rule = fresh("def-" + target.substr(target.rfind('/') + 1));
        refs_[target] = rule;
        rules_[rule] = "";
        rules_[rule] = rule_for(body, target);
        return rule;
    }

    // oneOf: exactly one branch matches. The grammar is the branches' union, which is exact when
    // no value can match two of them; that is checked, pair by pair, and a oneOf whose branches
    // may overlap is refused rather than enforced as anyOf.
    std::string one_of(const json& branches, const std::string& where) {
        if (!branches.is_array() || branches.empty()) fail("JSON schema: 'oneOf' at ", where, " must be a non-empty array");
        if (branches.size() > kMaxOneOfBranches)
            throw GrammarTooComplex("JSON schema: 'oneOf' at " + where + " has " + std::to_string(branches.size()) +
                                    " branches; the limit is " + std::to_string(kMaxOneOfBranches));
        // Each branch as the grammar takes it: references followed, allOf merged.
        std::vector<json> shapes;
        for (std::size_t i = 0; i < branches.size(); ++i) {
            const std::string at = where + "/oneOf/" + std::to_string(i);
            const json& branch = resolved(branches[i], at);
            shapes.push_back(branch.is_object() && branch.contains("allOf") ? all_of(branch, at, 0) : branch);
        }
        for (std::size_t i = 0; i < branches.size(); ++i)
            for (std::size_t j = i + 1; j < branches.size(); ++j)
                if (!disjoint(shapes[i], shapes[j], where))
                    unsupported(where + "/oneOf", "a oneOf whose branches " + std::to_string(i) + " and " + std::to_string(j) +
                                                      " may both match (give them different types, or a required property "
                                                      "with different const or enum values; or use anyOf)");
        std::string body;
        for (std::size_t i = 0; i < branches.size(); ++i)
            body += (i ? " | " : "") + rule_for(branches[i], where + "/oneOf/" + std::to_string(i));
        return add("one-of", body);
    }

    // The JSON types a schema's values may have ("integer" is a "number"); all seven when it
    // does not say.
    static std::set<std::string> kinds(const json& s) {
        static const std::set<std::string> every = {"object", "array", "string", "number", "boolean", "null"};
        if (!s.is_object()) return every;
        const auto kind_of = [](const json& v) -> std::string {
            if (v.is_number()) return "number";
            return v.type_name();
        };
        if (const auto c = s.find("const"); c != s.end()) return {kind_of(*c)};
        if (const auto e = s.find("enum"); e != s.end() && e->is_array()) {
            std::set<std::string> out;
            for (const json& v : *e) out.insert(kind_of(v));
            return out;
        }
        if (const auto t = s.find("type"); t != s.end()) {
            std::set<std::string> out;
            for (const json& name : t->is_array() ? *t : json::array({*t}))
                if (name.is_string()) out.insert(name == "integer" ? "number" : name.get<std::string>());
            return out;
        }
        if (s.contains("properties")) return {"object"};
        if (s.contains("items")) return {"array"};
        if (s.contains("pattern") || s.contains("format")) return {"string"};  // compiled as strings (rule_for)
        return every;
    }

    // The values a schema allows when it lists them (const or enum).
    static std::optional<std::vector<json>> listed_values(const json& s) {
        if (!s.is_object()) return std::nullopt;
        if (const auto c = s.find("const"); c != s.end()) return std::vector<json>{*c};
        if (const auto e = s.find("enum"); e != s.end() && e->is_array()) return std::vector<json>(e->begin(), e->end());
        return std::nullopt;
    }
    static bool values_disjoint(const std::optional<std::vector<json>>& a, const std::optional<std::vector<json>>& b) {
        if (!a || !b) return false;
        for (const json& x : *a)
            for (const json& y : *b)
                if (x == y) return false;
        return true;
    }
    static bool required_in(const json& s, const std::string& name) {
        const auto r = s.find("required");
        return r != s.end() && r->is_array() && std::find(r->begin(), r->end(), json(name)) != r->end();
    }

    // Whether no value can match both schemas, by what can be seen cheaply: their types, their
    // listed values, or a property both require with listed values that differ.
    bool disjoint(const json& a, const json& b, const std::string& where) const {
        const std::set<std::string> ka = kinds(a), kb = kinds(b);
        if (std::none_of(ka.begin(), ka.end(), [&](const std::string& k) { return kb.count(k) > 0; })) return true;
        if (values_disjoint(listed_values(a), listed_values(b))) return true;
        if (!a.is_object() || !b.is_object() || !a.contains("properties") || !b.contains("properties")) return false;
        const json& pa = a["properties"];
        const json& pb = b["properties"];
        if (!pa.is_object() || !pb.is_object()) return false;
        for (const auto& [name, sub] : pa.items())
            if (pb.contains(name) && required_in(a, name) && required_in(b, name) &&
                values_disjoint(listed_values(resolved(sub, where)), listed_values(resolved(pb[name], where))))
                return true;
        return false;
    }

    // allOf as one schema: a single part (beside annotations) is that part; parts that are all
    // objects merge into one object, their properties and required united. A property two
    // parts give different schemas, a part that forbids another's properties, and parts of
    // other kinds are refused, so the merged schema takes exactly what every part takes.
    json all_of(const json& schema, const std::string& where, int depth) const {
        if (depth > kMaxSchemaDepth) throw GrammarTooComplex("JSON schema: allOf nests more than " + std::to_string(kMaxSchemaDepth) + " deep at " + where);
        const json& all = schema["allOf"];
        if (!all.is_array() || all.empty()) fail("JSON schema: 'allOf' at ", where, " must be a non-empty array");
        std::vector<json> parts;
        json self = schema;
        self.erase("allOf");
        const auto substantive = [](const json& part) {
            if (!part.is_object()) return !(part.is_boolean() && part.get<bool>());
            for (const auto& [key, value] : part.items())
                if (!annotations().count(key)) return true;
            return false;
        };
        if (substantive(self)) parts.push_back(self);
        for (std::size_t i = 0; i < all.size(); ++i) {
            const std::string at = where + "/allOf/" + std::to_string(i);
            const json& part = resolved(all[i], at);
            if (part.is_object() && part.contains("allOf")) parts.push_back(all_of(part, at, depth + 1));
            else if (substantive(part)) parts.push_back(part);
        }
        if (parts.empty()) return json::object();
        if (parts.size() == 1) return parts[0];
        json merged = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
        for (const json& part : parts) {
            if (!part.is_object()) unsupported(where + "/allOf", "an allOf with a part that is not an object schema");
            for (const auto& [key, value] : part.items()) {
                if (annotations().count(key)) continue;
                if (key == "type" && value == "object") continue;
                if (key != "properties" && key != "required" && key != "additionalProperties")
                    unsupported(where + "/allOf", "'" + key + "' in an allOf of several parts (only objects' properties and required are merged)");
            }
            if (const auto p = part.find("properties"); p != part.end() && p->is_object())
                for (const auto& [name, sub] : p->items()) {
                    if (merged["properties"].contains(name) && merged["properties"][name] != sub)
                        unsupported(where + "/allOf", "the property '" + name + "' with different schemas in two parts of an allOf");
                    merged["properties"][name] = sub;
                }
            if (const auto r = part.find("required"); r != part.end() && r->is_array())
                for (const json& name : *r)
                    if (std::find(merged["required"].begin(), merged["required"].end(), name) == merged["required"].end())
                        merged["required"].push_back(name);
        }
        // A part that allows no other properties forbids every one it does not list.
        for (const json& part : parts) {
            const auto extra = part.find("additionalProperties");
            if (extra == part.end() || !(extra->is_boolean() && !extra->get<bool>())) continue;
            for (const auto& [name, sub] : merged["properties"].items())
                if (!part.contains("properties") || !part["properties"].contains(name))
                    unsupported(where + "/allOf", "the property '" + name + "', which a part with additionalProperties false does not list");
        }
        // Extra properties (whatever each part allows of them) are left out: a subset of what
        // the parts take, never more.
        return merged;
    }

    std::string object(const json& schema, const std::string& where) {
        std::vector<std::pair<std::string, std::string>> properties;  // key literal, value rule
        std::set<std::string> required;
        if (const auto r = schema.find("required"); r != schema.end()) {
            if (!r->is_array()) fail("JSON schema: 'required' at ", where, " must be an array");
            for (const json& name : *r) {
                if (!name.is_string()) fail("JSON schema: 'required' at ", where, " must hold property names, found ", name.dump());
                required.insert(name.get<std::string>());
            }
        }
        std::vector<bool> must;
        if (const auto p = schema.find("properties"); p != schema.end()) {
            if (!p->is_object()) fail("JSON schema: 'properties' at ", where, " must be an object");
            for (const auto& [name, sub] : p->items()) {
                properties.push_back({literal(json(name).dump()), rule_for(sub, where + "/properties/" + name)});
                must.push_back(required.count(name) > 0);
            }
        }
        for (const std::string& name : required)
            if (!schema.contains("properties") || !schema["properties"].contains(name))
                fail("JSON schema: '", name, "' is required at ", where, " but has no entry in 'properties'");
        // Extra properties where additionalProperties allows them (absent or false: none).
        std::string extra;
        if (const auto a = schema.find("additionalProperties"); a != schema.end() && !(a->is_boolean() && !a->get<bool>())) {
            const std::string value = rule_for(*a, where + "/additionalProperties");
            extra = add("extra", json_string() + " " + ws() + " \":\" " + ws() + " " + value);
        }
        const std::string sep = "\",\" " + ws();
        // tail(i, first): properties i.. given whether one was written already.
        std::map<std::pair<std::size_t, bool>, std::string> tails;
        const auto tail = [&](auto&& self, std::size_t i, bool first) -> std::string {
            if (const auto it = tails.find({i, first}); it != tails.end()) return it->second;
            std::string body;
            if (i == properties.size()) {
                body = extra.empty() ? "\"\"" : (first ? "(" + extra + " " + ws() + " (" + sep + " " + extra + " " + ws() + ")*)?"
                                                        : "(" + sep + " " + extra + " " + ws() + ")*");
            } else {
                const std::string member = (first ? "" : sep + " ") + properties[i].first + " " + ws() + " \":\" " + ws() +
                                           " " + properties[i].second + " " + ws();
                body = member + " " + self(self, i + 1, false);
                if (!must[i]) body = "(" + body + ") | " + self(self, i + 1, first);
            }
            const std::string name = add("props", body);
            tails[{i, first}] = name;
            return name;
        };
        return add("object", "\"{\" " + ws() + " " + tail(tail, 0, true) + " \"}\"");
    }

    std::string array(const json& schema, const std::string& where) {
        const std::string item = schema.contains("items") ? rule_for(schema["items"], where + "/items") : any_value();
        const long min = count(schema, "minItems", where, 0);
        const long max = count(schema, "maxItems", where, -1);
        if (max >= 0 && max < min) fail("JSON schema: maxItems < minItems at ", where);
        const std::string more = "(\",\" " + ws() + " " + item + " " + ws() + ")";
        std::string body;
        if (max == 0) body = "\"[\" " + ws() + " \"]\"";
        else {
            const std::string repeat = "{" + std::to_string(min > 0 ? min - 1 : 0) + "," + (max > 0 ? std::to_string(max - 1) : "") + "}";
            const std::string items = item + " " + ws() + " " + more + repeat;
            body = "\"[\" " + ws() + " " + (min > 0 ? items : "(" + items + ")?") + " \"]\"";
        }
        return add("array", body);
    }

    // What a string's keywords ask of it, gathered from one schema or from the parts of an allOf.
    struct StringKeywords {
        std::vector<pattern_detail::PatternSource> patterns;  // patterns and formats, all to be matched
        std::vector<std::pair<std::string, std::string>> other_formats;  // (name, where): formats smol has no pattern for
        long min = 0, max = -1;
    };

    std::string string(const json& schema, const std::string& where) {
        StringKeywords keywords;
        string_keywords(schema, where, keywords);
        return string_of(keywords, where);
    }

    void string_keywords(const json& schema, const std::string& where, StringKeywords& k) {
        const long min = count(schema, "minLength", where, 0);
        const long max = count(schema, "maxLength", where, -1);
        k.min = std::max(k.min, min);
        if (max >= 0) k.max = k.max < 0 ? max : std::min(k.max, max);
        if (const auto p = schema.find("pattern"); p != schema.end()) {
            if (!p->is_string()) fail("JSON schema: 'pattern' at ", where, " must be a string, found ", p->type_name());
            k.patterns.push_back({p->get<std::string>(), where + "/pattern"});
        }
        if (const auto f = schema.find("format"); f != schema.end()) {
            if (!f->is_string()) fail("JSON schema: 'format' at ", where, " must be a string, found ", f->type_name());
            const auto known = format_patterns().find(f->get<std::string>());
            if (known != format_patterns().end()) k.patterns.push_back({known->second, where + "/format"});
            else k.other_formats.push_back({f->get<std::string>(), where + "/format"});
        }
    }

    // A string with these keywords. A lone pattern compiles straight to grammar (counts stay
    // counts) when its own lengths lie within the bounds; patterns and formats together (as Zod
    // writes them), a lookahead or narrowing lengths are intersected as automata
    // (text/automaton.hpp), so the text satisfies every keyword.
    std::string string_of(const StringKeywords& k, const std::string& where) {
        json_string();
        if (k.max >= 0 && k.max < k.min) fail("JSON schema: maxLength < minLength at ", where);
        check_formats(k);
        if (k.patterns.empty()) {
            if (k.min == 0 && k.max < 0) return "string";
            return add("string", "\"\\\"\" char{" + std::to_string(k.min) + "," + (k.max >= 0 ? std::to_string(k.max) : "") + "} \"\\\"\"");
        }
        const auto named_set = [this](const std::string& body) { return shared("pattern-char", body); };
        const pattern_detail::PatternSource& first = k.patterns[0];
        if (k.patterns.size() == 1 && !pattern_detail::mentions_lookahead(first.pattern)) {
            const pattern_detail::Piece piece = pattern_detail::PatternCompiler(first.pattern, first.where, named_set).compile();
            if (std::uint64_t(k.min) <= piece.min_chars && (k.max < 0 || piece.max_chars <= std::uint64_t(k.max)))
                return add("pattern", "\"\\\"\" " + piece.gbnf + " \"\\\"\"");
        }
        const std::string start = pattern_detail::intersection_gbnf(
            k.patterns, std::uint64_t(k.min), k.max, where, fresh("string-state"), named_set,
            [this](const std::string& name, const std::string& body) { rules_[name] = body; });
        return add("pattern", "\"\\\"\" " + start + " \"\\\"\"");
    }

    // A format smol has no pattern for. A name JSON Schema does not define (Zod's cuid, nanoid,
    // e164, ...) asserts nothing, and Zod writes the pattern that does beside it, so beside a
    // pattern it is an annotation; a defined one is checked by validators, so it is refused
    // rather than left unenforced, as is any format with no pattern to hold the string to.
    void check_formats(const StringKeywords& k) const {
        for (const auto& [name, at] : k.other_formats)
            if (defined_formats().count(name) || k.patterns.empty())
                unsupported(at, "the format '" + name + "' (supported: date, time, date-time, email, uuid, uri, ipv4" +
                                    (defined_formats().count(name) ? "" : "; other names only beside a pattern") + ")");
    }

    static long count(const json& schema, const char* key, const std::string& where, long absent) {
        const auto it = schema.find(key);
        if (it == schema.end()) return absent;
        if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() > 100000)
            fail("JSON schema: '", key, "' at ", where, " must be a whole number in [0, 100000]");
        return long(it->get<long long>());
    }

    // The schema's bounds as integers (exclusive ones moved inwards); nullopt where unbounded.
    static std::pair<std::optional<std::int64_t>, std::optional<std::int64_t>> bounds(const json& schema,
                                                                                        const std::string& where,
                                                                                        bool exclusive_allowed) {
        std::optional<std::int64_t> lo, hi;
        const auto whole = [&](const char* key) -> std::optional<std::int64_t> {
            const auto it = schema.find(key);
            if (it == schema.end()) return std::nullopt;
            if (!it->is_number()) fail("JSON schema: '", key, "' at ", where, " must be a number");
            const double v = it->get<double>();
            if (v != double(std::int64_t(v)) || v < -1e15 || v > 1e15)
                unsupported(where + "/" + key, "a bound that is not a whole number below 1e15 (" + it->dump() + ")");
            return std::int64_t(v);
        };
        lo = whole("minimum");
        hi = whole("maximum");
        if (auto x = whole("exclusiveMinimum")) {
            if (!exclusive_allowed) unsupported(where + "/exclusiveMinimum", "'exclusiveMinimum' on a number");
            lo = lo ? std::max(*lo, *x + 1) : *x + 1;
        }
        if (auto x = whole("exclusiveMaximum")) {
            if (!exclusive_allowed) unsupported(where + "/exclusiveMaximum", "'exclusiveMaximum' on a number");
            hi = hi ? std::min(*hi, *x - 1) : *x - 1;
        }
        if (lo && hi && *lo > *hi) fail("JSON schema: no number fits the bounds at ", where);
        return {lo, hi};
    }

    // Integers in [lo, hi], either side open.
    static std::string int_range(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
        std::vector<std::string> parts;
        // Non-negative part.
        if (!hi || *hi >= 0) {
            const std::uint64_t from = lo && *lo > 0 ? std::uint64_t(*lo) : 0;
            parts.push_back(hi ? uint_range(from, std::uint64_t(*hi)) : uint_from(from));
        }
        // Negative part: "-" and the magnitudes.
        if (!lo || *lo < 0) {
            const std::uint64_t smallest = hi && *hi < 0 ? std::uint64_t(-*hi) : 1;
            parts.push_back("\"-\" " + (lo ? uint_range(smallest, std::uint64_t(-*lo)) : uint_from(smallest)));
        }
        std::string out = "(";
        for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
        return out + ")";
    }

    std::string integer(const json& schema, const std::string& where) {
        const auto [lo, hi] = bounds(schema, where, true);
        if (!lo && !hi) return add("integer", std::string(kJsonIntegerRule));
        return add("integer", int_range(lo, hi));
    }

    // A number in [lo, hi] (whole-number bounds): an integer in range, or one with a fraction
    // where the fraction keeps it in range.
    std::string bounded_number(const json& schema, const std::string& where) {
        const auto [lo, hi] = bounds(schema, where, false);
        if (!lo && !hi) return number();
        const std::string fraction(kJsonFractionRule);
        std::vector<std::string> parts{int_range(lo, hi)};
        // x.f with x >= 0 lies in (x, x+1): fine for x in [max(lo, 0), hi - 1].
        const std::int64_t pos_lo = lo ? std::max<std::int64_t>(*lo, 0) : 0;
        if (!hi || *hi - 1 >= pos_lo)
            parts.push_back((hi ? uint_range(std::uint64_t(pos_lo), std::uint64_t(*hi - 1)) : uint_from(std::uint64_t(pos_lo))) +
                            " " + fraction);
        // -m.f lies in (-m-1, -m): fine for m in [max(0, -hi), -lo - 1].
        const std::int64_t neg_lo = hi ? std::max<std::int64_t>(0, -*hi) : 0;
        if (!lo || -*lo - 1 >= neg_lo)
            parts.push_back("\"-\" " + (lo ? uint_range(std::uint64_t(neg_lo), std::uint64_t(-*lo - 1)) : uint_from(std::uint64_t(neg_lo))) +
                            " " + fraction);
        std::string body;
        for (std::size_t i = 0; i < parts.size(); ++i) body += (i ? " | " : "") + parts[i];
        return add("number", body);
    }
};

}  // namespace json_schema_detail

// GBNF for the JSON texts `schema` accepts; throws smol::Error naming what it cannot express.
inline std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
    return json_schema_detail::Compiler(schema).compile();
}

}  // namespace smol::text
