#pragma once
// smol-server's routes on cpp-httplib: the checks every request passes first (Host, CORS,
// Content-Type, the API key), the page and its files, the API's endpoints, the error shape of
// httplib's own errors, and the log line with counters of each reply. The completion endpoints
// themselves are completion_routes.hpp.

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api_request.hpp"
#include "completion_routes.hpp"
#include "connection_gate.hpp"
#include "http_framing.hpp"
#include "llama_completion_request.hpp"
#include "messages_api.hpp"
#include "metrics.hpp"
#include "ollama_routes.hpp"
#include "openai_chat_request.hpp"
#include "origin_policy.hpp"
#include "outgoing_text.hpp"
#include "reply_ids.hpp"
#include "sampling_fields.hpp"
#include "server_state.hpp"
#include "slot_routes.hpp"
#include "smol/smol.hpp"
#include "smol_server_assets.hpp"
#include "tenants.hpp"

namespace smol_server {

// An error in the shape of the API the path belongs to (error_body_for_path). A 503 (busy,
// draining, shutting down) also says when to try again, as balancers and clients expect.
inline void send_error(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    if (e.status == 503) res.set_header("Retry-After", "1");
    res.set_content(to_wire(error_body_for_path(req.path, e)), "application/json");
}

inline void send_json(httplib::Response& res, const json& body, int status = 200) {
    res.status = status;
    res.set_content(to_wire(body), "application/json");
}

// The most tokens one /tokenize reply holds or one /detokenize request gives (--max-tokenize,
// by default the context): with it, the largest reply either can build is bounded before it is
// built (a vocabulary piece is at most a few hundred bytes, six times that escaped).
inline std::size_t tokenize_limit(const ServerOptions& options) {
    return std::size_t(options.max_tokenize > 0 ? options.max_tokenize : options.context);
}

// `at_least`: "more than" where counting stopped past the limit.
inline void check_token_count(const ServerOptions& options, std::size_t count, const char* subject,
                              const char* at_least, const char* verb) {
    const std::size_t limit = tokenize_limit(options);
    if (count > limit)
        reject(400,
               std::string(subject) + " " + (*at_least ? std::string(at_least) + " " + std::to_string(limit) : std::to_string(count)) +
                   " tokens; this server " + verb + " at most " +
                   std::to_string(limit) + " in one request (--max-tokenize)",
               "too_many_tokens");
}

// {"tokens": [...]}, written straight into its text (no JSON value per token): the ids, or with
// a tokenizer {"id", "piece"} objects whose piece is the token's text, control tokens spelled
// out (bytes that are not UTF-8 replaced, as every reply's).
inline std::string tokens_reply(std::span<const std::int32_t> ids, const smol::text::Tokenizer* pieces) {
    std::string out = "{\"tokens\":[";
    out.reserve(out.size() + ids.size() * (pieces ? 32 : 7) + 2);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i) out += ',';
        if (!pieces) {
            out += std::to_string(ids[i]);
            continue;
        }
        out += "{\"id\":";
        out += std::to_string(ids[i]);
        out += ",\"piece\":";
        out += to_wire(std::string(pieces->rendered_piece(ids[i], /*show_control=*/true)));
        out += '}';
    }
    out += "]}";
    return out;
}

// With --cors, lets a page from an allowed origin read the reply; whether it did.
inline bool allow_origin(const ServerOptions& options, const httplib::Request& req, httplib::Response& res) {
    if (!req.has_header("Origin")) return false;
    const std::string allowed = allowed_origin(options, req.get_header_value("Origin"));
    if (allowed.empty()) return false;
    res.set_header("Access-Control-Allow-Origin", allowed);
    res.set_header("Vary", "Origin");
    return true;
}

// When the request being answered on this httplib worker thread arrived, for its log line.
inline thread_local Clock::time_point request_start;

// Open to anyone: the page and its files (the embedded set) and /health; every other request
// needs the key when one is set, whatever its path.
inline bool public_request(const httplib::Request& req) {
    if (req.method != "GET" && req.method != "HEAD") return false;
    if (req.path == "/health" || req.path == "/v1/health" || req.path == "/") return true;
    for (std::size_t i = 0; i < smol_server_assets::count; ++i)
        if (req.path == smol_server_assets::all[i].url) return true;
    return false;
}

