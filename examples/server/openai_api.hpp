#pragma once
// The OpenAI API as smol-server speaks it, without HTTP: request bodies checked and turned into
// generation requests, and replies, stream chunks and errors shaped as OpenAI shapes them (with
// llama-server's extensions that chat front ends read). routes.hpp, completion_routes.hpp and
// reply_adapters.hpp carry them over HTTP; the unit tests (tests/test_openai_api.cpp) call them
// directly.

#include <algorithm>
#include <initializer_list>
#include <charconv>
#include <chrono>
#include <cctype>
#include <cstdint>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/smol.hpp"

namespace smol_server {

using json = nlohmann::ordered_json;

// The OpenAI API's finish_reason: "stop" for a natural end or a stop string, "length" when a
// limit cut the reply short, "tool_calls" when the turn ended with calls. Cancelled and
// failed generations have none (nullptr).
inline const char* openai_finish_reason(smol::FinishReason reason) {
    switch (reason) {
        case smol::FinishReason::end_of_generation:
        case smol::FinishReason::stop_string: return "stop";
        case smol::FinishReason::max_tokens:
        case smol::FinishReason::context_full: return "length";
        case smol::FinishReason::tool_calls: return "tool_calls";
        case smol::FinishReason::cancelled:
        case smol::FinishReason::error: return nullptr;
    }
    return nullptr;
}

// UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, 74 random bits; sorts by time.
inline std::string uuid_v7() {
    static std::mutex mutex;
    static std::mt19937_64 rng{std::random_device{}()};
    const auto ms = std::uint64_t(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    std::uint64_t r1, r2;
    {
        std::lock_guard lock(mutex);
        r1 = rng();
        r2 = rng();
    }
    unsigned char b[16];
    for (int i = 0; i < 6; ++i) b[i] = static_cast<unsigned char>(ms >> (40 - 8 * i));
    for (int i = 6; i < 16; ++i) b[i] = static_cast<unsigned char>((i < 14 ? r1 : r2) >> (8 * (i % 8)));
    b[6] = static_cast<unsigned char>(0x70 | (b[6] & 0x0F));  // version 7
    b[8] = static_cast<unsigned char>(0x80 | (b[8] & 0x3F));  // variant 10
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
        s += hex[b[i] >> 4];
        s += hex[b[i] & 15];
    }
    return s;
}

// An id of the form Anthropic's and the Responses API's ids take ("msg_...", "resp_...",
// "toolu_..."): the prefix and a UUIDv7's hex digits.
inline std::string prefixed_id(std::string_view prefix) {
    std::string id(prefix);
    for (const char c : uuid_v7())
        if (c != '-') id += c;
    return id;
}

inline std::int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

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

// Whether a presented API key equals the expected one, in time that depends only on the
// longer length, so response times do not tell an attacker how much of a guess was right.
inline bool equal_in_constant_time(std::string_view presented, std::string_view expected) {
    unsigned difference = presented.size() != expected.size() ? 1u : 0u;
    const std::size_t n = std::max(presented.size(), expected.size());
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char a = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
        const unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
        difference |= unsigned(a ^ b);
    }
    return difference == 0;
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

// ---- which request fields smol-server reads ---------------------------------------------------

// Fields that smol-server implements, with llama-server's sampling extensions. `user` (an
// end-user id for the provider's abuse monitoring) and `cache_prompt` (prompt caching changes
// no output here, only speed) are accepted as they come; the others are checked for values
// smol-server cannot honour below. `speculative` is smol's own (read_sampling); `cache_salt`
// (vLLM's) is read by tenants.hpp.
inline constexpr std::string_view kSamplingFields[] = {
    "model", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repeat_penalty",
    "seed", "max_tokens", "stop", "stream", "stream_options", "n", "user", "cache_prompt", "logprobs", "logit_bias",
    "grammar", "speculative", "cache_salt", "typical_p", "top_n_sigma", "xtc_probability", "xtc_threshold",
    "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "mirostat",
    "mirostat_tau", "mirostat_eta", "samplers"};
inline constexpr std::string_view kChatFields[] = {
    "messages", "max_completion_tokens", "tools", "tool_choice", "chat_template_kwargs", "store",
    "parallel_tool_calls", "response_format", "top_logprobs", "metadata", "reasoning_effort"};
inline constexpr std::string_view kTextFields[] = {"prompt", "echo", "suffix", "best_of"};
// llama-server's own names that both OpenAI endpoints take (read_llama_server_fields).
inline constexpr std::string_view kLlamaServerFields[] = {"n_predict", "n_probs", "id_slot", "ignore_eos",
                                                          "json_schema", "n_keep"};

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

// Fields whose neutral value smol-server honours but whose other values it cannot: a 400 for
// those, never a reply that silently ignores what was asked.
inline void reject_unsupported_values(const json& body) {
    if (!absent_or(body, "store", false)) unsupported("store", "must be false or absent: smol-server keeps no completions");
    if (!absent_or(body, "metadata", json::object()))
        unsupported("metadata", "is not supported: smol-server stores no completions to tag");
    if (!absent_or(body, "parallel_tool_calls", true))
        unsupported("parallel_tool_calls", "must be true or absent: the model may call several tools in one turn");
    if (!absent_or(body, "echo", false)) unsupported("echo", "is not supported: the reply holds only the completion");
    if (!absent_or(body, "suffix", "")) unsupported("suffix", "is not supported: SmolLM3 has no fill-in-the-middle tokens");
    if (!absent_or(body, "best_of", 1)) unsupported("best_of", "must be 1 or absent");
    // llama-server keeps the first n_keep tokens when it shifts a full context; smol-server
    // never shifts (a reply ends when the context is full), so only "keep nothing special" (0)
    // and "keep everything" (-1) describe what it does.
    if (!absent_or(body, "n_keep", 0) && !absent_or(body, "n_keep", -1))
        unsupported("n_keep", "must be 0, -1 or absent: smol-server never shifts the context, a reply ends when it is full");
    if (const auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
        if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string())
            reject(400, "'response_format' must be an object with a 'type'", "invalid_value");
        const std::string type = (*it)["type"];
        if (type != "text" && type != "json_object" && type != "json_schema")
            reject(400, "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", found \"" + type + "\"",
                   "invalid_value");
    }
    if (const auto it = body.find("stream_options"); it != body.end() && it->is_object())
        for (const auto& [key, value] : it->items())
            if (key != "include_usage" && !value.is_null()) unsupported("stream_options." + key, "is not supported");
}


