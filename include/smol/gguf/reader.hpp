#pragma once
// GGUF reader: parses the header, metadata and tensor table of a GGUF v2/v3 file and maps its
// data section into memory. Every read is bounds-checked: a corrupt, truncated or hostile file
// gives a smol::Error naming the file, the key or tensor and the byte offset, never a crash.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/platform.hpp"
#include "smol/core/tensor_types.hpp"

namespace smol::gguf {

inline constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr std::uint64_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;                    // ggml's GGML_MAX_DIMS

// Limits on what the counts and lengths written in a file can make the reader do. Every count is
// also checked against the bytes left in the file before anything is allocated for it, so the
// heap the metadata takes stays within a small multiple of the file's header size; these caps
// bound it outright and stop the recursion. Real files are far inside them (SmolLM3-3B: a few
// dozen keys, 326 tensors, no nested arrays; ggml itself refuses nested arrays, and tensor
// names over 63 bytes).
inline constexpr int kMaxArrayNesting = 4;                     // arrays of arrays, levels in all
inline constexpr std::uint64_t kMaxNestedArrays = 1u << 20;    // arrays inside arrays, whole file
inline constexpr std::uint64_t kMaxMetadataEntries = 1u << 20;
inline constexpr std::uint64_t kMaxTensors = 1u << 20;
inline constexpr std::uint64_t kMaxNameBytes = 65535;          // a metadata key or tensor name

enum class ValueType : std::uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
    String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};

inline std::string_view value_type_name(ValueType type) {
    switch (type) {
        case ValueType::U8: return "u8";
        case ValueType::I8: return "i8";
        case ValueType::U16: return "u16";
        case ValueType::I16: return "i16";
        case ValueType::U32: return "u32";
        case ValueType::I32: return "i32";
        case ValueType::F32: return "f32";
        case ValueType::Bool: return "bool";
        case ValueType::String: return "string";
        case ValueType::Array: return "array";
        case ValueType::U64: return "u64";
        case ValueType::I64: return "i64";
        case ValueType::F64: return "f64";
    }
    return "unknown";
}

// Size in bytes of a fixed-size value type; 0 for string and array.
inline std::size_t value_type_size(ValueType type) {
    switch (type) {
        case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
        case ValueType::U16: case ValueType::I16: return 2;
        case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
        case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
        case ValueType::String: case ValueType::Array: return 0;
    }
    return 0;
}

inline bool is_integer_type(ValueType t) {
    return t == ValueType::U8 || t == ValueType::I8 || t == ValueType::U16 || t == ValueType::I16 ||
           t == ValueType::U32 || t == ValueType::I32 || t == ValueType::U64 || t == ValueType::I64;
}

// Reads a fixed-size little-endian scalar of `type` at `p` as a double or integer.
inline std::int64_t load_integer(ValueType type, const std::uint8_t* p) {
    auto load = [p]<class T>(T) { T v; std::memcpy(&v, p, sizeof v); return v; };
    switch (type) {
        case ValueType::U8: return load(std::uint8_t{});
        case ValueType::I8: return load(std::int8_t{});
        case ValueType::U16: return load(std::uint16_t{});
        case ValueType::I16: return load(std::int16_t{});
        case ValueType::U32: return load(std::uint32_t{});
        case ValueType::I32: return load(std::int32_t{});
        case ValueType::U64: return std::int64_t(load(std::uint64_t{}));
        case ValueType::I64: return load(std::int64_t{});
        case ValueType::Bool: return load(std::uint8_t{}) != 0;
        default: return 0;
    }
}

inline double load_float(ValueType type, const std::uint8_t* p) {
    if (type == ValueType::F32) { float v; std::memcpy(&v, p, 4); return v; }
    if (type == ValueType::F64) { double v; std::memcpy(&v, p, 8); return v; }
    if (type == ValueType::U64) { std::uint64_t v; std::memcpy(&v, p, 8); return double(v); }
    return double(load_integer(type, p));
}

