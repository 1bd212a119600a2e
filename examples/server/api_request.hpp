#pragma once
// The one request model under every API smol-server speaks (OpenAI's chat and completions, the
// Responses API, Anthropic's Messages API, ollama's): the ApiRequest each body is turned into,
// the errors a body is refused with, the typed field readers and field-list checks every API's
// parser is built from, and the conversation rendered by the chat template into the prompt.
// The fields several APIs share have their own rooms: sampling_fields.hpp (sampler, length,
// stop strings, streaming), tool_fields.hpp (tools and the call grammar), reasoning_budget.hpp.

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "smol/smol.hpp"

namespace smol_server {

using json = nlohmann::ordered_json;

// A client error with the OpenAI error shape: {"error": {"message", "type", "code"}}.
struct ApiError {
    int status;
    std::string message;
    std::string type;
    std::string code;
};

[[noreturn]] inline void reject(int status, std::string message, std::string code) {
    std::string type = status == 401   ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 503 ? "unavailable_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    throw ApiError{status, std::move(message), std::move(type), std::move(code)};
}

inline json error_body(const ApiError& e) {
    return json{{"error", {{"message", e.message}, {"type", e.type}, {"code", e.code}}}};
}

// JSON text from a request (the body, or JSON inside one of its strings) as a value, or a 400
// naming `what`: json_too_complex past the caps (smol/core/bounded_json.hpp), else invalid_json.
inline json parse_request_json(std::string_view text, const std::string& what) {
    try {
        return smol::parse_json(text, what);
    } catch (const smol::JsonError& e) {
        reject(400, e.what(), e.over_limits ? "json_too_complex" : "invalid_json");
    }
}

// The request body as a JSON object, or a 400 saying why not.
inline json parse_json_body(const std::string& text) {
    const json body = parse_request_json(text, "the request body");
    if (!body.is_object()) reject(400, std::string("expected a JSON object, found ") + body.type_name(), "invalid_request");
    return body;
}

// Typed optional fields: absent or null gives nullopt, a wrong type a 400 naming the field.
inline std::optional<double> number_field(const json& body, const char* name, double low, double high) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_number())
        reject(400, std::string("'") + name + "' must be a number, found " + it->type_name(), "invalid_type");
    const double v = it->get<double>();
    if (!(v >= low && v <= high))
        reject(400, std::string("'") + name + "' must be in [" + std::to_string(low) + ", " + std::to_string(high) +
                        "], found " + it->dump(),
               "invalid_value");
    return v;
}

inline std::optional<long long> integer_field(const json& body, const char* name, long long low, long long high) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_number_integer())
        reject(400, std::string("'") + name + "' must be an integer, found " + it->type_name(), "invalid_type");
    if (it->is_number_unsigned() && it->get<unsigned long long>() > static_cast<unsigned long long>(high))
        reject(400, std::string("'") + name + "' is out of range: " + it->dump(), "invalid_value");
    const long long v = it->get<long long>();
    if (v < low || v > high)
        reject(400, std::string("'") + name + "' must be in [" + std::to_string(low) + ", " + std::to_string(high) +
                        "], found " + std::to_string(v),
               "invalid_value");
    return v;
}

inline std::optional<bool> bool_field(const json& body, const char* name) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_boolean())
        reject(400, std::string("'") + name + "' must be true, false or null, found " + it->type_name() + " " +
                        it->dump().substr(0, 64),
               "invalid_type");
    return it->get<bool>();
}

// A field that must be a string when present (`model`, `system`, `prompt`).
inline std::optional<std::string> optional_string(const json& body, const char* name) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) reject(400, std::string("'") + name + "' must be a string, found " + it->type_name(), "invalid_type");
    return it->get<std::string>();
}

// ---- checking which fields a request holds -----------------------------------------------------