// Every handler throws ApiError for client mistakes; this turns them into responses.
template <class Handler>
auto guarded(Handler handler) {
    return [handler](const httplib::Request& req, httplib::Response& res) {
        try {
            handler(req, res);
        } catch (const ApiError& e) {
            send_error(req, res, e);
        } catch (const std::exception& e) {
            send_error(req, res, ApiError{500, std::string("internal error: ") + e.what(), "server_error", "internal"});
        }
    };
}

// The checks every request passes before its route: Host, CORS preflight, Content-Type, the key.
inline void install_request_checks(httplib::Server& http, ServerState& server) {
    http.set_pre_routing_handler([&server](const httplib::Request& req, httplib::Response& res) {
        request_start = Clock::now();
        server.metrics.http_requests++;
        // Behind a balancer, which replica answered (deploy/README.md); on every reply, errors too.
        res.set_header("X-Smol-Replica", server.options.replica_name);
        // DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 reaches a
        // loopback server as same-origin, and could read every reply; its requests still say
        // "Host: evil.example". Checked before CORS and the key, on every method.
        if (!host_allowed(server.options, req.get_header_value("Host"))) {
            send_error(req, res, ApiError{403,
                                     "the Host header '" + loggable(req.get_header_value("Host")) +
                                         "' is not one this server answers to; it listens on a loopback address and "
                                         "answers localhost, 127.0.0.1 and [::1] (add names with --allowed-hosts)",
                                     "invalid_request_error", "host_not_allowed"});
            return httplib::Server::HandlerResponse::Handled;
        }
        const bool cors = allow_origin(server.options, req, res);
        if (req.method == "OPTIONS") {
            // A browser's preflight: answered without the key (browsers never send it here).
            res.status = 204;
            if (cors) {
                res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
                // Anthropic's browser clients send their key and version headers too.
                res.set_header("Access-Control-Allow-Headers",
                               "Authorization, Content-Type, X-Session-Id, x-api-key, anthropic-version, anthropic-beta, "
                               "anthropic-dangerous-direct-browser-access");
                res.set_header("Access-Control-Max-Age", "600");
            }
            return httplib::Server::HandlerResponse::Handled;
        }
        // A form or text/plain POST needs no CORS preflight, so any page could send one to a
        // loopback server; JSON bodies must say they are JSON, which only a preflighted (or
        // same-origin) request can.
        if (req.method == "POST" && !http::is_json_content_type(req.get_header_value("Content-Type"))) {
            send_error(req, res, ApiError{415,
                                     "request bodies must be JSON sent with 'Content-Type: application/json', found " +
                                         (req.has_header("Content-Type")
                                              ? "'" + loggable(req.get_header_value("Content-Type")) + "'"
                                              : std::string("no Content-Type")),
                                     "invalid_request_error", "unsupported_media_type"});
            return httplib::Server::HandlerResponse::Handled;
        }
        if (server.options.api_keys.empty() || public_request(req)) return httplib::Server::HandlerResponse::Unhandled;
        if (request_api_key(server.options, req)) return httplib::Server::HandlerResponse::Unhandled;
        send_error(req, res, ApiError{401,
                                      req.has_header("Authorization") || req.has_header("x-api-key")
                                          ? "invalid API key"
                                          : "an API key is required: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
                                      "authentication_error", "invalid_api_key"});
        return httplib::Server::HandlerResponse::Handled;
    });
}

// Why a path that llama-server or ollama answers is not one here (empty for any other path):
// its 404 says so, rather than only that the endpoint does not exist.
inline std::string why_not_served(std::string_view path) {
    const auto any_of = [&](std::initializer_list<std::string_view> paths) {
        return std::find(paths.begin(), paths.end(), path) != paths.end();
    };
    if (any_of({"/infill", "/v1/infill"}))
        return "SmolLM3 has no fill-in-the-middle tokens, so smol-server has no /infill; send the code before the cursor "
               "to /completion";
    if (any_of({"/embedding", "/embeddings", "/v1/embeddings", "/api/embed", "/api/embeddings"}))
        return "smol-server generates text and computes no embeddings (SmolLM3 is not an embedding model)";
    if (any_of({"/rerank", "/reranking", "/v1/rerank", "/v1/reranking"})) return "smol-server has no reranking model";
    if (any_of({"/api/pull", "/api/push", "/api/create", "/api/copy", "/api/delete", "/api/blobs"}))
        return "smol-server serves the one model it was started with (-m or -hf); it pulls, pushes, creates, copies and "
               "deletes none";
    return "";
}

