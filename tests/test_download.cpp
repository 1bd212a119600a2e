// Model download (smol/hub) against a fake Hub: a cpp-httplib server on 127.0.0.1 inside the
// test that serves /api/models/<repo>, redirects /<repo>/resolve/main/<file> to /cdn/<file>
// (optionally on a second server, as the real Hub redirects to a CDN host), and serves files
// with Range support and X-Linked-Etag / X-Linked-Size. Faults are switched on per test: a
// connection dropped mid-body, a server that ignores Range, a wrong checksum, a wrong size.
// No internet is used; the expected SHA-256 comes from OpenSSL's one-shot SHA256(), not from
// the streaming hasher under test.

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "smol/hub/download.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_download {

namespace fs = std::filesystem;
using namespace smol::hub;

namespace {

// Deterministic bytes that do not repeat with a short period, so a misplaced resume offset
// changes the hash.
std::string make_content(std::size_t size, std::uint32_t seed) {
    std::string data(size, '\0');
    std::uint32_t state = seed;
    for (char& c : data) {
        state = state * 1664525u + 1013904223u;
        c = static_cast<char>(state >> 24);
    }
    return data;
}

std::string openssl_sha256_hex(const std::string& data) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
    char hex[2 * SHA256_DIGEST_LENGTH + 1];
    for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return hex;
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const std::string& data) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

// A port nothing listens on: bound and closed again, so connecting to it is refused.
int closed_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    ::close(fd);
    return ntohs(address.sin_port);
}

struct SeenRequest {
    std::string path, range, authorization;
};

// The fake Hub. Configure the public fields before the first request.
class FakeHub {
public:
    std::string repo = "test-org/Tiny-GGUF";
    std::map<std::string, std::string> files;  // rfilename -> content
    std::string cdn_origin;                    // where /resolve redirects; empty: this server
    bool announce_linked = true;               // X-Linked-Etag / X-Linked-Size on the redirect
    bool etag_is_sha = false;                  // the CDN's ETag is the file's SHA-256
    std::string sha_override;                  // announce this instead of the real SHA-256
    long size_override = -1;                   // announce this instead of the real size
    bool ignore_range = false;                 // answer 200 with the whole file, chunked
    std::atomic<int> drops_left{0};            // drop this many CDN bodies halfway
    int cdn_delay_ms = 0;                      // wait this long before answering the CDN
    bool cdn_redirect_loop = false;            // the CDN redirects every request to itself

    // Plain HTTP, or HTTPS with the given certificate and key (PEM files).
    explicit FakeHub(const fs::path& tls_cert = {}, const fs::path& tls_key = {}) {
        if (tls_cert.empty()) {
            server_ = std::make_unique<httplib::Server>();
        } else {
            server_ = std::make_unique<httplib::SSLServer>(tls_cert.c_str(), tls_key.c_str());
            scheme_ = "https";
        }
        REQUIRE(server_->is_valid());
        httplib::Server& server = *server_;
        server.Get(R"(/api/models/([^/]+/[^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
            record(req);
            if (req.matches[1] != repo) {
                res.status = 404;
                res.set_header("X-Error-Code", "RepoNotFound");
                res.set_header("X-Error-Message", "Repository not found");
                res.set_content(R"({"error":"Repository not found"})", "application/json");
                return;
            }
            nlohmann::json listing = {{"id", repo}, {"siblings", nlohmann::json::array()}};
            for (const auto& [name, content] : files) listing["siblings"].push_back({{"rfilename", name}});
            res.set_content(listing.dump(), "application/json");
        });
        server.Get(R"(/([^/]+/[^/]+)/resolve/main/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
            record(req);
            auto it = files.find(req.matches[2]);
            if (req.matches[1] != repo || it == files.end()) {
                res.status = 404;
                res.set_header("X-Error-Code", "EntryNotFound");
                res.set_header("X-Error-Message", "Entry not found");
                return;
            }
            res.set_redirect(cdn_origin + "/cdn/" + it->first, 302);
            if (announce_linked) {
                res.set_header("X-Linked-Etag", "\"" + announced_sha(it->second) + "\"");
                res.set_header("X-Linked-Size", std::to_string(announced_size(it->second)));
            }
        });
        server.Get(R"(/cdn/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
            record(req);
            if (cdn_redirect_loop) {
                res.set_redirect(req.path, 302);
                return;
            }
            auto it = files.find(req.matches[1]);
            if (it == files.end()) {
                res.status = 404;
                return;
            }
            const std::string* content = &it->second;
            std::this_thread::sleep_for(std::chrono::milliseconds(cdn_delay_ms));
            res.set_header("ETag", etag_is_sha ? "\"" + announced_sha(*content) + "\"" : "\"cdn-version-7\"");
            if (ignore_range) {
                res.status = 200;  // explicit, so httplib does not turn it into a 206
                res.set_chunked_content_provider("application/octet-stream",
                                                 [content](std::size_t offset, httplib::DataSink& sink) {
                                                     if (offset >= content->size()) {
                                                         sink.done();
                                                         return true;
                                                     }
                                                     const std::size_t n = std::min<std::size_t>(16384, content->size() - offset);
                                                     return sink.write(content->data() + offset, n);
                                                 });
                return;
            }
            // Nothing left after the range start: 416 as HTTP servers and CDNs answer it (httplib
            // on its own would send a 206 with an empty, inverted range).
            if (req.ranges.size() == 1 && req.ranges[0].first >= static_cast<ssize_t>(content->size())) {
                res.status = 416;
                res.set_header("Content-Range", "bytes */" + std::to_string(content->size()));
                return;
            }
            // httplib applies the Range header itself: the provider is asked for the requested
            // slice and the response is a 206 with Content-Range.
            const bool drop = drops_left.fetch_sub(1) > 0;
            const std::size_t drop_at = content->size() / 2;
            res.set_content_provider(content->size(), "application/octet-stream",
                                     [content, drop, drop_at](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                                         if (drop && offset >= drop_at) return false;  // closes the connection
                                         std::size_t n = std::min<std::size_t>(16384, length);
                                         if (drop && offset < drop_at) n = std::min(n, drop_at - offset);
                                         return sink.write(content->data() + offset, n);
                                     });
        });
        port_ = server.bind_to_any_port("127.0.0.1");
        REQUIRE(port_ > 0);
        thread_ = std::thread([this] { server_->listen_after_bind(); });
        while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ~FakeHub() { stop(); }

    void stop() {
        server_->stop();
        if (thread_.joinable()) thread_.join();
    }

    std::string origin() const { return scheme_ + "://127.0.0.1:" + std::to_string(port_); }

    std::vector<SeenRequest> seen(std::string_view path_prefix = "") const {
        std::lock_guard lock(mutex_);
        std::vector<SeenRequest> out;
        for (const SeenRequest& r : seen_)
            if (r.path.starts_with(path_prefix)) out.push_back(r);
        return out;
    }

