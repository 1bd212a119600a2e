#pragma once
// Model download from the Hugging Face Hub (the -hf flag of smol-cli, smol-server, smol-bench).
//
// Cache layout: <cache>/<owner>/<name>/<file>, e.g.
//   ~/.cache/smol/ggml-org/SmolLM3-3B-GGUF/SmolLM3-Q4_K_M.gguf
// where <cache> is $SMOL_CACHE, else ~/.cache/smol. A download in progress lives next to its
// final name as <file>.part and is renamed into place only after its size and SHA-256 check
// out, so a file under its final name is always complete; a later run resumes the .part with
// an HTTP Range request. <file>.lock serializes downloads of one file between processes (it is
// deleted once the file is in place). Once a file is cached, finding it needs no network at all.

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/bounded_json.hpp"
#include "smol/hub/http.hpp"
#include "smol/hub/model_spec.hpp"
#include "smol/hub/progress.hpp"
#include "smol/hub/sha256.hpp"

namespace smol::hub {

inline constexpr std::string_view kDefaultEndpoint = "https://huggingface.co";

struct DownloadOptions {
    std::string endpoint = std::string(kDefaultEndpoint);  // Hub or mirror base URL
    std::filesystem::path cache_dir;                       // see default_cache_dir()
    std::string token;                                     // sent as "Authorization: Bearer"
    ProgressCallback on_progress;                          // none: silent
    bool offline = false;                                  // never touch the network
    std::string ca_cert_file;  // PEM trust anchors for HTTPS (a mirror's private CA); empty: system's
    int max_attempts = 5;  // tries in a row without progress before a broken download gives up
    std::chrono::milliseconds retry_delay{1000};  // waited before retry n: n * retry_delay
    int connect_timeout_seconds = 15;
    int read_timeout_seconds = 60;
    // The largest file accepted: a size announced above it is refused before the body is read,
    // and a body that announces no size is cut off (and deleted) once past it. A size the server
    // does announce (X-Linked-Size, else Content-Length or Content-Range) is never exceeded either.
    std::uint64_t max_file_bytes = std::uint64_t(64) << 30;  // 64 GiB
};

// $SMOL_CACHE, else $HOME/.cache/smol.
inline std::filesystem::path default_cache_dir() {
    if (const char* cache = std::getenv("SMOL_CACHE"); cache && *cache) return cache;
    if (const char* home = std::getenv("HOME"); home && *home)
        return std::filesystem::path(home) / ".cache" / "smol";
    fail("model cache: neither SMOL_CACHE nor HOME is set; set SMOL_CACHE to a folder for downloaded models");
}

// Options from the environment: SMOL_HF_ENDPOINT (mirror or test server), SMOL_CACHE, HF_TOKEN,
// HF_HUB_OFFLINE=1 (as in huggingface_hub); progress goes to stderr.
inline DownloadOptions default_options() {
    DownloadOptions options;
    if (const char* endpoint = std::getenv("SMOL_HF_ENDPOINT"); endpoint && *endpoint) options.endpoint = endpoint;
    options.cache_dir = default_cache_dir();
    if (const char* token = std::getenv("HF_TOKEN"); token && *token) options.token = token;
    if (const char* offline = std::getenv("HF_HUB_OFFLINE"); offline && *offline && std::string_view(offline) != "0")
        options.offline = true;
    options.on_progress = stderr_progress();
    return options;
}

namespace detail {

inline std::string endpoint_base(const DownloadOptions& options) {
    std::string base = options.endpoint;
    while (!base.empty() && base.back() == '/') base.pop_back();
    return base;
}

inline std::filesystem::path repo_cache_dir(const DownloadOptions& options, std::string_view repo) {
    validate_repo_id(repo);
    if (options.cache_dir.empty()) fail("model cache: DownloadOptions::cache_dir is empty (see default_options())");
    return options.cache_dir / std::filesystem::path(std::string(repo));
}

inline std::filesystem::path part_path(const std::filesystem::path& final_path) {
    std::filesystem::path part = final_path;
    part += ".part";
    return part;
}

inline bool is_sha256_hex(std::string_view text) {
    if (text.size() != 64) return false;
    for (char c : text)
        if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    return true;
}

// An ETag value without its weak marker and quotes, lowercased.
inline std::string strip_etag(std::string_view tag) {
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    while (!tag.empty() && (tag.front() == '"' || tag.front() == ' ')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == '"' || tag.back() == ' ')) tag.remove_suffix(1);
    std::string out(tag);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// The SHA-256 the Hub announces: X-Linked-Etag on its redirect (the LFS object id), else an
// ETag that is a 64-hex LFS oid. Empty when neither is there (small non-LFS files, mirrors).
inline std::string announced_sha256(const std::vector<HttpHop>& hops) {
    if (std::string linked = strip_etag(first_header(hops, "X-Linked-Etag")); is_sha256_hex(linked)) return linked;
    for (auto hop = hops.rbegin(); hop != hops.rend(); ++hop)
        if (auto it = hop->headers.find("ETag"); it != hop->headers.end())
            if (std::string tag = strip_etag(it->second); is_sha256_hex(tag)) return tag;
    return {};
}

inline std::optional<std::uint64_t> parse_u64(std::string_view text) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    if (text.empty() || text.size() > 19) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : text) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
        value = value * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return value;
}

