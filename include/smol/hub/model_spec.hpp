#pragma once
// Which model to fetch from the Hugging Face Hub: "owner/name[:QUANT]" as llama.cpp's -hf flag
// takes it, or an exact file (--hf-file). Picking the file for a quantization tag out of a
// repository listing lives here too, so it can be tested without a network.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"

namespace smol::hub {

inline constexpr std::string_view kDefaultModelSpec = "ggml-org/SmolLM3-3B-GGUF:Q4_K_M";
inline constexpr std::string_view kDefaultQuant = "Q4_K_M";

namespace detail {

inline bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

inline char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

inline bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

inline bool iends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && iequals(text.substr(text.size() - suffix.size()), suffix);
}

inline std::string join(const std::vector<std::string>& items, std::string_view separator) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += separator;
        out += items[i];
    }
    return out;
}

}  // namespace detail

// Throws unless `file` is a plain relative path inside a repository. Names come from the
// command line and from the Hub's listing and both end up as paths in the cache, so "..",
// absolute paths and backslashes are refused rather than trusted.
inline void validate_repo_file(std::string_view file) {
    if (file.empty()) fail("repository file name is empty");
    if (file.front() == '/') fail("repository file name '", file, "' must be relative, not start with '/'");
    if (file.find('\\') != std::string_view::npos || file.find('\0') != std::string_view::npos)
        fail("repository file name '", file, "' contains a backslash or NUL byte");
    std::size_t start = 0;
    while (start <= file.size()) {
        const std::size_t end = std::min(file.find('/', start), file.size());
        const std::string_view part = file.substr(start, end - start);
        if (part.empty() || part == "." || part == "..")
            fail("repository file name '", file, "' has an empty, '.' or '..' path component");
        start = end + 1;
    }
}

// Throws unless `repo` is "owner/name" with names the Hub allows (it becomes a cache folder).
inline void validate_repo_id(std::string_view repo) {
    const std::size_t slash = repo.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 == repo.size() ||
        repo.find('/', slash + 1) != std::string_view::npos)
        fail("repository '", repo, "': expected owner/name");
    for (char c : repo)
        if (c != '/' && !detail::is_name_char(c))
            fail("repository '", repo, "' may only hold letters, digits, '-', '_', '.' and one '/'");
    const std::string_view owner = repo.substr(0, slash), name = repo.substr(slash + 1);
    if (owner == "." || owner == ".." || name == "." || name == "..")
        fail("repository '", repo, "': '.' and '..' are not names");
}

struct ModelSpec {
    std::string repo;   // "owner/name" on the Hub
    std::string quant;  // tag looked for in a .gguf file name, e.g. "Q4_K_M"
    std::string file;   // exact file in the repository (--hf-file); when set, quant is not used

    // Parses "owner/name" or "owner/name:QUANT"; the quant defaults to Q4_K_M.
    static ModelSpec parse(std::string_view text) {
        ModelSpec spec;
        std::string_view repo = text;
        const std::size_t colon = text.find(':');
        if (colon != std::string_view::npos) {
            repo = text.substr(0, colon);
            spec.quant = std::string(text.substr(colon + 1));
            if (spec.quant.empty())
                fail("model spec '", text, "': expected a quantization after ':' (e.g. ", kDefaultQuant, ")");
            for (char c : spec.quant)
                if (!detail::is_name_char(c))
                    fail("model spec '", text, "': quantization '", spec.quant,
                         "' may only hold letters, digits, '-', '_' and '.'");
        } else {
            spec.quant = std::string(kDefaultQuant);
        }
        try {
            validate_repo_id(repo);
        } catch (const Error& e) {
            fail("model spec '", text, "': ", e.what(), " (e.g. ", kDefaultModelSpec, ")");
        }
        spec.repo = std::string(repo);
        return spec;
    }

    // The same spec with an exact file (--hf-file) chosen.
    ModelSpec with_file(std::string_view exact_file) const {
        validate_repo_file(exact_file);
        ModelSpec spec = *this;
        spec.file = std::string(exact_file);
        return spec;
    }

    std::string to_string() const {
        if (!file.empty()) return repo + " (file " + file + ")";
        return repo + ":" + quant;
    }
};

// True for the parts of a split GGUF ("...-00001-of-00003.gguf").
inline bool is_split_gguf(std::string_view file) {
    static constexpr std::string_view kPattern = "-#####-of-#####.gguf";
    if (file.size() < kPattern.size()) return false;
    const std::string_view tail = file.substr(file.size() - kPattern.size());
    for (std::size_t i = 0; i < kPattern.size(); ++i) {
        const char want = kPattern[i], got = tail[i];
        if (want == '#' ? !std::isdigit(static_cast<unsigned char>(got)) : detail::lower(got) != want)
            return false;
    }
    return true;
}

// True when `file` is a .gguf whose base name holds the tag `quant` (case-insensitive) as a
// whole token: "Q4_K" matches "model-Q4_K.gguf" but not "model-Q4_K_M.gguf". Projector files
// (mmproj-*) are never a model.
inline bool gguf_matches_quant(std::string_view file, std::string_view quant) {
    if (quant.empty() || !detail::iends_with(file, ".gguf")) return false;
    const std::size_t slash = file.rfind('/');
    const std::string_view base = slash == std::string_view::npos ? file : file.substr(slash + 1);
    if (base.size() >= 6 && detail::iequals(base.substr(0, 6), "mmproj")) return false;
    auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
    for (std::size_t at = 0; at + quant.size() <= base.size(); ++at) {
        if (!detail::iequals(base.substr(at, quant.size()), quant)) continue;
        const bool starts_token = at == 0 || !alnum(base[at - 1]);
        const std::size_t after = at + quant.size();
        const bool ends_token = after == base.size() || (!alnum(base[after]) && base[after] != '_');
        if (starts_token && ends_token) return true;
    }
    return false;
}

// Picks the one single-file .gguf for `quant` among a repository's files. Several single-file
// matches, only split matches or none at all are errors that list what is there, so the user
// can name the file with --hf-file.
inline std::string choose_quant_file(const std::vector<std::string>& files, std::string_view quant,
                                     std::string_view repo) {
    std::vector<std::string> single, split, all_gguf;
    for (const std::string& file : files) {
        if (!detail::iends_with(file, ".gguf")) continue;
        all_gguf.push_back(file);
        if (!gguf_matches_quant(file, quant)) continue;
        (is_split_gguf(file) ? split : single).push_back(file);
    }
    if (single.size() == 1) return single.front();
    if (single.size() > 1)
        fail("repository ", repo, ": ", single.size(), " files match quantization ", quant, ": ",
             detail::join(single, ", "), "; choose one with --hf-file");
    if (!split.empty())
        fail("repository ", repo, ": quantization ", quant, " exists only as a split GGUF (",
             detail::join(split, ", "), "), which smol does not load; available .gguf files: ",
             detail::join(all_gguf, ", "));
    if (all_gguf.empty())
        fail("repository ", repo, " has no .gguf files (files: ",
             files.empty() ? std::string("none") : detail::join(files, ", "), ")");
    fail("repository ", repo, ": no .gguf file matches quantization ", quant,
         "; available .gguf files: ", detail::join(all_gguf, ", "));
}

}  // namespace smol::hub
