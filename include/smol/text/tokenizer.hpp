#pragma once
// Byte-level BPE tokenizer (GGUF `tokenizer.ggml.model` = "gpt2") with the Llama-3
// pre-tokenizer, producing the ids of the Hugging Face tokenizer the model was trained with:
//   1. special tokens are cut out of the text (USER_DEFINED always, CONTROL only when asked);
//   2. the rest is split by the Llama-3 pre-tokenizer regex (pretokenizer.hpp);
//   3. each piece's bytes go through GPT-2's byte-to-unicode mapping; a piece that is itself a
//      normal vocabulary entry is that token (Llama 3's `ignore_merges`), any other piece is
//      merged strictly by rank, lowest first, leftmost first among equal ranks.
// Decoding maps vocabulary strings back to the exact bytes.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/text/flat_hash.hpp"
#include "smol/text/pretokenizer.hpp"
#include "smol/text/text_span.hpp"
#include "smol/text/unicode.hpp"

namespace smol::text {

// GGUF token types (llama.cpp's llama_token_type).
enum class TokenType : int { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class Tokenizer {
public:
    // Reads tokenizer.ggml.{model, pre, tokens, token_type, merges, eos_token_id, bos_token_id}.
    static Tokenizer from_gguf(const gguf::File& file) {
        const std::string& where = file.name();
        const std::string_view model = file.get_string("tokenizer.ggml.model");
        if (model != "gpt2")
            fail(where, ": tokenizer.ggml.model: expected \"gpt2\" (byte-level BPE), found \"", model, "\"");
        const std::string_view pre = file.get_string_or("tokenizer.ggml.pre", "<missing>");
        if (pre != "smaug-bpe" && pre != "llama-bpe")
            fail(where, ": tokenizer.ggml.pre: expected \"smaug-bpe\" or \"llama-bpe\" (the Llama-3 pre-tokenizer), found \"",
                 pre, "\"");

        const auto& token_strings = file.require("tokenizer.ggml.tokens").strings();
        std::vector<std::string> tokens(token_strings.begin(), token_strings.end());

        std::vector<TokenType> types(tokens.size(), TokenType::Normal);
        if (const gguf::Value* type_value = file.find("tokenizer.ggml.token_type")) {
            const std::vector<std::int64_t> raw = type_value->ints();
            if (raw.size() != tokens.size())
                fail(where, ": tokenizer.ggml.token_type: expected ", tokens.size(), " entries (one per token), found ", raw.size());
            for (std::size_t i = 0; i < raw.size(); ++i) {
                if (raw[i] < 1 || raw[i] > 6)
                    fail(where, ": tokenizer.ggml.token_type[", i, "]: expected a type in 1..6, found ", raw[i]);
                types[i] = TokenType(raw[i]);
            }
        }

        const auto& merge_strings = file.require("tokenizer.ggml.merges").strings();
        std::vector<std::string> merges(merge_strings.begin(), merge_strings.end());

        auto read_id = [&](std::string_view key) -> std::optional<std::int32_t> {
            const gguf::Value* v = file.find(key);
            if (!v) return std::nullopt;
            const auto id = v->as_int();
            if (!id) fail(where, ": ", key, ": expected an integer token id, found ", v->describe_type());
            if (*id < 0 || *id >= std::int64_t(tokens.size()))
                fail(where, ": ", key, ": expected a token id below ", tokens.size(), ", found ", *id);
            return std::int32_t(*id);
        };
        const auto eos = read_id("tokenizer.ggml.eos_token_id");
        if (!eos) fail(where, ": missing required metadata key 'tokenizer.ggml.eos_token_id'");
        const auto bos = read_id("tokenizer.ggml.bos_token_id");

        // Both names stand for Llama 3's tokenizer.json, whose BPE model sets `ignore_merges`:
        // a piece that is already a whole vocabulary entry is final. llama.cpp honours that for
        // "llama-bpe" only and merges "smaug-bpe" pieces (SmolLM3's label), which splits 579
        // vocabulary words the model only ever saw whole; we follow the tokenizer it was
        // trained with.
        constexpr bool kLlama3IgnoresMerges = true;
        return Tokenizer(std::move(tokens), std::move(types), std::move(merges), *eos, bos, kLlama3IgnoresMerges);
    }