// One metadata value. Strings and arrays of fixed-size values point into the file's memory,
// which the owning File keeps alive.
class Value {
public:
    struct Array {
        ValueType element_type = ValueType::U8;
        std::uint64_t count = 0;
        const std::uint8_t* packed = nullptr;        // fixed-size elements, little-endian
        std::vector<std::string_view> strings;       // element_type == String
        std::vector<Value> nested;                   // element_type == Array
    };

    Value() = default;
    static Value scalar(ValueType type, const std::uint8_t* bytes) {
        Value v;
        v.type_ = type;
        v.scalar_ = bytes;
        return v;
    }
    static Value string(std::string_view s) {
        Value v;
        v.type_ = ValueType::String;
        v.string_ = s;
        return v;
    }
    static Value array(Array a) {
        Value v;
        v.type_ = ValueType::Array;
        v.array_ = std::make_shared<Array>(std::move(a));
        return v;
    }

    ValueType type() const { return type_; }
    bool is_array() const { return type_ == ValueType::Array; }
    bool is_string() const { return type_ == ValueType::String; }

    std::optional<std::int64_t> as_int() const {
        if (type_ == ValueType::U64 && as_uint() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
            return std::nullopt;  // would wrap negative; as_uint() still reads it
        if (is_integer_type(type_) || type_ == ValueType::Bool) return load_integer(type_, scalar_);
        return std::nullopt;
    }
    std::optional<std::uint64_t> as_uint() const {
        if (type_ == ValueType::U64) { std::uint64_t v; std::memcpy(&v, scalar_, 8); return v; }
        auto v = as_int();
        if (v && *v >= 0) return std::uint64_t(*v);
        return std::nullopt;
    }
    std::optional<double> as_float() const {
        if (type_ == ValueType::F32 || type_ == ValueType::F64 || is_integer_type(type_)) return load_float(type_, scalar_);
        return std::nullopt;
    }
    std::optional<bool> as_bool() const {
        if (type_ == ValueType::Bool) return scalar_[0] != 0;
        return std::nullopt;
    }
    std::optional<std::string_view> as_string() const {
        if (type_ == ValueType::String) return string_;
        return std::nullopt;
    }

    ValueType element_type() const { return array_ ? array_->element_type : type_; }
    std::size_t size() const { return array_ ? std::size_t(array_->count) : 0; }
    const Array* array_data() const { return array_.get(); }

    // A string array's elements; throws when this is not one.
    const std::vector<std::string_view>& strings() const {
        if (!array_ || array_->element_type != ValueType::String)
            fail("expected an array of strings, found ", describe_type());
        return array_->strings;
    }
    std::vector<std::int64_t> ints() const {
        if (!array_ || !(is_integer_type(array_->element_type) || array_->element_type == ValueType::Bool))
            fail("expected an array of integers, found ", describe_type());
        const std::size_t stride = value_type_size(array_->element_type);
        std::vector<std::int64_t> out(array_->count);
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_integer(array_->element_type, array_->packed + i * stride);
        return out;
    }
    std::vector<double> floats() const {
        if (!array_ || value_type_size(array_->element_type) == 0 || array_->element_type == ValueType::Bool)
            fail("expected an array of numbers, found ", describe_type());
        const std::size_t stride = value_type_size(array_->element_type);
        std::vector<double> out(array_->count);
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_float(array_->element_type, array_->packed + i * stride);
        return out;
    }

    std::string describe_type() const {
        if (!array_) return std::string(value_type_name(type_));
        return "array of " + std::to_string(array_->count) + " " + std::string(value_type_name(array_->element_type));
    }

private:
    ValueType type_ = ValueType::U8;
    const std::uint8_t* scalar_ = nullptr;
    std::string_view string_;
    std::shared_ptr<const Array> array_;
};

struct TensorInfo {
    std::string name;
    std::vector<std::int64_t> shape;  // ggml order: shape[0] (ne0) is the innermost, contiguous dimension
    TensorType type = TensorType::F32;
    std::uint64_t offset = 0;         // from the start of the data section
    std::uint64_t n_elements = 0;
    std::uint64_t n_bytes = 0;
    std::uint64_t info_offset = 0;    // file offset of this tensor's entry in the table (for messages)
    const std::uint8_t* data = nullptr;

