#pragma once
// Tools as every API hands them to SmolLM3: function definitions listed in the template (its
// xml_tools), the grammar that forces a call (tool_choice "required", "any" or a named tool) or
// that holds each call the model starts under "auto", and OpenAI's `tools` / `tool_choice`
// (chat completions, /apply-template and ollama's /api/chat read them).

#include <cctype>
#include <string>
#include <string_view>

#include "api_request.hpp"

namespace smol_server {

// Which calls a request allows, in every API's terms: OpenAI's "auto" / "none" / "required" /
// a named function, Anthropic's "auto" / "none" / "any" / a named tool.
enum class ToolChoice { automatic, none, any, named };

// Function definitions ({name, description, parameters}, already checked) listed for the
// template, as SmolLM3's xml_tools. Returns the grammar that forces one call when the choice
// is `any` or `named` (`forced_name`, a JSON string), else "". `schema_field` names the
// parameters schema in errors, in the API's own terms.
inline std::string tools_into_template(const json& functions, ToolChoice choice, const json& forced_name,
                                       const std::string& schema_field, smol::ChatOptions& chat) {
    const bool forced = choice == ToolChoice::any || choice == ToolChoice::named;
    if (functions.empty()) {
        if (forced) reject(400, "'tool_choice' forces a call but 'tools' is empty", "invalid_value");
        return "";
    }
    if (chat.xml_tools.is_array() && !chat.xml_tools.empty())
        reject(400, "give tools either as 'tools' or as 'chat_template_kwargs.xml_tools', not both", "invalid_value");
    if (choice != ToolChoice::none) chat.xml_tools = functions;
    if (!forced) return "";

    // A forced call: the reply is one <tool_call> block holding {"name", "arguments"} of one of
    // the tools (or the named one), its arguments following that tool's parameters schema.
    json callable = json::array();
    if (choice == ToolChoice::named) {
        for (const json& f : functions)
            if (f["name"] == forced_name) callable.push_back(f);
        if (callable.empty())
            reject(400, "'tool_choice' names the tool " + forced_name.dump() + ", which 'tools' does not define",
                   "invalid_value");
    } else {
        callable = functions;
    }
    json calls = json::array();
    for (const json& f : callable)
        calls.push_back({{"type", "object"},
                         {"properties", {{"name", {{"const", f["name"]}}},
                                         {"arguments", f.value("parameters", json{{"type", "object"}})}}},
                         {"required", json::array({"name", "arguments"})}});
    const std::string call = schema_grammar(json{{"anyOf", calls}}, schema_field);
    // The schema's grammar becomes rule `call` inside the block (SmolLM3 writes calls this way).
    return "root ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\ncall" + call.substr(std::string_view("root").size());
}

// The tag that starts a call in SmolLM3's replies (one token): under tool_choice "auto" the call
// grammar starts there (GenerationParams::grammar_trigger), and the text before it is free.
inline constexpr std::string_view kToolCallTrigger = "<tool_call>";

// Under tool_choice "auto" with `functions` offered and nothing else holding the reply: the
// grammar of one call of one of them, which the model's <tool_call> starts (each call it makes).
inline void lazy_call_grammar(const json& functions, const std::string& schema_field, ApiRequest& out) {
    if (!out.grammar.empty() || !functions.is_array() || functions.empty()) return;
    smol::ChatOptions scratch;
    out.grammar = tools_into_template(functions, ToolChoice::any, json(), schema_field, scratch);
    out.generation.params.grammar_trigger = std::string(kToolCallTrigger);
}

// A tool's name as the template and the call grammar can carry it; `where` names it in errors.
inline void check_tool_name(const json& name, const std::string& where) {
    if (!name.is_string() || name.get_ref<const std::string&>().empty())
        reject(400, where + " must be a non-empty string", "invalid_value");
    if (name.get_ref<const std::string&>().size() > 256)
        reject(400, where + " may be at most 256 bytes long", "invalid_value");
    for (const char c : name.get_ref<const std::string&>())
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
            reject(400, where + " may hold only letters, digits, '_', '-' and '.'", "invalid_value");
}

// `tools`: a list of at most 128 definitions, each turned by `read_one(tool, where)` (`where` is
// "tools[i]") into the function definition ({name, description, parameters}) the template lists.
// Every API's tool list goes through it; the definitions' shapes are each API's own.
template <class ReadOne>
json read_tool_list(const json& body, ReadOne read_one) {
    json functions = json::array();
    const auto tools = body.find("tools");
    if (tools == body.end() || tools->is_null()) return functions;
    if (!tools->is_array())
        reject(400, std::string("'tools' must be a list of tool definitions, found ") + tools->type_name(), "invalid_type");
    if (tools->size() > 128) reject(400, "'tools' accepts at most 128 tools", "invalid_value");
    for (std::size_t i = 0; i < tools->size(); ++i)
        functions.push_back(read_one((*tools)[i], "tools[" + std::to_string(i) + "]"));
    return functions;
}

// The function definition of a flat tool (the Responses API's and Anthropic's tools hold name and
// description at their top level): its checked name and, when given, its description.
inline json named_function(const json& tool, const std::string& where) {
    check_tool_name(tool.value("name", json()), where + ".name");
    json function = {{"name", tool["name"]}};
    if (const auto d = tool.find("description"); d != tool.end() && !d->is_null()) {
        if (!d->is_string()) reject(400, where + ".description must be a string", "invalid_type");
        function["description"] = *d;
    }
    return function;
}

// OpenAI's `tools` ([{"type": "function", "function": {name, description, parameters}}]) and
// `tool_choice`. SmolLM3's template lists the function objects themselves (its xml_tools).
// Returns the grammar that forces a call when tool_choice is "required" or names a function,
// else "". `offered` (when given) receives the functions a call may name under "auto".
inline std::string read_tools(const json& body, smol::ChatOptions& chat, json* offered = nullptr) {
    const json functions = read_tool_list(body, [](const json& tool, const std::string& where) -> json {
        if (!tool.is_object() || tool.value("type", json()) != "function")
            reject(400, where + " must be {\"type\": \"function\", \"function\": {...}}", "invalid_value");
        const auto function = tool.find("function");
        if (function == tool.end() || !function->is_object())
            reject(400, where + ".function must be an object with a name", "invalid_value");
        const auto name = function->find("name");
        check_tool_name(name == function->end() ? json() : *name, where + ".function.name");
        if (const auto d = function->find("description"); d != function->end() && !d->is_string())
            reject(400, where + ".function.description must be a string", "invalid_type");
        if (const auto p = function->find("parameters"); p != function->end() && !p->is_object())
            reject(400, where + ".function.parameters must be a JSON schema object", "invalid_type");
        return *function;
    });
    std::string choice = "auto";
    json forced_name;
    if (const auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
        if (c->is_string()) choice = c->get<std::string>();
        else if (c->is_object()) choice = "function";
        else reject(400, std::string("'tool_choice' must be a string or an object, found ") + c->type_name(), "invalid_type");
        if (choice != "auto" && choice != "none" && choice != "required" && choice != "function")
            reject(400, "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", ...}, found \"" +
                            choice + "\"",
                   "invalid_value");
        if (choice == "function") {
            const auto function = c->find("function");
            if (c->value("type", json()) != "function" || function == c->end() || !function->is_object() ||
                !function->contains("name") || !(*function)["name"].is_string())
                reject(400, "'tool_choice' as an object must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                       "invalid_value");
            forced_name = (*function)["name"];
        }
    }
    const ToolChoice tool_choice = choice == "none"       ? ToolChoice::none
                                   : choice == "required" ? ToolChoice::any
                                   : choice == "function" ? ToolChoice::named
                                                          : ToolChoice::automatic;
    if (offered && tool_choice == ToolChoice::automatic) *offered = functions;
    return tools_into_template(functions, tool_choice, forced_name, "tools[].function.parameters", chat);
}

}  // namespace smol_server
