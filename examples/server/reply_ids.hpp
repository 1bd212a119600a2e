#pragma once
// What every reply object of every API carries to name itself: ids (UUIDv7, or a prefix and
// its hex digits as Anthropic's and the Responses API's ids are), the creation time, the model.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

namespace smol_server {

// UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, 74 random bits; sorts by time.
inline std::string uuid_v7() {
    static std::mutex mutex;
    static std::mt19937_64 rng{std::random_device{}()};
    const auto ms = std::uint64_t(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    std::uint64_t r1, r2;
    {
        std::lock_guard lock(mutex);
        r1 = rng();
        r2 = rng();
    }
    unsigned char b[16];
    for (int i = 0; i < 6; ++i) b[i] = static_cast<unsigned char>(ms >> (40 - 8 * i));
    for (int i = 6; i < 16; ++i) b[i] = static_cast<unsigned char>((i < 14 ? r1 : r2) >> (8 * (i % 8)));
    b[6] = static_cast<unsigned char>(0x70 | (b[6] & 0x0F));  // version 7
    b[8] = static_cast<unsigned char>(0x80 | (b[8] & 0x3F));  // variant 10
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
        s += hex[b[i] >> 4];
        s += hex[b[i] & 15];
    }
    return s;
}

// An id of the form Anthropic's and the Responses API's ids take ("msg_...", "resp_...",
// "toolu_..."): the prefix and a UUIDv7's hex digits.
inline std::string prefixed_id(std::string_view prefix) {
    std::string id(prefix);
    for (const char c : uuid_v7())
        if (c != '-') id += c;
    return id;
}

inline std::int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// What every object of one reply carries.
struct ReplyIds {
    std::string id;  // chatcmpl-...
    std::string model;
    std::int64_t created = 0;
};

}  // namespace smol_server