private:
    std::string announced_sha(const std::string& content) const {
        return sha_override.empty() ? openssl_sha256_hex(content) : sha_override;
    }
    long announced_size(const std::string& content) const {
        return size_override >= 0 ? size_override : static_cast<long>(content.size());
    }
    void record(const httplib::Request& req) {
        std::lock_guard lock(mutex_);
        seen_.push_back({req.path, req.get_header_value("Range"), req.get_header_value("Authorization")});
    }

    std::unique_ptr<httplib::Server> server_;
    std::string scheme_ = "http";
    std::thread thread_;
    int port_ = 0;
    mutable std::mutex mutex_;
    std::vector<SeenRequest> seen_;
};

// Writes a self-signed certificate for IP 127.0.0.1 (its own CA) and its key as PEM files.
void make_self_signed_certificate(const fs::path& cert_path, const fs::path& key_path) {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    REQUIRE(key);
    X509* cert = X509_new();
    REQUIRE(cert);
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509V3_CTX context;
    X509V3_set_ctx_nodb(&context);
    X509V3_set_ctx(&context, cert, cert, nullptr, nullptr, 0);
    for (auto [nid, value] : {std::pair{NID_subject_alt_name, "IP:127.0.0.1"}, std::pair{NID_basic_constraints, "critical,CA:TRUE"}}) {
        X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
        REQUIRE(extension);
        X509_add_ext(cert, extension, -1);
        X509_EXTENSION_free(extension);
    }
    REQUIRE(X509_sign(cert, key, EVP_sha256()) > 0);
    std::FILE* cert_file = std::fopen(cert_path.c_str(), "wb");
    std::FILE* key_file = std::fopen(key_path.c_str(), "wb");
    REQUIRE(cert_file);
    REQUIRE(key_file);
    CHECK(PEM_write_X509(cert_file, cert) == 1);
    CHECK(PEM_write_PrivateKey(key_file, key, nullptr, nullptr, 0, nullptr, nullptr) == 1);
    std::fclose(cert_file);
    std::fclose(key_file);
    X509_free(cert);
    EVP_PKEY_free(key);
}