    // `merges` are "left right" pairs of vocabulary strings, highest priority first.
    Tokenizer(std::vector<std::string> tokens, std::vector<TokenType> types, std::vector<std::string> merges,
              std::int32_t eos_id, std::optional<std::int32_t> bos_id = std::nullopt, bool ignore_merges = false)
        : tokens_(std::move(tokens)), types_(std::move(types)), eos_id_(eos_id), bos_id_(bos_id),
          ignore_merges_(ignore_merges) {
        if (tokens_.empty()) fail("tokenizer: expected a non-empty vocabulary");
        if (tokens_.size() > std::size_t(INT32_MAX / 2)) fail("tokenizer: vocabulary of ", tokens_.size(), " tokens is too large");
        if (types_.size() != tokens_.size())
            fail("tokenizer: expected one token type per token (", tokens_.size(), "), found ", types_.size());
        check_id(eos_id_, "EOS id");
        if (bos_id_) check_id(*bos_id_, "BOS id");

        // Later duplicates win, as in llama.cpp's token_to_id map.
        symbol_ids_.reserve(tokens_.size() + merges.size() / 64);
        for (std::size_t i = 0; i < tokens_.size(); ++i) symbol_ids_.insert_or_assign(tokens_[i], std::int32_t(i), symbol_text());

        mark_end_of_generation_tokens();
        build_decoded_pieces();
        build_merges(merges);
        build_special_tokens();
    }

    // Token ids of `text`. With `parse_special`, CONTROL tokens written in the text (such as
    // "<|im_start|>") become their ids; USER_DEFINED tokens ("<think>") always do. Never adds BOS.
    std::vector<std::int32_t> encode(std::string_view text, bool parse_special) const {
        return encode(text, parse_special, {});
    }

    // Token ids of a prompt whose control tokens are its template's alone: CONTROL tokens are
    // matched everywhere but in `plain_text` (where message text stands, which a user, a tool or
    // a web page wrote), so no text can close a turn or open one; there "<|im_end|>" is just
    // those ten characters. USER_DEFINED tokens are matched everywhere, as Hugging Face does. For
    // text without control-token spellings in those spans the ids are encode(text, true)'s.
    std::vector<std::int32_t> encode(std::string_view text, std::span<const TextSpan> plain_text) const {
        return encode(text, /*parse_special=*/true, plain_text);
    }

    // max_ids: stop once more than this many ids are made (they are then a prefix of the whole
    // text's, one window at most past the bound), for callers that refuse longer texts anyway.
    std::vector<std::int32_t> encode(std::string_view text, bool parse_special, std::span<const TextSpan> plain_text,
                                     std::size_t max_ids = std::numeric_limits<std::size_t>::max()) const {
        std::vector<std::int32_t> ids;
        ids.reserve(std::min(text.size() / 3, max_ids) + 4);
        Scratch scratch;
        for (const Fragment& fragment : split_special_tokens(text, parse_special, plain_text)) {
            if (ids.size() > max_ids) break;
            if (fragment.token >= 0) ids.push_back(fragment.token);
            else encode_text(text.substr(fragment.begin, fragment.end - fragment.begin), ids, scratch, max_ids);
        }
        return ids;
    }

    // How much text is pre-tokenized at once (the rest of a long text waits its turn); tests set
    // small windows to show that the ids do not depend on it.
    void set_encode_window(std::size_t bytes) { encode_window_bytes_ = std::max(bytes, kEncodeMarginBytes + 1); }
    // Pieces ending this close to a window's end are left to the next window.
    static constexpr std::size_t kEncodeMarginBytes = 64;

