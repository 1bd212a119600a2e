#pragma once
// The one way smol turns JSON text into a value: every text, whatever it came from (a request
// body, JSON inside a string field such as tool-call arguments, a schema or chat file named on a
// command line, a model's tool call, a Hub listing, a server's reply to a client), is measured
// against the depth and value caps (json_bounds.hpp) before nlohmann's parser builds anything.
// A CI check (scripts/check-json-parsing.sh) fails on a JSON parse anywhere else.

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "smol/core/error.hpp"
#include "smol/core/json_bounds.hpp"

namespace smol {

// A JSON text refused: past the caps (`over_limits`), or not JSON at all.
class JsonError : public Error {
public:
    JsonError(const std::string& message, bool over_limits) : Error(message), over_limits(over_limits) {}
    bool over_limits;
};

// `text` parsed as Json (nlohmann::json or ordered_json), or a JsonError naming `what` ("the
// request body", "input[3].arguments") and, for a text past the caps, the byte where it passed
// them. Numbers out of double's range (1e999) are errors too, not infinities.
template <class Json = nlohmann::json>
Json parse_json(std::string_view text, std::string_view what, const JsonLimits& limits = {}) {
    if (std::string why = json_over_limits(text, what, limits); !why.empty()) throw JsonError(why, true);
    try {
        return Json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
        throw JsonError(std::string(what) + " is not valid JSON: " + e.what(), false);
    }
}

// The same, for callers to whom a refused text is simply not a value (a model's malformed
// tool call): nullopt instead of the error.
template <class Json = nlohmann::json>
std::optional<Json> try_parse_json(std::string_view text, const JsonLimits& limits = {}) {
    if (!json_over_limits(text, "", limits).empty()) return std::nullopt;
    Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) return std::nullopt;
    return value;
}

}  // namespace smol