// A fresh cache folder per test, removed afterwards.
struct TempCache {
    fs::path dir;
    TempCache() {
        static std::atomic<int> counter{0};
        dir = fs::temp_directory_path() /
              ("smol-hub-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    ~TempCache() {
        std::error_code ignored;
        fs::remove_all(dir, ignored);
    }
};

DownloadOptions test_options(const std::string& endpoint, const fs::path& cache) {
    DownloadOptions options;
    options.endpoint = endpoint;
    options.cache_dir = cache;
    options.retry_delay = std::chrono::milliseconds(0);
    options.connect_timeout_seconds = 5;
    options.read_timeout_seconds = 5;
    return options;
}

const std::string kModelFile = "tiny-Q4_K_M.gguf";

// A hub holding a model of `size` bytes under kModelFile, plus files that must not be picked.
void fill_repo(FakeHub& hub, std::size_t size = 300'000) {
    hub.files[kModelFile] = make_content(size, 1);
    hub.files["tiny-Q8_0.gguf"] = make_content(1000, 2);
    hub.files["tiny-Q4_K_M-00001-of-00002.gguf"] = make_content(1000, 3);
    hub.files["README.md"] = "# tiny";
}

std::string error_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const smol::Error& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("ModelSpec::parse takes owner/name[:QUANT] and rejects anything else") {
    ModelSpec spec = ModelSpec::parse(kDefaultModelSpec);
    CHECK(spec.repo == "ggml-org/SmolLM3-3B-GGUF");
    CHECK(spec.quant == "Q4_K_M");
    CHECK(spec.file.empty());
    CHECK(ModelSpec::parse("a/b").quant == "Q4_K_M");
    CHECK(ModelSpec::parse("a/b:q8_0").quant == "q8_0");
    CHECK(ModelSpec::parse("a/b").with_file("sub/x.gguf").file == "sub/x.gguf");
    for (const char* bad : {"", "a", "/b", "a/", "a/b/c", "a/b:", "a b/c", "../b", "a/..", "a/b:Q4 K"})
        CHECK_THROWS_AS(ModelSpec::parse(bad), smol::Error);
    for (const char* bad : {"", "/x.gguf", "../x.gguf", "a/../x.gguf", "a//x.gguf", "a\\x.gguf", "dir/"})
        CHECK_THROWS_AS(validate_repo_file(bad), smol::Error);
}

TEST_CASE("quant tags match whole tokens, case-insensitively, single files first") {
    CHECK(gguf_matches_quant("SmolLM3-Q4_K_M.gguf", "q4_k_m"));
    CHECK(gguf_matches_quant("smollm3.Q4_K_M.GGUF", "Q4_K_M"));
    CHECK(gguf_matches_quant("dir/model-Q8_0.gguf", "Q8_0"));
    CHECK_FALSE(gguf_matches_quant("model-Q4_K_M.gguf", "Q4_K"));  // Q4_K is not Q4_K_M
    CHECK_FALSE(gguf_matches_quant("model-Q4_0_4_4.gguf", "Q4_0"));
    CHECK_FALSE(gguf_matches_quant("model-Q4_K_M.bin", "Q4_K_M"));
    CHECK_FALSE(gguf_matches_quant("mmproj-model-Q8_0.gguf", "Q8_0"));
    CHECK(is_split_gguf("m-Q4_K_M-00001-of-00003.gguf"));
    CHECK_FALSE(is_split_gguf("m-Q4_K_M.gguf"));

    const std::vector<std::string> files = {"README.md", "m-Q4_K_M-00001-of-00002.gguf",
                                            "m-Q4_K_M-00002-of-00002.gguf", "m-Q4_K_M.gguf", "m-Q8_0.gguf"};
    CHECK(choose_quant_file(files, "q4_k_m", "o/m") == "m-Q4_K_M.gguf");

    const std::string none = error_of([&] { choose_quant_file(files, "IQ2_XS", "o/m"); });
    CHECK(none.find("IQ2_XS") != std::string::npos);
    CHECK(none.find("m-Q8_0.gguf") != std::string::npos);  // lists what is available
    CHECK(none.find("m-Q4_K_M.gguf") != std::string::npos);

    const std::string split_only =
        error_of([&] { choose_quant_file({"m-Q2_K-00001-of-00002.gguf", "m-Q2_K-00002-of-00002.gguf"}, "Q2_K", "o/m"); });
    CHECK(split_only.find("split") != std::string::npos);

    const std::string several = error_of([&] { choose_quant_file({"a-Q8_0.gguf", "b-Q8_0.gguf"}, "Q8_0", "o/m"); });
    CHECK(several.find("a-Q8_0.gguf") != std::string::npos);
    CHECK(several.find("--hf-file") != std::string::npos);
}

TEST_CASE("SHA-256 streaming matches the FIPS 180-2 test vectors") {
    CHECK(sha256_hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    Sha256 hash;  // one million 'a', fed in uneven pieces
    const std::string a(1'000'000, 'a');
    for (std::size_t at = 0, step = 1; at < a.size(); at += step, step = step * 3 % 9973 + 1)
        hash.update(a.data() + at, std::min(step, a.size() - at));
    CHECK(hash.hex_digest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("URLs: parsing, origins and redirect targets") {
    Url url = Url::parse("HTTPS://Huggingface.co/o/m/resolve/main/f.gguf?x=1");
    CHECK(url.scheme == "https");
    CHECK(url.host == "huggingface.co");
    CHECK(url.port == 443);
    CHECK(url.target == "/o/m/resolve/main/f.gguf?x=1");
    CHECK(url.origin() == "https://huggingface.co:443");
    CHECK(Url::parse("http://127.0.0.1:8080").target == "/");
    CHECK(Url::parse("http://[::1]:81/x").host == "[::1]");
    CHECK(url.resolve("https://cdn.example/a?sig=a%2Bb").str() == "https://cdn.example/a?sig=a%2Bb");
    CHECK(url.resolve("/api/x").str() == "https://huggingface.co/api/x");
    CHECK(url.resolve("//cdn.example/y").str() == "https://cdn.example/y");
    CHECK(url.resolve("g.gguf").str() == "https://huggingface.co/o/m/resolve/main/g.gguf");
    CHECK(encode_url_path("o/m/my file+1.gguf") == "o/m/my%20file%2B1.gguf");
    CHECK_THROWS_AS(Url::parse("ftp://x/y"), smol::Error);
    CHECK_THROWS_AS(Url::parse("http://x:99999/"), smol::Error);
}

TEST_CASE("the Hub's model API resolves a quant tag to its file") {
    FakeHub hub;
    fill_repo(hub);
    TempCache cache;
    const DownloadOptions options = test_options(hub.origin(), cache.dir);
    CHECK(resolve_model_file(ModelSpec::parse("test-org/Tiny-GGUF:q4_k_m"), options) == kModelFile);
    CHECK(resolve_model_file(ModelSpec::parse("test-org/Tiny-GGUF:Q8_0"), options) == "tiny-Q8_0.gguf");
    const std::string missing = error_of([&] { resolve_model_file(ModelSpec::parse("test-org/Tiny-GGUF:Q2_K"), options); });
    CHECK(missing.find("Q2_K") != std::string::npos);
    CHECK(missing.find("tiny-Q8_0.gguf") != std::string::npos);
    CHECK(hub.seen("/api/models/test-org/Tiny-GGUF").size() == 3);
}

TEST_CASE("download follows the redirect, verifies and moves the file into the cache") {
    FakeHub hub;
    fill_repo(hub);
    TempCache cache;
    DownloadOptions options = test_options(hub.origin(), cache.dir);
    std::vector<Progress> reports;
    options.on_progress = [&](const Progress& p) { reports.push_back(p); };

    const fs::path path = ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options);
    CHECK(path == cache.dir / "test-org" / "Tiny-GGUF" / kModelFile);
    CHECK(read_file(path) == hub.files[kModelFile]);
    CHECK_FALSE(fs::exists(detail::part_path(path)));
    CHECK(hub.seen("/test-org/Tiny-GGUF/resolve/main/" + kModelFile).size() == 1);
    CHECK(hub.seen("/cdn/" + kModelFile).size() == 1);

    // Progress: bytes never go backwards, the total is the announced size, the last report
    // says finished with everything there.
    REQUIRE(reports.size() >= 3);
    for (std::size_t i = 1; i < reports.size(); ++i) CHECK(reports[i].downloaded >= reports[i - 1].downloaded);
    CHECK(reports.front().downloaded < reports.back().downloaded);
    CHECK(reports.back().finished);
    CHECK(reports.back().downloaded == hub.files[kModelFile].size());
    CHECK(reports.back().total == hub.files[kModelFile].size());
    for (std::size_t i = 0; i + 1 < reports.size(); ++i) CHECK_FALSE(reports[i].finished);
}

TEST_CASE("a connection dropped mid-body is resumed with a Range request") {
    FakeHub hub;
    fill_repo(hub);
    hub.drops_left = 1;
    TempCache cache;
    DownloadOptions options = test_options(hub.origin(), cache.dir);
    std::vector<std::uint64_t> downloaded;
    options.on_progress = [&](const Progress& p) { downloaded.push_back(p.downloaded); };

    const fs::path path = ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options);
    const std::string& content = hub.files[kModelFile];
    CHECK(read_file(path) == content);
    const auto cdn = hub.seen("/cdn/");
    REQUIRE(cdn.size() == 2);
    CHECK(cdn[0].range.empty());
    CHECK(cdn[1].range == "bytes=" + std::to_string(content.size() / 2) + "-");
    for (std::size_t i = 1; i < downloaded.size(); ++i) CHECK(downloaded[i] >= downloaded[i - 1]);
}

TEST_CASE("a .part left by an earlier run is resumed, and a stale one is replaced") {
    FakeHub hub;
    fill_repo(hub);
    TempCache cache;
    const DownloadOptions options = test_options(hub.origin(), cache.dir);
    const std::string& content = hub.files[kModelFile];
    const fs::path final_path = cache_path(options, hub.repo, kModelFile);

    SUBCASE("a correct prefix continues where it stopped") {
        write_file(detail::part_path(final_path), content.substr(0, 100'000));
        CHECK(ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options) == final_path);
        CHECK(read_file(final_path) == content);
        const auto cdn = hub.seen("/cdn/");
        REQUIRE(cdn.size() == 1);
        CHECK(cdn[0].range == "bytes=100000-");
    }
    SUBCASE("a prefix of other bytes fails the checksum, then downloads from zero once") {
        write_file(detail::part_path(final_path), make_content(100'000, 99));
        CHECK(ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options) == final_path);
        CHECK(read_file(final_path) == content);
        const auto cdn = hub.seen("/cdn/");
        REQUIRE(cdn.size() == 2);
        CHECK(cdn[0].range == "bytes=100000-");
        CHECK(cdn[1].range.empty());
    }
    SUBCASE("a complete part is finished without downloading again") {
        write_file(detail::part_path(final_path), content);
        CHECK(ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options) == final_path);
        CHECK(read_file(final_path) == content);
        CHECK_FALSE(fs::exists(detail::part_path(final_path)));
        const auto cdn = hub.seen("/cdn/");
        REQUIRE(cdn.size() == 1);  // the 416 answer, and no second download
        CHECK(cdn[0].range == "bytes=" + std::to_string(content.size()) + "-");
    }
    SUBCASE("a complete part with other bytes is downloaded again") {
        write_file(detail::part_path(final_path), make_content(content.size(), 77));
        CHECK(ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options) == final_path);
        CHECK(read_file(final_path) == content);
        const auto cdn = hub.seen("/cdn/");
        REQUIRE(cdn.size() == 2);
        CHECK(cdn[1].range.empty());
    }
    SUBCASE("a server that ignores Range (200) makes the download start over") {
        hub.ignore_range = true;
        write_file(detail::part_path(final_path), make_content(5'000, 42));
        CHECK(ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options) == final_path);
        CHECK(read_file(final_path) == content);
        const auto cdn = hub.seen("/cdn/");
        REQUIRE(cdn.size() == 1);
        CHECK(cdn[0].range == "bytes=5000-");
    }
}

TEST_CASE("a wrong checksum or size is rejected and leaves no file behind") {
    FakeHub hub;
    fill_repo(hub);
    TempCache cache;
    const DownloadOptions options = test_options(hub.origin(), cache.dir);
    const fs::path final_path = cache_path(options, hub.repo, kModelFile);
    const std::string wrong_sha(64, 'a');

    SUBCASE("X-Linked-Etag") { hub.sha_override = wrong_sha; }
    SUBCASE("ETag holding the LFS oid, no X-Linked-* headers") {
        hub.announce_linked = false;
        hub.etag_is_sha = true;
        hub.sha_override = wrong_sha;
    }
    SUBCASE("X-Linked-Size smaller than the body") { hub.size_override = 1000; }

    const std::string error = error_of([&] { ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options); });
    CHECK(error.find(hub.size_override >= 0 ? "more than the 1000 bytes" : "SHA-256 mismatch") != std::string::npos);
    CHECK(error.find(final_path.string()) != std::string::npos);
    CHECK_FALSE(fs::exists(final_path));
    CHECK_FALSE(fs::exists(detail::part_path(final_path)));
}

TEST_CASE("the SHA-256 announced in the CDN's ETag is checked when X-Linked-Etag is absent") {
    FakeHub hub;
    fill_repo(hub);
    hub.announce_linked = false;
    hub.etag_is_sha = true;
    TempCache cache;
    const fs::path path = ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), test_options(hub.origin(), cache.dir));
    CHECK(read_file(path) == hub.files[kModelFile]);
}