    // The exact bytes the ids stand for. CONTROL tokens are left out unless `show_control`.
    std::string decode(std::span<const std::int32_t> ids, bool show_control = false) const {
        std::string text;
        for (const std::int32_t id : ids) text += rendered_piece(id, show_control);
        return text;
    }

    // The vocabulary string as stored (byte-mapped for normal tokens, e.g. "Ġthe").
    std::string_view token_piece(std::int32_t id) const {
        check_id(id, "token id");
        return tokens_[std::size_t(id)];
    }
    // The bytes one token decodes to; CONTROL tokens give their text, UNUSED and BYTE tokens
    // nothing (llama.cpp renders neither for byte-level vocabularies).
    const std::string& token_bytes(std::int32_t id) const {
        check_id(id, "token id");
        return decoded_[std::size_t(id)];
    }
    std::optional<std::int32_t> find(std::string_view token_text) const {
        const std::int32_t id = symbol_ids_.find(token_text, symbol_text());
        if (id < 0 || std::size_t(id) >= tokens_.size()) return std::nullopt;  // extra symbols are not tokens
        return id;
    }

    std::int32_t eos_id() const { return eos_id_; }
    std::optional<std::int32_t> bos_id() const { return bos_id_; }
    std::size_t n_vocab() const { return tokens_.size(); }
    TokenType type(std::int32_t id) const {
        check_id(id, "token id");
        return types_[std::size_t(id)];
    }
    bool is_control(std::int32_t id) const {
        const TokenType t = type(id);
        return t == TokenType::Control || t == TokenType::Unknown;
    }
    // Tokens that end a generated turn: EOS, then <|im_end|>, <|end_of_text|>, <|eot_id|> and
    // <|eom_id|> where the vocabulary has them.
    const std::vector<std::int32_t>& end_of_generation_ids() const { return end_of_generation_; }
    bool is_end_of_generation(std::int32_t id) const {
        return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) != end_of_generation_.end();
    }

    // What decode() shows for one token.
    std::string_view rendered_piece(std::int32_t id, bool show_control) const {
        check_id(id, "token id");
        if (!show_control && is_control(id)) return {};
        return decoded_[std::size_t(id)];
    }

private:
    // The string of a BPE symbol: a vocabulary entry, or an extra symbol (see build_merges).
    struct SymbolText {
        const Tokenizer* self;
        std::string_view operator()(std::int32_t id) const {
            const std::size_t n = self->tokens_.size();
            return std::size_t(id) < n ? std::string_view(self->tokens_[std::size_t(id)])
                                       : std::string_view(self->extra_symbols_[std::size_t(id) - n]);
        }
    };
    SymbolText symbol_text() const { return {this}; }

    // A piece of the input: raw text [begin, end) when token < 0, otherwise one special token.
    struct Fragment {
        std::int32_t token;
        std::size_t begin;
        std::size_t end;
    };

    // Ids already produced for a piece within one encode() call: [first, first + count) of the
    // output. Keys view the text being encoded, which outlives the cache.
    using WordCache = std::unordered_map<std::string_view, std::pair<std::size_t, std::size_t>>;

    // A possible merge of the symbols at positions `left` and `right` of a piece.
    struct Candidate {
        std::int32_t rank;
        std::int32_t left;
        std::int32_t right;
        std::int32_t left_symbol;   // the symbols when queued: a changed symbol makes the candidate stale
        std::int32_t right_symbol;
        std::int32_t result;
        // Heap order: the lowest rank on top, then the leftmost position.
        bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };

    // Buffers reused by every piece of one encode() call.
    struct Scratch {
        WordCache cache;
        std::vector<std::int32_t> symbol, prev, next;  // [piece bytes]
        std::vector<Candidate> queue;                  // binary heap
        std::string mapped;
    };

    void check_id(std::int32_t id, const char* what) const {
        if (id < 0 || std::size_t(id) >= tokens_.size())
            fail("tokenizer: ", what, " ", id, " is outside the vocabulary [0, ", tokens_.size(), ")");
    }