// Whether `key` is one of `names` (an array, a span or a braced list of field names).
template <class Names>
bool is_listed(std::string_view key, const Names& names) {
    for (const std::string_view name : names)
        if (key == name) return true;
    return false;
}

// A member that must be a string (`where` names its object in the error).
inline const std::string& string_member(const json& object, const char* name, const std::string& where) {
    const auto it = object.find(name);
    if (it == object.end() || !it->is_string())
        reject(400,
               where + "." + name + " must be a string, found " + (it == object.end() ? "nothing" : it->type_name()),
               "invalid_value");
    return it->get_ref<const std::string&>();
}

// A 400 unsupported_parameter naming `field`.
[[noreturn]] inline void unsupported(const std::string& field, const std::string& why) {
    reject(400, "'" + field + "' " + why, "unsupported_parameter");
}

// A list of the top-level fields one endpoint reads.
using FieldNames = std::span<const std::string_view>;

// Every key of `object` that none of `lists` names is a 400 unsupported_parameter naming it
// (`where` + "." + key inside a request, the key alone at its top level, where `where` is empty)
// and who does not read it (`reader`: "smol-server", or one of its APIs), so a client learns at
// once that smol-server does not do what it asked for (OpenAI and Anthropic answer unknown
// fields the same way). The one check behind every endpoint's top level and nested objects.
inline void reject_unlisted_fields(const json& object, std::initializer_list<FieldNames> lists, const std::string& where = "",
                                   const std::string& reader = "smol-server") {
    for (const auto& item : object.items()) {
        const bool listed = std::any_of(lists.begin(), lists.end(), [&](FieldNames names) { return is_listed(item.key(), names); });
        if (!listed) unsupported(where.empty() ? item.key() : where + "." + item.key(), "is not supported by " + reader);
    }
}

// reject_unlisted_fields for a nested object whose fields are spelled out at the call.
inline void check_fields(const json& object, std::initializer_list<std::string_view> fields, const std::string& where) {
    reject_unlisted_fields(object, {FieldNames(fields.begin(), fields.size())}, where);
}

// Whether a field is absent, null or equal to `neutral` (the value that asks for nothing).
inline bool absent_or(const json& body, const char* field, const json& neutral) {
    const auto it = body.find(field);
    return it == body.end() || it->is_null() || *it == neutral;
}

// ---- the request every API builds --------------------------------------------------------------

// A request checked and turned into what the scheduler runs.
struct ApiRequest {
    smol::GenerationRequest generation;
    std::string grammar;  // GBNF the output must follow (empty: free); compiled by the caller
    bool logprobs = false;  // generation.params.logprobs says how many alternatives
    bool stream = false;
    bool include_usage = false;
    int prompt_tokens = 0;
};

// What smol-server's flags set for the requests that do not say otherwise.
struct RequestDefaults {
    int reasoning_budget = -1;  // --reasoning-budget: thinking tokens at most, -1 no limit, 0 thinking off
    smol::SamplerParams sampling;  // the sampling flags; a request's own fields win
};

// The request every API's parser starts from: the server's sampling flags, which the body's own
// fields then override.
inline ApiRequest request_with(const RequestDefaults& defaults) {
    ApiRequest out;
    out.generation.params.sampling = defaults.sampling;
    return out;
}

// GBNF for a JSON schema from the request; what it cannot express is a 400 naming it.
inline std::string schema_grammar(const json& schema, const std::string& field) {
    try {
        return smol::text::json_schema_to_gbnf(schema);
    } catch (const smol::text::UnsupportedSchema& e) {
        reject(400, "'" + field + "': " + e.what(), "unsupported_parameter");
    } catch (const smol::text::GrammarTooComplex& e) {
        reject(400, "'" + field + "': " + e.what(), "grammar_too_complex");
    } catch (const smol::Error& e) {
        reject(400, "'" + field + "': " + e.what(), "invalid_value");
    }
}