TEST_CASE("missing repositories and files give a clear 404 error") {
    FakeHub hub;
    fill_repo(hub);
    TempCache cache;
    const DownloadOptions options = test_options(hub.origin(), cache.dir);
    const std::string no_repo = error_of([&] { ensure_model(ModelSpec::parse("test-org/Nope-GGUF"), options); });
    CHECK(no_repo.find("test-org/Nope-GGUF not found") != std::string::npos);
    CHECK(no_repo.find("404") != std::string::npos);
    const std::string no_file =
        error_of([&] { ensure_model(ModelSpec::parse("test-org/Tiny-GGUF").with_file("other.gguf"), options); });
    CHECK(no_file.find("other.gguf not found") != std::string::npos);
    CHECK(no_file.find("Entry not found") != std::string::npos);
    for (const auto& entry : fs::directory_iterator(cache.dir / "test-org" / "Tiny-GGUF"))
        CHECK(entry.path().extension() == ".lock");  // no .gguf, no .part
}

TEST_CASE("no network and no cached model: one message saying what to download and where") {
    TempCache cache;
    const DownloadOptions refused = test_options("http://127.0.0.1:" + std::to_string(closed_port()), cache.dir);
    const std::string repo_dir = (cache.dir / "test-org" / "Tiny-GGUF").string();

    const std::string by_quant = error_of([&] { ensure_model(ModelSpec::parse("test-org/Tiny-GGUF:Q4_K_M"), refused); });
    CHECK(by_quant.find("cannot connect") != std::string::npos);
    CHECK(by_quant.find(refused.endpoint + "/test-org/Tiny-GGUF/tree/main") != std::string::npos);
    CHECK(by_quant.find("Q4_K_M") != std::string::npos);
    CHECK(by_quant.find(repo_dir) != std::string::npos);

    const ModelSpec exact = ModelSpec::parse("test-org/Tiny-GGUF").with_file(kModelFile);
    const std::string by_file = error_of([&] { ensure_model(exact, refused); });
    CHECK(by_file.find(refused.endpoint + "/test-org/Tiny-GGUF/resolve/main/" + kModelFile) != std::string::npos);
    CHECK(by_file.find(repo_dir + "/" + kModelFile) != std::string::npos);

    DownloadOptions offline = test_options("http://192.0.2.1:9", cache.dir);  // would hang if contacted
    offline.offline = true;
    const std::string off = error_of([&] { ensure_model(exact, offline); });
    CHECK(off.find("offline") != std::string::npos);
    CHECK(off.find(repo_dir + "/" + kModelFile) != std::string::npos);
}