    void mark_end_of_generation_tokens() {
        end_of_generation_.push_back(eos_id_);
        for (const char* text : {"<|im_end|>", "<|end_of_text|>", "<|eot_id|>", "<|eom_id|>"}) {
            const auto id = find(text);
            if (!id) continue;
            // These only make sense as atomic tokens; llama.cpp forces them to CONTROL too.
            types_[std::size_t(*id)] = TokenType::Control;
            if (!is_end_of_generation(*id)) end_of_generation_.push_back(*id);
        }
    }

    void build_decoded_pieces() {
        const auto& mapping = unicode::ByteMapping::get();
        decoded_.resize(tokens_.size());
        for (std::size_t i = 0; i < tokens_.size(); ++i) {
            switch (types_[i]) {
                case TokenType::Normal: {
                    // Every code point of a byte-level vocabulary string stands for one byte; a
                    // code point outside the mapping (a malformed vocabulary) is kept as text.
                    std::string& bytes = decoded_[i];
                    for (const char32_t cp : unicode::decode_utf8_lenient(tokens_[i]).codepoints) {
                        const int byte = mapping.codepoint_to_byte(cp);
                        if (byte >= 0) bytes.push_back(char(byte));
                        else unicode::append_utf8(bytes, cp);
                    }
                    break;
                }
                case TokenType::Control:
                case TokenType::Unknown:
                case TokenType::UserDefined: decoded_[i] = tokens_[i]; break;
                case TokenType::Unused:
                case TokenType::Byte: break;
            }
        }
    }

    // Symbols are vocabulary ids, plus ids from n_vocab up for strings that a merge mentions or
    // produces but the vocabulary lacks (none in a consistent vocabulary); this keeps the BPE
    // loop on integers while giving the same result as llama.cpp's string-based merging.
    void build_merges(const std::vector<std::string>& merges) {
        auto intern = [&](std::string_view s) -> std::int32_t {
            if (const std::int32_t id = symbol_ids_.find(s, symbol_text()); id >= 0) return id;
            const auto id = std::int32_t(tokens_.size() + extra_symbols_.size());
            extra_symbols_.emplace_back(s);
            symbol_ids_.insert_or_assign(s, id, symbol_text());
            return id;
        };

        const auto& mapping = unicode::ByteMapping::get();
        for (int b = 0; b < 256; ++b) byte_symbols_[std::size_t(b)] = intern(mapping.byte_to_utf8(std::uint8_t(b)));

        merges_.reserve(merges.size());
        std::string joined;
        for (std::size_t rank = 0; rank < merges.size(); ++rank) {
            const std::string& merge = merges[rank];
            // Split at the first space after the first character, as llama.cpp does; mapped
            // vocabulary strings contain no spaces, so this is unambiguous for real files.
            const std::size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string::npos;
            if (space == std::string::npos)
                fail("tokenizer: merge ", rank, ": expected \"left right\", found \"", merge, "\"");
            const std::string_view left(merge.data(), space);
            const std::string_view right(merge.data() + space + 1, merge.size() - space - 1);
            joined.assign(left);
            joined.append(right);
            const std::int32_t left_id = intern(left);
            const std::int32_t right_id = intern(right);
            const std::int32_t result_id = intern(joined);
            // A repeated pair keeps its first (best) rank.
            merges_.try_emplace(left_id, right_id, {std::int32_t(rank), result_id});
        }
    }

    // llama.cpp matches special tokens one at a time, longest text first, each over all the
    // raw text left by the longer ones; ties keep id order.
    void build_special_tokens() {
        for (std::size_t i = 0; i < tokens_.size(); ++i) {
            const TokenType t = types_[i];
            if ((t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) && !tokens_[i].empty())
                special_ids_.push_back(std::int32_t(i));
        }
        std::stable_sort(special_ids_.begin(), special_ids_.end(), [&](std::int32_t a, std::int32_t b) {
            return tokens_[std::size_t(a)].size() > tokens_[std::size_t(b)].size();
        });
    }