struct ContentRange {
    std::uint64_t first = 0, last = 0;
    std::optional<std::uint64_t> total;  // absent for "bytes a-b/*"
};

// Parses "bytes first-last/total".
inline std::optional<ContentRange> parse_content_range(std::string_view text) {
    if (!text.starts_with("bytes ")) return std::nullopt;
    text.remove_prefix(6);
    const std::size_t dash = text.find('-'), slash = text.find('/');
    if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) return std::nullopt;
    auto first = parse_u64(text.substr(0, dash)), last = parse_u64(text.substr(dash + 1, slash - dash - 1));
    if (!first || !last || *last < *first) return std::nullopt;
    ContentRange range{*first, *last, std::nullopt};
    if (text.substr(slash + 1) != "*") {
        range.total = parse_u64(text.substr(slash + 1));
        if (!range.total || *range.total <= *last) return std::nullopt;
    }
    return range;
}

// "Repository not found", "Access to model ... is restricted": the Hub's X-Error-Message.
inline std::string hub_error_message(const std::vector<HttpHop>& hops) {
    if (hops.empty()) return {};
    auto it = hops.back().headers.find("X-Error-Message");
    return it == hops.back().headers.end() ? std::string() : " (" + it->second + ")";
}

inline bool is_connection_failure(httplib::Error error) {
    return error == httplib::Error::Connection || error == httplib::Error::ConnectionTimeout ||
           error == httplib::Error::SSLConnection || error == httplib::Error::BindIPAddress;
}

inline void fail_if_tls_untrusted(const HttpOutcome& outcome, const std::string& url) {
    if (!outcome.tls_untrusted()) return;
    fail("HTTPS request to ", url, ": the TLS certificate ", outcome.hops.empty() ? "" : "of a redirect target ",
         "could not be verified (", outcome.error_text(),
         "); check the system clock and CA certificates (SSL_CERT_FILE), or DownloadOptions::ca_cert_file for a mirror");
}