TEST_CASE("a cached model is found without the network") {
    TempCache cache;
    fs::path downloaded;
    std::string content;
    {
        FakeHub hub;
        fill_repo(hub);
        content = hub.files[kModelFile];
        downloaded = ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), test_options(hub.origin(), cache.dir));
    }  // the hub is gone now
    const DownloadOptions refused = test_options("http://127.0.0.1:" + std::to_string(closed_port()), cache.dir);
    CHECK(cached_path(ModelSpec::parse("test-org/Tiny-GGUF:q4_k_m"), refused) == downloaded);
    CHECK(ensure_model(ModelSpec::parse("test-org/Tiny-GGUF:Q4_K_M"), refused) == downloaded);
    CHECK(ensure_model(ModelSpec::parse("test-org/Tiny-GGUF").with_file(kModelFile), refused) == downloaded);
    CHECK(read_file(downloaded) == content);
    CHECK_FALSE(cached_path(ModelSpec::parse("test-org/Tiny-GGUF:Q8_0"), refused).has_value());

    // A .part is not a cached model.
    write_file(detail::part_path(cache_path(refused, "test-org/Other", "x-Q4_K_M.gguf")), "partial");
    CHECK_FALSE(cached_path(ModelSpec::parse("test-org/Other"), refused).has_value());
    CHECK_FALSE(cached_path(ModelSpec::parse("test-org/Other").with_file("x-Q4_K_M.gguf"), refused).has_value());
}

