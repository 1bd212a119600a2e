#pragma once
// GGUF writer: builds a GGUF v3 file from metadata and tensors. Tensor data can be given up
// front or produced on demand while writing, so multi-gigabyte files stream to disk.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/gguf/reader.hpp"

namespace smol::gguf {

class Writer {
public:
    // Produces a tensor's bytes when the writer reaches it; must return exactly its byte size.
    using TensorProducer = std::function<std::vector<std::uint8_t>()>;

    explicit Writer(std::uint32_t version = 3, std::uint64_t alignment = kDefaultAlignment)
        : version_(version), alignment_(alignment) {
        if (alignment == 0 || (alignment & (alignment - 1)) != 0) fail("gguf writer: alignment must be a power of two");
        if (alignment != kDefaultAlignment) set_u32("general.alignment", std::uint32_t(alignment));
    }

    template <class T>
    void set(std::string_view key, ValueType type, T value) {
        static_assert(std::is_trivially_copyable_v<T>);
        if (sizeof(T) != value_type_size(type)) fail("gguf writer: key '", key, "': value size does not match its type");
        std::vector<std::uint8_t> payload(sizeof(T));
        std::memcpy(payload.data(), &value, sizeof(T));
        add_kv(key, type, std::move(payload));
    }
    void set_u32(std::string_view key, std::uint32_t v) { set(key, ValueType::U32, v); }
    void set_i32(std::string_view key, std::int32_t v) { set(key, ValueType::I32, v); }
    void set_u64(std::string_view key, std::uint64_t v) { set(key, ValueType::U64, v); }
    void set_f32(std::string_view key, float v) { set(key, ValueType::F32, v); }
    void set_bool(std::string_view key, bool v) { set(key, ValueType::Bool, std::uint8_t(v)); }
    void set_string(std::string_view key, std::string_view v) {
        std::vector<std::uint8_t> payload;
        append_string(payload, v);
        add_kv(key, ValueType::String, std::move(payload));
    }
    void set_string_array(std::string_view key, const std::vector<std::string>& items) {
        std::vector<std::uint8_t> payload;
        append_scalar(payload, std::uint32_t(ValueType::String));
        append_scalar(payload, std::uint64_t(items.size()));
        for (const auto& s : items) append_string(payload, s);
        add_kv(key, ValueType::Array, std::move(payload));
    }
    template <class T>
    void set_array(std::string_view key, ValueType element_type, const std::vector<T>& items) {
        static_assert(std::is_trivially_copyable_v<T>);
        if (sizeof(T) != value_type_size(element_type)) fail("gguf writer: key '", key, "': element size does not match its type");
        std::vector<std::uint8_t> payload;
        append_scalar(payload, std::uint32_t(element_type));
        append_scalar(payload, std::uint64_t(items.size()));
        const std::size_t at = payload.size();
        payload.resize(at + items.size() * sizeof(T));
        if (!items.empty()) std::memcpy(payload.data() + at, items.data(), items.size() * sizeof(T));
        add_kv(key, ValueType::Array, std::move(payload));
    }
    // A value already encoded as GGUF stores it after the type (for tests that need odd values).
    void set_raw(std::string_view key, std::uint32_t raw_type, std::vector<std::uint8_t> payload) {
        entries_.push_back({std::string(key), raw_type, std::move(payload)});
    }

    void add_tensor(std::string name, TensorType type, std::vector<std::int64_t> shape, std::vector<std::uint8_t> bytes) {
        auto shared = std::make_shared<std::vector<std::uint8_t>>(std::move(bytes));
        add_tensor(std::move(name), type, std::move(shape), [shared] { return *shared; });
    }
    void add_tensor(std::string name, TensorType type, std::vector<std::int64_t> shape, TensorProducer producer) {
        const auto traits = traits_of(type);
        std::uint64_t elements = 1;
        for (auto d : shape) elements *= std::uint64_t(d);
        if (shape.empty() || shape[0] % std::int64_t(traits.block_elements) != 0)
            fail("gguf writer: tensor '", name, "': first dimension must be a multiple of ", traits.block_elements);
        const std::uint64_t bytes = elements / traits.block_elements * traits.block_bytes;
        tensors_.push_back({std::move(name), type, std::move(shape), bytes, next_offset_, std::move(producer)});
        next_offset_ = align(next_offset_ + bytes);
    }