// Errors httplib produces itself (unknown path, body over the limit) get the same shape.
inline void install_error_shape(httplib::Server& http) {
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        ApiError e{res.status, "request failed", "invalid_request_error", "http_" + std::to_string(res.status)};
        if (res.status == 404) {
            const std::string why = why_not_served(req.path);
            e = {404, "no such endpoint: " + req.method + " " + loggable(req.path) + (why.empty() ? "" : ": " + why),
                 "not_found_error", "not_found"};
        }
        if (res.status == 413) e = {413, "the request body is larger than the server accepts", "invalid_request_error",
                                    "payload_too_large"};
        if (res.status == 405) e = {405, "method not allowed", "invalid_request_error", "method_not_allowed"};
        send_error(req, res, e);
    });
}

// A line on stderr for each reply (and with --log-prompts the body), and the reply counters.
inline void install_request_log(httplib::Server& http, ServerState& server) {
    http.set_logger([&server](const httplib::Request& req, const httplib::Response& res) {
        if (res.status >= 500) server.metrics.http_server_errors++;
        else if (res.status >= 400) server.metrics.http_client_errors++;
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - request_start).count();
        // The gate says who the client is; httplib itself only sees the gate's Unix socket.
        const std::string client = req.has_header(kClientField) ? req.get_header_value(kClientField) : req.remote_addr;
        std::fprintf(stderr, "%s %s %s %d %.1fms\n", loggable(client).c_str(), loggable(req.method).c_str(),
                     loggable(req.path).c_str(), res.status, ms);
        // The body as JSON text on one line (dump() escapes control characters), not as sent.
        if (server.options.log_prompts && req.method == "POST" &&
            (req.path == "/v1/chat/completions" || req.path == "/v1/completions" || req.path == "/chat/completions" ||
             req.path == "/completions" || req.path == "/completion" || is_messages_path(req.path) ||
             req.path == "/v1/responses" || req.path == "/v1/responses/input_tokens" || req.path == "/api/chat" ||
             req.path == "/api/generate")) {
            std::string shown = "(not JSON within the limits)";
            if (const std::optional<json> body = smol::try_parse_json(req.body)) shown = to_wire(*body);
            std::fprintf(stderr, "  body: %s\n", shown.c_str());
        }
    });
}

// The chat page and its files, compiled in.
inline void install_page_routes(httplib::Server& http) {
    for (std::size_t i = 0; i < smol_server_assets::count; ++i) {
        const auto& asset = smol_server_assets::all[i];
        auto serve = [&asset](const httplib::Request&, httplib::Response& res) {
            res.set_content(reinterpret_cast<const char*>(asset.data), asset.size, asset.content_type);
            res.set_header("Cache-Control", "no-cache");
        };
        http.Get(asset.url, serve);
        if (std::string_view(asset.url) == "/index.html") http.Get("/", serve);
    }
}

// What a balancer and an operator look at: /health and /metrics.
inline void install_health_routes(httplib::Server& http, ServerState& server) {
    // A balancer sends traffic only where this says 200: not while loading, nor once draining.
    // /v1/health is llama-server's second name for it.
    const auto health = [&server](const httplib::Request&, httplib::Response& res) {
        if (server.draining.load()) send_json(res, json{{"status", "draining"}}, 503);
        else if (server.model.scheduler()) send_json(res, json{{"status", "ok"}});
        else send_json(res, json{{"status", "loading"}}, 503);
    };
    http.Get("/health", health);
    http.Get("/v1/health", health);

    http.Get("/metrics", [&server](const httplib::Request&, httplib::Response& res) {
        const ReplicaState replica{server.options.replica_name, server.draining.load()};
        res.set_content(metrics_text(server.metrics, replica, server.gate_stats.load(), server.model.scheduler()),
                        "text/plain; version=0.0.4");
    });
}