inline bool is_retryable_status(int status) {
    return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

inline HttpRequest make_request(const DownloadOptions& options, const std::string& url) {
    HttpRequest request;
    request.url = Url::parse(url);
    request.headers.emplace("User-Agent", "smol/0.1");
    request.bearer_token = options.token;
    request.token_origin = Url::parse(endpoint_base(options)).origin();
    request.ca_cert_file = options.ca_cert_file;
    request.connect_timeout_seconds = options.connect_timeout_seconds;
    request.read_timeout_seconds = options.read_timeout_seconds;
    return request;
}

// A write-only FILE* that is flushed and fsync'ed before the rename, so that after a crash the
// final name never points at data still sitting in the page cache.
struct PartFile {
    std::FILE* file = nullptr;
    std::filesystem::path path;

    void open(const std::filesystem::path& at, bool append) {
        close();
        path = at;
        file = std::fopen(at.c_str(), append ? "ab" : "wb");
        if (!file) fail("download: cannot open ", at, " for writing: ", std::strerror(errno));
    }
    void write(const char* data, std::size_t size) {
        if (std::fwrite(data, 1, size, file) != size)
            fail("download: cannot write ", size, " bytes to ", path, ": ", std::strerror(errno));
    }
    void close(bool sync = false) {
        if (!file) return;
        const bool flushed = std::fflush(file) == 0 && (!sync || ::fsync(fileno(file)) == 0);
        const int saved_errno = errno;
        std::fclose(file);
        file = nullptr;
        if (!flushed) fail("download: cannot flush ", path, ": ", std::strerror(saved_errno));
    }
    ~PartFile() {
        if (file) std::fclose(file);
    }
};

// An exclusive flock on `path`, so two processes (say smol-server and smol-cli started together)
// never write the same .part: the second waits, then finds the file in place.
class FileLock {
public:
    explicit FileLock(std::filesystem::path path) : path_(std::move(path)) {
        fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) fail("download: cannot create lock file ", path_, ": ", std::strerror(errno));
        while (::flock(fd_, LOCK_EX) != 0) {
            if (errno == EINTR) continue;
            const int error = errno;
            ::close(fd_);
            fail("download: cannot lock ", path_, ": ", std::strerror(error));
        }
    }
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    // Deletes the lock file on release. Only safe once the file it guards is in place: a
    // process still waiting on the old lock then finds the file and does not download.
    void remove_when_released() { remove_ = true; }
    ~FileLock() {
        if (remove_) ::unlink(path_.c_str());
        ::close(fd_);
    }

private:
    std::filesystem::path path_;
    int fd_ = -1;
    bool remove_ = false;
};

inline void remove_quietly(const std::filesystem::path& path) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
}

}  // namespace detail

// Where a repository file lives in the cache: <cache>/<owner>/<name>/<file>.
inline std::filesystem::path cache_path(const DownloadOptions& options, std::string_view repo, std::string_view file) {
    validate_repo_file(file);
    return detail::repo_cache_dir(options, repo) / std::filesystem::path(std::string(file));
}

// The URL a repository file is fetched from.
inline std::string file_url(const DownloadOptions& options, std::string_view repo, std::string_view file) {
    return detail::endpoint_base(options) + "/" + encode_url_path(repo) + "/resolve/main/" + encode_url_path(file);
}

// The cached file for `spec`, found without any network access, or nullopt. With an exact
// file that is its cache path; with a quant tag it is the single complete .gguf in the
// repository's cache folder that matches the tag (nullopt when none or several do).
inline std::optional<std::filesystem::path> cached_path(const ModelSpec& spec, const DownloadOptions& options) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!spec.file.empty()) {
        const fs::path path = cache_path(options, spec.repo, spec.file);
        if (fs::is_regular_file(path, ec)) return path;
        return std::nullopt;
    }
    const fs::path folder = detail::repo_cache_dir(options, spec.repo);
    if (!fs::is_directory(folder, ec)) return std::nullopt;
    std::vector<fs::path> matches;
    for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        const std::string relative = it->path().lexically_relative(folder).generic_string();
        if (gguf_matches_quant(relative, spec.quant) && !is_split_gguf(relative)) matches.push_back(it->path());
    }
    if (matches.size() == 1) return matches.front();
    return std::nullopt;
}

// The one clear message for "the model is not here and cannot be fetched": what to download,
// from where, and where to put it.
inline std::string not_cached_message(const ModelSpec& spec, const std::string& file, const DownloadOptions& options,
                                      std::string_view reason) {
    std::string message = "model " + spec.to_string() + " is not in the cache and cannot be downloaded: " +
                          std::string(reason) + ".\n";
    if (!file.empty()) {
        message += "Download " + file_url(options, spec.repo, file) + "\nand save it as " +
                   cache_path(options, spec.repo, file).string();
    } else {
        message += "Download the .gguf file with " + spec.quant + " in its name from " +
                   detail::endpoint_base(options) + "/" + spec.repo + "/tree/main\n(" +
                   detail::endpoint_base(options) + "/" + spec.repo + "/resolve/main/<file>) and save it in " +
                   detail::repo_cache_dir(options, spec.repo).string() + "/";
    }
    message += "\n(the cache folder is $SMOL_CACHE, else ~/.cache/smol), or pass a local file with -m.";
    return message;
}