    std::int64_t rows() const {  // product of every dimension but the first
        std::int64_t r = 1;
        for (std::size_t i = 1; i < shape.size(); ++i) r *= shape[i];
        return r;
    }
    std::size_t row_bytes() const { return shape.empty() ? 0 : std::size_t(n_bytes / std::uint64_t(rows())); }
    std::string shape_string() const {
        std::string s = "[";
        for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
        return s + "]";
    }
};

// Read-only memory holding a whole file: an mmap of a file on disk or an owned buffer.
//
// The mapping is PROT_READ + MAP_PRIVATE: nothing is ever written through it, so it shares the
// page cache with every other reader of the file exactly as MAP_SHARED would, and no copy is
// made. What neither flag gives is protection from the file changing underneath:
// - Truncating the file (`cp new.gguf model.gguf`, `> model.gguf`, an editor saving in place)
//   makes every access to a page past the new end a SIGBUS, whatever the mapping flags: Linux
//   unmaps those pages from private mappings too, copied-on-write ones included
//   (truncate_pagecache). No userspace answer short of copying the weights out (a 1.8 GB read
//   and 1.8 GB of anonymous memory; MAP_POPULATE only prefaults, the pages stay file-backed) or
//   a process-wide SIGBUS handler avoids that, and a library must not install one.
// - Writing into the file in place changes the weights a running model reads (MAP_PRIVATE
//   copies a page only when this process writes to it, which it never does).
// So a model file in use is replaced by writing the new one beside it and renaming it over the
// old name (`mv`, rename(2), on the same file system): the mapping keeps the old inode, whose
// blocks the kernel keeps until the last mapping goes, and the next load sees the new file. The
// downloader (smol/hub) installs files this way; the test "a model file replaced by rename
// while mapped" checks that the mapping keeps reading the old bytes.
class FileMemory {
public:
    static std::shared_ptr<FileMemory> map(const std::filesystem::path& path) {
        auto memory = std::shared_ptr<FileMemory>(new FileMemory());
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail(path.string(), ": cannot open: ", std::strerror(errno));
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            const int e = errno;
            ::close(fd);
            fail(path.string(), ": cannot stat: ", std::strerror(e));
        }
        if (!S_ISREG(st.st_mode)) {
            ::close(fd);
            fail(path.string(), ": expected a regular file");
        }
        memory->size_ = std::size_t(st.st_size);
        if (memory->size_ > 0) {
            const void* p = platform::map_read_only(fd, memory->size_);
            if (!p) {
                const int e = errno;
                ::close(fd);
                fail(path.string(), ": cannot mmap ", memory->size_, " bytes: ", std::strerror(e));
            }
            memory->mapped_ = p;
            memory->data_ = static_cast<const std::uint8_t*>(p);
        }
        ::close(fd);
        return memory;
    }
    static std::shared_ptr<FileMemory> own(std::vector<std::uint8_t> bytes) {
        auto memory = std::shared_ptr<FileMemory>(new FileMemory());
        memory->owned_ = std::move(bytes);
        memory->data_ = memory->owned_.data();
        memory->size_ = memory->owned_.size();
        return memory;
    }
    ~FileMemory() {
        if (mapped_) platform::unmap(mapped_, size_);
    }
    FileMemory(const FileMemory&) = delete;
    FileMemory& operator=(const FileMemory&) = delete;

    const std::uint8_t* data() const { return data_; }
    std::size_t size() const { return size_; }
    // Asks the kernel to read the range ahead (the weights are then paged in sequentially).
    void will_need(std::size_t offset, std::size_t length) const {
        if (mapped_) platform::advise_will_need(data_ + offset, length);
    }
    // Tells the kernel the whole pages inside the range will not be read again, so they leave
    // this process's resident memory (a later read would page them back in from the file).
    void wont_need(std::size_t offset, std::size_t length) const {
        if (mapped_) platform::advise_wont_need(data_ + offset, length);
    }

private:
    FileMemory() = default;
    const void* mapped_ = nullptr;
    std::vector<std::uint8_t> owned_;
    const std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
};

