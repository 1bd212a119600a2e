#pragma once
// How deeply a JSON text nests and how many values it holds, found by one pass over its bytes
// before any parser builds it.
//
// nlohmann's parser builds nesting without recursion, but copying a parsed value, dump(), ==,
// and every walker of smol's (schema compiler, template writer, tool-call writer) recurse once
// per level: a 3 MB body of '[' is 1.5 million frames, past any thread's stack. And a parsed
// value costs 10 to 30 times its text ("[{},{},...]" most). So every JSON text that comes from
// outside (request bodies, files named on a command line, model output read as a tool call, Hub
// listings) is measured here first and refused past the caps; whatever parses after that nests
// at most max_depth deep, and no recursion over it can overflow.

#include <cstddef>
#include <string>
#include <string_view>

namespace smol {

struct JsonLimits {
    // Arrays and objects inside one another, the outermost counted as 1. OpenAI-style requests
    // with tool schemas nest about 12 deep.
    int max_depth = 64;
    // Values (members and elements, containers included), counted from the separators: a
    // 131,072-token prompt sent as ids is 131,073.
    std::size_t max_values = std::size_t(1) << 18;
};

// Why a JSON text is past `limits` ("" when it is not): the cap and the byte offset where it was
// passed, after `what` ("the request body"). Brackets and commas inside strings are text. Exact
// for valid JSON; for invalid JSON the parser that runs next reports the real error.
inline std::string json_over_limits(std::string_view text, std::string_view what, const JsonLimits& limits = {}) {
    int depth = 0;
    std::size_t values = 1;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;  // the escaped byte cannot end the string
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > limits.max_depth)
                return std::string(what) + " nests arrays and objects more than " + std::to_string(limits.max_depth) +
                       " deep (at byte " + std::to_string(i) + "); the limit is " + std::to_string(limits.max_depth);
            ++values;
        } else if (c == ']' || c == '}') {
            if (depth > 0) --depth;
        } else if (c == ',') {
            if (++values > limits.max_values)
                return std::string(what) + " holds more than " + std::to_string(limits.max_values) +
                       " values (at byte " + std::to_string(i) + "); the limit is " +
                       std::to_string(limits.max_values);
        }
    }
    return "";
}

}  // namespace smol