// Lists the repository through the Hub's model API and picks the file for spec.quant.
inline std::string resolve_model_file(const ModelSpec& spec, const DownloadOptions& options) {
    if (!spec.file.empty()) return spec.file;
    if (options.offline) fail(not_cached_message(spec, "", options, "offline mode is on (HF_HUB_OFFLINE)"));
    const std::string url = detail::endpoint_base(options) + "/api/models/" + encode_url_path(spec.repo);
    constexpr std::size_t kMaxListingBytes = 64u << 20;
    std::string body;
    HttpOutcome outcome = http_get(
        detail::make_request(options, url), [](const std::vector<HttpHop>&) { return true; },
        [&](const char* data, std::size_t size) {
            if (body.size() + size > kMaxListingBytes) return false;
            body.append(data, size);
            return true;
        });
    detail::fail_if_tls_untrusted(outcome, url);
    if (outcome.transport_failed() && detail::is_connection_failure(outcome.error))
        fail(not_cached_message(spec, "", options, "cannot connect to " + url + " (" + outcome.error_text() + ")"));
    if (outcome.too_many_redirects) fail("model API ", url, ": ", outcome.too_many_redirects_text());
    if (outcome.stopped) fail("model API ", url, ": listing larger than ", kMaxListingBytes, " bytes");
    if (outcome.transport_failed()) fail("model API ", url, ": transfer failed (", outcome.error_text(), ")");
    const int status = outcome.status();
    if (status == 401 || status == 403)
        fail("model API ", url, ": HTTP ", status, detail::hub_error_message(outcome.hops),
             "; the repository may be private or gated: accept its terms on the Hub and set HF_TOKEN");
    if (status == 404)
        fail("model API ", url, ": repository ", spec.repo, " not found (HTTP 404)", detail::hub_error_message(outcome.hops));
    if (status != 200) fail("model API ", url, ": expected HTTP 200, got ", status, detail::hub_error_message(outcome.hops));

    nlohmann::json listing;
    try {
        listing = parse_json(body, "the listing");
    } catch (const JsonError& e) {
        fail("model API ", url, ": ", e.what());
    }
    if (!listing.is_object()) fail("model API ", url, ": expected a JSON object, got ", body.substr(0, 200));
    auto siblings = listing.find("siblings");
    if (siblings == listing.end() || !siblings->is_array())
        fail("model API ", url, ": response has no \"siblings\" array of files");
    std::vector<std::string> files;
    for (const auto& sibling : *siblings) {
        if (!sibling.is_object() || !sibling.contains("rfilename") || !sibling["rfilename"].is_string())
            fail("model API ", url, ": a \"siblings\" entry has no string \"rfilename\": ", sibling.dump());
        files.push_back(sibling["rfilename"].get<std::string>());
    }
    std::string file = choose_quant_file(files, spec.quant, spec.repo);
    validate_repo_file(file);
    return file;
}

namespace detail {

// A download under way: what it fetches and where to, and what its attempts so far have learnt.
// download_file makes attempts until one puts the file in place or the failures run out.
struct Download {
    const ModelSpec& spec;
    const std::string& file;
    const DownloadOptions& options;
    std::filesystem::path final_path;
    std::filesystem::path part;
    std::string url;
    int failures_in_a_row = 0;
    std::uint64_t most_written = 0;  // high-water mark: only getting further counts as progress
    bool restarted_after_bad_resume = false;
    bool ever_connected = false;

    void wait_before_retry() const { std::this_thread::sleep_for(options.retry_delay * failures_in_a_row); }