TEST_CASE("two downloads of the same file at once: one downloads, the other waits for it") {
    FakeHub hub;
    fill_repo(hub);
    hub.cdn_delay_ms = 300;  // so the second caller arrives while the first is downloading
    TempCache cache;
    const DownloadOptions options = test_options(hub.origin(), cache.dir);
    fs::path first, second;
    std::string second_error;
    std::thread other([&] {
        try {
            second = ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options);
        } catch (const smol::Error& e) {
            second_error = e.what();
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    first = ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options);
    other.join();
    CHECK(second_error.empty());
    CHECK(first == second);
    CHECK(read_file(first) == hub.files[kModelFile]);
    CHECK(hub.seen("/cdn/").size() == 1);
    CHECK(hub.seen("/api/").size() == 2);  // both resolved the file before one waited
    CHECK_FALSE(fs::exists(first.string() + ".lock"));
}

TEST_CASE("HF_TOKEN goes to the Hub as a Bearer token but not to another host") {
    FakeHub hub, cdn;
    fill_repo(hub);
    fill_repo(cdn);
    hub.cdn_origin = cdn.origin();
    TempCache cache;

    ::setenv("HF_TOKEN", "hf_test_secret", 1);
    ::setenv("SMOL_HF_ENDPOINT", hub.origin().c_str(), 1);
    ::setenv("SMOL_CACHE", cache.dir.c_str(), 1);
    ::unsetenv("HF_HUB_OFFLINE");
    DownloadOptions options = default_options();
    ::unsetenv("HF_TOKEN");
    ::unsetenv("SMOL_HF_ENDPOINT");
    ::unsetenv("SMOL_CACHE");
    CHECK(options.token == "hf_test_secret");
    CHECK(options.endpoint == hub.origin());
    CHECK(options.cache_dir == cache.dir);
    options.on_progress = nullptr;
    options.retry_delay = std::chrono::milliseconds(0);

    const fs::path path = ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options);
    CHECK(read_file(path) == hub.files[kModelFile]);
    const auto api = hub.seen("/api/");
    const auto resolve = hub.seen("/test-org/");
    const auto cdn_requests = cdn.seen("/cdn/");
    REQUIRE(api.size() == 1);
    REQUIRE(resolve.size() == 1);
    REQUIRE(cdn_requests.size() == 1);
    CHECK(api[0].authorization == "Bearer hf_test_secret");
    CHECK(resolve[0].authorization == "Bearer hf_test_secret");
    CHECK(cdn_requests[0].authorization.empty());
    CHECK(hub.seen("/cdn/").empty());
}

