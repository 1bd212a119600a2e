#pragma once
// Who a request is: which API key it carries, and so whose cached prompts it may reuse. A
// cached prefix shows in a reply's cached_tokens and in its timing, so reusing another key's
// cache would tell one tenant what another asked; requests under different keys (unless
// --cache-share-keys) or with different `cache_salt`s (vLLM's field) never share a cache.

#include <httplib.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "api_keys.hpp"
#include "api_request.hpp"
#include "server_options.hpp"

namespace smol_server {

inline constexpr std::size_t kMaxCacheSaltBytes = 1024;

// Which of the server's keys `presented` is. Every key is compared, each in constant time,
// whatever matched: neither timing nor the keys' order tells a guesser how close it came.
inline std::optional<std::size_t> matching_api_key(const ServerOptions& options, std::string_view presented) {
    std::optional<std::size_t> match;
    for (std::size_t i = 0; i < options.api_keys.size(); ++i)
        if (equal_in_constant_time(presented, options.api_keys[i]) && !match) match = i;
    return match;
}

// The key a request carries as OpenAI's clients send it (Authorization: Bearer) or Anthropic's
// (x-api-key): its index in ServerOptions::api_keys, none when it carries no valid key.
inline std::optional<std::size_t> request_api_key(const ServerOptions& options, const httplib::Request& req) {
    constexpr std::string_view kBearer = "Bearer ";
    const std::string authorization = req.get_header_value("Authorization");
    std::optional<std::size_t> bearer;
    if (authorization.starts_with(kBearer))
        bearer = matching_api_key(options, std::string_view(authorization).substr(kBearer.size()));
    if (bearer || !req.has_header("x-api-key")) return bearer;
    return matching_api_key(options, req.get_header_value("x-api-key"));
}

// The request's `cache_salt`: absent or null is none; otherwise a non-empty string of bounded size.
inline std::string read_cache_salt(const json& body) {
    const auto it = body.find("cache_salt");
    if (it == body.end() || it->is_null()) return {};
    if (!it->is_string())
        reject(400, std::string("'cache_salt' must be a string, found ") + it->type_name(), "invalid_type");
    const std::string& salt = it->get_ref<const std::string&>();
    if (salt.empty() || salt.size() > kMaxCacheSaltBytes)
        reject(400, "'cache_salt' must be 1 to " + std::to_string(kMaxCacheSaltBytes) + " bytes, found " +
                        std::to_string(salt.size()),
               "invalid_value");
    return salt;
}

// The scheduler's cache partition for a request (GenerationRequest::cache_partition): its key's
// index unless keys share, and its salt. Empty (shared as before) with neither. The key itself
// never goes into it, so the scheduler holds no secret.
inline std::string cache_partition(const ServerOptions& options, const httplib::Request& req, const json& body) {
    std::string partition;
    if (!options.cache_share_keys)
        if (const auto key = request_api_key(options, req)) partition = "key " + std::to_string(*key);
    if (const std::string salt = read_cache_salt(body); !salt.empty()) partition += "\nsalt " + salt;
    return partition;
}

}  // namespace smol_server
