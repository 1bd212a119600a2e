#pragma once
// smol-server's command line: the options struct, argv parsing and the help text. A model named
// with -hf (or not named at all: the cached default) is resolved to a file here, so the rest of
// the server always has a path. Bad input prints what was expected and exits with status 2.

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "smol/core/comma_list.hpp"
#include "smol/hub.hpp"

namespace smol_server {

struct ServerOptions {
    std::string model_path;
    std::string hf_repo;  // -hf, when no -m
    std::string hf_file;  // --hf-file
    std::string host = "127.0.0.1";
    int port = 8080;  // 0: any free port (printed at start)
    int context = 4096;
    int threads = 0;
    int parallel = 4;
    int max_queue = 32;
    std::string api_key;
    std::string alias;                      // the model's id in the API; default: the file name
    std::vector<std::string> cors_origins;  // browser origins allowed to call the API ("*": any)
    std::vector<std::string> allowed_hosts;  // Host names accepted besides loopback's ("*": any)
    std::size_t max_body_bytes = 4u << 20;
    std::size_t cache_budget_mib = 0;
    bool log_prompts = false;  // completion request bodies in the log (never the key)
    smol::RopeScalingRequest rope_scaling;  // --rope-scaling, --rope-scale, --yarn-orig-ctx
    smol::KvCacheTypes cache_types;         // -ctk, -ctv
    // The connection gate's limits (see connection_gate.hpp).
    int max_connections = 2048;
    int header_timeout_s = 10;
    int body_timeout_s = 60;
    int keep_alive_timeout_s = 5;  // 0: close each connection after its reply
    std::size_t max_buffered_mib = 256;  // request bytes the gate holds at once, all connections together
};

[[noreturn]] inline void usage(int code) {
    std::fprintf(code ? stderr : stdout,
                 "usage: smol-server [-m MODEL | -hf REPO[:QUANT]] [options]\n"
                 "  -m, --model PATH        SmolLM3 GGUF file\n"
                 "  -hf, --hf-repo REPO[:QUANT]  model from the Hugging Face Hub, downloaded into the cache when\n"
                 "                          missing (default quant Q4_K_M); without -m or -hf the cached\n"
                 "                          default ggml-org/SmolLM3-3B-GGUF:Q4_K_M\n"
                 "      --hf-file NAME      with -hf: the file in the repository\n"
                 "      --host HOST         address to listen on (default 127.0.0.1)\n"
                 "      --port PORT         port (default 8080; 0 picks a free one)\n"
                 "  -c, --ctx-size N        context per conversation slot in tokens (default 4096)\n"
                 "  -t, --threads N         compute threads (default: all cores)\n"
                 "  -np, --parallel N       requests generating at once (default 4)\n"
                 "      --queue N           requests waiting for a slot before 503 (default 32)\n"
                 "      --api-key KEY       require 'Authorization: Bearer KEY' on everything but the page and /health\n"
                 "      --alias NAME        the model's id in the API (default: the file name)\n"
                 "      --cors ORIGINS      comma-separated origins whose pages may call the API (* for any)\n"
                 "      --allowed-hosts HOSTS  comma-separated Host names accepted besides localhost, 127.0.0.1 and\n"
                 "                          [::1] when listening on a loopback address (* for any): a reverse\n"
                 "                          proxy's name; others get 403, which stops DNS rebinding\n"
                 "      --max-body BYTES    largest accepted request body (default 4 MiB)\n"
                 "      --max-connections N open client connections at most; more get 503 (default 2048)\n"
                 "      --header-timeout S  seconds for a whole request header to arrive, else 408 (default 10)\n"
                 "      --body-timeout S    seconds for a whole request body to arrive after its header (default 60)\n"
                 "      --keep-alive-timeout S  seconds an idle kept-alive connection waits for its next request\n"
                 "                          (default 5; 0 closes each connection after its reply)\n"
                 "      --max-buffered MIB  request bytes held at once, all connections together; past it requests\n"
                 "                          wait unread, up to --header-timeout, then get 503 (default 256)\n"
                 "      --cache-budget MIB  memory for KV caches kept between requests, counted in the\n"
                 "                          cache types (default: one per slot)\n"
                 "      --log-prompts       also log the body of each completion request (prompts are private:\n"
                 "                          off by default; the API key is never logged)\n"
                 "%s%s",
                 smol::kRopeScalingUsage, smol::kKvCacheTypeUsage);
    std::exit(code);
}

inline ServerOptions parse_options(int argc, char** argv) {
    ServerOptions o;
    auto value = [&](int& i) -> std::string {
        if (i + 1 >= argc) {
            std::fprintf(stderr, "smol-server: %s needs a value\n", argv[i]);
            usage(2);
        }
        return argv[++i];
    };
    auto number = [&](int& i, long long low, long long high) -> long long {
        const std::string flag = argv[i];
        const std::string v = value(i);
        try {
            std::size_t used = 0;
            const long long n = std::stoll(v, &used);
            if (used == v.size() && n >= low && n <= high) return n;
        } catch (const std::exception&) {
        }
        std::fprintf(stderr, "smol-server: %s expects a whole number in [%lld, %lld], found '%s'\n", flag.c_str(),
                     low, high, v.c_str());
        usage(2);
    };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-m" || a == "--model") o.model_path = value(i);
        else if (a == "-hf" || a == "--hf-repo") o.hf_repo = value(i);
        else if (a == "--hf-file") o.hf_file = value(i);
        else if (a == "--host") o.host = value(i);
        else if (a == "--port") o.port = int(number(i, 0, 65535));
        else if (a == "-c" || a == "--ctx-size") o.context = int(number(i, 16, 1 << 20));
        else if (a == "-t" || a == "--threads") o.threads = int(number(i, 1, 1024));
        else if (a == "-np" || a == "--parallel") o.parallel = int(number(i, 1, 256));
        else if (a == "--queue") o.max_queue = int(number(i, 0, 100000));
        else if (a == "--api-key") o.api_key = value(i);
        else if (a == "--alias") o.alias = value(i);
        else if (a == "--cors") o.cors_origins = smol::split_commas(value(i));
        else if (a == "--allowed-hosts") o.allowed_hosts = smol::split_commas(value(i));
        else if (a == "--max-body") o.max_body_bytes = std::size_t(number(i, 1024, 1ll << 32));
        else if (a == "--max-connections") o.max_connections = int(number(i, 1, 1 << 20));
        else if (a == "--header-timeout") o.header_timeout_s = int(number(i, 1, 3600));
        else if (a == "--body-timeout") o.body_timeout_s = int(number(i, 1, 3600));
        else if (a == "--keep-alive-timeout") o.keep_alive_timeout_s = int(number(i, 0, 3600));
        else if (a == "--max-buffered") o.max_buffered_mib = std::size_t(number(i, 1, 1 << 20));
        else if (a == "--log-prompts") o.log_prompts = true;
        else if (a == "--cache-budget") o.cache_budget_mib = std::size_t(number(i, 0, 1ll << 24));
        else if (smol::is_rope_scaling_flag(a) || smol::is_kv_cache_type_flag(a)) {
            try {
                if (smol::is_rope_scaling_flag(a)) smol::apply_rope_scaling_flag(o.rope_scaling, a, value(i));
                else smol::apply_kv_cache_type_flag(o.cache_types, a, value(i));
            } catch (const smol::Error& e) {
                std::fprintf(stderr, "smol-server: %s\n", e.what());
                usage(2);
            }
        } else if (a == "-h" || a == "--help") usage(0);
        else {
            std::fprintf(stderr, "smol-server: unknown option '%s'\n", a.c_str());
            usage(2);
        }
    }
    if (o.model_path.empty()) {
        // -hf downloads (with progress) when needed; no flag at all takes the cached default.
        const auto hub = smol::hub::default_options();
        std::optional<std::filesystem::path> path;
        try {
            path = smol::hub::resolve_model_source({o.model_path, o.hf_repo, o.hf_file}, hub);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "smol-server: error: %s\n", e.what());
            std::exit(1);
        }
        if (!path) {
            std::fprintf(stderr, "smol-server: %s\n", smol::hub::no_model_message(hub).c_str());
            usage(2);
        }
        o.model_path = path->string();
    }
    return o;
}

}  // namespace smol_server
