#pragma once
// smol's public API: load a SmolLM3 GGUF, chat with it (Engine, ChatSession), or go lower:
// tokenize, render the chat template, make a KV cache, run tokens, read logits, read and write
// GGUF files, quantize and dequantize rows of any type in the type table.
// Front ends (CLI, server, tools) include this header and nothing deeper; model download is
// smol/hub.hpp (CMake target smol::hub, which brings OpenSSL and cpp-httplib).

#include "smol/core/error.hpp"
#include "smol/core/bounded_json.hpp"
#include "smol/core/threads.hpp"
#include "smol/generate/cache_file.hpp"
#include "smol/generate/engine.hpp"
#include "smol/generate/logprobs.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/pipeline.hpp"
#include "smol/generate/scheduler.hpp"
#include "smol/generate/sequence.hpp"
#include "smol/generate/session.hpp"
#include "smol/generate/stop_strings.hpp"
#include "smol/gguf/reader.hpp"
#include "smol/gguf/writer.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/load_progress.hpp"
#include "smol/model/model.hpp"
#include "smol/model/registry.hpp"
#include "smol/quant/int8_peak.hpp"
#include "smol/quant/type_table.hpp"
#include "smol/text/chat_template.hpp"
#include "smol/text/grammar.hpp"
#include "smol/text/hf_tokenizer_json.hpp"
#include "smol/text/json_schema.hpp"
#include "smol/text/thinking.hpp"
#include "smol/text/tokenizer.hpp"
#include "smol/text/tool_calls.hpp"