TEST_CASE("the stderr progress renderer: a bar on a terminal, ~10% lines otherwise") {
    CHECK(format_bytes(17) == "17 B");
    CHECK(format_bytes(1'500'000) == "1.5 MB");
    CHECK(format_bytes(2'340'000'000.0) == "2.34 GB");
    CHECK(format_eta(125) == "02:05");
    CHECK(format_eta(3725) == "1:02:05");
    CHECK(format_eta(-1) == "--:--");

    Progress p;
    p.file = "m.gguf";
    p.total = 1'000'000;
    p.downloaded = 450'000;
    p.bytes_per_second = 2'000'000;
    p.eta_seconds = 0.275;
    const std::string bar = format_progress_bar(p, 20);
    CHECK(bar.starts_with("[=========>          ] "));
    CHECK(bar.find("45% 450.0 KB / 1.0 MB, 2.0 MB/s, ETA 00:00") != std::string::npos);

    std::FILE* log = std::tmpfile();
    REQUIRE(log);
    {
        ProgressPrinter printer(log, /*is_terminal=*/false);
        for (std::uint64_t done = 0; done <= p.total; done += 1000) {
            p.downloaded = done;
            printer(p);
        }
        p.finished = true;
        printer(p);
    }
    std::rewind(log);
    std::vector<std::string> lines;
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, log)) lines.emplace_back(buffer);
    std::fclose(log);
    REQUIRE(lines.size() == 12);  // 0%, 10%, ..., 100%, then "downloaded"
    CHECK(lines[0].find("downloading m.gguf:   0%") != std::string::npos);
    CHECK(lines[5].find(" 50% ") != std::string::npos);
    CHECK(lines[11].find("downloaded m.gguf: 100%") != std::string::npos);
}

TEST_CASE("HTTPS through cpp-httplib and OpenSSL, with certificate verification") {
    TempCache cache;
    const fs::path cert = cache.dir / "server-cert.pem", key = cache.dir / "server-key.pem";
    make_self_signed_certificate(cert, key);
    FakeHub hub(cert, key);
    fill_repo(hub);
    DownloadOptions options = test_options(hub.origin(), cache.dir / "models");
    REQUIRE(options.endpoint.starts_with("https://"));

    // Not signed by a CA the system trusts: refused at once, with a message saying why.
    const std::string untrusted = error_of([&] { ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options); });
    CHECK(untrusted.find("TLS certificate") != std::string::npos);
    CHECK(untrusted.find("SSLServerVerification") != std::string::npos);

    options.ca_cert_file = cert.string();
    const fs::path path = ensure_model(ModelSpec::parse("test-org/Tiny-GGUF"), options);
    CHECK(read_file(path) == hub.files[kModelFile]);
    CHECK(hub.seen("/cdn/").size() == 1);
}