    // Whether [begin, end) overlaps a span of `plain` (sorted, apart).
    static bool overlaps(std::span<const TextSpan> plain, std::size_t begin, std::size_t end) {
        const auto after = std::upper_bound(plain.begin(), plain.end(), begin,
                                            [](std::size_t at, const TextSpan& span) { return at < span.end; });
        return after != plain.end() && after->begin < end;
    }

    std::vector<Fragment> split_special_tokens(std::string_view text, bool parse_special,
                                               std::span<const TextSpan> plain) const {
        std::vector<Fragment> fragments;
        if (text.empty()) return fragments;
        fragments.push_back({-1, 0, text.size()});
        std::vector<Fragment> next;
        for (const std::int32_t id : special_ids_) {
            if (!parse_special && is_control(id)) continue;
            const std::string_view special = tokens_[std::size_t(id)];
            bool found_any = false;
            next.clear();
            for (const Fragment& fragment : fragments) {
                if (fragment.token >= 0) {
                    next.push_back(fragment);
                    continue;
                }
                std::size_t begin = fragment.begin;
                const std::string_view window = text.substr(0, fragment.end);
                for (std::size_t match, from = begin; (match = window.find(special, from)) != std::string_view::npos;) {
                    if (is_control(id) && overlaps(plain, match, match + special.size())) {
                        from = match + 1;  // spelled inside message text: text, and so are its bytes
                        continue;
                    }
                    if (match > begin) next.push_back({-1, begin, match});
                    next.push_back({id, match, match + special.size()});
                    begin = from = match + special.size();
                    found_any = true;
                }
                if (begin < fragment.end) next.push_back({-1, begin, fragment.end});
            }
            if (found_any) fragments.swap(next);
        }
        return fragments;
    }

    // Pre-tokenizes raw text (no special tokens in it) and appends the BPE ids of each piece.
    void encode_text(std::string_view raw, std::vector<std::int32_t>& ids, Scratch& scratch, std::size_t max_ids) const {
        // Invalid UTF-8 bytes become U+FFFD before splitting (as in llama.cpp), so the pieces are
        // cut from the re-encoded text in that case (and not cached: the cache's keys view text
        // that outlives the encode() call, which `raw` does).
        // One pass over the windows finds whether decoding changes the text and, from the first
        // window where it does, builds the re-encoded copy (the windows before it are their bytes).
        std::string reencoded;
        bool valid = true;
        for (std::size_t begin = 0, end; begin < raw.size(); begin = end) {
            end = window_end(raw, begin, encode_window_bytes_);
            const unicode::DecodedText window = unicode::decode_utf8_lenient(raw.substr(begin, end - begin));
            if (valid && !window.changed) continue;
            if (valid) {
                valid = false;
                reencoded.reserve(raw.size() + raw.size() / 2 + 8);
                reencoded.assign(raw.substr(0, begin));
            }
            for (const char32_t cp : window.codepoints) unicode::append_utf8(reencoded, cp);
        }
        const std::string_view text = valid ? raw : std::string_view(reencoded);
        // A long text is split in windows, so the code points and pieces held at once are a
        // window's (24 bytes of them per byte of text), not the whole text's, whatever a request
        // sends. Each window's pieces are taken but for those ending within the margin
        // of its end, which a longer text could have split differently; the next window starts
        // where they did. A piece longer than the window gets a window as long as it needs.
        std::size_t begin = 0, window = encode_window_bytes_;
        while (begin < text.size() && ids.size() <= max_ids) {
            const std::size_t end = window_end(text, begin, window);
            const bool last = end == text.size();
            const std::size_t taken = encode_window(text.substr(begin, end - begin), last, valid, ids, scratch);
            if (taken == 0) {
                window *= 2;  // one piece fills the window: widen it
                continue;
            }
            begin += taken;
            window = encode_window_bytes_;
        }
    }

    // The end of a window of about `bytes` from `begin`: before a byte that starts a character (or
    // at the text's end), where cutting changes no character's decoding.
    static std::size_t window_end(std::string_view text, std::size_t begin, std::size_t bytes) {
        std::size_t end = std::min(text.size(), begin + bytes);
        while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
        return end;
    }