namespace detail {

// Bounds-checked little-endian reader over the file's bytes; every failure names the file,
// what was being read and the offset.
class Cursor {
public:
    Cursor(const std::string& file, const std::uint8_t* data, std::size_t size) : file_(file), data_(data), size_(size) {}

    std::size_t offset() const { return pos_; }
    std::size_t remaining() const { return size_ - pos_; }
    // What is being read ("metadata key 'x'", "tensor 'y'"), so a truncation names it.
    void set_context(std::string context) { context_ = std::move(context); }

    const std::uint8_t* take(std::size_t n, std::string_view what) {
        if (n > remaining())
            fail(file_, ": truncated at offset ", pos_, context_.empty() ? "" : " in ", context_, ": expected ", n,
                 " bytes for ", what, ", but only ", remaining(), " remain (file size ", size_, ")");
        const std::uint8_t* p = data_ + pos_;
        pos_ += n;
        return p;
    }
    template <class T>
    T read(std::string_view what) {
        T v;
        std::memcpy(&v, take(sizeof(T), what), sizeof(T));
        return v;
    }
    std::string_view read_string(std::string_view what,
                                 std::uint64_t max_length = std::numeric_limits<std::uint64_t>::max()) {
        const std::size_t at = pos_;
        const std::uint64_t length = read<std::uint64_t>(what);
        if (length > max_length)
            fail(file_, ": string length ", length, " for ", what, context_.empty() ? "" : " of ", context_,
                 " at offset ", at, " is over the limit of ", max_length, " bytes");
        if (length > remaining())
            fail(file_, ": string length ", length, " for ", what, context_.empty() ? "" : " of ", context_,
                 " at offset ", at, " runs past the end of the file (", remaining(), " bytes remain)");
        return {reinterpret_cast<const char*>(take(std::size_t(length), what)), std::size_t(length)};
    }

private:
    const std::string& file_;
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
    std::string context_;
};

}  // namespace detail

class File {
public:
    // Maps the file at `path` and parses it.
    static File open(const std::filesystem::path& path) { return File(FileMemory::map(path), path.string()); }
    // Parses a file image held in memory (tests, fuzzing); `name` stands for the path in messages.
    static File from_bytes(std::vector<std::uint8_t> bytes, std::string name) {
        return File(FileMemory::own(std::move(bytes)), std::move(name));
    }

    const std::string& name() const { return name_; }
    std::uint32_t version() const { return version_; }
    std::uint64_t alignment() const { return alignment_; }
    std::uint64_t data_offset() const { return data_offset_; }
    std::uint64_t file_size() const { return memory_->size(); }
    const FileMemory& memory() const { return *memory_; }

    const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }

    const Value* find(std::string_view key) const {
        auto it = key_index_.find(std::string(key));
        return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
    }
    const Value& require(std::string_view key) const {
        const Value* v = find(key);
        if (!v) fail(name_, ": missing required metadata key '", key, "'");
        return *v;
    }
    std::string_view get_string(std::string_view key) const {
        auto s = require(key).as_string();
        if (!s) fail(name_, ": metadata key '", key, "': expected a string, found ", require(key).describe_type());
        return *s;
    }
    std::int64_t get_int(std::string_view key) const {
        auto v = require(key).as_int();
        if (!v) fail(name_, ": metadata key '", key, "': expected an integer, found ", require(key).describe_type());
        return *v;
    }
    double get_float(std::string_view key) const {
        auto v = require(key).as_float();
        if (!v) fail(name_, ": metadata key '", key, "': expected a number, found ", require(key).describe_type());
        return *v;
    }
    bool get_bool(std::string_view key) const {
        auto v = require(key).as_bool();
        if (!v) fail(name_, ": metadata key '", key, "': expected a bool, found ", require(key).describe_type());
        return *v;
    }
    std::string_view get_string_or(std::string_view key, std::string_view fallback) const {
        const Value* v = find(key);
        return v && v->as_string() ? *v->as_string() : fallback;
    }

    const TensorInfo* find_tensor(std::string_view tensor_name) const {
        auto it = tensor_index_.find(std::string(tensor_name));
        return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
    }
    const TensorInfo& tensor(std::string_view tensor_name) const {
        const TensorInfo* t = find_tensor(tensor_name);
        if (!t) fail(name_, ": missing required tensor '", tensor_name, "'");
        return *t;
    }

