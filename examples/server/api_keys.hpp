#pragma once
// smol-server's API keys: from --api-key (repeatable), --api-key-file (one key a line) and the
// SMOL_API_KEY environment variable, all accepted together, so keys can be rotated (old and new
// both valid for a while) and given to several tenants. A key is checked here once, as it is
// read; tenants.hpp finds which key a request carries.

#include <cerrno>
#include <cstddef>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "program_args.hpp"

namespace smol_server {

// Whether a presented API key equals the expected one, in time that depends only on the
// longer length, so response times do not tell an attacker how much of a guess was right.
inline bool equal_in_constant_time(std::string_view presented, std::string_view expected) {
    unsigned difference = presented.size() != expected.size() ? 1u : 0u;
    const std::size_t n = std::max(presented.size(), expected.size());
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char a = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
        const unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
        difference |= unsigned(a ^ b);
    }
    return difference == 0;
}

// A key file larger than this is not a key file (a wrong path, a model file): refused unread.
inline constexpr std::size_t kMaxApiKeyFileBytes = 1u << 20;
inline constexpr std::size_t kMaxApiKeyBytes = 1024;

// Why `key` cannot be an API key (empty when it can): a client sends it in a header, so it
// must be a header value's printable ASCII without spaces, which also keeps the comparison
// length-bounded.
inline std::string api_key_problem(std::string_view key) {
    if (key.empty()) return "expected a non-empty key, found an empty one";
    if (key.size() > kMaxApiKeyBytes)
        return "expected a key of at most " + std::to_string(kMaxApiKeyBytes) + " bytes, found " +
               std::to_string(key.size());
    for (std::size_t i = 0; i < key.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(key[i]);
        if (c <= ' ' || c >= 0x7f)
            return "expected printable ASCII without spaces, found byte " + std::to_string(unsigned(c)) +
                   " at offset " + std::to_string(i);
    }
    return {};
}

// A key given on the command line or in the environment (`source` names which, for the error).
inline std::string checked_api_key(std::string key, std::string_view source) {
    if (const std::string problem = api_key_problem(key); !problem.empty())
        throw smol::args::UsageError(std::string(source) + ": " + problem);
    return key;
}

// The keys of a key file: one a line, surrounding spaces and a trailing CR ignored, blank
// lines and lines starting with '#' skipped. A file that cannot be read or holds no key is an
// error, never an open server.
inline std::vector<std::string> read_api_key_file(const std::string& path) {
    const std::string where = "--api-key-file '" + path + "'";
    std::ifstream in(path, std::ios::binary);
    if (!in) throw smol::args::UsageError(where + ": cannot open it: " + std::strerror(errno));
    std::string text(kMaxApiKeyFileBytes + 1, '\0');
    in.read(text.data(), std::streamsize(text.size()));
    text.resize(std::size_t(in.gcount()));
    if (text.size() > kMaxApiKeyFileBytes)
        throw smol::args::UsageError(where + ": expected a key file of at most 1 MiB, found a larger file");
    std::vector<std::string> keys;
    std::size_t line_number = 0;
    for (std::size_t start = 0; start < text.size();) {
        const std::size_t end = std::min(text.find('\n', start), text.size());
        std::string_view line(text.data() + start, end - start);
        start = end + 1;
        ++line_number;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
        while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
        if (line.empty() || line.front() == '#') continue;
        if (const std::string problem = api_key_problem(line); !problem.empty())
            throw smol::args::UsageError(where + " line " + std::to_string(line_number) + ": " + problem);
        keys.emplace_back(line);
    }
    if (keys.empty())
        throw smol::args::UsageError(where + ": expected one key a line, found none (blank lines and lines "
                                     "starting with '#' are skipped)");
    return keys;
}

}  // namespace smol_server
