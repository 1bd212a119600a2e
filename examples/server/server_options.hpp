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
    std::size_t cache_budget_mib = 0;  // --cache-budget, or llama-server's --cache-ram
    std::string slot_save_path;  // --slot-save-path: where /slots/{id}?action=save|restore keep files; "": off
    bool log_prompts = false;  // completion request bodies in the log (never the key)
    smol::RopeScalingRequest rope_scaling;  // --rope-scaling, --rope-scale, --yarn-orig-ctx
    smol::KvCacheTypes cache_types;         // -ctk, -ctv
    bool repack = true;                     // -nr
    smol::SpeculationParams speculation;    // --spec, --draft-max, --draft-min: every request's default
    int reasoning_budget = -1;  // --reasoning-budget: thinking tokens of a request that names none; -1 no limit
    smol::SamplerParams sampling;           // the sampling flags: every request's defaults
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

// llama-server's --cache-ram in --cache-budget's unit (MiB, 0: no limit): -1 is no limit; 0,
// which turns llama-server's prompt cache off, is the least budget here (one cache: smol always
// reuses a slot's own prefix).
inline std::size_t cache_ram_mib(long long mib) { return mib < 0 ? 0 : mib == 0 ? 1 : std::size_t(mib); }

// --slot-save-path: an existing folder.
inline std::string checked_slot_save_path(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec))
        throw smol::args::UsageError("--slot-save-path: expected an existing folder, found '" + path + "'");
    return path;
}

// What the server listens on and who may call it.
inline std::vector<smol::args::Flag> access_flags(ServerOptions& o) {
    using namespace smol::args;
    const auto add_key = [&o](const std::string& flag, const std::string& key) { o.api_keys.push_back(checked_api_key(key, flag)); };
    const auto add_key_file = [&o](const std::string&, const std::string& path) {
        for (std::string& key : read_api_key_file(path)) o.api_keys.push_back(std::move(key));
    };
    return {
        {{"--host"}, "HOST", "address to listen on", text_value(o.host)},
        {{"--port"}, "PORT", "port; 0 picks a free one", integer_value(o.port, 0, 65535)},
        {{"--api-key"}, "KEY",
         "require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on everything but the page and /health; repeat "
         "it for several keys. The SMOL_API_KEY environment variable adds one more (safer: argv is visible to other "
         "users of the machine)",
         text_reader(add_key)},
        {{"--api-key-file"}, "FILE",
         "the keys in FILE, one a line ('#' comments and blank lines skipped); repeatable, and combined with "
         "--api-key and SMOL_API_KEY",
         text_reader(add_key_file)},
        {{"--cache-share-keys"}, "",
         "let requests under different keys reuse each other's cached prompt prefixes (off: a key never sees "
         "another's cache, whose reuse shows in cached_tokens and in timing; a request's cache_salt separates caches "
         "the same way)",
         switch_value(o.cache_share_keys, true)},
        {{"--alias"}, "NAME", "the model's id in the API", with_default(text_value(o.alias), "the file name")},
        {{"--cors"}, "ORIGINS", "comma-separated origins whose pages may call the API (* for any)",
         comma_list_value(o.cors_origins)},
        {{"--allowed-hosts"}, "HOSTS",
         "comma-separated Host names accepted besides localhost, 127.0.0.1 and [::1] when listening on a loopback "
         "address (* for any): a reverse proxy's name; others get 403, which stops DNS rebinding",
         comma_list_value(o.allowed_hosts)},
        {{"--log-prompts"}, "",
         "also log the body of each completion request (prompts are private: off by default; the API key is never "
         "logged)",
         switch_value(o.log_prompts, true)},
    };
}

