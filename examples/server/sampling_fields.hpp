#pragma once
// The sampling, length, stop, streaming and speculation fields every API that generates reads
// (OpenAI's names; ollama's `options` and Anthropic's top-level fields use them too), with
// llama-server's sampler extensions: typical_p, top_n_sigma, XTC, DRY, mirostat and the chain's
// order (`samplers`).

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "api_request.hpp"

namespace smol_server {

inline constexpr std::size_t kMaxLogitBiasEntries = 1024;

// One bias of logit_bias: a number in [-100, 100] added to the token's logit, or llama-server's
// `false` (the token is never sampled; finite, as every bias must be, and below any logit).
inline float logit_bias_value(const json& value, const std::string& where) {
    if (value.is_boolean() && !value.get<bool>()) return -1e30f;
    if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0))
        reject(400, "'" + where + "' must be a number in [-100, 100] or false, found " + value.dump().substr(0, 64),
               "invalid_value");
    return value.get<float>();
}

// logit_bias as OpenAI gives it, {"token id": bias, ...}, or as llama-server also takes it, a
// list of [token id or text, bias] pairs, where a text's bias goes to each of its tokens.
inline std::vector<std::pair<std::int32_t, float>> read_logit_bias(const json& body, const smol::text::Tokenizer& tokenizer) {
    std::vector<std::pair<std::int32_t, float>> biases;
    const auto it = body.find("logit_bias");
    if (it == body.end() || it->is_null()) return biases;
    const std::size_t n_vocab = tokenizer.n_vocab();
    const auto add = [&](std::int32_t token, float bias) {
        if (biases.size() == kMaxLogitBiasEntries)
            reject(400, "'logit_bias' accepts at most " + std::to_string(kMaxLogitBiasEntries) + " tokens", "invalid_value");
        biases.emplace_back(token, bias);
    };
    if (it->is_object()) {
        for (const auto& [key, value] : it->items()) {
            std::int32_t token = -1;
            const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), token);
            if (error != std::errc{} || end != key.data() + key.size() || token < 0 || std::size_t(token) >= n_vocab)
                reject(400, "'logit_bias' keys must be token ids in [0, " + std::to_string(n_vocab) + "), found \"" + key + "\"",
                       "invalid_value");
            add(token, logit_bias_value(value, "logit_bias[\"" + key + "\"]"));
        }
        return biases;
    }
    if (!it->is_array())
        reject(400, std::string("'logit_bias' must be an object of token id -> bias or a list of [token, bias] pairs, found ") +
                        it->type_name(),
               "invalid_type");
    if (it->size() > kMaxLogitBiasEntries)
        reject(400, "'logit_bias' accepts at most " + std::to_string(kMaxLogitBiasEntries) + " tokens", "invalid_value");
    for (std::size_t i = 0; i < it->size(); ++i) {
        const json& pair = (*it)[i];
        const std::string where = "logit_bias[" + std::to_string(i) + "]";
        if (!pair.is_array() || pair.size() != 2)
            reject(400, "'" + where + "' must be a [token id or text, bias] pair, found " + pair.dump().substr(0, 64),
                   "invalid_value");
        const float bias = logit_bias_value(pair[1], where + "[1]");
        if (pair[0].is_string()) {
            const std::string& text = pair[0].get_ref<const std::string&>();
            if (text.empty() || text.size() > 256)
                reject(400, "'" + where + "[0]' text must be 1 to 256 bytes long, found " + std::to_string(text.size()),
                       "invalid_value");
            for (const std::int32_t token : tokenizer.encode(text, /*parse_special=*/false)) add(token, bias);
        } else if (pair[0].is_number_integer() && pair[0].get<long long>() >= 0 &&
                   std::size_t(pair[0].get<long long>()) < n_vocab) {
            add(std::int32_t(pair[0].get<long long>()), bias);
        } else {
            reject(400,
                   "'" + where + "[0]' must be a token id in [0, " + std::to_string(n_vocab) + ") or a text, found " +
                       pair[0].dump().substr(0, 64),
                   "invalid_value");
        }
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

// How an API gives its stop strings: OpenAI's `stop` as one string or a list, Anthropic's
// `stop_sequences` as a list only.
enum class StopShape { string_or_list, list };

// The stop strings in `field`, added to `stops` and bounded (check_stop_strings).
inline void read_stop_strings(const json& body, const char* field, StopShape shape, std::vector<std::string>& stops) {
    const auto it = body.find(field);
    if (it == body.end() || it->is_null()) return;
    const bool one_allowed = shape == StopShape::string_or_list;
    const std::string expected = one_allowed ? "a string or a list of strings" : "a list of strings";
    const std::string name = std::string("'") + field + "'";
    if (one_allowed && it->is_string()) {
        stops.push_back(it->get<std::string>());
    } else if (it->is_array()) {
        for (const json& stop : *it) {
            if (!stop.is_string())
                reject(400, name + (one_allowed ? " must be " + expected : " must hold only strings"), "invalid_type");
            stops.push_back(stop.get<std::string>());
        }
    } else {
        reject(400, name + " must be " + expected + ", found " + it->type_name(), "invalid_type");
    }
    check_stop_strings(stops, field);
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
inline void read_sampling(const json& body, ApiRequest& out, const smol::text::Tokenizer& tokenizer) {
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
    s.logit_bias = read_logit_bias(body, tokenizer);
    read_chain_sampling(body, s);

    read_stop_strings(body, "stop", StopShape::string_or_list, params.stop);
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

}  // namespace smol_server
