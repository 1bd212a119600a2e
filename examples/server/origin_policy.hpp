#pragma once
// Which browsers' requests the server answers, from the options: the Host names a loopback
// server answers to (against DNS rebinding) and the page origins --cors lets read replies. Both
// the routes and the connection gate's own refusals (gate_setup.hpp) ask here.

#include <string>
#include <string_view>

#include "http_framing.hpp"
#include "server_options.hpp"

namespace smol_server {

// Whether a request's Host header names this server: always when it listens on a non-loopback
// address (it is then reached by names the server cannot know); on loopback, localhost,
// 127.0.0.1 and [::1] with any port, and the --allowed-hosts names. A request without Host
// (HTTP/1.0, some tools) is no browser's and passes.
inline bool host_allowed(const ServerOptions& options, std::string_view host_header) {
    if (host_header.empty() || !http::is_loopback_host(options.host)) return true;
    const std::string name = http::host_name_of(host_header);
    if (name == "localhost" || name == "127.0.0.1" || name == "[::1]") return true;
    for (const std::string& allowed : options.allowed_hosts)
        if (allowed == "*" || http::detail::iequals(allowed, name)) return true;
    return false;
}

// With --cors, what Access-Control-Allow-Origin says to a page from `origin`: "*", the origin
// itself, or "" where that origin is not allowed.
inline std::string allowed_origin(const ServerOptions& options, std::string_view origin) {
    for (const std::string& allowed : options.cors_origins)
        if (allowed == "*" || allowed == origin) return allowed == "*" ? "*" : std::string(origin);
    return "";
}

}  // namespace smol_server