    // The part, whole and verified, becomes the cached file.
    void move_into_place() const {
        std::error_code ec;
        std::filesystem::rename(part, final_path, ec);
        if (ec) fail("download: cannot move ", part, " to ", final_path, ": ", ec.message());
    }
};

// One GET of the file from where the part ends: the answer's header decides where the bytes go
// (appended to the part after a 206, a fresh part after a 200), then they are written and
// hashed as they arrive.
struct DownloadAttempt {
    Download& d;
    std::uint64_t offset = 0;       // where the part ended when the attempt started
    bool resumed = false;
    Sha256 hash;                    // of the part's bytes
    PartFile out;
    std::uint64_t written = 0;        // bytes in the part file
    std::uint64_t expected_size = 0;  // 0: unknown
    std::string expected_sha;
    std::string restart_reason;  // set when the server's answer forces starting over
    std::uint64_t received_this_run = 0;
    std::chrono::steady_clock::time_point started;

    explicit DownloadAttempt(Download& download) : d(download) {}

    // Hashes what the part holds so far; false when it changed meanwhile (it is removed: the
    // next attempt starts over).
    bool read_part() {
        std::error_code ec;
        offset = std::filesystem::is_regular_file(d.part, ec) ? std::filesystem::file_size(d.part, ec) : 0;
        if (ec) offset = 0;
        resumed = offset > 0;
        if (resumed && hash.update_from_file(d.part) != offset) {
            remove_quietly(d.part);
            return false;
        }
        written = offset;
        started = std::chrono::steady_clock::now();
        return true;
    }

    void report(bool finished) {
        if (!d.options.on_progress) return;
        Progress p;
        p.file = d.file;
        p.downloaded = written;
        p.total = expected_size;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        p.bytes_per_second = seconds > 0 ? static_cast<double>(received_this_run) / seconds : 0;
        if (expected_size > written && p.bytes_per_second > 0)
            p.eta_seconds = static_cast<double>(expected_size - written) / p.bytes_per_second;
        else if (expected_size > 0 && expected_size <= written)
            p.eta_seconds = 0;
        p.finished = finished;
        d.options.on_progress(p);
    }

    void refuse_if_too_large() const {
        if (expected_size > d.options.max_file_bytes)
            fail("download ", d.url, ": the server announced a file of ", expected_size,
                 " bytes, more than the limit of ", d.options.max_file_bytes,
                 " bytes (DownloadOptions::max_file_bytes); nothing was saved as ", d.final_path);
    }

    // The answer's header (after redirects): whether its body is the file's rest (206) or the
    // whole file (200); it opens the part accordingly.
    bool accept(const std::vector<HttpHop>& hops) {
        const HttpHop& last = hops.back();
        if (last.status != 200 && last.status != 206) return false;
        std::optional<std::uint64_t> linked_size = parse_u64(first_header(hops, "X-Linked-Size"));
        if (last.status == 206) {
            auto range = parse_content_range(header_value(last, "Content-Range"));
            if (!range || range->first != offset) {
                restart_reason = "the server answered a Range request for bytes " + std::to_string(offset) +
                                 "- with an unusable Content-Range";
                return false;
            }
            expected_size = linked_size ? *linked_size : range->total.value_or(0);
            refuse_if_too_large();
            out.open(d.part, /*append=*/true);
        } else {
            // A 200 is the whole file from byte 0: the server ignored our Range (or there
            // was no part), so whatever the part held is dropped.
            if (offset > 0) {
                offset = 0;
                written = 0;
                resumed = false;
                hash.reset();
            }
            auto length = parse_u64(header_value(last, "Content-Length"));
            expected_size = linked_size ? *linked_size : length.value_or(0);
            refuse_if_too_large();
            out.open(d.part, /*append=*/false);
        }
        expected_sha = announced_sha256(hops);
        report(false);
        return true;
    }

    bool receive(const char* data, std::size_t size) {
        if (expected_size > 0 && written + size > expected_size) {
            out.close();
            remove_quietly(d.part);
            fail("download ", d.url, ": the server sent more than the ", expected_size,
                 " bytes it announced; nothing was saved as ", d.final_path);
        }
        if (expected_size == 0 && written + size > d.options.max_file_bytes) {
            out.close();
            remove_quietly(d.part);
            fail("download ", d.url, ": the server announced no size and sent more than the limit of ",
                 d.options.max_file_bytes, " bytes (DownloadOptions::max_file_bytes); the partial file was deleted, ",
                 "nothing was saved as ", d.final_path);
        }
        out.write(data, size);
        hash.update(data, size);
        written += size;
        received_this_run += size;
        report(false);
        return true;
    }