// ---- what both completion endpoints read -----------------------------------------------------

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

// OpenAI's logit_bias: {"token id": bias in [-100, 100], ...}.
inline std::vector<std::pair<std::int32_t, float>> read_logit_bias(const json& body, std::size_t n_vocab) {
    std::vector<std::pair<std::int32_t, float>> biases;
    const auto it = body.find("logit_bias");
    if (it == body.end() || it->is_null()) return biases;
    if (!it->is_object())
        reject(400, std::string("'logit_bias' must be an object of token id -> bias, found ") + it->type_name(),
               "invalid_type");
    if (it->size() > 1024) reject(400, "'logit_bias' accepts at most 1024 tokens", "invalid_value");
    for (const auto& [key, value] : it->items()) {
        std::int32_t token = -1;
        const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), token);
        if (error != std::errc{} || end != key.data() + key.size() || token < 0 || std::size_t(token) >= n_vocab)
            reject(400, "'logit_bias' keys must be token ids in [0, " + std::to_string(n_vocab) + "), found \"" + key + "\"",
                   "invalid_value");
        if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0))
            reject(400, "'logit_bias[\"" + key + "\"]' must be a number in [-100, 100], found " + value.dump(),
                   "invalid_value");
        biases.emplace_back(token, value.get<float>());
    }
    return biases;
}

inline constexpr std::size_t kMaxStopBytes = 1024;

// Stop strings as every API bounds them; `field` names them in errors.
inline void check_stop_strings(const std::vector<std::string>& stops, const std::string& field) {
    for (const auto& stop : stops)
        if (stop.empty()) reject(400, "'" + field + "' strings must not be empty", "invalid_value");
    if (stops.size() > 16) reject(400, "'" + field + "' accepts at most 16 strings", "invalid_value");
    // Each token is checked against every stop string, and output is held back while it may
    // still become one: both grow with their length.
    for (const auto& stop : stops)
        if (stop.size() > kMaxStopBytes)
            reject(400, "'" + field + "' strings may be at most " + std::to_string(kMaxStopBytes) +
                            " bytes long, found one of " + std::to_string(stop.size()),
                   "invalid_value");
}

// dry_sequence_breakers: a list of 1 to 16 strings of 1 to 40 bytes (llama-server's field).
inline std::vector<std::string> read_dry_sequence_breakers(const json& value) {
    using Limits = smol::SamplerParams;
    if (!value.is_array() || value.empty() || value.size() > std::size_t(Limits::kMaxDryBreakers))
        reject(400, "'dry_sequence_breakers' must be a list of 1 to " + std::to_string(Limits::kMaxDryBreakers) + " strings",
               "invalid_value");
    std::vector<std::string> breakers;
    for (const json& breaker : value) {
        if (!breaker.is_string() || breaker.get_ref<const std::string&>().empty() ||
            breaker.get_ref<const std::string&>().size() > Limits::kMaxDryBreakerBytes)
            reject(400, "'dry_sequence_breakers' strings must be 1 to " + std::to_string(Limits::kMaxDryBreakerBytes) +
                            " bytes long, found " + breaker.dump().substr(0, 64),
                   "invalid_value");
        breakers.push_back(breaker.get<std::string>());
    }
    return breakers;
}