TEST_CASE("redirects: https never goes down to plain http, http may go up to https, loops end") {
    TempCache cache;
    const fs::path cert = cache.dir / "server-cert.pem", key = cache.dir / "server-key.pem";
    make_self_signed_certificate(cert, key);
    const ModelSpec spec = ModelSpec::parse("test-org/Tiny-GGUF");

    SUBCASE("an https Hub redirecting to an http CDN is refused, naming both URLs") {
        FakeHub hub(cert, key), cdn;
        fill_repo(hub);
        fill_repo(cdn);
        hub.cdn_origin = cdn.origin();
        DownloadOptions options = test_options(hub.origin(), cache.dir / "models");
        options.ca_cert_file = cert.string();
        const std::string resolve_url = hub.origin() + "/test-org/Tiny-GGUF/resolve/main/" + kModelFile;
        const std::string error = error_of([&] { ensure_model(spec, options); });
        CHECK(error.find("redirect from " + resolve_url + " to " + cdn.origin() + "/cdn/" + kModelFile) !=
              std::string::npos);
        CHECK(error.find("leaves HTTPS for plain HTTP") != std::string::npos);
        CHECK(cdn.seen().empty());  // not one byte was asked of the http host
        const fs::path final_path = cache_path(options, hub.repo, kModelFile);
        CHECK_FALSE(fs::exists(final_path));
        CHECK_FALSE(fs::exists(detail::part_path(final_path)));
    }
    SUBCASE("an http Hub (a mirror, this test's stand-in) may redirect to an https CDN") {
        FakeHub hub, cdn(cert, key);
        fill_repo(hub);
        fill_repo(cdn);
        hub.cdn_origin = cdn.origin();
        DownloadOptions options = test_options(hub.origin(), cache.dir / "models");
        options.ca_cert_file = cert.string();
        CHECK(read_file(ensure_model(spec, options)) == cdn.files[kModelFile]);
        CHECK(cdn.seen("/cdn/").size() == 1);
    }
    SUBCASE("a redirect loop stops at max_redirects and says where it pointed") {
        FakeHub hub;
        fill_repo(hub);
        hub.cdn_redirect_loop = true;
        const std::string error =
            error_of([&] { ensure_model(spec, test_options(hub.origin(), cache.dir / "models")); });
        CHECK(error.find("more than 10 redirects") != std::string::npos);
        CHECK(error.find("pointed to /cdn/" + kModelFile) != std::string::npos);
        CHECK(hub.seen("/cdn/").size() == 10);  // the resolve hop, then ten to the CDN, one not followed
    }
    SUBCASE("a Location with another scheme is an error naming it") {
        FakeHub hub;
        fill_repo(hub);
        hub.cdn_origin = "ftp://127.0.0.1:21";
        const std::string error =
            error_of([&] { ensure_model(spec, test_options(hub.origin(), cache.dir / "models")); });
        CHECK(error.find("unusable Location 'ftp://127.0.0.1:21/cdn/" + kModelFile + "'") != std::string::npos);
        CHECK(error.find("unsupported scheme 'ftp'") != std::string::npos);
    }
}

TEST_CASE("download size cap: an announced size over it is refused, an unannounced body is cut off") {
    FakeHub hub;
    fill_repo(hub);  // a 300,000-byte model
    TempCache cache;
    DownloadOptions options = test_options(hub.origin(), cache.dir);
    const fs::path final_path = cache_path(options, hub.repo, kModelFile);
    const ModelSpec spec = ModelSpec::parse("test-org/Tiny-GGUF");
    CHECK(options.max_file_bytes == std::uint64_t(64) << 30);

    SUBCASE("X-Linked-Size over the cap: refused before the body") {
        options.max_file_bytes = 299'999;
        const std::string error = error_of([&] { ensure_model(spec, options); });
        CHECK(error.find("announced a file of 300000 bytes, more than the limit of 299999 bytes") != std::string::npos);
        CHECK(error.find("max_file_bytes") != std::string::npos);
        CHECK(error.find(final_path.string()) != std::string::npos);
    }
    SUBCASE("Content-Length over the cap (no X-Linked-Size): refused before the body") {
        hub.announce_linked = false;
        options.max_file_bytes = 1000;
        const std::string error = error_of([&] { ensure_model(spec, options); });
        CHECK(error.find("announced a file of 300000 bytes, more than the limit of 1000 bytes") != std::string::npos);
    }
    SUBCASE("no size announced at all (chunked): cut off past the cap, nothing kept") {
        hub.announce_linked = false;
        hub.ignore_range = true;  // chunked, so no Content-Length either
        options.max_file_bytes = 100'000;
        const std::string error = error_of([&] { ensure_model(spec, options); });
        CHECK(error.find("announced no size and sent more than the limit of 100000 bytes") != std::string::npos);
        CHECK(error.find(final_path.string()) != std::string::npos);
    }
    CHECK_FALSE(fs::exists(final_path));
    CHECK_FALSE(fs::exists(detail::part_path(final_path)));

    // A file of exactly the cap, with no size announced, is fine.
    hub.announce_linked = false;
    hub.ignore_range = true;
    options.max_file_bytes = hub.files[kModelFile].size();
    CHECK(read_file(ensure_model(spec, options)) == hub.files[kModelFile]);
}

}  // namespace test_download