    // The GET itself, asking for the bytes after the part's end; the part is closed after it
    // (synced when the transfer completed).
    HttpOutcome get() {
        HttpRequest request = make_request(d.options, d.url);
        if (offset > 0) request.headers.emplace("Range", "bytes=" + std::to_string(offset) + "-");
        HttpOutcome outcome;
        try {
            outcome = http_get(
                request, [this](const std::vector<HttpHop>& hops) { return accept(hops); },
                [this](const char* data, std::size_t size) { return receive(data, size); });
        } catch (...) {  // keep what arrived (a later run resumes it) unless it was discarded above
            try { out.close(); } catch (...) {}
            throw;
        }
        out.close(/*sync=*/outcome.complete());
        return outcome;
    }
};

// A transfer that completed: the file in place when it is whole and its hash matches (true);
// false to try again: a body that ended early resumes like a drop, a stale part from another
// version of the file is dropped once.
inline bool settle_complete(DownloadAttempt& a) {
    Download& d = a.d;
    if (a.expected_size > 0 && a.written < a.expected_size) {
        // The body ended early but cleanly (e.g. a short 206); resume like a drop.
        if (++d.failures_in_a_row >= d.options.max_attempts)
            fail("download ", d.url, ": the server keeps ending the file at byte ", a.written, " of ", a.expected_size,
                 "; ", a.written, " bytes are kept in ", d.part);
        d.wait_before_retry();
        return false;
    }
    const std::string actual_sha = a.hash.hex_digest();
    if (!a.expected_sha.empty() && actual_sha != a.expected_sha) {
        remove_quietly(d.part);
        if (a.resumed && !d.restarted_after_bad_resume) {  // a stale part from another version of the file
            d.restarted_after_bad_resume = true;
            return false;
        }
        fail("download ", d.url, ": SHA-256 mismatch: the server announced ", a.expected_sha, ", the ", a.written,
             " bytes received hash to ", actual_sha, "; the partial file was deleted, nothing was saved as ",
             d.final_path);
    }
    d.move_into_place();
    a.report(true);
    return true;
}

// A server that answered with something other than the file: a 416 for a part that already
// holds the whole file finishes it (true); other 416s start over, and statuses that pass
// (429, 5xx) are retried after a wait (false); the rest are errors that say what to do.
inline bool settle_declined(DownloadAttempt& a, const HttpOutcome& outcome) {
    Download& d = a.d;
    const int status = outcome.status();
    if (status == 416) {
        // Nothing left after byte `offset`. If that is because the part already holds
        // the whole file (a run that stopped just before the rename), finish it here.
        std::optional<std::uint64_t> total = parse_u64(first_header(outcome.hops, "X-Linked-Size"));
        if (const std::string range = header_value(*outcome.final_hop(), "Content-Range");
            !total && range.starts_with("bytes */"))
            total = parse_u64(std::string_view(range).substr(8));
        const std::string sha = announced_sha256(outcome.hops);
        if (a.offset > 0 && total == a.offset && (sha.empty() || a.hash.hex_digest() == sha)) {
            d.move_into_place();
            a.expected_size = a.offset;
            a.report(true);
            return true;
        }
        remove_quietly(d.part);  // not a prefix the server can continue: start over
        if (++d.failures_in_a_row >= d.options.max_attempts)
            fail("download ", d.url, ": the server keeps rejecting the Range request (HTTP 416)");
        return false;
    }
    if (is_retryable_status(status) && ++d.failures_in_a_row < d.options.max_attempts) {
        d.wait_before_retry();
        return false;
    }
    if (status == 401 || status == 403)
        fail("download ", d.url, ": HTTP ", status, hub_error_message(outcome.hops),
             "; the repository may be private or gated: accept its terms on the Hub and set HF_TOKEN");
    if (status == 404)
        fail("download ", d.url, ": file ", d.file, " not found in repository ", d.spec.repo, " (HTTP 404)",
             hub_error_message(outcome.hops));
    fail("download ", d.url, ": expected HTTP 200 or 206, got ", status, hub_error_message(outcome.hops));
}

// What an attempt's outcome means: true once the file is in place; false to make another
// attempt (after the wait a failure earns); throws when retrying cannot help or the failures
// in a row reached max_attempts.
inline bool settle_attempt(DownloadAttempt& a, const HttpOutcome& outcome) {
    Download& d = a.d;
    if (!outcome.hops.empty()) d.ever_connected = true;
    if (a.written > d.most_written) {  // progress: the next failure is the first again
        d.most_written = a.written;
        d.failures_in_a_row = 0;
    }
    if (outcome.complete()) return settle_complete(a);
    if (!a.restart_reason.empty()) {
        remove_quietly(d.part);
        if (++d.failures_in_a_row >= d.options.max_attempts)
            fail("download ", d.url, ": ", a.restart_reason, " (", d.failures_in_a_row, " attempts)");
        return false;
    }
    if (outcome.too_many_redirects) fail("download ", d.url, ": ", outcome.too_many_redirects_text());
    if (outcome.declined) return settle_declined(a, outcome);

    // The transfer broke (refused, timed out, connection dropped mid-body): what arrived is
    // in the part; try again from there.
    fail_if_tls_untrusted(outcome, d.url);
    if (outcome.hops.empty() && !d.ever_connected && is_connection_failure(outcome.error))
        fail(not_cached_message(d.spec, d.file, d.options,
                                "cannot connect to " + d.url + " (" + outcome.error_text() + ")"));
    if (++d.failures_in_a_row >= d.options.max_attempts)
        fail("download ", d.url, ": the transfer failed ", d.failures_in_a_row, " times in a row (last error: ",
             outcome.error_text(), ", HTTP ", outcome.status(), "); ", a.written, " bytes are kept in ", d.part,
             " and the next run resumes from there");
    d.wait_before_retry();
    return false;
}

}  // namespace detail

