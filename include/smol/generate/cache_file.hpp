#pragma once
// A KV cache on disk: the tokens a sequence's cache holds and their keys and values, so a
// server slot (llama-server's /slots/{id}?action=save|restore) or a CLI prompt (--prompt-cache)
// continues later without running its prompt again.
//
// The file, every integer little-endian:
//   "smolkvc\n"                    8 bytes, what the file is
//   version                        u32, kCacheFileVersion
//   model identity                 u32 length + bytes (cache_model_identity: keys and values
//                                  depend on every weight and on RoPE, so another model's or
//                                  another quantization's cache must not be read as this one's)
//   partition                      u32 length + bytes (a server's tenant, tenants.hpp; "" else)
//   key type, value type           u8 each (KvType)
//   layers, kv heads, head size    u32 each
//   n tokens                       u32
//   tokens                         i32 each
//   keys                           per head (layer by layer), n tokens rows of the key type
//   values                         the same in the value type
// A reader checks each part against what it expects before it reads the next, bounds every
// length before allocating, and checks the file's size against what the header implies before
// reading the rows, so a hostile or truncated file is refused with what was expected and found.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/engine.hpp"
#include "smol/model/kv_cache.hpp"

namespace smol {

// A cache file that cannot be restored here: not a cache file, another version, model, cache
// type or shape, more tokens than the cache holds, or cut short.
class CacheFileError : public Error {
public:
    using Error::Error;
};

inline constexpr std::uint32_t kCacheFileVersion = 1;
inline constexpr std::string_view kCacheFileMagic = "smolkvc\n";
// The model identity and the partition are short; a longer one is not a file this writer made.
inline constexpr std::size_t kMaxCacheFileLabelBytes = 4096;

// What the keys and values were computed by: the model's name and shape, the bytes of its
// file and tensors (another quantization of the same model differs there) and its RoPE.
inline std::string cache_model_identity(const Engine& engine) {
    const ModelInfo& info = engine.info();
    const RopeScaling& rope = info.rope_scaling;
    std::string id = (info.description.empty() ? info.architecture : info.description) + " (" + info.config_name +
                     ", " + std::to_string(info.file_bytes) + " file bytes, " + std::to_string(info.tensor_bytes) +
                     " tensor bytes, vocabulary " + std::to_string(engine.n_vocab()) + ", rope " +
                     (rope.yarn() ? "yarn x" + std::to_string(rope.factor) + " of " + std::to_string(rope.original_context)
                                  : std::string("none")) +
                     ")";
    if (id.size() > kMaxCacheFileLabelBytes) id.resize(kMaxCacheFileLabelBytes);
    return id;
}

namespace cache_file_detail {

inline void put_u32(std::string& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
}

inline std::uint32_t get_u32(const unsigned char* p) {
    return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}

// Reads exactly n bytes or says where the file ended.
class Reader {
public:
    Reader(std::ifstream& in, const std::filesystem::path& path) : in_(in), path_(path) {}
    void bytes(void* to, std::size_t n, const char* what) {
        in_.read(static_cast<char*>(to), std::streamsize(n));
        if (std::size_t(in_.gcount()) != n)
            throw CacheFileError(path_.string() + ": the file ends inside " + what + " at byte " +
                                 std::to_string(read_ + std::size_t(in_.gcount())) + "; expected " + std::to_string(n) +
                                 " more bytes");
        read_ += n;
    }
    std::uint32_t u32(const char* what) {
        unsigned char b[4];
        bytes(b, 4, what);
        return get_u32(b);
    }
    std::string label(const char* what) {
        const std::uint32_t n = u32(what);
        if (n > kMaxCacheFileLabelBytes)
            throw CacheFileError(path_.string() + ": " + what + " is " + std::to_string(n) + " bytes; expected at most " +
                                 std::to_string(kMaxCacheFileLabelBytes));
        std::string s(n, '\0');
        bytes(s.data(), n, what);
        return s;
    }
    std::size_t read() const { return read_; }

private:
    std::ifstream& in_;
    const std::filesystem::path& path_;
    std::size_t read_ = 0;
};

}  // namespace cache_file_detail

// Writes the first tokens.size() positions of `cache` (which holds at least that many) as a
// cache file, through a temporary file renamed into place so a reader never sees half a file;
// the bytes written. The temporary file's name adds ".partial" and a count to the path's.
inline std::uint64_t write_cache_file(const std::filesystem::path& path, const KvCache& cache,
                                      std::span<const std::int32_t> tokens, std::string_view model_identity,
                                      std::string_view partition) {
    using cache_file_detail::put_u32;
    if (tokens.size() > std::size_t(cache.size()))
        fail("cache file: expected at most the ", cache.size(), " positions the cache holds, found ", tokens.size(), " tokens");
    if (model_identity.size() > kMaxCacheFileLabelBytes || partition.size() > kMaxCacheFileLabelBytes)
        fail("cache file: the model identity and the partition may be at most ", kMaxCacheFileLabelBytes, " bytes each");
    std::string header(kCacheFileMagic);
    put_u32(header, kCacheFileVersion);
    put_u32(header, std::uint32_t(model_identity.size()));
    header += model_identity;
    put_u32(header, std::uint32_t(partition.size()));
    header += partition;
    header.push_back(char(cache.types().keys));
    header.push_back(char(cache.types().values));
    put_u32(header, std::uint32_t(cache.n_layers()));
    put_u32(header, std::uint32_t(cache.n_kv_heads()));
    put_u32(header, std::uint32_t(cache.head_dim()));
    put_u32(header, std::uint32_t(tokens.size()));
    for (const std::int32_t t : tokens) put_u32(header, std::uint32_t(t));

    // Its own temporary name, so two saves to one name never write into each other's file.
    static std::atomic<std::uint64_t> saves{0};
    const std::filesystem::path partial = path.string() + ".partial" + std::to_string(++saves);
    std::uint64_t written = header.size();
    {
        std::ofstream out(partial, std::ios::binary | std::ios::trunc);
        if (!out) fail("cache file: cannot create ", partial.string());
        out.write(header.data(), std::streamsize(header.size()));
        const int n = int(tokens.size());
        for (int keys = 1; keys >= 0; --keys)
            for (std::size_t head = 0; head < cache.heads(); ++head) {
                const std::span<const std::byte> rows = keys ? cache.filled_keys(head, n) : cache.filled_values(head, n);
                out.write(reinterpret_cast<const char*>(rows.data()), std::streamsize(rows.size()));
                written += rows.size();
            }
        out.flush();
        if (!out) {
            std::error_code ignored;
            std::filesystem::remove(partial, ignored);
            fail("cache file: cannot write ", written, " bytes to ", partial.string(), " (is the disk full?)");
        }
    }
    std::error_code ec;
    std::filesystem::rename(partial, path, ec);
    if (ec) {
        std::filesystem::remove(partial, ec);
        fail("cache file: cannot rename ", partial.string(), " to ", path.string());
    }
    return written;
}

// What read_cache_file restored.
struct RestoredCache {
    std::vector<std::int32_t> tokens;  // the tokens `cache` now holds
    std::string partition;             // as written
    std::uint64_t bytes_read = 0;
};

// Reads a cache file into `cache` (a fresh one of the model's shape and the cache types it is
// to be used with): checks the format, the version, the model identity, the cache types and
// shape, that the tokens fit the cache and lie in [0, n_vocab), and that the file is exactly
// as long as its header says, each before reading on. Throws CacheFileError saying what was
// expected and what was found; `cache` is then empty.
inline RestoredCache read_cache_file(const std::filesystem::path& path, KvCache& cache, std::string_view model_identity,
                                     int n_vocab) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw CacheFileError(path.string() + ": cannot open the file");
    std::error_code ec;
    const std::uintmax_t file_bytes = std::filesystem::file_size(path, ec);
    if (ec) throw CacheFileError(path.string() + ": cannot read its size: " + ec.message());
    cache_file_detail::Reader read(in, path);
    const std::string where = path.string() + ": ";
    std::array<char, kCacheFileMagic.size()> magic{};
    read.bytes(magic.data(), magic.size(), "the format's name");
    if (std::string_view(magic.data(), magic.size()) != kCacheFileMagic)
        throw CacheFileError(where + "not a smol KV cache file (expected it to start with \"smolkvc\")");
    if (const std::uint32_t version = read.u32("the version"); version != kCacheFileVersion)
        throw CacheFileError(where + "cache file version " + std::to_string(version) + "; expected " +
                             std::to_string(kCacheFileVersion));
    const std::string model = read.label("the model identity");
    if (model != model_identity)
        throw CacheFileError(where + "the cache was made by another model: expected " + std::string(model_identity) +
                             ", found " + model);
    RestoredCache out;
    out.partition = read.label("the partition");
    unsigned char types[2];
    read.bytes(types, 2, "the cache types");
    const auto type_name = [](unsigned char t) { return t <= std::uint8_t(KvType::q4_0) ? kv_type_name(KvType(t)) : "unknown"; };
    if (types[0] != std::uint8_t(cache.types().keys) || types[1] != std::uint8_t(cache.types().values))
        throw CacheFileError(where + "the cache types are " + type_name(types[0]) + "/" + type_name(types[1]) +
                             " (keys/values); expected " + kv_type_name(cache.types().keys) + "/" +
                             kv_type_name(cache.types().values) + " (-ctk/-ctv)");
    const std::uint32_t layers = read.u32("the layer count"), heads = read.u32("the head count"),
                        head_dim = read.u32("the head size");
    if (layers != std::uint32_t(cache.n_layers()) || heads != std::uint32_t(cache.n_kv_heads()) ||
        head_dim != std::uint32_t(cache.head_dim()))
        throw CacheFileError(where + "the cache is " + std::to_string(layers) + " layers x " + std::to_string(heads) +
                             " heads x " + std::to_string(head_dim) + "; expected " + std::to_string(cache.n_layers()) +
                             " x " + std::to_string(cache.n_kv_heads()) + " x " + std::to_string(cache.head_dim()));
    const std::uint32_t n = read.u32("the token count");
    if (n > std::uint32_t(cache.capacity()))
        throw CacheFileError(where + "the cache holds " + std::to_string(n) + " tokens; this context holds at most " +
                             std::to_string(cache.capacity()) + " (-c / --ctx-size)");
    const std::uint64_t expected = read.read() + std::uint64_t(n) * (4 + cache.bytes_per_token());
    if (file_bytes != expected)
        throw CacheFileError(where + "the file is " + std::to_string(file_bytes) + " bytes; its header says " +
                             std::to_string(expected));
    out.tokens.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::int32_t t = std::int32_t(read.u32("the tokens"));
        if (t < 0 || t >= n_vocab)
            throw CacheFileError(where + "token " + std::to_string(i) + " is " + std::to_string(t) +
                                 ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
        out.tokens[i] = t;
    }
    cache.clear();
    for (int keys = 1; keys >= 0; --keys)
        for (std::size_t head = 0; head < cache.heads(); ++head) {
            const std::span<std::byte> rows = keys ? cache.filled_keys(head, int(n)) : cache.filled_values(head, int(n));
            read.bytes(rows.data(), rows.size(), keys ? "the keys" : "the values");
        }
    cache.set_size(int(n));
    out.bytes_read = read.read();
    return out;
}

}  // namespace smol
