#pragma once
// A Hugging Face `tokenizer.json` rebuilt from a GGUF's own tokenizer metadata, so that smol's
// tokenizer can be compared with Hugging Face's implementations (Rust `tokenizers`, or the
// JavaScript port `@huggingface/tokenizers`) on the very vocabulary and merges smol reads.
//
// It is Llama 3's layout, the one GGUFs labelled "llama-bpe" or "smaug-bpe" were converted from:
// the Llama-3 split regex and the byte-level mapping as pre-tokenizer, a byte-level BPE model
// with `ignore_merges` over the normal tokens, and every other token as an added token
// (CONTROL ones marked special).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "smol/gguf/reader.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol::text {

// The regex that pretokenizer.hpp implements by hand, as Llama 3's tokenizer.json spells it.
inline constexpr std::string_view kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The tokens and their types come from `tokenizer` (which validated them when it read `file`),
// the merges from `file` as stored. `with_control_tokens = false` leaves the CONTROL tokens out
// altogether, which is how a Hugging Face tokenizer treats their text when special tokens are
// not parsed (smol's `encode(text, false)`): as plain text.
inline nlohmann::json hf_tokenizer_json(const gguf::File& file, const Tokenizer& tokenizer, bool with_control_tokens) {
    nlohmann::json vocab = nlohmann::json::object();
    nlohmann::json added = nlohmann::json::array();
    for (std::int32_t id = 0; id < std::int32_t(tokenizer.n_vocab()); ++id) {
        const TokenType type = tokenizer.type(id);
        const std::string piece(tokenizer.token_piece(id));
        if (type == TokenType::Normal) {
            vocab[piece] = id;
            continue;
        }
        if (type == TokenType::Unused || type == TokenType::Byte) continue;
        const bool control = tokenizer.is_control(id);
        if (control && !with_control_tokens) continue;
        added.push_back({{"id", id},
                         {"content", piece},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", control}});
    }

    nlohmann::json merge_list = nlohmann::json::array();
    for (const std::string_view merge : file.require("tokenizer.ggml.merges").strings())
        merge_list.push_back(std::string(merge));

    const nlohmann::json byte_level = {
        {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
    return {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", added},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", std::string(kLlama3SplitRegex)}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            byte_level}}}},
        {"post_processor", nullptr},
        {"decoder", byte_level},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"ignore_merges", true},
          {"vocab", vocab},
          {"merges", merge_list}}},
    };
}

}  // namespace smol::text
