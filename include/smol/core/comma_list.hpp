#pragma once
// Comma-separated command-line values ("512,1024", "1,2,3"), as the programs' list flags take them
// (smol-bench -p/-n/-t, smol-logits --tokens). One parser so every flag rejects the same inputs
// with the same message: the flag, the accepted range and the offending item.

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "smol/core/error.hpp"

namespace smol {

// The items between commas, empty ones included ("a,,b" -> {"a", "", "b"}; "" -> {""}), so a
// stray comma reaches the caller's validation instead of disappearing.
inline std::vector<std::string> split_commas(std::string_view text) {
    std::vector<std::string> items;
    std::size_t at = 0;
    while (true) {
        const std::size_t comma = text.find(',', at);
        items.emplace_back(text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
        if (comma == std::string_view::npos) return items;
        at = comma + 1;
    }
}

// Decimal integers in [min_value, max_value], one per comma-separated item. Every item must be a
// whole number with nothing around it: no spaces, no sign other than a leading '-', no empty
// items; otherwise throws smol::Error naming `flag`, what the items are (`item_name`, e.g.
// "token ids") and the offending item.
inline std::vector<std::int64_t> parse_int_list(std::string_view flag, std::string_view text, std::int64_t min_value,
                                                std::int64_t max_value, std::string_view item_name = "integers") {
    std::vector<std::int64_t> values;
    for (const std::string& item : split_commas(text)) {
        std::int64_t v = 0;
        const char* end = item.data() + item.size();
        const auto [stop, error] = std::from_chars(item.data(), end, v);
        if (item.empty() || error != std::errc() || stop != end || v < min_value || v > max_value)
            fail(flag, ": expected comma-separated ", item_name, " from ", min_value, " to ", max_value, ", found '", item,
                 "' in '", text, "'");
        values.push_back(v);
    }
    return values;
}

}  // namespace smol