    std::vector<std::uint8_t> to_bytes() const {
        std::vector<std::uint8_t> out = header();
        for (const auto& t : tensors_) {
            out.resize(align(out.size()), 0);
            auto bytes = produce(t);
            out.insert(out.end(), bytes.begin(), bytes.end());
        }
        return out;
    }

    void write(const std::filesystem::path& path) const {
        std::ofstream file(path, std::ios::binary | std::ios::trunc);
        if (!file) fail(path.string(), ": cannot open for writing");
        auto head = header();
        std::uint64_t written = head.size();
        file.write(reinterpret_cast<const char*>(head.data()), std::streamsize(head.size()));
        static const char zeros[64] = {};
        for (const auto& t : tensors_) {
            // Padding can exceed the zero buffer (alignments above 64), so write it in pieces.
            for (std::uint64_t padding = align(written) - written; padding > 0;) {
                const std::uint64_t piece = std::min<std::uint64_t>(padding, sizeof zeros);
                file.write(zeros, std::streamsize(piece));
                padding -= piece;
                written += piece;
            }
            auto bytes = produce(t);
            file.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
            written += bytes.size();
        }
        if (!file) fail(path.string(), ": write failed after ", written, " bytes");
    }

    std::size_t tensor_count() const { return tensors_.size(); }

private:
    struct Entry {
        std::string key;
        std::uint32_t type;
        std::vector<std::uint8_t> payload;
    };
    struct Tensor {
        std::string name;
        TensorType type;
        std::vector<std::int64_t> shape;
        std::uint64_t bytes;
        std::uint64_t offset;
        TensorProducer producer;
    };

    template <class T>
    static void append_scalar(std::vector<std::uint8_t>& out, T v) {
        const auto at = out.size();
        out.resize(at + sizeof(T));
        std::memcpy(out.data() + at, &v, sizeof(T));
    }
    static void append_string(std::vector<std::uint8_t>& out, std::string_view s) {
        append_scalar(out, std::uint64_t(s.size()));
        out.insert(out.end(), s.begin(), s.end());
    }
    std::uint64_t align(std::uint64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }

    void add_kv(std::string_view key, ValueType type, std::vector<std::uint8_t> payload) {
        for (auto& e : entries_)
            if (e.key == key) {
                e.type = std::uint32_t(type);
                e.payload = std::move(payload);
                return;
            }
        entries_.push_back({std::string(key), std::uint32_t(type), std::move(payload)});
    }

    std::vector<std::uint8_t> header() const {
        std::vector<std::uint8_t> out;
        append_scalar(out, kMagic);
        append_scalar(out, version_);
        append_scalar(out, std::uint64_t(tensors_.size()));
        append_scalar(out, std::uint64_t(entries_.size()));
        for (const auto& e : entries_) {
            append_string(out, e.key);
            append_scalar(out, e.type);
            out.insert(out.end(), e.payload.begin(), e.payload.end());
        }
        for (const auto& t : tensors_) {
            append_string(out, t.name);
            append_scalar(out, std::uint32_t(t.shape.size()));
            for (auto d : t.shape) append_scalar(out, std::int64_t(d));
            append_scalar(out, std::uint32_t(t.type));
            append_scalar(out, t.offset);
        }
        return out;
    }

    std::vector<std::uint8_t> produce(const Tensor& t) const {
        auto bytes = t.producer();
        if (bytes.size() != t.bytes)
            fail("gguf writer: tensor '", t.name, "': expected ", t.bytes, " bytes of data, got ", bytes.size());
        return bytes;
    }

    std::uint32_t version_;
    std::uint64_t alignment_;
    std::vector<Entry> entries_;
    std::vector<Tensor> tensors_;
    std::uint64_t next_offset_ = 0;
};

}  // namespace smol::gguf
