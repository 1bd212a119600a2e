#pragma once
// Text a client controls, on its way out of the server: JSON replies (which may quote what the
// client sent) and log lines (which name its path, method and address). Neither may carry bytes
// that break what reads them.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace smol_server {

// Messages may quote what the client sent, invalid UTF-8 included; it goes out as U+FFFD.
inline std::string to_wire(const nlohmann::ordered_json& body) {
    return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// One server-sent event without a name (the OpenAI completion streams, llama-server's native one).
inline std::string sse(const nlohmann::ordered_json& data) { return "data: " + to_wire(data) + "\n\n"; }

// One server-sent event named by its data's "type" (Anthropic's and OpenAI Responses' streams):
// the name on an `event:` line, then the data.
inline std::string named_sse(const nlohmann::ordered_json& data) {
    return "event: " + data["type"].get<std::string>() + "\ndata: " + to_wire(data) + "\n\n";
}

// Text from a request (its path, method, a header) as it may go into the log: bytes outside
// printable ASCII as \xHH, so a client cannot forge log lines or send terminal escapes, and at
// most 256 bytes of it.
inline std::string loggable(std::string_view text) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (const char c : text.substr(0, 256)) {
        const auto b = static_cast<unsigned char>(c);
        if (b >= 0x20 && b < 0x7f && b != '\\') {
            out += c;
        } else {
            out += "\\x";
            out += hex[b >> 4];
            out += hex[b & 15];
        }
    }
    if (text.size() > 256) out += "...";
    return out;
}

}  // namespace smol_server