// What the model and the server hold: /v1/models, and llama-server's /props and /slots.
inline void install_model_info_routes(httplib::Server& http, ServerState& server) {
    http.Get("/v1/models", guarded([&server](const httplib::Request&, httplib::Response& res) {
        smol::Scheduler& s = server.model.require_scheduler();
        send_json(res, json{{"object", "list"},
                            {"data", json::array({{{"id", server.model.id()},
                                                   {"object", "model"},
                                                   {"created", unix_seconds()},
                                                   {"owned_by", "smol"},
                                                   {"meta",
                                                    {{"n_ctx", s.context()},
                                                     {"n_vocab", s.engine().n_vocab()},
                                                     {"n_params", s.engine().info().n_params},
                                                     {"slots", s.options().slots}}}}})}});
    }));

    // llama-server's /props: the defaults a request starts from, and what the server holds. The
    // model is named by its file name: its absolute path would tell any key holder how the
    // machine is laid out (a user name, a mount).
    http.Get("/props", guarded([&server](const httplib::Request&, httplib::Response& res) {
        smol::Scheduler& s = server.model.require_scheduler();
        smol::GenerationParams defaults;  // what a request without sampling fields runs with: the flags
        defaults.sampling = server.options.sampling;
        json props = {{"default_generation_settings", {{"n_ctx", s.context()}, {"params", generation_settings_json(defaults)}}},
                      {"total_slots", s.options().slots},
                      {"model_alias", server.model.id()},
                      {"model_path", std::filesystem::path(server.options.model_path).filename().string()},
                      {"modalities", {{"vision", false}, {"audio", false}}}};
        if (const auto* tmpl = s.engine().model().file().find("tokenizer.chat_template"); tmpl && tmpl->is_string())
            props["chat_template"] = std::string(*tmpl->as_string());
        send_json(res, props);
    }));

    // llama-server's /slots, read-only: what each conversation slot holds.
    http.Get("/slots", guarded([&server](const httplib::Request&, httplib::Response& res) {
        smol::Scheduler& s = server.model.require_scheduler();
        json slots = json::array();
        for (const auto& slot : s.slot_states())
            slots.push_back({{"id", slot.id},
                             {"n_ctx", s.context()},
                             {"is_processing", slot.processing},
                             {"n_cached_tokens", slot.cached_tokens}});
        send_json(res, slots);
    }));
    // llama-server's slot actions (slot_routes.hpp); any id reaches the handler, which says
    // which ids exist.
    http.Post(R"(/slots/([^/]*))", guarded([&server](const httplib::Request& req, httplib::Response& res) {
        slot_actions(server, req, res);
    }));
}

// The completion endpoints of the three APIs and their token counts (completion_routes.hpp).
inline void install_completion_routes(httplib::Server& http, ServerState& server) {
    // llama-server answers chat without /v1 too; so does smol-server, through the same handler.
    for (const char* path : {"/v1/chat/completions", "/chat/completions"})
        http.Post(path, guarded([&server](const httplib::Request& req, httplib::Response& res) {
            complete(server, req, res, Endpoint::chat);
        }));
    http.Post("/v1/completions", guarded([&server](const httplib::Request& req, httplib::Response& res) {
        complete(server, req, res, Endpoint::text);
    }));
    // llama-server's native completion API at its two paths (OpenAI's is /v1/completions).
    for (const char* path : {"/completion", "/completions"})
        http.Post(path, guarded([&server](const httplib::Request& req, httplib::Response& res) {
            complete(server, req, res, Endpoint::llama_completion);
        }));

    // Anthropic's Messages API (messages_api.hpp).
    http.Post("/v1/messages", guarded([&server](const httplib::Request& req, httplib::Response& res) {
        complete(server, req, res, Endpoint::messages);
    }));
    http.Post("/v1/messages/count_tokens", guarded([&server](const httplib::Request& req, httplib::Response& res) {
        count_message_tokens(server, req, res);
    }));

    // OpenAI's Responses API, stateless (responses_request.hpp, responses_replies.hpp).
    http.Post("/v1/responses", guarded([&server](const httplib::Request& req, httplib::Response& res) {
        complete(server, req, res, Endpoint::responses);
    }));
    http.Post("/v1/responses/input_tokens", guarded([&server](const httplib::Request& req, httplib::Response& res) {
        count_response_tokens(server, req, res);
    }));
    // ollama's native API (ollama_routes.hpp).
    install_ollama_routes(http, server, [](auto handler) { return guarded(std::move(handler)); });
}