// Downloads one repository file into the cache (resuming a .part left by an earlier run) and
// returns its final path. See the top of this file for the guarantees.
inline std::filesystem::path download_file(const ModelSpec& spec, const std::string& file,
                                           const DownloadOptions& options) {
    namespace fs = std::filesystem;
    detail::Download d{spec, file, options, cache_path(options, spec.repo, file), {}, file_url(options, spec.repo, file)};
    d.part = detail::part_path(d.final_path);
    if (options.offline) fail(not_cached_message(spec, file, options, "offline mode is on (HF_HUB_OFFLINE)"));
    std::error_code ec;
    fs::create_directories(d.final_path.parent_path(), ec);
    if (ec) fail("download: cannot create cache folder ", d.final_path.parent_path(), ": ", ec.message());
    std::filesystem::path lock_path = d.final_path;
    lock_path += ".lock";
    detail::FileLock lock(lock_path);
    if (fs::is_regular_file(d.final_path, ec)) {  // another process finished it while we waited
        lock.remove_when_released();
        return d.final_path;
    }
    for (;;) {
        detail::DownloadAttempt attempt(d);
        if (!attempt.read_part()) continue;  // the part changed under us: start over
        const HttpOutcome outcome = attempt.get();
        if (detail::settle_attempt(attempt, outcome)) {
            lock.remove_when_released();
            return d.final_path;
        }
    }
}

// The local path of the model `spec` names: the cached file when there is one (no network),
// else resolved through the Hub's API, downloaded, verified and cached.
inline std::filesystem::path ensure_model(const ModelSpec& spec, const DownloadOptions& options) {
    if (auto cached = cached_path(spec, options)) return *cached;
    const std::string file = resolve_model_file(spec, options);
    const std::filesystem::path path = cache_path(options, spec.repo, file);
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) return path;
    return download_file(spec, file, options);
}

}  // namespace smol::hub