// samplers: the chain's order, as llama-server takes it: a list of names ("dry", "top_k",
// "typ_p", "top_p", "min_p", "xtc", "temperature", "top_n_sigma", "penalties") or a string of
// their letters ("dkypmxt").
inline std::vector<smol::SamplerStage> read_sampler_order(const json& value) {
    std::vector<smol::SamplerStage> order;
    const auto bad = [&](const std::string& what) {
        reject(400, "'samplers' " + what + "; the names are dry, top_k, typ_p, top_p, min_p, xtc, temperature, "
                        "top_n_sigma and penalties, the letters d, k, y, p, m, x, t, s and e",
               "invalid_value");
    };
    if (value.is_string()) {
        for (const char letter : value.get_ref<const std::string&>()) {
            const auto stage = smol::parse_sampler_stage_letter(letter);
            if (!stage) bad("has an unknown letter '" + std::string(1, letter) + "'");
            order.push_back(*stage);
            if (order.size() > std::size_t(smol::SamplerParams::kMaxStages)) break;
        }
    } else if (value.is_array()) {
        for (const json& name : value) {
            if (!name.is_string()) bad("must be a list of names, found " + name.dump().substr(0, 64));
            const auto stage = smol::parse_sampler_stage(name.get_ref<const std::string&>(), /*alternative_names=*/true);
            if (!stage) bad("names an unknown sampler " + name.dump().substr(0, 64));
            order.push_back(*stage);
            if (order.size() > std::size_t(smol::SamplerParams::kMaxStages)) break;
        }
    } else {
        bad(std::string("must be a list of names or a string of letters, found ") + value.type_name());
    }
    if (order.size() > std::size_t(smol::SamplerParams::kMaxStages))
        bad("lists at most " + std::to_string(smol::SamplerParams::kMaxStages) + " samplers");
    return order;
}

// The chain's order by llama.cpp's names, as /props shows it.
inline json sampler_names(const std::vector<smol::SamplerStage>& order) {
    json names = json::array();
    for (const smol::SamplerStage stage : order) names.push_back(std::string(smol::sampler_stage_name(stage)));
    return names;
}

// llama-server's further samplers: typical-p, top-n-sigma, XTC, DRY, mirostat and the order.
inline void read_chain_sampling(const json& body, smol::SamplerParams& s) {
    using Limits = smol::SamplerParams;
    if (auto v = number_field(body, "typical_p", 0.0, 1.0)) {
        if (*v <= 0.0) reject(400, "'typical_p' must be above 0 (1 turns it off)", "invalid_value");
        s.typical_p = float(*v);
    }
    if (auto v = number_field(body, "top_n_sigma", -1.0, 100.0)) s.top_n_sigma = float(*v);
    if (auto v = number_field(body, "xtc_probability", 0.0, 1.0)) s.xtc_probability = float(*v);
    if (auto v = number_field(body, "xtc_threshold", 0.0, 1.0)) s.xtc_threshold = float(*v);
    if (auto v = number_field(body, "dry_multiplier", 0.0, 100.0)) s.dry_multiplier = float(*v);
    if (auto v = number_field(body, "dry_base", 1.0, 100.0)) s.dry_base = float(*v);
    if (auto v = integer_field(body, "dry_allowed_length", 1, Limits::kMaxDryWindow)) s.dry_allowed_length = int(*v);
    if (auto v = integer_field(body, "dry_penalty_last_n", -1, Limits::kMaxDryWindow)) s.dry_penalty_last_n = int(*v);
    if (const auto it = body.find("dry_sequence_breakers"); it != body.end() && !it->is_null())
        s.dry_sequence_breakers = read_dry_sequence_breakers(*it);
    if (auto v = integer_field(body, "mirostat", 0, 2)) s.mirostat = int(*v);
    if (auto v = number_field(body, "mirostat_tau", 0.0, 100.0)) s.mirostat_tau = float(*v);
    if (auto v = number_field(body, "mirostat_eta", 0.0, 10.0)) s.mirostat_eta = float(*v);
    if (const auto it = body.find("samplers"); it != body.end() && !it->is_null()) s.samplers = read_sampler_order(*it);
}

