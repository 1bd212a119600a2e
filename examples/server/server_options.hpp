#pragma once
// smol-server's command line: the options struct, argv parsing and the help text. A model named
// with -hf (or not named at all: the cached default) is resolved to a file here, so the rest of
// the server always has a path. Bad input prints what was expected and exits with status 2.

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api_keys.hpp"
#include "program_args.hpp"
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
    // Every key accepted (--api-key, --api-key-file, SMOL_API_KEY); none: the API is open.
    std::vector<std::string> api_keys;
    // Whether requests under different keys may reuse each other's cached prompt prefixes
    // (tenants.hpp); off: each key's prompts stay its own.
    bool cache_share_keys = false;
    std::string alias;                      // the model's id in the API; default: the file name
    std::vector<std::string> cors_origins;  // browser origins allowed to call the API ("*": any)
    std::vector<std::string> allowed_hosts;  // Host names accepted besides loopback's ("*": any)
    std::size_t max_body_bytes = 4u << 20;
    int max_tokenize = 0;  // tokens /tokenize and /detokenize take or give in one request; 0: the context (-c)
    std::size_t cache_budget_mib = 0;
    bool log_prompts = false;  // completion request bodies in the log (never the key)
    smol::RopeScalingRequest rope_scaling;  // --rope-scaling, --rope-scale, --yarn-orig-ctx
    smol::KvCacheTypes cache_types;         // -ctk, -ctv
    bool repack = true;                     // -nr
    smol::SpeculationParams speculation;    // --spec, --draft-max, --draft-min: every request's default
    smol::SamplerParams sampling;           // kSamplingUsage's flags: every request's defaults
    bool dry_breakers_given = false;        // a --dry-sequence-breaker replaced the defaults
    // The connection gate's limits (see connection_gate.hpp).
    int max_connections = 2048;
    int header_timeout_s = 10;
    int body_timeout_s = 60;
    int keep_alive_timeout_s = 5;  // 0: close each connection after its reply
    std::size_t max_buffered_mib = 256;  // request bytes the gate holds at once, all connections together
    // Behind a load balancer (deploy/README.md): the name this replica answers with (the
    // X-Smol-Replica header, /metrics), and how long SIGTERM lets running replies finish while
    // new requests get 503. Under Kubernetes' default 30 s grace period by default.
    std::string replica_name;  // default: the host name
    int drain_timeout_s = 25;
};

// A replica's name goes into a header and a Prometheus label as it is, so it is held to a
// host name's characters.
inline bool valid_replica_name(std::string_view name) {
    if (name.empty() || name.size() > 128) return false;
    for (const char c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':')) return false;
    return true;
}

// The machine's host name, which names a replica unless --replica-name does ("smol" if it
// cannot be read or is not a valid name).
inline std::string host_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || !valid_replica_name(name)) return "smol";
    return name;
}

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
                 "      --api-key KEY       require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on everything but\n"
                 "                          the page and /health; repeat it for several keys. The SMOL_API_KEY\n"
                 "                          environment variable adds one more (safer: argv is visible to\n"
                 "                          other users of the machine)\n"
                 "      --api-key-file FILE the keys in FILE, one a line ('#' comments and blank lines skipped);\n"
                 "                          repeatable, and combined with --api-key and SMOL_API_KEY\n"
                 "      --cache-share-keys  let requests under different keys reuse each other's cached prompt\n"
                 "                          prefixes (off: a key never sees another's cache, whose reuse shows\n"
                 "                          in cached_tokens and in timing; a request's cache_salt separates\n"
                 "                          caches the same way)\n"
                 "      --alias NAME        the model's id in the API (default: the file name)\n"
                 "      --cors ORIGINS      comma-separated origins whose pages may call the API (* for any)\n"
                 "      --allowed-hosts HOSTS  comma-separated Host names accepted besides localhost, 127.0.0.1 and\n"
                 "                          [::1] when listening on a loopback address (* for any): a reverse\n"
                 "                          proxy's name; others get 403, which stops DNS rebinding\n"
                 "      --max-body BYTES    largest accepted request body (default 4 MiB)\n"
                 "      --max-tokenize N    most tokens /tokenize returns or /detokenize takes (default: -c)\n"
                 "      --max-connections N open client connections at most; more get 503 (default 2048)\n"
                 "      --header-timeout S  seconds for a whole request header to arrive, else 408 (default 10)\n"
                 "      --body-timeout S    seconds for a whole request body to arrive after its header (default 60)\n"
                 "      --keep-alive-timeout S  seconds an idle kept-alive connection waits for its next request\n"
                 "                          (default 5; 0 closes each connection after its reply)\n"
                 "      --max-buffered MIB  request bytes held at once, all connections together; past it requests\n"
                 "                          wait unread, up to --header-timeout, then get 503 (default 256)\n"
                 "      --cache-budget MIB  memory for KV caches kept between requests, counted in the\n"
                 "                          cache types (default: one per slot)\n"
                 "      --replica-name NAME behind a load balancer, the name sent in each reply's X-Smol-Replica\n"
                 "                          header and in /metrics (default: the host name)\n"
                 "      --drain-timeout S   on SIGTERM, seconds running replies may take to finish while new\n"
                 "                          requests and /health get 503; then they are cancelled (default 25;\n"
                 "                          0 cancels at once, as SIGINT always does)\n"
                 "      --log-prompts       also log the body of each completion request (prompts are private:\n"
                 "                          off by default; the API key is never logged)\n"
                 "%s%s%s%s"
                 "  Sampling defaults for every request (a request's own fields win), llama.cpp's flags:\n"
                 "%s"
                 "  With --spec ngram, the drafts of all generating slots share 8 rows per step with their own\n"
                 "  tokens: a full batch drafts nothing. /metrics counts drafted and accepted tokens.\n",
                 smol::args::kRopeScalingUsage, smol::args::kKvCacheTypeUsage, smol::args::kRepackUsage,
                 smol::args::kSpeculationUsage, smol::args::kSamplingUsage);
    std::exit(code);
}