    // Encodes the pieces of `text` (valid UTF-8, a window of the whole) and says how many of its
    // bytes they covered: all of them when `last`, else up to the first piece that ends within
    // kEncodeMarginBytes of the window's end (0 when that is the first piece).
    std::size_t encode_window(std::string_view text, bool last, bool cacheable, std::vector<std::int32_t>& ids,
                              Scratch& scratch) const {
        const unicode::DecodedText decoded = unicode::decode_utf8_lenient(text);
        // Pieces come in text order, so one cursor walking the code points finds each piece's
        // bytes; a table of every code point's offset would cost 8 bytes per character.
        std::size_t cursor_cp = 0, cursor_byte = 0;
        auto byte_offset = [&](std::size_t cp_index) {
            for (; cursor_cp < cp_index; ++cursor_cp) {
                const char32_t cp = decoded.codepoints[cursor_cp];
                cursor_byte += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            }
            return cursor_byte;
        };
        const std::size_t keep_before = last ? text.size() + 1 : text.size() - std::min(text.size(), kEncodeMarginBytes);
        std::size_t taken = 0;
        for (const auto& [first, end_cp] : pre_tokenize_llama3(decoded.codepoints)) {
            const std::size_t begin = byte_offset(first);
            const std::size_t end = byte_offset(end_cp);
            if (end >= keep_before) break;
            taken = end;
            const std::string_view word = text.substr(begin, end - begin);
            if (cacheable) {
                if (auto it = scratch.cache.find(word); it != scratch.cache.end()) {
                    const auto [start, count] = it->second;
                    for (std::size_t k = 0; k < count; ++k) ids.push_back(ids[start + k]);
                    continue;
                }
                const std::size_t start = ids.size();
                encode_word(word, ids, scratch);
                scratch.cache.emplace(word, std::pair{start, ids.size() - start});
            } else {
                encode_word(word, ids, scratch);
            }
        }
        return last ? text.size() : taken;
    }

    // Byte-level BPE on one pre-tokenized piece: a doubly linked list of symbols and a queue of
    // candidate merges ordered by (rank, position), as in llama.cpp's llm_tokenizer_bpe.
    void encode_word(std::string_view word, std::vector<std::int32_t>& ids, Scratch& scratch) const {
        const std::size_t n = word.size();
        if (n == 0) return;
        if (ignore_merges_) {
            const auto& mapping = unicode::ByteMapping::get();
            scratch.mapped.clear();
            for (const char c : word) scratch.mapped += mapping.byte_to_utf8(std::uint8_t(c));
            // Only the BPE model's own entries count: Hugging Face keeps added tokens apart.
            if (auto id = find(scratch.mapped); id && types_[std::size_t(*id)] == TokenType::Normal) {
                ids.push_back(*id);
                return;
            }
        }
        if (n == 1) {
            emit_symbol(byte_symbols_[std::uint8_t(word[0])], ids);
            return;
        }

        auto& symbol = scratch.symbol;  // [n] symbol at each position; merged-away positions are unlinked
        auto& prev = scratch.prev;      // [n] linked list of live positions, -1 at the ends
        auto& next = scratch.next;      // [n]
        auto& queue = scratch.queue;
        symbol.resize(n);
        prev.resize(n);
        next.resize(n);
        queue.clear();
        for (std::size_t i = 0; i < n; ++i) {
            symbol[i] = byte_symbols_[std::uint8_t(word[i])];
            prev[i] = std::int32_t(i) - 1;
            next[i] = i + 1 < n ? std::int32_t(i) + 1 : -1;
        }

        auto consider = [&](std::int32_t left, std::int32_t right) {
            if (left < 0 || right < 0) return;
            const std::int32_t ls = symbol[std::size_t(left)], rs = symbol[std::size_t(right)];
            const MergeTable::Merge* merge = merges_.find(ls, rs);
            if (!merge) return;
            queue.push_back({merge->rank, left, right, ls, rs, merge->result});
            std::push_heap(queue.begin(), queue.end());
        };
        for (std::size_t i = 0; i + 1 < n; ++i) consider(std::int32_t(i), std::int32_t(i + 1));

        while (!queue.empty()) {
            std::pop_heap(queue.begin(), queue.end());
            const Candidate c = queue.back();
            queue.pop_back();
            const auto l = std::size_t(c.left), r = std::size_t(c.right);
            if (symbol[l] != c.left_symbol || symbol[r] != c.right_symbol || next[l] != c.right) continue;
            symbol[l] = c.result;
            symbol[r] = -1;
            next[l] = next[r];
            if (next[r] >= 0) prev[std::size_t(next[r])] = c.left;
            consider(prev[l], c.left);
            consider(c.left, next[l]);
        }

        for (std::int32_t i = 0; i >= 0; i = next[std::size_t(i)]) emit_symbol(symbol[std::size_t(i)], ids);
    }