// The sampling, length, stop, streaming and speculation fields every API shares.
inline void read_sampling(const json& body, ApiRequest& out, std::size_t n_vocab) {
    smol::GenerationParams& params = out.generation.params;
    smol::SamplerParams& s = params.sampling;
    if (auto v = number_field(body, "temperature", 0.0, 100.0)) s.temperature = float(*v);
    if (auto v = number_field(body, "top_p", 0.0, 1.0)) {
        if (*v <= 0.0) reject(400, "'top_p' must be above 0 (1 turns it off)", "invalid_value");
        s.top_p = float(*v);
    }
    if (auto v = integer_field(body, "top_k", 0, 1 << 30)) s.top_k = int(*v);
    if (auto v = number_field(body, "min_p", 0.0, 1.0)) s.min_p = float(*v);
    if (auto v = number_field(body, "presence_penalty", -2.0, 2.0)) s.presence_penalty = float(*v);
    if (auto v = number_field(body, "frequency_penalty", -2.0, 2.0)) s.frequency_penalty = float(*v);
    if (auto v = number_field(body, "repeat_penalty", 0.01, 10.0)) s.repeat_penalty = float(*v);
    if (auto v = integer_field(body, "seed", -1, std::numeric_limits<long long>::max()))
        s.seed = *v < 0 ? SMOL_DEFAULT_SEED : std::uint64_t(*v);
    if (auto v = integer_field(body, "max_tokens", 1, 1 << 30)) params.max_tokens = int(*v);
    s.logit_bias = read_logit_bias(body, n_vocab);
    read_chain_sampling(body, s);

    if (const auto stop = body.find("stop"); stop != body.end() && !stop->is_null()) {
        if (stop->is_string()) {
            params.stop.push_back(stop->get<std::string>());
        } else if (stop->is_array()) {
            for (const auto& s1 : *stop) {
                if (!s1.is_string()) reject(400, "'stop' must be a string or a list of strings", "invalid_type");
                params.stop.push_back(s1.get<std::string>());
            }
        } else {
            reject(400, std::string("'stop' must be a string or a list of strings, found ") + stop->type_name(),
                   "invalid_type");
        }
        check_stop_strings(params.stop, "stop");
    }
    if (auto v = bool_field(body, "stream")) out.stream = *v;
    if (const auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
        if (!so->is_object())
            reject(400, std::string("'stream_options' must be an object, found ") + so->type_name(), "invalid_type");
        if (auto v = bool_field(*so, "include_usage")) out.include_usage = *v;
    }
    if (auto n = integer_field(body, "n", 1, 1); n && *n != 1) reject(400, "only n = 1 is supported", "invalid_value");
    // smol's own: true drafts tokens by prompt lookup for this request, false never drafts for it,
    // null or absent keeps the server's --spec. The reply is the same, only its speed differs.
    out.generation.speculative = bool_field(body, "speculative");
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

// The grammar the output must follow: response_format {"type": "json_object"} (chat only) or
// llama-server's `grammar` (GBNF text); not both.
inline std::string read_output_grammar(const json& body) {
    std::string grammar;
    if (const auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
        if (!it->is_string()) reject(400, std::string("'grammar' must be GBNF text, found ") + it->type_name(), "invalid_type");
        grammar = it->get<std::string>();
        if (grammar.empty()) reject(400, "'grammar' is empty", "invalid_value");
    }
    // llama-server's json_schema: the schema itself, as response_format's json_schema.schema.
    if (const auto it = body.find("json_schema"); it != body.end() && !it->is_null()) {
        if (!grammar.empty() || !absent_or(body, "response_format", json{{"type", "text"}}))
            reject(400, "give one of 'json_schema', 'grammar' and 'response_format', not several", "invalid_value");
        if (!it->is_object())
            reject(400, std::string("'json_schema' must be a JSON schema object, found ") + it->type_name(), "invalid_type");
        return schema_grammar(*it, "json_schema");
    }
    const auto format = body.find("response_format");
    // reject_unsupported_values() checked the shape and the type already.
    if (format == body.end() || format->is_null() || format->value("type", json()) == "text") return grammar;
    if (!grammar.empty()) reject(400, "give either 'grammar' or 'response_format', not both", "invalid_value");
    if (format->value("type", json()) == "json_object") return std::string(smol::text::kJsonObjectGrammar);
    // json_schema: {name, description, schema, strict}; without a schema, any JSON object.
    const auto spec = format->find("json_schema");
    if (spec == format->end() || !spec->is_object())
        reject(400, "'response_format.json_schema' must be an object with the 'schema'", "invalid_value");
    const auto schema = spec->find("schema");
    if (schema == spec->end() || schema->is_null()) return std::string(smol::text::kJsonObjectGrammar);
    return schema_grammar(*schema, "response_format.json_schema.schema");
}

// llama-server's request fields that have an OpenAI twin or a scheduler meaning: n_predict
// (max_tokens when that is absent; -1 is no limit), n_probs (alternatives per token, as
// top_logprobs or the completions API's logprobs), id_slot (the slot to run in, -1 any: its
// cache is the one reused) and ignore_eos (end-of-generation tokens are never sampled, so
// the reply runs to max_tokens, a stop string or a full context). json_schema is read with
// the grammar (read_output_grammar) and n_keep by reject_unsupported_values. Returns n_probs.
inline int read_llama_server_fields(const json& body, ApiRequest& out, const smol::text::Tokenizer& tokenizer) {
    smol::GenerationParams& params = out.generation.params;
    if (auto v = integer_field(body, "n_predict", -1, 1 << 30);
        v && !body.contains("max_tokens") && !body.contains("max_completion_tokens")) {
        if (*v == 0) reject(400, "'n_predict' must be -1 (no limit) or at least 1, found 0", "invalid_value");
        params.max_tokens = int(*v);
    }
    if (auto v = integer_field(body, "id_slot", -1, 1 << 20)) out.generation.slot = int(*v);
    if (bool_field(body, "ignore_eos").value_or(false)) {
        if (!out.grammar.empty())
            reject(400, "'ignore_eos' cannot be combined with a grammar, json_schema or response_format: the output "
                        "could never end where they say it is complete", "invalid_value");
        // Finite, as every bias must be; no logit comes near it, so these tokens' probability is 0.
        for (const std::int32_t id : tokenizer.end_of_generation_ids())
            params.sampling.logit_bias.emplace_back(id, -1e30f);
    }
    return int(integer_field(body, "n_probs", 0, smol::kMaxTopLogprobs).value_or(0));
}

// Counts the prompt; a prompt that leaves no room to generate (smol::prompt_fits, the rule the
// scheduler applies too) is a 400.
inline void check_prompt_fits(ApiRequest& out, int context) {
    const std::size_t n_prompt = out.generation.prompt.size();
    out.prompt_tokens = int(n_prompt);
    if (!smol::prompt_fits(n_prompt, context))
        reject(400, smol::prompt_too_long_message(n_prompt, context), "context_length_exceeded");
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

// ---- chat completion requests -----------------------------------------------------------------

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

// Content given as a list of parts ([{"type": "text", "text": ...}]) becomes one string, since
// the template renders only string content.
inline json normalize_messages(const json& body) {
    const auto it = body.find("messages");
    if (it == body.end()) reject(400, "'messages' is required: a list of {role, content} objects", "missing_messages");
    if (!it->is_array()) reject(400, std::string("'messages' must be an array, found ") + it->type_name(), "invalid_type");
    if (it->empty()) reject(400, "'messages' is empty; at least one message is needed", "invalid_value");
    json messages = json::array();
    for (std::size_t i = 0; i < it->size(); ++i) {
        json m = (*it)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) reject(400, where + " must be an object, found " + m.type_name(), "invalid_type");
        const auto role = m.find("role");
        if (role == m.end()) reject(400, where + " has no 'role'", "missing_role");
        if (!role->is_string()) reject(400, where + ".role must be a string, found " + role->type_name(), "invalid_type");
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "user" && r != "assistant" && r != "tool")
            reject(400, where + ".role '" + r + "' is unknown; expected system, user, assistant or tool", "invalid_role");
        auto content = m.find("content");
        // An assistant turn that only called tools may leave its content out.
        if (content == m.end() && r == "assistant" && m.contains("tool_calls")) content = m.emplace("content", nullptr).first;
        if (content == m.end()) reject(400, where + " has no 'content'", "missing_content");
        if (content->is_array()) {
            std::string joined;
            for (const auto& part : *content) {
                // value() with a json default: a part whose "type" is not a string is a 400, not a
                // type_error (a 500).
                if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
                    !part["text"].is_string())
                    reject(400, where + ".content: only text parts {\"type\": \"text\", \"text\": ...} are supported",
                           "invalid_content");
                joined += part["text"].get<std::string>();
            }
            *content = joined;
        } else if (!content->is_string() && !content->is_null()) {
            reject(400, where + ".content must be a string, a list of text parts or null, found " +
                            content->type_name(),
                   "invalid_type");
        }
        messages.push_back(std::move(m));
    }
    return messages;
}

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