inline ServerOptions parse_options(int argc, char** argv) {
    ServerOptions o;
    try {
        smol::args::ArgReader args(argc, argv);
        while (args.next()) {
            if (read_rope_scaling_flag(args, o.rope_scaling) || read_kv_cache_type_flag(args, o.cache_types) ||
                read_repack_flag(args, o.repack) || read_speculation_flag(args, o.speculation) ||
                read_sampling_flag(args, o.sampling, o.dry_breakers_given))
                continue;
            if (args.is("-m", "--model")) o.model_path = args.value();
            else if (args.is("-hf", "--hf-repo")) o.hf_repo = args.value();
            else if (args.is("--hf-file")) o.hf_file = args.value();
            else if (args.is("--host")) o.host = args.value();
            else if (args.is("--port")) o.port = args.integer<int>(0, 65535);
            else if (args.is("-c", "--ctx-size")) o.context = args.integer<int>(16, 1 << 20);
            else if (args.is("-t", "--threads")) o.threads = args.integer<int>(1, 1024);
            else if (args.is("-np", "--parallel")) o.parallel = args.integer<int>(1, 256);
            else if (args.is("--queue")) o.max_queue = args.integer<int>(0, 100000);
            else if (args.is("--api-key")) o.api_keys.push_back(checked_api_key(args.value("a key"), "--api-key"));
            else if (args.is("--api-key-file")) {
                for (std::string& key : read_api_key_file(args.value("a file"))) o.api_keys.push_back(std::move(key));
            }
            else if (args.is("--cache-share-keys")) o.cache_share_keys = true;
            else if (args.is("--alias")) o.alias = args.value();
            else if (args.is("--cors")) o.cors_origins = args.list();
            else if (args.is("--allowed-hosts")) o.allowed_hosts = args.list();
            else if (args.is("--max-body")) o.max_body_bytes = args.integer<std::size_t>(1024, std::size_t(1) << 32);
            else if (args.is("--max-tokenize")) o.max_tokenize = args.integer<int>(1, 1 << 24);
            else if (args.is("--max-connections")) o.max_connections = args.integer<int>(1, 1 << 20);
            else if (args.is("--header-timeout")) o.header_timeout_s = args.integer<int>(1, 3600);
            else if (args.is("--body-timeout")) o.body_timeout_s = args.integer<int>(1, 3600);
            else if (args.is("--keep-alive-timeout")) o.keep_alive_timeout_s = args.integer<int>(0, 3600);
            else if (args.is("--max-buffered")) o.max_buffered_mib = args.integer<std::size_t>(1, 1 << 20);
            else if (args.is("--log-prompts")) o.log_prompts = true;
            else if (args.is("--replica-name")) {
                o.replica_name = args.value();
                if (!valid_replica_name(o.replica_name))
                    throw smol::args::UsageError("--replica-name: expected 1 to 128 letters, digits and '-_.:', found '" +
                                                 o.replica_name + "'");
            }
            else if (args.is("--drain-timeout")) o.drain_timeout_s = args.integer<int>(0, 3600);
            else if (args.is("--cache-budget")) o.cache_budget_mib = args.integer<std::size_t>(0, std::size_t(1) << 24);
            else if (args.is("-h", "--help")) usage(0);
            else args.unknown();
        }
        // As llama-server reads LLAMA_API_KEY: a key kept out of argv (a Kubernetes Secret).
        if (const char* key = std::getenv("SMOL_API_KEY"))
            o.api_keys.push_back(checked_api_key(key, "the SMOL_API_KEY environment variable"));
        try {
            o.speculation.validate();              // --draft-min against --draft-max
            smol::Sampler check(o.sampling, 1);  // the sampling flags together, before the model loads
        } catch (const smol::Error& e) {
            throw smol::args::UsageError(e.what());
        }
    } catch (const smol::args::UsageError& e) {
        std::fprintf(stderr, "smol-server: %s\n", e.what());
        usage(2);
    }
    if (o.replica_name.empty()) o.replica_name = host_name();
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