// How much the server takes on: slots, queue, request sizes, the connection gate's limits.
inline std::vector<smol::args::Flag> limit_flags(ServerOptions& o) {
    using namespace smol::args;
    return {
        {{"-np", "--parallel"}, "N", "requests generating at once", integer_value(o.parallel, 1, 256)},
        {{"--queue"}, "N", "requests waiting for a slot before 503", integer_value(o.max_queue, 0, 100000)},
        {{"--max-body"}, "BYTES", "largest accepted request body",
         integer_value(o.max_body_bytes, std::size_t(1024), std::size_t(1) << 32)},
        {{"--max-tokenize"}, "N", "most tokens /tokenize returns or /detokenize takes",
         with_default(integer_value(o.max_tokenize, 1, 1 << 24), "-c")},
        {{"--max-connections"}, "N", "open client connections at most; more get 503",
         integer_value(o.max_connections, 1, 1 << 20)},
        {{"--header-timeout"}, "S", "seconds for a whole request header to arrive, else 408",
         integer_value(o.header_timeout_s, 1, 3600)},
        {{"--body-timeout"}, "S", "seconds for a whole request body to arrive after its header",
         integer_value(o.body_timeout_s, 1, 3600)},
        {{"--keep-alive-timeout"}, "S",
         "seconds an idle kept-alive connection waits for its next request; 0 closes each connection after its reply",
         integer_value(o.keep_alive_timeout_s, 0, 3600)},
        {{"--max-buffered"}, "MIB",
         "request bytes held at once, all connections together; past it requests wait unread, up to "
         "--header-timeout, then get 503",
         integer_value(o.max_buffered_mib, std::size_t(1), std::size_t(1) << 20)},
        {{"--cache-budget"}, "MIB", "memory for KV caches kept between requests, counted in the cache types",
         with_default(integer_value(o.cache_budget_mib, std::size_t(0), std::size_t(1) << 24), "one per slot")},
        {{"--cache-ram"}, "MIB", "llama-server's name for --cache-budget: -1 no limit, 0 the least (one cache)",
         FlagValue{[&o](const std::string& flag, const std::string& text) {
                       o.cache_budget_mib = cache_ram_mib(parse_integer<long long>(flag, text, -1, 1 << 24));
                   },
                   integer_range(-1LL, 1LL << 24), ""}},
        {{"--slot-save-path"}, "DIR",
         "folder where POST /slots/{id}?action=save|restore keep prompt caches (llama-server's); without it those "
         "actions are a 501",
         text_reader([&o](const std::string&, const std::string& path) { o.slot_save_path = checked_slot_save_path(path); })},
    };
}

// Running behind a load balancer (deploy/README.md).
inline std::vector<smol::args::Flag> replica_flags(ServerOptions& o) {
    using namespace smol::args;
    const auto name = [&o](const std::string& text) { return valid_replica_name(text) && (o.replica_name = text, true); };
    return {
        {{"--replica-name"}, "NAME",
         "behind a load balancer, the name sent in each reply's X-Smol-Replica header and in /metrics",
         checked_value("1 to 128 letters, digits and '-_.:'", "the host name", name)},
        {{"--drain-timeout"}, "S",
         "on SIGTERM, seconds running replies may take to finish while new requests and /health get 503; then they "
         "are cancelled (0 cancels at once, as SIGINT always does)",
         integer_value(o.drain_timeout_s, 0, 3600)},
    };
}

// smol-server's one table of flags: parsing, checking and --help all read it.
inline smol::args::FlagTable flag_table(ServerOptions& o, bool& help) {
    using namespace smol::args;
    FlagTable table("usage: smol-server [-m MODEL | -hf REPO[:QUANT]] [options]");
    table.add(model_flag(o.model_path))
        .add(hub_flags(o.hf_repo, o.hf_file))
        .add(context_flag(o.context))
        .add(threads_flag(o.threads))
        .add(rope_scaling_flags(o.rope_scaling))
        .add(kv_cache_type_flags(o.cache_types))
        .add(repack_flag(o.repack))
        .add(speculation_flags(o.speculation))
        .add(reasoning_budget_flag(o.reasoning_budget))
        .note("  Sampling defaults for every request (a request's own fields win), llama.cpp's flags:")
        .add(sampling_flags(o.sampling))
        .note("  With --spec ngram, the drafts of all generating slots share 8 rows per step with their own\n"
              "  tokens: a full batch drafts nothing. /metrics counts drafted and accepted tokens.")
        .add(access_flags(o))
        .add(limit_flags(o))
        .add(replica_flags(o))
        .add(help_flag(help));
    return table;
}

// The help on stdout (status 0) or, after a mistake, on stderr; then exits with `code`.
[[noreturn]] inline void usage(int code) {
    ServerOptions o;
    bool help = false;
    std::fputs(flag_table(o, help).help().c_str(), code ? stderr : stdout);
    std::exit(code);
}

inline ServerOptions parse_options(int argc, char** argv) {
    ServerOptions o;
    bool help = false;
    const smol::args::FlagTable table = flag_table(o, help);
    const auto status = table.parse_or_exit_status(argc, argv, help, "smol-server", [&] {
        // As llama-server reads LLAMA_API_KEY: a key kept out of argv (a Kubernetes Secret).
        if (const char* key = std::getenv("SMOL_API_KEY"))
            o.api_keys.push_back(checked_api_key(key, "the SMOL_API_KEY environment variable"));
        try {
            o.speculation.validate();              // --draft-min against --draft-max
            smol::Sampler check(o.sampling, 1);  // the sampling flags together, before the model loads
        } catch (const smol::Error& e) {
            throw smol::args::UsageError(e.what());
        }
    });
    if (status) std::exit(*status);
    if (o.context == 0) o.context = smol::kDefaultContext;  // -c 0 means the default, as in every program
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