// ---- reasoning budgets ------------------------------------------------------------------------

// The thinking budgets the named efforts stand for (chat completions' reasoning_effort, the
// Responses API's reasoning.effort); "none" and "minimal" turn thinking off.
inline constexpr int kLowEffortBudget = 1024;
inline constexpr int kMediumEffortBudget = 4096;
inline constexpr int kHighEffortBudget = 16384;

// The budget an effort names, in `field`'s terms; nullopt when absent or null.
inline std::optional<int> effort_budget(const json& object, const char* name, const std::string& field) {
    const auto it = object.find(name);
    if (it == object.end() || it->is_null()) return std::nullopt;
    const std::string effort = it->is_string() ? it->get<std::string>() : "";
    if (effort == "none" || effort == "minimal") return 0;
    if (effort == "low") return kLowEffortBudget;
    if (effort == "medium") return kMediumEffortBudget;
    if (effort == "high") return kHighEffortBudget;
    reject(400, "'" + field + "' must be \"none\", \"minimal\", \"low\", \"medium\" or \"high\", found " +
                    it->dump().substr(0, 64),
           "invalid_value");
}

// A request's reasoning budget (its own, else the server's --reasoning-budget) into its
// generation; budget 0 renders the no-think prompt, as llama.cpp does, unless the request turned
// thinking on itself (then the engine closes the block at once).
inline void apply_reasoning_budget(std::optional<int> asked, int server_default, bool thinking_asked,
                                   smol::ChatOptions& chat, ApiRequest& out) {
    const int budget = asked.value_or(server_default);
    out.generation.params.reasoning_budget = budget;
    if (budget == 0 && !thinking_asked) chat.enable_thinking = false;
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

// OpenAI's `tools` ([{"type": "function", "function": {name, description, parameters}}]) and
// `tool_choice`. SmolLM3's template lists the function objects themselves (its xml_tools).
// Returns the grammar that forces a call when tool_choice is "required" or names a function,
// else "". `offered` (when given) receives the functions a call may name under "auto".
inline std::string read_tools(const json& body, smol::ChatOptions& chat, json* offered = nullptr) {
    json functions = json::array();
    if (const auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
        if (!tools->is_array())
            reject(400, std::string("'tools' must be a list of tool definitions, found ") + tools->type_name(),
                   "invalid_type");
        if (tools->size() > 128) reject(400, "'tools' accepts at most 128 tools", "invalid_value");
        for (std::size_t i = 0; i < tools->size(); ++i) {
            const json& tool = (*tools)[i];
            const std::string where = "tools[" + std::to_string(i) + "]";
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
            functions.push_back(*function);
        }
    }
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

// chat_template_kwargs into the template's options: enable_thinking, and tools given as
// xml_tools or python_tools. Whether thinking was asked for explicitly.
inline bool read_template_kwargs(const json& body, smol::ChatOptions& chat) {
    bool thinking_asked = false;
    if (const auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
        if (!kw->is_object())
            reject(400, std::string("'chat_template_kwargs' must be an object, found ") + kw->type_name(), "invalid_type");
        if (auto think = bool_field(*kw, "enable_thinking")) {
            chat.enable_thinking = *think;
            thinking_asked = *think;
        }
        // SmolLM3's template lists tools given as xml_tools or python_tools in its system turn.
        for (const char* name : {"xml_tools", "python_tools"}) {
            const auto tools = kw->find(name);
            if (tools == kw->end() || tools->is_null()) continue;
            if (!tools->is_array())
                reject(400, std::string("'chat_template_kwargs.") + name + "' must be a list of tool definitions, found " +
                                tools->type_name(),
                       "invalid_type");
            (std::string_view(name) == "xml_tools" ? chat.xml_tools : chat.python_tools) = *tools;
        }
    }
    return thinking_asked;
}

// The fields llama-server's /apply-template reads: the conversation and what shapes its template.
inline constexpr std::string_view kApplyTemplateFields[] = {"messages", "chat_template_kwargs", "tools", "tool_choice"};

// llama-server's POST /apply-template: the prompt a chat request with these messages, template
// options and tools would run, as text (rendered as parse_chat_request renders it).
inline json apply_template(const json& body) {
    reject_unlisted_fields(body, {kApplyTemplateFields});
    const json messages = normalize_messages(body);
    smol::ChatOptions chat;
    read_template_kwargs(body, chat);
    read_tools(body, chat);
    return json{{"prompt", render_chat_text(messages, chat).text}};
}

inline ApiRequest parse_chat_request(const json& body, const smol::text::Tokenizer& tokenizer, int context,
                                     const RequestDefaults& defaults = {}) {
    reject_unlisted_fields(body, {kSamplingFields, kChatFields, kLlamaServerFields});
    reject_unsupported_values(body);
    ApiRequest out;
    out.generation.params.sampling = defaults.sampling;
    const json messages = normalize_messages(body);

    smol::ChatOptions chat;
    const bool thinking_asked = read_template_kwargs(body, chat);
    json offered;  // the tools a call may name under tool_choice "auto"
    const std::string forced_call = read_tools(body, chat, &offered);
    // A grammar holds the answer (or, under "auto", each call), after any reasoning.
    out.grammar = read_output_grammar(body);
    if (!forced_call.empty()) {
        if (!out.grammar.empty()) reject(400, "a forced tool call cannot be combined with response_format or grammar", "invalid_value");
        out.grammar = forced_call;
    }
    lazy_call_grammar(offered, "tools[].function.parameters", out);
    const std::optional<int> effort = effort_budget(body, "reasoning_effort", "reasoning_effort");
    if (effort == 0 && thinking_asked)
        reject(400, "'reasoning_effort' \"" + body["reasoning_effort"].get<std::string>() +
                        "\" turns thinking off, but 'chat_template_kwargs.enable_thinking' is true",
               "invalid_value");
    apply_reasoning_budget(effort, defaults.reasoning_budget, thinking_asked, chat, out);
    smol::GenerationParams& params = out.generation.params;
    // Calls are looked for whenever the template listed tools (here or in chat_template_kwargs).
    params.parse_tool_calls = chat.xml_tools.is_array() && !chat.xml_tools.empty();
    read_sampling(body, out, tokenizer.n_vocab());
    if (auto v = integer_field(body, "max_completion_tokens", 1, 1 << 30)) params.max_tokens = int(*v);  // the newer name wins
    out.logprobs = bool_field(body, "logprobs").value_or(false);
    auto top_logprobs = integer_field(body, "top_logprobs", 0, smol::kMaxTopLogprobs);
    if (top_logprobs && !out.logprobs) reject(400, "'top_logprobs' needs \"logprobs\": true", "invalid_value");
    if (const int n_probs = read_llama_server_fields(body, out, tokenizer); n_probs > 0) {
        if (body.contains("logprobs") && !out.logprobs)
            reject(400, "'n_probs' asks for log-probabilities and \"logprobs\" is false", "invalid_value");
        if (top_logprobs && *top_logprobs != n_probs)
            reject(400, "'n_probs' and 'top_logprobs' differ; give one", "invalid_value");
        out.logprobs = true;
        top_logprobs = n_probs;
    }
    params.logprobs = out.logprobs ? int(top_logprobs.value_or(0)) : -1;

    // Rendering comes last, so a bad field is reported even when the prompt is also too long.
    render_prompt(messages, chat, tokenizer, out);
    check_prompt_fits(out, context);

    return out;
}

// ---- text completion requests (/v1/completions) -----------------------------------------------

// A /v1/completions body: `prompt` as a string (special tokens such as <|im_start|> are parsed)
// or as token ids, continued as it is: no chat template, and <think> blocks stay in the text.
// `logprobs` is the number of alternatives per token here, as in OpenAI's completions API.
inline ApiRequest parse_text_request(const json& body, const smol::text::Tokenizer& tokenizer, int context,
                                     const RequestDefaults& defaults = {}) {
    reject_unlisted_fields(body, {kSamplingFields, kTextFields, kLlamaServerFields});
    reject_unsupported_values(body);
    ApiRequest out;
    out.generation.params.sampling = defaults.sampling;
    const auto prompt = body.find("prompt");
    if (prompt == body.end() || prompt->is_null())
        reject(400, "'prompt' is required: a string or a list of token ids", "missing_prompt");
    json text = *prompt;
    if (text.is_array() && text.size() == 1 && text[0].is_string()) text = text[0];  // one prompt in a list
    std::vector<std::int32_t>& ids = out.generation.prompt;
    if (text.is_string()) {
        ids = tokenizer.encode(text.get<std::string>(), /*parse_special=*/true);
    } else if (text.is_array() && (text.empty() || text[0].is_number())) {
        for (std::size_t i = 0; i < text.size(); ++i) {
            const json& id = text[i];
            if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= (long long)tokenizer.n_vocab())
                reject(400,
                       "'prompt[" + std::to_string(i) + "]' must be a token id in [0, " +
                           std::to_string(tokenizer.n_vocab()) + "), found " + id.dump(),
                       "invalid_value");
            ids.push_back(std::int32_t(id.get<long long>()));
        }
    } else if (text.is_array()) {
        unsupported("prompt", "as a list of several prompts is not supported: send one request per prompt");
    } else {
        reject(400, std::string("'prompt' must be a string or a list of token ids, found ") + text.type_name(),
               "invalid_type");
    }
    if (ids.empty()) reject(400, "'prompt' is empty; at least one token is needed to continue from", "invalid_value");
    read_sampling(body, out, tokenizer.n_vocab());
    smol::GenerationParams& params = out.generation.params;
    params.split_reasoning = false;
    out.grammar = read_output_grammar(body);
    auto logprobs = integer_field(body, "logprobs", 0, smol::kMaxTopLogprobs);
    if (const int n_probs = read_llama_server_fields(body, out, tokenizer); n_probs > 0) {
        if (logprobs && *logprobs != n_probs) reject(400, "'n_probs' and 'logprobs' differ; give one", "invalid_value");
        logprobs = n_probs;
    }
    out.logprobs = logprobs.has_value();
    params.logprobs = logprobs ? int(*logprobs) : -1;
    check_prompt_fits(out, context);
    return out;
}

inline json usage_json(const smol::GenerationUsage& u) {
    return json{{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens},
                {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
                {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

// llama.cpp's "timings" block, which chat front ends read for tokens/s.
inline json timings_json(const smol::GenerationUsage& u) {
    return json{{"cache_n", u.cached_tokens},
                {"prompt_n", u.prompt_evaluated()},
                {"prompt_ms", u.prompt_ms},
                {"prompt_per_second", u.prompt_tokens_per_second()},
                {"predicted_n", u.completion_tokens},
                {"predicted_ms", u.generation_ms},
                {"predicted_per_second", u.tokens_per_second()}};
}


// One tool call as the OpenAI API shapes it in message.tool_calls (delta.tool_calls adds "index").
inline json tool_call_json(const smol::ToolCall& call) {
    return json{{"id", "call_" + uuid_v7()},
                {"type", "function"},
                {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// What every object of one reply carries.
struct ReplyIds {
    std::string id;  // chatcmpl-...
    std::string model;
    std::int64_t created = 0;
};

// One chat.completion.chunk of a streamed reply; finish_reason null until the last.
inline json chunk_json(const ReplyIds& ids, json delta, const char* finish_reason) {
    json choice = {{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", nullptr}};
    if (finish_reason) choice["finish_reason"] = finish_reason;
    return json{{"id", ids.id},
                {"object", "chat.completion.chunk"},
                {"created", ids.created},
                {"model", ids.model},
                {"choices", json::array({std::move(choice)})}};
}

// OpenAI's logprobs.content: per generated token its text, log-probability, UTF-8 bytes (a
// token may hold part of a character) and the most likely alternatives.
inline json logprobs_json(std::span<const smol::TokenLogprob> entries, const smol::text::Tokenizer& tokenizer) {
    const auto token_fields = [&](std::int32_t id, float logprob) {
        const std::string& bytes = tokenizer.token_bytes(id);
        json byte_values = json::array();
        for (const char c : bytes) byte_values.push_back(int(static_cast<unsigned char>(c)));
        return json{{"token", bytes}, {"logprob", logprob}, {"bytes", std::move(byte_values)}};
    };
    json content = json::array();
    for (const smol::TokenLogprob& entry : entries) {
        json item = token_fields(entry.token, entry.logprob);
        json top = json::array();
        for (const smol::TokenAlternative& alt : entry.top) top.push_back(token_fields(alt.token, alt.logprob));
        item["top_logprobs"] = std::move(top);
        content.push_back(std::move(item));
    }
    return content;
}

// A choice's "logprobs": {content, refusal} when asked for, else null.
inline json choice_logprobs(bool requested, json content) {
    if (!requested) return nullptr;
    return json{{"content", std::move(content)}, {"refusal", nullptr}};
}

// The whole chat.completion object of a reply that finished (not cancelled, not failed).
// logprobs: choice_logprobs().
inline json completion_json(const ReplyIds& ids, const std::string& reasoning, const std::string& content,
                            json tool_calls, smol::FinishReason finish, const smol::GenerationUsage& usage,
                            json logprobs = nullptr) {
    json message = {{"role", "assistant"}, {"content", content}};
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) {
        if (content.empty()) message["content"] = nullptr;  // as OpenAI sends a call-only reply
        message["tool_calls"] = std::move(tool_calls);
    }
    json choice = {{"index", 0},
                   {"message", std::move(message)},
                   {"logprobs", std::move(logprobs)},
                   {"finish_reason", openai_finish_reason(finish)}};
    return json{{"id", ids.id},
                {"object", "chat.completion"},
                {"created", ids.created},
                {"model", ids.model},
                {"choices", json::array({std::move(choice)})},
                {"usage", usage_json(usage)},
                {"timings", timings_json(usage)}};
}

// The completions API's logprobs object for a run of tokens: parallel lists of the tokens, their
// log-probabilities, their alternatives ({token: logprob}) and their byte offsets in the
// completion, the first being `offset`.
inline json text_logprobs_json(std::span<const smol::TokenLogprob> entries, const smol::text::Tokenizer& tokenizer,
                               std::size_t offset) {
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
    for (const smol::TokenLogprob& entry : entries) {
        const std::string& bytes = tokenizer.token_bytes(entry.token);
        tokens.push_back(bytes);
        token_logprobs.push_back(entry.logprob);
        json alternatives = json::object();
        for (const smol::TokenAlternative& alt : entry.top) alternatives[tokenizer.token_bytes(alt.token)] = alt.logprob;
        top.push_back(std::move(alternatives));
        offsets.push_back(offset);
        offset += bytes.size();
    }
    return json{{"tokens", std::move(tokens)},
                {"token_logprobs", std::move(token_logprobs)},
                {"top_logprobs", std::move(top)},
                {"text_offset", std::move(offsets)}};
}

// One text_completion object: the whole reply (with usage) or, streamed, one chunk of it.
inline json text_completion_json(const ReplyIds& ids, const std::string& text, const char* finish_reason,
                                 json logprobs = nullptr) {
    json choice = {{"index", 0}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", nullptr}};
    if (finish_reason) choice["finish_reason"] = finish_reason;
    return json{{"id", ids.id},
                {"object", "text_completion"},
                {"created", ids.created},
                {"model", ids.model},
                {"choices", json::array({std::move(choice)})}};
}

}  // namespace smol_server
