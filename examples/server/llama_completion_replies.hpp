#pragma once
// llama-server's native completion replies as smol-server writes them, without HTTP: the final
// object ({content, tokens, stop: true, tokens_predicted, generation_settings, timings, ...}),
// and, streamed, Server-Sent Events of chunks ({content, tokens, stop: false, ...}) ending with
// that object and no [DONE]. reply_adapters.hpp carries them over HTTP.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api_request.hpp"
#include "llama_completion_request.hpp"
#include "openai_replies.hpp"
#include "outgoing_text.hpp"
#include "reply_ids.hpp"
#include "smol/smol.hpp"

namespace smol_server {

// llama-server's stop_type: why the reply ended.
inline const char* llama_stop_type(smol::FinishReason reason) {
    switch (reason) {
        case smol::FinishReason::end_of_generation:
        case smol::FinishReason::tool_calls: return "eos";
        case smol::FinishReason::stop_string: return "word";
        case smol::FinishReason::max_tokens:
        case smol::FinishReason::context_full: return "limit";
        case smol::FinishReason::cancelled:
        case smol::FinishReason::error: return "none";
    }
    return "none";
}

// completion_probabilities: OpenAI's logprobs.content with each token's id.
inline json llama_probabilities_json(std::span<const smol::TokenLogprob> entries, const smol::text::Tokenizer& tokenizer) {
    return logprobs_json(entries, tokenizer, /*with_ids=*/true);
}

// The reply with only the fields `paths` names ("a/b": member b of member a), each under its
// path, as llama-server's response_fields; the whole reply when none are named.
inline json select_response_fields(json reply, const std::vector<std::string>& paths) {
    if (paths.empty()) return reply;
    json selected = json::object();
    for (const std::string& path : paths) {
        const json* at = &reply;
        std::size_t start = 0;
        while (at && start <= path.size()) {
            const std::size_t end = std::min(path.find('/', start), path.size());
            const auto member = at->is_object() ? at->find(path.substr(start, end - start)) : at->end();
            at = at->is_object() && member != at->end() ? &*member : nullptr;
            start = end + 1;
        }
        if (at) selected[path] = *at;
    }
    return selected;
}

// Token ids as a JSON list.
inline json token_list(std::span<const std::int32_t> tokens) {
    json out = json::array();
    for (const std::int32_t token : tokens) out.push_back(token);
    return out;
}

// A reply's text and token ids (the ids with return_tokens only).
struct LlamaCompletionText {
    const std::string& content;
    std::span<const std::int32_t> tokens;
};

// One streamed chunk: the text and tokens of one step, tokens_predicted counting all so far.
inline json llama_completion_chunk(const LlamaCompletionSettings& settings, LlamaCompletionText text,
                                   int tokens_predicted, const json& probabilities) {
    json chunk = {{"index", 0},
                  {"content", text.content},
                  {"tokens", settings.return_tokens ? token_list(text.tokens) : json::array()},
                  {"stop", false},
                  {"id_slot", -1},
                  {"tokens_predicted", tokens_predicted},
                  {"tokens_evaluated", settings.prompt_tokens}};
    if (!probabilities.is_null()) chunk["completion_probabilities"] = probabilities;
    return chunk;
}

// The last object of a reply that finished: the whole text when not streamed (streamed, its
// text went out in the chunks and `text` is empty), how it ended, and the request's settings.
// `has_new_line`: whether the generated text holds a line break.
inline json llama_completion_final(const ReplyIds& ids, const LlamaCompletionSettings& settings, LlamaCompletionText text,
                                   bool has_new_line, const smol::StreamEvent& end, const json& probabilities) {
    const smol::GenerationUsage& usage = end.usage;
    json reply = {{"index", 0},
                  {"content", text.content},
                  {"tokens", settings.return_tokens ? token_list(text.tokens) : json::array()},
                  {"id_slot", end.slot},
                  {"stop", true},
                  {"model", ids.model},
                  {"tokens_predicted", usage.completion_tokens},
                  {"tokens_evaluated", usage.prompt_tokens},
                  {"generation_settings", settings.generation_settings},
                  {"prompt", settings.prompt},
                  {"has_new_line", has_new_line},
                  {"truncated", false},
                  {"stop_type", llama_stop_type(end.finish)},
                  {"stopping_word", end.stop_string},
                  // The slot's cache: the prompt and every token sampled but the last, which was never fed.
                  {"tokens_cached", usage.prompt_tokens + std::max(usage.completion_tokens - 1, 0)},
                  {"timings", timings_json(usage)}};
    if (!probabilities.is_null()) reply["completion_probabilities"] = probabilities;
    return select_response_fields(std::move(reply), settings.response_fields);
}

// A streamed native reply: each event's text as a chunk, the token ids and log-probabilities of
// text still held back (a possible stop string) riding with the next chunk that shows text, and
// the final object last.
class LlamaCompletionStream {
public:
    LlamaCompletionStream() = default;
    LlamaCompletionStream(ReplyIds ids, LlamaCompletionSettings settings, bool logprobs)
        : ids_(std::move(ids)), settings_(std::move(settings)), logprobs_(logprobs) {}

    std::string render(const smol::StreamEvent& event, const smol::text::Tokenizer& tokenizer, const ApiError* error) {
        pending_tokens_.insert(pending_tokens_.end(), event.tokens.begin(), event.tokens.end());
        pending_logprobs_.insert(pending_logprobs_.end(), event.logprobs.begin(), event.logprobs.end());
        predicted_ += int(event.tokens.size());
        has_new_line_ = has_new_line_ || event.content.find('\n') != std::string::npos;
        std::string out;
        if (!event.content.empty() || (event.finished && !pending_tokens_.empty() && !error)) {
            out += sse(llama_completion_chunk(settings_, {event.content, pending_tokens_}, predicted_, probabilities(tokenizer)));
            pending_tokens_.clear();
        }
        if (!event.finished) return out;
        if (error) return out + sse(error_body(*error));
        static const std::string no_text;
        return out + sse(llama_completion_final(ids_, settings_, {no_text, {}}, has_new_line_, event, nullptr));
    }

private:
    // The waiting log-probabilities as the chunk's completion_probabilities (null when not asked).
    json probabilities(const smol::text::Tokenizer& tokenizer) {
        if (!logprobs_) return nullptr;
        json out = llama_probabilities_json(pending_logprobs_, tokenizer);
        pending_logprobs_.clear();
        return out;
    }

    ReplyIds ids_;
    LlamaCompletionSettings settings_;
    bool logprobs_ = false;
    std::vector<std::int32_t> pending_tokens_;
    std::vector<smol::TokenLogprob> pending_logprobs_;
    int predicted_ = 0;
    bool has_new_line_ = false;
};

}  // namespace smol_server
