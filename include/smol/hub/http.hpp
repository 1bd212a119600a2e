#pragma once
// HTTP(S) GET over cpp-httplib with redirects followed by hand. httplib can follow redirects
// itself, but we need (a) the headers of every hop, since the Hub announces a file's size and
// SHA-256 on its redirect to the CDN, (b) control over credentials: the Authorization header
// goes only to the origin the token belongs to, never to the CDN or any other host, and (c) a
// redirect policy: at most HttpRequest::max_redirects hops, and never from https to plain http
// (a redirect may go from http to https, so an http:// mirror or test server still works, but
// once a transfer is on TLS it stays there; a downgrade is an error naming both URLs).

#include <httplib.h>

#include <cctype>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"

namespace smol::hub {

struct Url {
    std::string scheme;  // "http" or "https"
    std::string host;    // as written; IPv6 literals keep their brackets
    int port = 0;
    std::string target;  // path and query, always starting with '/'

    static Url parse(std::string_view text) {
        Url url;
        const std::size_t scheme_end = text.find("://");
        if (scheme_end == std::string_view::npos) fail("URL '", text, "': expected http:// or https://");
        for (char c : text.substr(0, scheme_end))
            url.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (url.scheme != "http" && url.scheme != "https")
            fail("URL '", text, "': unsupported scheme '", url.scheme, "', expected http or https");
        const std::string_view rest = text.substr(scheme_end + 3);
        const std::size_t authority_end = rest.find_first_of("/?#");
        std::string_view authority = rest.substr(0, authority_end);
        if (authority.find('@') != std::string_view::npos)
            fail("URL '", text, "': user:password@ in URLs is not supported (use HF_TOKEN)");
        std::string_view port_text;
        if (!authority.empty() && authority.front() == '[') {
            const std::size_t close = authority.find(']');
            if (close == std::string_view::npos) fail("URL '", text, "': unterminated IPv6 address");
            url.host = std::string(authority.substr(0, close + 1));
            if (close + 1 < authority.size()) {
                if (authority[close + 1] != ':') fail("URL '", text, "': junk after IPv6 address");
                port_text = authority.substr(close + 2);
            }
        } else {
            const std::size_t colon = authority.find(':');
            url.host = std::string(authority.substr(0, colon));
            if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
        }
        if (url.host.empty()) fail("URL '", text, "': no host");
        for (char& c : url.host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        url.port = url.scheme == "https" ? 443 : 80;
        if (!port_text.empty()) {
            int port = 0;
            for (char c : port_text) {
                if (!std::isdigit(static_cast<unsigned char>(c)) || port > 65535)
                    fail("URL '", text, "': bad port '", port_text, "'");
                port = port * 10 + (c - '0');
            }
            if (port == 0 || port > 65535) fail("URL '", text, "': port ", port, " out of range");
            url.port = port;
        }
        url.target = authority_end == std::string_view::npos ? "/" : std::string(rest.substr(authority_end));
        if (url.target.front() != '/') url.target.insert(url.target.begin(), '/');
        if (const std::size_t hash = url.target.find('#'); hash != std::string::npos) url.target.resize(hash);
        return url;
    }

    // "https://host:443": what credentials are scoped to, and what httplib::Client takes.
    std::string origin() const { return scheme + "://" + host + ":" + std::to_string(port); }

    std::string str() const {
        const bool default_port = (scheme == "https" && port == 443) || (scheme == "http" && port == 80);
        return scheme + "://" + host + (default_port ? "" : ":" + std::to_string(port)) + target;
    }

    // The URL a Location header points to, relative to this one (RFC 3986 forms that servers
    // send: absolute, scheme-relative "//host/..", absolute-path "/..", or relative "..").
    Url resolve(std::string_view location) const {
        if (location.find("://") != std::string_view::npos &&
            location.find("://") < location.find_first_of("/?#"))
            return parse(location);
        if (location.starts_with("//")) return parse(scheme + ":" + std::string(location));
        Url next = *this;
        if (location.starts_with("/")) {
            next.target = std::string(location);
        } else {
            std::string base = target.substr(0, target.find('?'));
            base.resize(base.rfind('/') + 1);
            next.target = base + std::string(location);
        }
        if (const std::size_t hash = next.target.find('#'); hash != std::string::npos) next.target.resize(hash);
        return next;
    }
};

// Percent-encodes every byte outside RFC 3986's unreserved set, keeping '/' separators, so
// repository and file names can be put into a URL path as they are.
inline std::string encode_url_path(std::string_view path) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : path) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

struct HttpHop {
    std::string url;
    int status = 0;
    httplib::Headers headers;
};

struct HttpRequest {
    Url url;
    httplib::Headers headers;     // sent on every hop
    std::string bearer_token;     // sent as Authorization only to token_origin
    std::string token_origin;     // Url::origin() of the endpoint the token is for
    std::string ca_cert_file;     // PEM trust anchors instead of the system's; empty: system
    int max_redirects = 10;
    int connect_timeout_seconds = 15;
    int read_timeout_seconds = 60;
};

struct HttpOutcome {
    std::vector<HttpHop> hops;               // every response seen, the final one last
    httplib::Error error = httplib::Error::Success;  // transport error, if any
    bool declined = false;                   // `accept` refused the final response's body
    bool stopped = false;                    // `receive` asked to stop mid-body
    bool too_many_redirects = false;

