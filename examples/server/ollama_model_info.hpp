#pragma once
// What ollama's /api/tags, /api/show and /api/ps say of the loaded model, and the /api/show body
// checked. ollama_routes.hpp serves them.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "api_request.hpp"
#include "smol/smol.hpp"

namespace smol_server {

// The ollama release whose API this follows (think and message.thinking, format as a JSON schema,
// tool_name): /api/version gives it, so clients that check for features by version find them.
inline constexpr const char* kOllamaApiVersion = "0.9.0";

// llama.cpp's names for general.file_type (its llama_ftype), as ollama's quantization_level.
inline std::string file_type_name(const smol::gguf::File& file) {
    const smol::gguf::Value* v = file.find("general.file_type");
    const std::optional<std::int64_t> type = v ? v->as_int() : std::nullopt;
    if (!type) return "unknown";
    static constexpr std::pair<int, const char*> kNames[] = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},     {3, "Q4_1"},     {7, "Q8_0"},    {8, "Q5_0"},    {9, "Q5_1"},
        {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},  {13, "Q3_K_L"},  {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"},
        {17, "Q5_K_M"}, {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},  {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},
        {24, "IQ1_S"},  {25, "IQ4_NL"}, {26, "IQ3_S"},   {27, "IQ3_M"},   {28, "IQ2_S"},  {29, "IQ2_M"},  {30, "IQ4_XS"},
        {31, "IQ1_M"},  {32, "BF16"},   {36, "TQ1_0"},   {37, "TQ2_0"}};
    for (const auto& [id, name] : kNames)
        if (id == *type) return name;
    return "file type " + std::to_string(*type);
}

// A parameter count as ollama writes parameter_size: "3.1B", "137.0M", "52.3K".
inline std::string parameter_size(std::uint64_t n) {
    char text[32];
    if (n >= 1'000'000'000) std::snprintf(text, sizeof text, "%.1fB", double(n) / 1e9);
    else if (n >= 1'000'000) std::snprintf(text, sizeof text, "%.1fM", double(n) / 1e6);
    else if (n >= 1'000) std::snprintf(text, sizeof text, "%.1fK", double(n) / 1e3);
    else std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(n));
    return text;
}

// `details` of /api/tags, /api/show and /api/ps.
inline json ollama_model_details(const smol::Engine& engine) {
    const smol::ModelInfo& info = engine.info();
    return json{{"parent_model", ""},
                {"format", "gguf"},
                {"family", info.architecture},
                {"families", json::array({info.architecture})},
                {"parameter_size", parameter_size(info.n_params)},
                {"quantization_level", file_type_name(engine.model().file())}};
}

// /api/show's model_info: the file's metadata, each string and number as it is, and the arrays
// of up to 64 numbers; longer arrays (the vocabulary, merges, token types) are given empty, as
// ollama gives them without `verbose`, so the reply stays small. The chat template is /api/show's
// `template`.
inline json ollama_model_info(const smol::Engine& engine) {
    using smol::gguf::ValueType;
    json out = json::object();
    for (const auto& [key, value] : engine.model().file().metadata()) {
        if (key == "tokenizer.chat_template") continue;
        if (value.is_array()) {
            const bool numbers = value.element_type() != ValueType::String && value.element_type() != ValueType::Array;
            json list = json::array();
            if (numbers && value.size() <= 64) {
                const bool integers = value.element_type() != ValueType::F32 && value.element_type() != ValueType::F64;
                if (integers)
                    for (const std::int64_t v : value.ints()) list.push_back(v);
                else
                    for (const double v : value.floats()) list.push_back(v);
            }
            out[key] = std::move(list);
        } else if (const auto text = value.as_string()) {
            out[key] = std::string(*text);
        } else if (const auto flag = value.as_bool()) {
            out[key] = *flag;
        } else if (value.type() == ValueType::F32 || value.type() == ValueType::F64) {
            out[key] = *value.as_float();
        } else if (const auto i = value.as_int()) {
            out[key] = *i;
        } else if (const auto u = value.as_uint()) {
            out[key] = *u;
        }
    }
    if (!out.contains("general.parameter_count")) out["general.parameter_count"] = engine.info().n_params;
    return out;
}

// /api/show's `parameters`: the sampler's defaults, one "name value" line each, as ollama lists a
// model's PARAMETER lines.
inline std::string ollama_parameters(int context) {
    const smol::SamplerParams d;
    char text[512];
    std::snprintf(text, sizeof text,
                  "num_ctx %d\ntemperature %g\ntop_k %d\ntop_p %g\nmin_p %g\nrepeat_penalty %g\nrepeat_last_n %d\n"
                  "presence_penalty %g\nfrequency_penalty %g",
                  context, double(d.temperature), d.top_k, double(d.top_p), double(d.min_p), double(d.repeat_penalty),
                  d.penalty_last_n, double(d.presence_penalty), double(d.frequency_penalty));
    return text;
}

// A /api/show body: `model` (or the older `name`) names the model; smol-server answers for its
// one model whatever the name. `verbose` lists the vocabulary in model_info, which smol-server
// does not send (the reply would be megabytes).
inline void check_show_request(const json& body) {
    check_fields(body, {"model", "name", "verbose"}, "");
    optional_string(body, "model");
    optional_string(body, "name");
    if (bool_field(body, "verbose").value_or(false))
        unsupported("verbose", "as true is not supported: the vocabulary and merges would make the reply megabytes");
}

}  // namespace smol_server
