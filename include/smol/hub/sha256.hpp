#pragma once
// Streaming SHA-256 over OpenSSL's EVP interface. The downloader feeds it every byte as it
// arrives (and the bytes of an existing .part when resuming), so verifying a multi-GB model
// needs no second pass over the file.

#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "smol/core/error.hpp"

namespace smol::hub {

class Sha256 {
public:
    Sha256() : context_(EVP_MD_CTX_new()) {
        if (!context_) fail("SHA-256: EVP_MD_CTX_new failed (out of memory?)");
        reset();
    }

    // Starts over, dropping everything fed so far.
    void reset() {
        if (EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1)
            fail("SHA-256: EVP_DigestInit_ex failed");
    }

    void update(const void* data, std::size_t size) {
        if (size == 0) return;
        if (EVP_DigestUpdate(context_.get(), data, size) != 1)
            fail("SHA-256: EVP_DigestUpdate failed on ", size, " bytes");
    }

    // Lowercase hex of the digest of everything fed since the last reset. Finalizes: call
    // reset() before feeding more.
    std::string hex_digest() {
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int length = 0;
        if (EVP_DigestFinal_ex(context_.get(), digest, &length) != 1)
            fail("SHA-256: EVP_DigestFinal_ex failed");
        static constexpr char kHex[] = "0123456789abcdef";
        std::string hex;
        hex.reserve(2 * length);
        for (unsigned int i = 0; i < length; ++i) {
            hex += kHex[digest[i] >> 4];
            hex += kHex[digest[i] & 15];
        }
        return hex;
    }

    // Feeds the first `max_bytes` bytes of `path` (all of it by default); returns how many were
    // read, which is less than max_bytes only when the file is shorter.
    std::uint64_t update_from_file(const std::filesystem::path& path,
                                   std::uint64_t max_bytes = UINT64_MAX) {
        std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                             &std::fclose);
        if (!file) fail("SHA-256: cannot open ", path, " for reading");
        std::vector<unsigned char> buffer(1 << 20);
        std::uint64_t total = 0;
        while (total < max_bytes) {
            const std::size_t want =
                static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), max_bytes - total));
            const std::size_t got = std::fread(buffer.data(), 1, want, file.get());
            update(buffer.data(), got);
            total += got;
            if (got < want) {
                if (std::ferror(file.get())) fail("SHA-256: read error in ", path, " at byte ", total);
                break;
            }
        }
        return total;
    }

private:
    struct FreeContext {
        void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
    };
    std::unique_ptr<EVP_MD_CTX, FreeContext> context_;
};

inline std::string sha256_hex(const void* data, std::size_t size) {
    Sha256 hash;
    hash.update(data, size);
    return hash.hex_digest();
}

inline std::string sha256_file_hex(const std::filesystem::path& path) {
    Sha256 hash;
    hash.update_from_file(path);
    return hash.hex_digest();
}

}  // namespace smol::hub
