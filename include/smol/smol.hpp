#pragma once
// smol's public API: load a SmolLM3 GGUF, make a KV cache, run tokens, read logits.
// Front ends (CLI, server, tools) include this header and nothing deeper.

#include "smol/core/error.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"
#include "smol/model/registry.hpp"