// The grammar of a JSON answer, as every API's JSON output format asks for one (OpenAI's
// response_format, the Responses API's text.format, ollama's format): null `schema` for any JSON
// object, else the schema's grammar (`field` names it in errors).
inline std::string json_answer_grammar(const json& schema, const std::string& field) {
    if (schema.is_null()) return std::string(smol::text::kJsonObjectGrammar);
    return schema_grammar(schema, field);
}

// Counts the prompt; a prompt that leaves no room to generate (smol::prompt_fits, the rule the
// scheduler applies too) is a 400.
inline void check_prompt_fits(ApiRequest& out, int context) {
    const std::size_t n_prompt = out.generation.prompt.size();
    out.prompt_tokens = int(n_prompt);
    if (!smol::prompt_fits(n_prompt, context))
        reject(400, smol::prompt_too_long_message(n_prompt, context), "context_length_exceeded");
}

// `messages`: a non-empty list, whose items each API checks in its own shape. Absent is a 400
// missing_messages, and so is null where `null_is_absent` (ollama's API).
inline const json& message_list(const json& body, bool null_is_absent = false) {
    const auto it = body.find("messages");
    if (it == body.end() || (null_is_absent && it->is_null()))
        reject(400, "'messages' is required: a list of {role, content} objects", "missing_messages");
    if (!it->is_array()) reject(400, std::string("'messages' must be an array, found ") + it->type_name(), "invalid_type");
    if (it->empty()) reject(400, "'messages' is empty; at least one message is needed", "invalid_value");
    return *it;
}

// System text a request gives in several places (a top-level field, then system-role messages
// among the turns), joined in order by a blank line into one system message that leads the
// conversation: SmolLM3's template reads only a leading one and drops any later one.
class SystemText {
public:
    void add(const std::string& part) {
        if (!text_.empty() && !part.empty()) text_ += "\n\n";
        text_ += part;
    }

    // The system message followed by `turns`. Empty system text gives none: the template writes
    // its default persona for an empty system message as for a missing one.
    json before(json turns) const {
        json messages = json::array();
        if (!text_.empty()) messages.push_back({{"role", "system"}, {"content", text_}});
        for (json& turn : turns) messages.push_back(std::move(turn));
        return messages;
    }

private:
    std::string text_;
};

// The conversation rendered by the chat template, as every API does it. A trailing assistant
// message is a prefill: generation continues it.
inline smol::ChatPrompt render_chat_text(const json& messages, smol::ChatOptions& chat) {
    const bool prefill = messages.back()["role"] == "assistant";
    chat.add_generation_prompt = !prefill;
    chat.continue_final_message = prefill;
    try {
        return smol::render_chat(messages, chat);
    } catch (const smol::Error& e) {
        reject(400, e.what(), "invalid_messages");
    }
}

// render_chat_text, tokenized into out's prompt.
inline void render_prompt(const json& messages, smol::ChatOptions& chat, const smol::text::Tokenizer& tokenizer,
                          ApiRequest& out) {
    smol::ChatPrompt prompt = render_chat_text(messages, chat);
    out.generation.assistant_prefix = std::move(prompt.assistant_prefix);
    out.generation.prompt = tokenizer.encode(prompt.text, prompt.message_text);
}

// Whether a prompt is for generating from, or only for counting (the Responses API's
// input_tokens, the Messages API's count_tokens).
enum class PromptUse { generate, count };

// render_prompt, then the prompt counted into out.prompt_tokens. One to generate from must leave
// room to generate (check_prompt_fits); one only counted may be longer than the context.
inline void render_counted_prompt(const json& messages, smol::ChatOptions& chat, const smol::text::Tokenizer& tokenizer,
                                  ApiRequest& out, int context, PromptUse use = PromptUse::generate) {
    render_prompt(messages, chat, tokenizer, out);
    if (use == PromptUse::generate) check_prompt_fits(out, context);
    else out.prompt_tokens = int(out.generation.prompt.size());
}

}  // namespace smol_server
