#pragma once
// How long a request may think: the named efforts (chat completions' reasoning_effort, the
// Responses API's reasoning.effort) as thinking budgets, and a budget applied to a request.

#include <optional>
#include <string>

#include "api_request.hpp"

namespace smol_server {

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

}  // namespace smol_server