// llama-server's /tokenize, /detokenize and /apply-template.
inline void install_tokenize_routes(httplib::Server& http, ServerState& server) {
    http.Post("/apply-template", guarded([&server](const httplib::Request& req, httplib::Response& res) {
        server.model.require_scheduler();  // answered once the model is loaded, as the others
        send_json(res, apply_template(parse_json_body(req.body)));
    }));

    http.Post("/tokenize", guarded([&server](const httplib::Request& req, httplib::Response& res) {
        smol::Scheduler& s = server.model.require_scheduler();
        const json body = parse_json_body(req.body);
        const auto content = body.find("content");
        if (content == body.end()) reject(400, "'content' is required: the text to tokenize", "missing_content");
        if (!content->is_string())
            reject(400, std::string("'content' must be a string, found ") + content->type_name(), "invalid_type");
        const bool special = bool_field(body, "parse_special").value_or(true);
        const bool with_pieces = bool_field(body, "with_pieces").value_or(false);
        // Encoding stops past the cap: a longer text is refused, so its ids need not all be made.
        const auto ids =
            s.tokenizer().encode(content->get_ref<const std::string&>(), special, {}, tokenize_limit(server.options));
        check_token_count(server.options, ids.size(), "'content' is", "more than", "returns");
        res.set_content(tokens_reply(ids, with_pieces ? &s.tokenizer() : nullptr), "application/json");
    }));

    http.Post("/detokenize", guarded([&server](const httplib::Request& req, httplib::Response& res) {
        smol::Scheduler& s = server.model.require_scheduler();
        const json body = parse_json_body(req.body);
        const auto tokens = body.find("tokens");
        if (tokens == body.end()) reject(400, "'tokens' is required: a list of token ids", "missing_tokens");
        if (!tokens->is_array()) reject(400, std::string("'tokens' must be an array, found ") + tokens->type_name(), "invalid_type");
        check_token_count(server.options, tokens->size(), "'tokens' holds", "", "takes");
        std::vector<std::int32_t> ids;
        for (const auto& t : *tokens) {
            if (!t.is_number_integer()) reject(400, std::string("'tokens' must hold integers, found ") + t.type_name(), "invalid_type");
            const long long id = t.get<long long>();
            if (id < 0 || id >= s.engine().n_vocab())
                reject(400,
                       "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                           std::to_string(s.engine().n_vocab()) + ")",
                       "invalid_value");
            ids.push_back(std::int32_t(id));
        }
        send_json(res, json{{"content", s.tokenizer().decode(ids, /*show_control=*/true)}});
    }));
}

// Every route and hook, one group each (the groups' paths do not overlap, so their order does
// not matter to httplib).
inline void install_routes(httplib::Server& http, ServerState& server) {
    install_request_checks(http, server);
    install_error_shape(http);
    install_request_log(http, server);
    install_page_routes(http);
    install_health_routes(http, server);
    install_model_info_routes(http, server);
    install_completion_routes(http, server);
    install_tokenize_routes(http, server);
}

// httplib's threads: every chat client holds one for its whole reply, so the pool has room for
// all generating and queued requests plus a few quick ones (health, metrics, the page). Only
// whole requests reach it (the gate holds the rest), one per connection.
inline int http_pool_size(const ServerOptions& options) { return options.parallel + options.max_queue + 8; }

// httplib as the server runs it: its pool, body cap, timeouts and the routes.
inline void configure_http(httplib::Server& http, ServerState& server, int pool) {
    http.new_task_queue = [pool] { return new httplib::ThreadPool(std::size_t(pool)); };
    http.set_payload_max_length(server.options.max_body_bytes);
    http.set_read_timeout(30, 0);
    http.set_write_timeout(30, 0);
    install_routes(http, server);
}

}  // namespace smol_server