private:
    File(std::shared_ptr<FileMemory> memory, std::string name) : memory_(std::move(memory)), name_(std::move(name)) {
        parse();
    }

    void parse() {
        detail::Cursor in(name_, memory_->data(), memory_->size());
        const std::uint32_t magic = in.read<std::uint32_t>("the magic number");
        if (magic != kMagic) {
            char found[5] = {};
            std::memcpy(found, &magic, 4);
            for (char& c : found)
                if (c && (c < 32 || c > 126)) c = '?';
            fail(name_, ": not a GGUF file: expected magic 'GGUF' at offset 0, found '", found, "'");
        }
        version_ = in.read<std::uint32_t>("the version");
        if (version_ == 1) fail(name_, ": GGUF version 1 is not supported (expected 2 or 3), at offset 4");
        if (version_ != 2 && version_ != 3) {
            const std::uint32_t swapped = __builtin_bswap32(version_);
            if (swapped == 2 || swapped == 3) fail(name_, ": big-endian GGUF files are not supported (version at offset 4)");
            fail(name_, ": unsupported GGUF version ", version_, " at offset 4 (expected 2 or 3)");
        }
        const std::size_t tensor_count_at = in.offset();
        const std::uint64_t tensor_count = in.read<std::uint64_t>("the tensor count");
        const std::size_t kv_count_at = in.offset();
        const std::uint64_t kv_count = in.read<std::uint64_t>("the metadata count");
        // A key/value takes at least 13 bytes (key length, type, a 1-byte value) and a tensor
        // entry at least 32 (name length, dimension count, one dimension, type, offset), even
        // before the key or name itself, so neither count can ask for more entries than the file
        // could hold.
        if (kv_count > in.remaining() / 13)
            fail(name_, ": metadata count ", kv_count, " at offset ", kv_count_at, " cannot fit in the ",
                 in.remaining(), " bytes that follow");
        if (kv_count > kMaxMetadataEntries)
            fail(name_, ": metadata count ", kv_count, " at offset ", kv_count_at, " is over the limit of ",
                 kMaxMetadataEntries, " keys");
        if (tensor_count > in.remaining() / 32)
            fail(name_, ": tensor count ", tensor_count, " at offset ", tensor_count_at, " cannot fit in the ",
                 in.remaining(), " bytes that follow");
        if (tensor_count > kMaxTensors)
            fail(name_, ": tensor count ", tensor_count, " at offset ", tensor_count_at, " is over the limit of ",
                 kMaxTensors, " tensors");

        metadata_.reserve(std::size_t(kv_count));
        for (std::uint64_t i = 0; i < kv_count; ++i) {
            const std::size_t key_at = in.offset();
            in.set_context("metadata entry " + std::to_string(i));
            std::string key(in.read_string("a metadata key", kMaxNameBytes));
            if (key.empty()) fail(name_, ": empty metadata key at offset ", key_at);
            in.set_context("metadata key '" + key + "'");
            const auto type = read_value_type(in, key);
            Value value = read_value(in, type, key, 0);
            if (!key_index_.emplace(key, metadata_.size()).second)
                fail(name_, ": duplicate metadata key '", key, "' at offset ", key_at);
            metadata_.emplace_back(std::move(key), std::move(value));
        }

        alignment_ = kDefaultAlignment;
        if (const Value* a = find("general.alignment")) {
            auto v = a->as_uint();
            if (!v || a->type() != ValueType::U32)
                fail(name_, ": metadata key 'general.alignment': expected a u32, found ", a->describe_type());
            if (*v == 0 || (*v & (*v - 1)) != 0)
                fail(name_, ": metadata key 'general.alignment': expected a power of two, found ", *v);
            alignment_ = *v;
        }

        tensors_.reserve(std::size_t(tensor_count));
        for (std::uint64_t i = 0; i < tensor_count; ++i) {
            in.set_context("tensor entry " + std::to_string(i));
            tensors_.push_back(read_tensor_info(in));
        }

        locate_tensor_data(in.offset());
    }

    // The data section starts at the first aligned offset after the header (`header_end`);
    // every tensor's bytes must lie whole inside it, aligned.
    void locate_tensor_data(std::uint64_t header_end) {
        data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
        const std::uint64_t file_size = memory_->size();
        if (!tensors_.empty() && data_offset_ > file_size)
            fail(name_, ": data section should start at offset ", data_offset_, " but the file is only ", file_size, " bytes");
        const std::uint64_t data_size = data_offset_ <= file_size ? file_size - data_offset_ : 0;
        for (auto& t : tensors_) {
            if (t.offset % alignment_ != 0)
                fail(name_, ": tensor '", t.name, "' (entry at offset ", t.info_offset, "): data offset ", t.offset,
                     " is not a multiple of the alignment ", alignment_);
            if (t.offset > data_size || t.n_bytes > data_size - t.offset)
                fail(name_, ": tensor '", t.name, "' (entry at offset ", t.info_offset, "): its ", t.n_bytes,
                     " bytes at data offset ", t.offset, " (file offset ", data_offset_ + t.offset,
                     ") run past the end of the file (size ", file_size, ")");
            t.data = memory_->data() + data_offset_ + t.offset;
        }
    }

    ValueType read_value_type(detail::Cursor& in, std::string_view key) {
        const std::size_t at = in.offset();
        const auto raw = in.read<std::uint32_t>("a metadata value type");
        if (raw > std::uint32_t(ValueType::F64))
            fail(name_, ": metadata key '", key, "': unknown value type ", raw, " at offset ", at);
        return ValueType(raw);
    }

    Value read_value(detail::Cursor& in, ValueType type, std::string_view key, int depth) {
        if (type == ValueType::String) return Value::string(in.read_string("the string value"));
        if (type != ValueType::Array) {
            const std::uint8_t* p = in.take(value_type_size(type), "a metadata value");
            if (type == ValueType::Bool && *p > 1)
                fail(name_, ": metadata key '", key, "': expected a bool (0 or 1), found ", int(*p), " at offset ",
                     in.offset() - 1);
            return Value::scalar(type, p);
        }
        if (depth >= kMaxArrayNesting)
            fail(name_, ": metadata key '", key, "': arrays nested deeper than ", kMaxArrayNesting, " at offset ", in.offset());
        Value::Array array;
        array.element_type = read_value_type(in, key);
        const std::size_t count_at = in.offset();
        array.count = in.read<std::uint64_t>("an array length");
        const std::size_t element_size = value_type_size(array.element_type);
        // Strings take at least 8 bytes each and nested arrays at least 12.
        const std::size_t min_element = element_size ? element_size : array.element_type == ValueType::String ? 8 : 12;
        if (array.count > in.remaining() / min_element)
            fail(name_, ": metadata key '", key, "': array of ", array.count, " ", value_type_name(array.element_type),
                 " at offset ", count_at, " cannot fit in the ", in.remaining(), " bytes that follow");
        if (element_size) {
            const std::size_t elements_at = in.offset();
            array.packed = in.take(std::size_t(array.count) * element_size, "array elements");
            if (array.element_type == ValueType::Bool)
                for (std::uint64_t i = 0; i < array.count; ++i)
                    if (array.packed[i] > 1)
                        fail(name_, ": metadata key '", key, "': element ", i, " is not a bool (found ",
                             int(array.packed[i]), ") at offset ", elements_at + i);
        } else if (array.element_type == ValueType::String) {
            array.strings.reserve(std::size_t(array.count));
            for (std::uint64_t i = 0; i < array.count; ++i) array.strings.push_back(in.read_string("an array string"));
        } else {
            // As gguf-py writes them: each element is a bare array (element type, count, items), with
            // no type tag of its own since the outer array's element type already says "array".
            // Each costs far more memory than its 12 bytes in the file, hence a budget per file.
            if (array.count > kMaxNestedArrays - nested_arrays_)
                fail(name_, ": metadata key '", key, "': array of ", array.count, " arrays at offset ", count_at,
                     " takes the file past the limit of ", kMaxNestedArrays, " nested arrays");
            nested_arrays_ += array.count;
            array.nested.reserve(std::size_t(array.count));
            for (std::uint64_t i = 0; i < array.count; ++i)
                array.nested.push_back(read_value(in, ValueType::Array, key, depth + 1));
        }
        return Value::array(std::move(array));
    }

    TensorInfo read_tensor_info(detail::Cursor& in) {
        TensorInfo t;
        t.info_offset = in.offset();
        t.name = std::string(in.read_string("a tensor name", kMaxNameBytes));
        if (t.name.empty()) fail(name_, ": empty tensor name in the entry at offset ", t.info_offset);
        in.set_context("tensor '" + t.name + "' (entry at offset " + std::to_string(t.info_offset) + ")");
        const std::uint32_t n_dims = in.read<std::uint32_t>("a tensor's dimension count");
        if (n_dims == 0 || n_dims > kMaxDims)
            fail(name_, ": tensor '", t.name, "' (entry at offset ", t.info_offset, "): expected 1 to ", kMaxDims,
                 " dimensions, found ", n_dims);
        std::uint64_t elements = 1;
        for (std::uint32_t d = 0; d < n_dims; ++d) {
            const auto extent = in.read<std::int64_t>("a tensor dimension");
            if (extent <= 0)
                fail(name_, ": tensor '", t.name, "' (entry at offset ", t.info_offset, "): dimension ", d,
                     " must be positive, found ", extent);
            if (std::uint64_t(extent) > std::uint64_t(std::numeric_limits<std::int64_t>::max()) / elements)
                fail(name_, ": tensor '", t.name, "' (entry at offset ", t.info_offset,
                     "): element count overflows 64 bits");
            elements *= std::uint64_t(extent);
            t.shape.push_back(extent);
        }
        const std::size_t type_at = in.offset();
        const std::uint32_t raw_type = in.read<std::uint32_t>("a tensor type");
        const auto traits = tensor_type_traits(raw_type);
        if (!traits)
            fail(name_, ": tensor '", t.name, "': unknown tensor type ", raw_type, " at offset ", type_at);
        t.type = traits->type;
        if (std::uint64_t(t.shape[0]) % traits->block_elements != 0)
            fail(name_, ": tensor '", t.name, "' (entry at offset ", t.info_offset, "): first dimension ", t.shape[0],
                 " is not a multiple of the ", traits->name, " block size ", traits->block_elements);
        const std::uint64_t blocks = elements / traits->block_elements;
        if (blocks > std::numeric_limits<std::uint64_t>::max() / traits->block_bytes)
            fail(name_, ": tensor '", t.name, "' (entry at offset ", t.info_offset, "): byte size overflows 64 bits");
        t.n_elements = elements;
        t.n_bytes = blocks * traits->block_bytes;
        t.offset = in.read<std::uint64_t>("a tensor data offset");
        if (!tensor_index_.emplace(t.name, tensors_.size()).second)
            fail(name_, ": duplicate tensor name '", t.name, "' in the entry at offset ", t.info_offset);
        return t;
    }

    std::shared_ptr<FileMemory> memory_;
    std::string name_;
    std::uint32_t version_ = 0;
    std::uint64_t alignment_ = kDefaultAlignment;
    std::uint64_t data_offset_ = 0;
    std::uint64_t nested_arrays_ = 0;  // arrays inside arrays read so far (kMaxNestedArrays)
    std::vector<std::pair<std::string, Value>> metadata_;
    std::unordered_map<std::string, std::size_t> key_index_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string, std::size_t> tensor_index_;
};

}  // namespace smol::gguf
