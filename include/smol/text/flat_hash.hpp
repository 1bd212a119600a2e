#pragma once
// Two open-addressing hash tables for the tokenizer. Loading SmolLM3's vocabulary makes about a
// million string lookups (three per merge) and encoding makes one pair lookup per candidate
// merge; node-based std::unordered_map spends most of that time in cache misses, while these
// keep every probe inside one flat array of small slots (linear probing, load at most 3/4).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace smol::text {

// Maps strings to int32 ids where the strings themselves live elsewhere: the table stores only
// (hash tag, id) and asks `text_of(id)` for the string when a tag matches.
class StringIdIndex {
public:
    // Inserts `id` under `text`, replacing the id of an equal string already present.
    template <class TextOf>
    void insert_or_assign(std::string_view text, std::int32_t id, TextOf&& text_of) {
        if ((count_ + 1) * 4 > slots_.size() * 3) grow(text_of);
        const std::uint64_t h = hash(text);
        for (std::size_t i = h & mask(); ; i = (i + 1) & mask()) {
            Slot& s = slots_[i];
            if (s.id < 0) {
                s = {tag(h), id};
                ++count_;
                return;
            }
            if (s.tag == tag(h) && text_of(s.id) == text) {
                s.id = id;
                return;
            }
        }
    }

    // The id stored under `text`, or -1.
    template <class TextOf>
    std::int32_t find(std::string_view text, TextOf&& text_of) const {
        if (slots_.empty()) return -1;
        const std::uint64_t h = hash(text);
        for (std::size_t i = h & mask(); ; i = (i + 1) & mask()) {
            const Slot& s = slots_[i];
            if (s.id < 0) return -1;
            if (s.tag == tag(h) && text_of(s.id) == text) return s.id;
        }
    }

    void reserve(std::size_t n) {
        std::size_t capacity = 16;
        while (capacity * 3 < n * 4) capacity *= 2;
        if (capacity > slots_.size() && count_ == 0) slots_.assign(capacity, Slot{});
    }

private:
    struct Slot {
        std::uint32_t tag = 0;  // high half of the hash: most mismatches end here, without touching the string
        std::int32_t id = -1;   // -1: empty
    };

    static std::uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
    static std::uint32_t tag(std::uint64_t h) { return std::uint32_t(h >> 32); }
    std::size_t mask() const { return slots_.size() - 1; }

    template <class TextOf>
    void grow(TextOf& text_of) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
        for (const Slot& s : old) {
            if (s.id < 0) continue;
            const std::uint64_t h = hash(text_of(s.id));
            std::size_t i = h & mask();
            while (slots_[i].id >= 0) i = (i + 1) & mask();
            slots_[i] = s;
        }
    }

    std::vector<Slot> slots_;  // size is a power of two (or zero)
    std::size_t count_ = 0;
};

// Maps a pair of int32 symbols to a BPE merge (its rank and the merged symbol).
class MergeTable {
public:
    struct Merge {
        std::int32_t rank;
        std::int32_t result;
    };

    void reserve(std::size_t n) {
        std::size_t capacity = 16;
        while (capacity * 3 < n * 4) capacity *= 2;
        if (capacity > slots_.size() && count_ == 0) slots_.assign(capacity, Slot{});
    }

    // Keeps an existing entry: the first (best-ranked) occurrence of a pair wins.
    void try_emplace(std::int32_t left, std::int32_t right, Merge merge) {
        if ((count_ + 1) * 4 > slots_.size() * 3) grow();
        const std::uint64_t k = key(left, right);
        for (std::size_t i = mix(k) & mask(); ; i = (i + 1) & mask()) {
            Slot& s = slots_[i];
            if (s.key == kEmpty) {
                s = {k, merge};
                ++count_;
                return;
            }
            if (s.key == k) return;
        }
    }

    const Merge* find(std::int32_t left, std::int32_t right) const {
        if (slots_.empty()) return nullptr;
        const std::uint64_t k = key(left, right);
        for (std::size_t i = mix(k) & mask(); ; i = (i + 1) & mask()) {
            const Slot& s = slots_[i];
            if (s.key == k) return &s.merge;
            if (s.key == kEmpty) return nullptr;
        }
    }

    std::size_t size() const { return count_; }

private:
    static constexpr std::uint64_t kEmpty = ~std::uint64_t(0);  // symbols are non-negative int32, never all ones
    struct Slot {
        std::uint64_t key = kEmpty;
        Merge merge{};
    };

    static std::uint64_t key(std::int32_t left, std::int32_t right) {
        return (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
    }
    // splitmix64's finalizer: symbol ids are small and dense, so their bits must be spread.
    static std::uint64_t mix(std::uint64_t x) {
        x ^= x >> 30;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 27;
        x *= 0x94D049BB133111EBull;
        return x ^ (x >> 31);
    }
    std::size_t mask() const { return slots_.size() - 1; }

    void grow() {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
        for (const Slot& s : old) {
            if (s.key == kEmpty) continue;
            std::size_t i = mix(s.key) & mask();
            while (slots_[i].key != kEmpty) i = (i + 1) & mask();
            slots_[i] = s;
        }
    }

    std::vector<Slot> slots_;
    std::size_t count_ = 0;
};

}  // namespace smol::text