    const HttpHop* final_hop() const { return hops.empty() ? nullptr : &hops.back(); }
    // What went wrong when too_many_redirects is set: how many were followed, and where the
    // one not followed pointed.
    std::string too_many_redirects_text() const {
        if (hops.empty()) return "too many redirects";
        auto location = hops.back().headers.find("Location");
        return "more than " + std::to_string(hops.size() - 1) + " redirects; the last, from " + hops.back().url +
               ", pointed to " + (location == hops.back().headers.end() ? std::string("?") : location->second);
    }
    int status() const { return hops.empty() ? 0 : hops.back().status; }
    // The body arrived in full and nobody stopped it.
    bool complete() const {
        return error == httplib::Error::Success && !declined && !stopped && !too_many_redirects && !hops.empty();
    }
    // A transport failure (not an HTTP status, and not our own cancel).
    bool transport_failed() const {
        return error != httplib::Error::Success && !declined && !stopped && !too_many_redirects;
    }
    std::string error_text() const { return httplib::to_string(error); }
    // The TLS peer could not be trusted: retrying will not help.
    bool tls_untrusted() const {
        return error == httplib::Error::SSLServerVerification || error == httplib::Error::SSLLoadingCerts;
    }
};

inline bool is_redirect_status(int status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// The value of header `name` in one response; empty when absent.
inline std::string header_value(const HttpHop& hop, const std::string& name) {
    auto it = hop.headers.find(name);
    return it == hop.headers.end() ? std::string() : it->second;
}

// First value of `name` over the hops, searching from the first response (the Hub's own
// headers, e.g. X-Linked-Etag on its redirect) to the last (the CDN's).
inline std::string first_header(const std::vector<HttpHop>& hops, const std::string& name) {
    for (const HttpHop& hop : hops)
        if (auto it = hop.headers.find(name); it != hop.headers.end()) return it->second;
    return {};
}

// GETs `request.url`, following redirects. `accept(hops)` sees the final response's status and
// headers (with every earlier hop before it) and returns whether to read its body, which then
// streams into `receive`; returning false from `receive` stops the transfer.
inline HttpOutcome http_get(const HttpRequest& request,
                            const std::function<bool(const std::vector<HttpHop>&)>& accept,
                            const std::function<bool(const char*, std::size_t)>& receive) {
    HttpOutcome outcome;
    Url url = request.url;
    for (int redirects = 0;; ++redirects) {
        httplib::Client client(url.origin());
        client.set_connection_timeout(request.connect_timeout_seconds, 0);
        client.set_read_timeout(request.read_timeout_seconds, 0);
        client.set_follow_location(false);
        client.set_url_encode(false);  // targets are already encoded; re-encoding breaks signed CDN URLs
        client.set_decompress(false);  // bytes on the wire are the bytes of the file
        if (!request.ca_cert_file.empty()) client.set_ca_cert_path(request.ca_cert_file);

        httplib::Headers headers = request.headers;
        headers.emplace("Accept-Encoding", "identity");
        if (!request.bearer_token.empty() && url.origin() == request.token_origin)
            headers.emplace("Authorization", "Bearer " + request.bearer_token);

        bool is_redirect = false;
        std::string location;
        // Exceptions from the callbacks must not unwind through httplib's compiled code: park
        // them, stop the transfer, and rethrow once Get has returned.
        std::exception_ptr callback_error;
        auto on_response = [&](const httplib::Response& response) {
            try {
                outcome.hops.push_back({url.str(), response.status, response.headers});
                if (is_redirect_status(response.status) && response.has_header("Location")) {
                    is_redirect = true;
                    location = response.get_header_value("Location");
                    return false;  // the redirect's body is of no interest
                }
                if (!accept(outcome.hops)) {
                    outcome.declined = true;
                    return false;
                }
                return true;
            } catch (...) {
                callback_error = std::current_exception();
                return false;
            }
        };
        auto on_data = [&](const char* data, std::size_t size) {
            try {
                if (!receive(data, size)) {
                    outcome.stopped = true;
                    return false;
                }
                return true;
            } catch (...) {
                callback_error = std::current_exception();
                return false;
            }
        };
        httplib::Result result = client.Get(url.target, headers, on_response, on_data);
        if (callback_error) std::rethrow_exception(callback_error);
        outcome.error = result.error();
        if (!is_redirect) return outcome;
        outcome.error = httplib::Error::Success;  // we cancelled the redirect's body ourselves
        if (redirects >= request.max_redirects) {
            outcome.too_many_redirects = true;
            return outcome;
        }
        Url next;
        try {
            next = url.resolve(location);
        } catch (const Error& e) {
            fail("GET ", request.url.str(), ": redirect from ", url.str(), " has an unusable Location '", location,
                 "' (", e.what(), ")");
        }
        if (url.scheme == "https" && next.scheme != "https")
            fail("GET ", request.url.str(), ": redirect from ", url.str(), " to ", next.str(),
                 " refused: it leaves HTTPS for plain HTTP (expected an https:// Location)");
        url = std::move(next);
    }
}

}  // namespace smol::hub
