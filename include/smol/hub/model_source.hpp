#pragma once
// Where a front end's model comes from, with llama.cpp's flags: -m FILE wins; else
// -hf REPO[:QUANT] (and --hf-file NAME), downloaded into the cache when missing; else the
// default model, but only if it is already cached (a bare command never touches the network).

#include <filesystem>
#include <optional>
#include <string>

#include "smol/core/error.hpp"
#include "smol/hub/download.hpp"
#include "smol/hub/model_spec.hpp"

namespace smol::hub {

struct ModelSource {
    std::string model;    // -m
    std::string hf_repo;  // -hf
    std::string hf_file;  // --hf-file
};

// The model file to load; nullopt when no flag names one and the default model is not cached.
inline std::optional<std::filesystem::path> resolve_model_source(const ModelSource& source,
                                                                 const DownloadOptions& options) {
    if (!source.model.empty()) return std::filesystem::path(source.model);
    if (!source.hf_repo.empty()) {
        ModelSpec spec = ModelSpec::parse(source.hf_repo);
        if (!source.hf_file.empty()) spec = spec.with_file(source.hf_file);
        return ensure_model(spec, options);
    }
    if (!source.hf_file.empty()) fail("--hf-file needs -hf REPO to say which repository it is in");
    return cached_path(ModelSpec::parse(kDefaultModelSpec), options);
}

// What to tell a user who gave no model and has not downloaded the default one.
inline std::string no_model_message(const DownloadOptions& options) {
    const ModelSpec spec = ModelSpec::parse(kDefaultModelSpec);
    return "no model: give -m MODEL.gguf, or -hf " + std::string(kDefaultModelSpec) +
           " to download the default model into " + detail::repo_cache_dir(options, spec.repo).string() + "/";
}

}  // namespace smol::hub