    void emit_symbol(std::int32_t symbol, std::vector<std::int32_t>& ids) const {
        if (std::size_t(symbol) < tokens_.size()) {
            ids.push_back(symbol);
            return;
        }
        // A string the vocabulary lacks: llama.cpp falls back to looking up each of its bytes.
        for (const char c : extra_symbols_[std::size_t(symbol) - tokens_.size()])
            if (auto id = find(std::string_view(&c, 1))) ids.push_back(*id);
    }

    std::vector<std::string> tokens_;           // [n_vocab] vocabulary strings as stored
    std::vector<TokenType> types_;              // [n_vocab]
    std::vector<std::string> decoded_;          // [n_vocab] bytes each token stands for
    std::vector<std::string> extra_symbols_;    // merge strings missing from the vocabulary
    StringIdIndex symbol_ids_;                  // vocabulary strings and extra symbols to their ids
    MergeTable merges_;
    std::array<std::int32_t, 256> byte_symbols_{};  // symbol of each input byte's mapped character
    std::vector<std::int32_t> special_ids_;     // CONTROL, USER_DEFINED and UNKNOWN tokens, longest first
    std::size_t encode_window_bytes_ = std::size_t(1) << 18;  // text pre-tokenized at once (encode_text)
    std::vector<std::int32_t> end_of_generation_;
    std::int32_t eos_id_;
    std::optional<std::int32_t> bos_id_;
    bool ignore_merges_;
};

// Turns generated ids into text one token at a time. A token can end in the middle of a
// multi-byte character (emoji are often split over several byte tokens), so bytes of an
// unfinished character are held back until the token that completes it arrives. The output is
// always valid UTF-8: bytes that can never form a character are replaced with U+FFFD.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool show_control = false)
        : tokenizer_(&tokenizer), show_control_(show_control) {}

    // The text that became complete with this token (possibly empty).
    std::string push(std::int32_t id) {
        pending_ += tokenizer_->rendered_piece(id, show_control_);
        return take_complete(false);
    }

    // Everything still held back; an unfinished character at the end becomes U+FFFD.
    std::string flush() { return take_complete(true); }

    bool has_pending() const { return !pending_.empty(); }

private:
    std::string take_complete(bool at_end) {
        std::string out;
        std::size_t i = 0;
        while (i < pending_.size()) {
            const std::string_view rest = std::string_view(pending_).substr(i);
            const int length = unicode::utf8_sequence_length(rest);
            if (length > 0) {
                out.append(rest.substr(0, std::size_t(length)));
                i += std::size_t(length);
            } else if (length < 0) {
                unicode::append_utf8(out, unicode::kReplacementChar);
                i += std::size_t(-length);
            } else if (at_end) {
                unicode::append_utf8(out, unicode::kReplacementChar);
                i = pending_.size();
            } else {
                break;  // an unfinished character: wait for the next token
            }
        }
        pending_.erase(0, i);
        return out;
    }

    const Tokenizer* tokenizer_;
    bool show_control_;
    std::string pending_;
};

}  // namespace smol::text
