// HTTP tests of smol-server (the built binary from SMOL_BIN_DIR) on the tiny float fixture:
// completions streamed and not, chunk format, reasoning split, cached tokens on a follow-up,
// cancellation when a client disconnects (streaming or not), every kind of bad input,
// concurrent streaming clients, 1,000 slow or idle connections held by the connection gate
// (keep-alive, pipelining and chunked bodies through it), a flood of maximum-size bodies held to
// its --max-buffered budget, and graceful shutdown on SIGTERM/SIGINT.
// The client is plain POSIX sockets, so tests control every byte and can hang up mid-stream.

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_server {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const std::string kServer = std::string(SMOL_BIN_DIR) + "/smol-server";
const std::string kModel = std::string(SMOL_TEST_DATA_DIR) + "/tiny-f32/smollm3-tiny-f32.gguf";
const std::string kKey = "test-key-123";

// ---- a minimal HTTP/1.1 client ---------------------------------------------------------------

struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;  // names lower-cased
    std::string body;                             // de-chunked
    json json_body() const { return json::parse(body); }
};

// A connection to the server on loopback, or -1 (no doctest assertions: for client threads).
int try_connect(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(std::uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    ::close(fd);
    return -1;
}

int connect_to(int port) {
    const int fd = try_connect(port);
    REQUIRE(fd >= 0);
    return fd;
}

void send_all(int fd, const std::string& data) {
    std::size_t sent = 0;
    while (sent < data.size()) {
        const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return;  // the server may answer and close early (e.g. body too large)
        sent += std::size_t(n);
    }
}

std::string request_text(const std::string& method, const std::string& path, const std::string& body,
                         const std::string& key, const std::string& content_type = "application/json") {
    std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (!key.empty()) r += "Authorization: Bearer " + key + "\r\n";
    if (method == "POST") r += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    return r + "\r\n" + body;
}

std::string dechunk(const std::string& raw) {
    std::string out;
    std::size_t pos = 0;
    while (pos < raw.size()) {
        const std::size_t eol = raw.find("\r\n", pos);
        if (eol == std::string::npos) break;
        const std::size_t n = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
        if (n == 0) break;
        out += raw.substr(eol + 2, n);
        pos = eol + 2 + n + 2;
    }
    return out;
}

Response parse_response(const std::string& raw) {
    Response r;
    const std::size_t header_end = raw.find("\r\n\r\n");
    REQUIRE_MESSAGE(header_end != std::string::npos, "no HTTP header in: " << raw.substr(0, 200));
    std::istringstream head(raw.substr(0, header_end));
    std::string line;
    std::getline(head, line);
    r.status = std::stoi(line.substr(9, 3));
    while (std::getline(head, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = line.substr(0, colon);
        for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
        r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    const std::string rest = raw.substr(header_end + 4);
    r.body = r.headers["transfer-encoding"] == "chunked" ? dechunk(rest) : rest;
    return r;
}

Response raw_http(int port, const std::string& request);

Response http(int port, const std::string& method, const std::string& path, const std::string& body = "",
              const std::string& key = kKey) {
    return raw_http(port, request_text(method, path, body, key));
}

// Sends a request written out whole (for headers the helper above does not send).
Response raw_http(int port, const std::string& request) {
    const int fd = connect_to(port);
    send_all(fd, request);
    std::string raw;
    char buffer[65536];
    ssize_t n;
    while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) raw.append(buffer, std::size_t(n));
    ::close(fd);
    return parse_response(raw);
}

// The `data:` payloads of an SSE body, in order.
std::vector<std::string> sse_data(const std::string& body) {
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos < body.size()) {
        std::size_t end = body.find("\n\n", pos);
        if (end == std::string::npos) end = body.size();
        const std::string block = body.substr(pos, end - pos);
        if (block.rfind("data: ", 0) == 0) out.push_back(block.substr(6));
        pos = end + 2;
    }
    return out;
}

// Reads until the server closes the connection; FAILs if nothing arrives for `seconds`, so a
// hung response fails the test instead of blocking it.
std::string read_to_end(int fd, int seconds) {
    timeval timeout{seconds, 0};
    REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) == 0);
    std::string raw;
    char buffer[65536];
    while (true) {
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n == 0) return raw;
        if (n < 0) FAIL("no end of the response after " << seconds << " s (errno " << errno << "); so far:\n" << raw);
        raw.append(buffer, std::size_t(n));
    }
}

// Reads one response with a Content-Length body from a connection that stays open. Bytes after
// it (the next of pipelined responses) are left in `rest`, where the next call starts.
Response read_one_response(int fd, std::string* rest = nullptr) {
    std::string raw;
    if (rest) raw.swap(*rest);
    char buffer[4096];
    while (true) {
        const std::size_t header_end = raw.find("\r\n\r\n");
        if (header_end != std::string::npos) {
            const Response head = parse_response(raw.substr(0, header_end + 4));
            const auto length = head.headers.find("content-length");
            REQUIRE(length != head.headers.end());
            const std::size_t end = header_end + 4 + std::stoul(length->second);
            if (raw.size() >= end) {
                if (rest) *rest = raw.substr(end);
                return parse_response(raw.substr(0, end));
            }
        }
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        REQUIRE(n > 0);
        raw.append(buffer, std::size_t(n));
    }
}

// What has arrived on the socket already, without waiting.
void read_available(int fd, std::string& raw) {
    char buffer[65536];
    ssize_t n;
    while ((n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT)) > 0) raw.append(buffer, std::size_t(n));
}

// The reasoning and answer text of the SSE chunks in a (possibly cut off) streamed reply, and
// how many chunks carried text.
struct Delivered {
    std::string text;
    int chunks = 0;
};
Delivered delivered_text(const std::string& raw) {
    Delivered d;
    const std::size_t header_end = raw.find("\r\n\r\n");
    if (header_end == std::string::npos) return d;
    for (const std::string& data : sse_data(dechunk(raw.substr(header_end + 4)))) {
        const json chunk = json::parse(data, nullptr, /*allow_exceptions=*/false);
        if (!chunk.is_object() || !chunk.contains("choices") || chunk["choices"].empty()) continue;
        const json& delta = chunk["choices"][0]["delta"];
        std::string piece;
        for (const char* key : {"reasoning_content", "content"})
            if (delta.contains(key)) piece += delta[key].get<std::string>();
        if (piece.empty()) continue;
        d.text += piece;
        ++d.chunks;
    }
    return d;
}

// ---- the server process ----------------------------------------------------------------------

class ServerProcess {
public:
    explicit ServerProcess(std::vector<std::string> extra, std::string model = kModel, bool wait_ready = true) {
        REQUIRE_MESSAGE(fs::exists(kServer), kServer << " is missing: build the smol-server target first");
        log_path_ = fs::temp_directory_path() / ("smol-server-test-" + std::to_string(::getpid()) + "-" +
                                                std::to_string(counter_++) + ".log");
        std::vector<std::string> args = {kServer, "-m", model, "--port", "0", "--host", "127.0.0.1"};
        args.insert(args.end(), extra.begin(), extra.end());
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            std::FILE* log = std::fopen(log_path_.c_str(), "w");
            if (log) ::dup2(::fileno(log), 2);
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            std::_Exit(127);
        }
        // The server logs the port it got, then loads the model.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (port_ == 0 && std::chrono::steady_clock::now() < deadline) {
            const std::string text = log();
            const auto at = text.find("listening on http://127.0.0.1:");
            if (at != std::string::npos) port_ = std::stoi(text.substr(at + 30));
            else std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        REQUIRE_MESSAGE(port_ != 0, "the server did not start:\n" << log());
        if (!wait_ready) return;
        while (std::chrono::steady_clock::now() < deadline) {
            if (http(port_, "GET", "/health").status == 200) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        FAIL("the server did not become healthy:\n" << log());
    }
    ~ServerProcess() {
        if (pid_ > 0) {
            ::kill(pid_, SIGTERM);
            int status = 0;
            ::waitpid(pid_, &status, 0);
        }
        std::error_code ec;
        fs::remove(log_path_, ec);
    }
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    // The server's resident memory now, from /proc (bytes).
    std::uint64_t rss_bytes() const { return status_bytes("VmRSS:"); }
    // The most it has been resident at once since it started (bytes).
    std::uint64_t peak_rss_bytes() const { return status_bytes("VmHWM:"); }
    // Waits for the process to exit; its exit status, or -1 if it is still running after `seconds`.
    int wait_exit(int seconds) {
        for (int i = 0; i < seconds * 50; ++i) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return -1;
    }
    std::string log() const {
        std::ifstream in(log_path_);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    // Every value from /metrics, read at one moment.
    std::map<std::string, double> metrics() const {
        const Response r = http(port_, "GET", "/metrics");
        std::map<std::string, double> out;
        std::istringstream lines(r.body);
        std::string line;
        while (std::getline(lines, line)) {
            if (line.empty() || line[0] == '#') continue;
            const auto space = line.find(' ');
            if (space != std::string::npos) out[line.substr(0, space)] = std::stod(line.substr(space + 1));
        }
        return out;
    }
    // A value from /metrics.
    double metric(const std::string& name) const {
        const auto all = metrics();
        const auto it = all.find(name);
        if (it == all.end()) FAIL("no metric " << name << " in /metrics");
        return it->second;
    }
    // Until `want` requests generate; fails with `what` after 30 s.
    void wait_for_active_sessions(double want, const std::string& what) const {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (metric("smol_active_sessions") != want) {
            if (std::chrono::steady_clock::now() > deadline) FAIL(what);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    // The metrics once no request is generating and the token count stopped changing, so what
    // a test reads is final rather than a snapshot taken while the model still runs (reading
    // /metrics may itself wait behind the compute threads on a busy machine).
    std::map<std::string, double> settled_metrics(int seconds = 30) const {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
        auto last = metrics();
        while (std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            auto now = metrics();
            if (now["smol_active_sessions"] == 0 && now["smol_queue_depth"] == 0 &&
                now["smol_tokens_generated_total"] == last["smol_tokens_generated_total"])
                return now;
            last = std::move(now);
        }
        FAIL("generation did not stop within " << seconds << " s");
        return last;
    }
    void send_signal(int sig) const { REQUIRE(::kill(pid_, sig) == 0); }

private:
    std::uint64_t status_bytes(const std::string& field) const {
        std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
        std::string line;
        while (std::getline(status, line))
            if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size())) * 1024;
        return 0;
    }

    static inline int counter_ = 0;
    pid_t pid_ = -1;
    int port_ = 0;
    fs::path log_path_;
};

// A short system prompt (/system_override drops the template's long default), so the tests
// spend their time on what they check.
json chat(const std::string& user, int max_tokens, bool stream) {
    return json{{"messages", json::array({{{"role", "system"}, {"content", "Be brief./system_override"}},
                                          {{"role", "user"}, {"content", user}}})},
                {"max_tokens", max_tokens},
                {"temperature", 0},
                {"stream", stream}};
}

void check_error(const Response& r, int status, const std::string& code) {
    CAPTURE(r.body);
    CHECK(r.status == status);
    CHECK(r.headers.at("content-type").find("application/json") != std::string::npos);
    const json e = json::parse(r.body, nullptr, false);
    REQUIRE(e.is_object());
    REQUIRE(e.contains("error"));
    CHECK(e["error"]["message"].is_string());
    CHECK(!e["error"]["message"].get<std::string>().empty());
    CHECK(e["error"]["type"].is_string());
    CHECK(e["error"]["code"] == code);
}

// A shell command's exit status and its standard output (and error, with " 2>&1").
struct CommandResult {
    int status = -1;  // -1: killed by a signal
    std::string output;
};
CommandResult run_command(const std::string& command) {
    std::FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE_MESSAGE(pipe != nullptr, "popen failed for: " << command);
    CommandResult result;
    char buffer[4096];
    while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
    const int status = ::pclose(pipe);
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
}

// Two chat replies under way when a test signals the server: one streamed, one not, each on its
// own connection, both generating and the stream two chunks of text in.
struct RepliesUnderWay {
    int streaming = -1;    // the streamed reply's connection
    int plain = -1;        // the non-streamed reply's connection
    std::string streamed;  // what the stream has delivered so far
};
RepliesUnderWay start_two_replies(const ServerProcess& server, int max_tokens, const std::string& key) {
    RepliesUnderWay replies;
    const int port = server.port();
    replies.streaming = connect_to(port);
    send_all(replies.streaming,
             request_text("POST", "/v1/chat/completions", chat("Tell me a long story", max_tokens, true).dump(), key));
    replies.plain = connect_to(port);
    send_all(replies.plain, request_text("POST", "/v1/chat/completions", chat("Another story", max_tokens, false).dump(), key));
    char buffer[4096];
    while (delivered_text(replies.streamed).chunks < 2) {
        const ssize_t n = ::recv(replies.streaming, buffer, sizeof buffer, 0);
        if (n <= 0) FAIL("the stream ended before any content: " << replies.streamed);
        replies.streamed.append(buffer, std::size_t(n));
    }
    server.wait_for_active_sessions(2, "the second request did not start");
    return replies;
}

}  // namespace

TEST_CASE("smol-server: health, models, tokenize, detokenize, the page and metrics") {
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "2"});
    const int port = server.port();
    const Response health = http(port, "GET", "/health", "", "");
    CHECK(health.status == 200);
    CHECK(health.json_body()["status"] == "ok");

    const Response models = http(port, "GET", "/v1/models");
    REQUIRE(models.status == 200);
    CHECK(models.json_body()["data"][0]["id"] == "smollm3-tiny-f32.gguf");
    CHECK(models.json_body()["data"][0]["meta"]["n_ctx"] == 512);

    const Response tok = http(port, "POST", "/tokenize", R"({"content": "<|im_start|>user\nHello"})");
    REQUIRE(tok.status == 200);
    const json ids = tok.json_body()["tokens"];
    REQUIRE(ids.size() >= 3);
    CHECK(ids[0] == 4088);  // <|im_start|>, a special token, parsed as one id
    const Response detok = http(port, "POST", "/detokenize", json{{"tokens", ids}}.dump());
    REQUIRE(detok.status == 200);
    CHECK(detok.json_body()["content"] == "<|im_start|>user\nHello");
    check_error(http(port, "POST", "/detokenize", R"({"tokens": [99999]})"), 400, "invalid_value");
    check_error(http(port, "POST", "/tokenize", R"({"content": 5})"), 400, "invalid_type");

    const Response page = http(port, "GET", "/", "", "");
    CHECK(page.status == 200);
    CHECK(page.headers.at("content-type").find("text/html") == 0);
    CHECK(page.body.find("/vendor/marked.min.js") != std::string::npos);
    const Response purify = http(port, "GET", "/vendor/purify.min.js", "", "");
    CHECK(purify.status == 200);
    CHECK(purify.body.find("DOMPurify") != std::string::npos);

    const Response metrics = http(port, "GET", "/metrics");
    CHECK(metrics.status == 200);
    for (const char* name : {"smol_http_requests_total", "smol_tokens_generated_total", "smol_tokens_per_second",
                             "smol_queue_depth", "smol_active_sessions", "smol_chat_completions_total"})
        CHECK(metrics.body.find(std::string("\n") + name + " ") != std::string::npos);
    // One log line per request.
    CHECK(server.log().find("GET /v1/models 200") != std::string::npos);
}

TEST_CASE("smol-server: non-streaming and streaming completions agree, with usage and [DONE]") {
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "2"});
    const int port = server.port();

    const Response plain = http(port, "POST", "/v1/chat/completions", chat("Hello there", 12, false).dump());
    REQUIRE(plain.status == 200);
    // Chunked, so the server can watch the connection while generating (see the disconnect tests).
    CHECK(plain.headers.at("content-type") == "application/json");
    CHECK(plain.headers.at("transfer-encoding") == "chunked");
    const json body = plain.json_body();
    CHECK(body["object"] == "chat.completion");
    CHECK(body["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
    CHECK(body["choices"][0]["message"]["role"] == "assistant");
    const std::string content = body["choices"][0]["message"]["content"];
    CHECK(!content.empty());
    CHECK(body["choices"][0]["finish_reason"] == "length");
    CHECK(body["usage"]["completion_tokens"] == 12);
    const int prompt_tokens = body["usage"]["prompt_tokens"];
    CHECK(prompt_tokens > 5);
    CHECK(body["usage"]["total_tokens"] == prompt_tokens + 12);

    json request = chat("Hello there", 12, true);
    request["stream_options"] = {{"include_usage", true}};
    const Response streamed = http(port, "POST", "/v1/chat/completions", request.dump());
    REQUIRE(streamed.status == 200);
    CHECK(streamed.headers.at("content-type").find("text/event-stream") == 0);
    const auto events = sse_data(streamed.body);
    REQUIRE(events.size() >= 4);
    CHECK(events.back() == "[DONE]");
    std::string joined;
    std::string finish;
    json usage;
    std::set<std::string> ids;
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
        const json chunk = json::parse(events[i]);
        CHECK(chunk["object"] == "chat.completion.chunk");
        ids.insert(chunk["id"].get<std::string>());
        if (chunk.contains("usage")) {
            usage = chunk["usage"];
            CHECK(chunk["choices"].empty());
            continue;
        }
        const json& choice = chunk["choices"][0];
        if (i == 0) CHECK(choice["delta"]["role"] == "assistant");
        if (choice["delta"].contains("content")) joined += choice["delta"]["content"].get<std::string>();
        CHECK(!choice["delta"].contains("reasoning_content"));
        if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
    CHECK(ids.size() == 1);
    CHECK(joined == content);  // greedy: the same text both ways
    CHECK(finish == "length");
    REQUIRE(usage.is_object());
    CHECK(usage["completion_tokens"] == 12);
    CHECK(usage["prompt_tokens"] == prompt_tokens);
    // The same prompt again is found in a slot's cache.
    CHECK(usage["prompt_tokens_details"]["cached_tokens"] == prompt_tokens - 1);

    // Without include_usage there is no usage chunk.
    const Response no_usage = http(port, "POST", "/v1/chat/completions", chat("Hi", 3, true).dump());
    CHECK(no_usage.body.find("\"usage\"") == std::string::npos);
    CHECK(sse_data(no_usage.body).back() == "[DONE]");

    // Stop strings end the answer before the stop text.
    json stop_request = chat("Hello there", 12, false);
    const std::string stop = content.substr(content.size() / 2, 3);
    REQUIRE(content.find(stop) >= 1);
    stop_request["stop"] = json::array({stop});
    const json stopped = http(port, "POST", "/v1/chat/completions", stop_request.dump()).json_body();
    CHECK(stopped["choices"][0]["finish_reason"] == "stop");
    CHECK(stopped["choices"][0]["message"]["content"] == content.substr(0, content.find(stop)));

    // Log-probabilities: one entry per token, whose bytes spell the reply; greedy picks the most
    // likely token; streamed chunks carry the same entries, each once.
    CHECK(body["choices"][0]["logprobs"].is_null());
    json with_logprobs = chat("Hello there", 12, false);
    with_logprobs["logprobs"] = true;
    with_logprobs["top_logprobs"] = 3;
    const json scored = http(port, "POST", "/v1/chat/completions", with_logprobs.dump()).json_body();
    CHECK(scored["choices"][0]["message"]["content"] == content);
    const json entries = scored["choices"][0]["logprobs"]["content"];
    REQUIRE(entries.size() == 12);
    std::string spelled;
    for (const json& e : entries) {
        for (const json& byte : e["bytes"]) spelled += char(byte.get<int>());
        REQUIRE(e["top_logprobs"].size() == 3);
        CHECK(e["token"] == e["top_logprobs"][0]["token"]);
        CHECK(e["logprob"] == e["top_logprobs"][0]["logprob"]);
        CHECK(e["logprob"].get<double>() <= 0.0);
        CHECK(e["top_logprobs"][1]["logprob"].get<double>() <= e["top_logprobs"][0]["logprob"].get<double>());
        CHECK(e["top_logprobs"][2]["logprob"].get<double>() <= e["top_logprobs"][1]["logprob"].get<double>());
    }
    CHECK(spelled == content);
    with_logprobs["stream"] = true;
    json streamed_entries = json::array();
    for (const std::string& event : sse_data(http(port, "POST", "/v1/chat/completions", with_logprobs.dump()).body)) {
        if (event == "[DONE]") continue;
        const json chunk = json::parse(event);
        if (chunk["choices"].empty() || !chunk["choices"][0].contains("logprobs")) continue;
        for (const json& e : chunk["choices"][0]["logprobs"]["content"]) streamed_entries.push_back(e);
    }
    CHECK(streamed_entries == entries);
}

TEST_CASE("smol-server: /v1/completions continues a raw prompt, streamed and not, from text or token ids") {
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "2"});
    const int port = server.port();
    const std::string path = "/v1/completions";
    json request = {{"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 0}, {"logprobs", 2}};
    const Response plain = http(port, "POST", path, request.dump());
    REQUIRE(plain.status == 200);
    const json body = plain.json_body();
    CHECK(body["object"] == "text_completion");
    CHECK(body["id"].get<std::string>().rfind("cmpl-", 0) == 0);
    const std::string text = body["choices"][0]["text"];
    CHECK(!text.empty());
    CHECK(body["choices"][0]["finish_reason"] == "length");
    CHECK(body["usage"]["completion_tokens"] == 10);
    const json& logprobs = body["choices"][0]["logprobs"];
    REQUIRE(logprobs["tokens"].size() == 10);
    std::string spelled;
    for (std::size_t i = 0; i < 10; ++i) {
        CHECK(logprobs["text_offset"][i] == spelled.size());
        spelled += logprobs["tokens"][i].get<std::string>();
        CHECK(logprobs["top_logprobs"][i].size() == 2);
        CHECK(logprobs["token_logprobs"][i].get<double>() <= 0.0);
    }
    CHECK(spelled == text);

    // The same prompt as token ids (from /tokenize) gives the same continuation.
    const json ids = http(port, "POST", "/tokenize", json{{"content", "Once upon a time"}}.dump()).json_body()["tokens"];
    json by_ids = request;
    by_ids["prompt"] = ids;
    const json again = http(port, "POST", path, by_ids.dump()).json_body();
    CHECK(again["choices"][0]["text"] == text);
    CHECK(again["usage"]["prompt_tokens"] == body["usage"]["prompt_tokens"]);

    // Streamed: text_completion chunks that join to the same text, usage, then [DONE].
    json streamed = request;
    streamed["stream"] = true;
    streamed["stream_options"] = {{"include_usage", true}};
    const auto events = sse_data(http(port, "POST", path, streamed.dump()).body);
    REQUIRE(events.size() >= 3);
    CHECK(events.back() == "[DONE]");
    std::string joined;
    json tokens = json::array();
    std::string finish;
    int usage_chunks = 0;
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
        const json chunk = json::parse(events[i]);
        CHECK(chunk["object"] == "text_completion");
        if (chunk.contains("usage")) {
            ++usage_chunks;
            CHECK(chunk["usage"]["completion_tokens"] == 10);
            continue;
        }
        joined += chunk["choices"][0]["text"].get<std::string>();
        for (const json& t : chunk["choices"][0]["logprobs"]["tokens"]) tokens.push_back(t);
        if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
    }
    CHECK(joined == text);
    CHECK(tokens == logprobs["tokens"]);
    CHECK(finish == "length");
    CHECK(usage_chunks == 1);

    check_error(http(port, "POST", path, R"({"max_tokens": 3})"), 400, "missing_prompt");
    check_error(http(port, "POST", path, R"({"prompt": "x", "echo": true})"), 400, "unsupported_parameter");
    check_error(http(port, "POST", path, R"({"prompt": "x"})", "wrong-key"), 401, "invalid_api_key");

    // llama-server's `grammar` constrains the completion; an invalid one is a 400.
    const json count = {{"prompt", "Count:"}, {"max_tokens", 6}, {"temperature", 1}, {"grammar", "root ::= [0-9]+"}};
    const std::string digits = http(port, "POST", path, count.dump()).json_body()["choices"][0]["text"];
    CHECK(!digits.empty());
    CHECK(digits.find_first_not_of("0123456789") == std::string::npos);
    check_error(http(port, "POST", path, R"({"prompt": "x", "grammar": "root ::= ["})"), 400, "invalid_grammar");
    CHECK(server.metric("smol_text_completions_total") == 4);

    // response_format json_object: the random-weight model answers with a JSON object, streamed
    // and not, within max_tokens.
    for (const bool stream : {false, true}) {
        json structured = chat("A cat as JSON", 20, stream);
        structured["temperature"] = 1;
        structured["response_format"] = {{"type", "json_object"}};
        const Response r = http(port, "POST", "/v1/chat/completions", structured.dump());
        REQUIRE(r.status == 200);
        std::string content;
        if (!stream) {
            content = r.json_body()["choices"][0]["message"]["content"];
        } else {
            for (const std::string& event : sse_data(r.body)) {
                if (event == "[DONE]") continue;
                const json delta = json::parse(event)["choices"][0]["delta"];
                if (delta.contains("content")) content += delta["content"].get<std::string>();
                CHECK_FALSE(delta.contains("reasoning_content"));
            }
        }
        CAPTURE(content);
        CHECK(json::parse(content, nullptr, false).is_object());
    }
}

TEST_CASE("smol-server: llama-server's native /completion and /completions: its object, its stream, its fields") {
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "2"});
    const int port = server.port();
    const json request = {{"prompt", "Once upon a time"}, {"n_predict", 8}, {"temperature", 0}};
    // The same continuation as OpenAI's /v1/completions gives (greedy), in llama-server's shape.
    const json openai = http(port, "POST", "/v1/completions", request.dump()).json_body();
    for (const char* path : {"/completion", "/completions"}) {
        CAPTURE(path);
        const Response r = http(port, "POST", path, request.dump());
        REQUIRE(r.status == 200);
        const json body = r.json_body();
        CHECK(body["content"] == openai["choices"][0]["text"]);
        CHECK(body["stop"] == true);
        CHECK(body["stop_type"] == "limit");
        CHECK(body["tokens_predicted"] == 8);
        CHECK(body["tokens_evaluated"] == openai["usage"]["prompt_tokens"]);
        CHECK(body["generation_settings"]["n_predict"] == 8);
        CHECK(body["generation_settings"]["temperature"] == 0.0);
        CHECK(body["prompt"] == "Once upon a time");
        CHECK(body["tokens"] == json::array());  // without return_tokens
        CHECK(body["timings"]["predicted_n"] == 8);
        CHECK_FALSE(body.contains("completion_probabilities"));
        CHECK_FALSE(body.contains("choices"));
        // id_slot names the slot that ran it, whose cache now holds tokens_cached tokens.
        const json slots = http(port, "GET", "/slots").json_body();
        CHECK(slots[body["id_slot"].get<int>()]["n_cached_tokens"] == body["tokens_cached"]);
    }

    // Streamed: chunks whose content joins to the same text and whose tokens (return_tokens) and
    // probabilities (n_probs) cover every token, then the final object with stop: true and no [DONE].
    json streamed = request;
    streamed["stream"] = true;
    streamed["return_tokens"] = true;
    streamed["n_probs"] = 2;
    const auto events = sse_data(http(port, "POST", "/completion", streamed.dump()).body);
    REQUIRE(events.size() >= 2);
    std::string joined;
    json tokens = json::array(), probabilities = json::array();
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
        const json chunk = json::parse(events[i]);
        CHECK(chunk["stop"] == false);
        joined += chunk["content"].get<std::string>();
        for (const json& t : chunk["tokens"]) tokens.push_back(t);
        for (const json& p : chunk["completion_probabilities"]) probabilities.push_back(p);
        CHECK(chunk["tokens_predicted"] == tokens.size());
    }
    const json last = json::parse(events.back());
    CHECK(last["stop"] == true);
    CHECK(last["content"] == "");
    CHECK(last["tokens_predicted"] == 8);
    CHECK(joined == openai["choices"][0]["text"]);
    REQUIRE(tokens.size() == 8);
    REQUIRE(probabilities.size() == 8);
    for (std::size_t i = 0; i < 8; ++i) {
        CHECK(probabilities[i]["id"] == tokens[i]);
        CHECK(probabilities[i]["top_logprobs"].size() == 2);
        CHECK(probabilities[i]["logprob"].get<double>() <= 0.0);
    }
    const json detokenized = http(port, "POST", "/detokenize", json{{"tokens", tokens}}.dump()).json_body();
    CHECK(detokenized["content"] == joined);

    // Not streamed, the same tokens and probabilities in the one object; response_fields picks.
    json whole = streamed;
    whole["stream"] = false;
    const json body = http(port, "POST", "/completion", whole.dump()).json_body();
    CHECK(body["tokens"] == tokens);
    CHECK(body["completion_probabilities"] == probabilities);
    whole["response_fields"] = {"content", "generation_settings/n_predict", "no/such"};
    CHECK(http(port, "POST", "/completion", whole.dump()).json_body() ==
          json{{"content", joined}, {"generation_settings/n_predict", 8}});

    // A stop word, llama-server's mixed prompt and its logit_bias pairs.
    const std::string second_word = joined.substr(0, std::min<std::size_t>(joined.size(), 2));
    json stopped = request;
    stopped["stop"] = {second_word};
    const json at_stop = http(port, "POST", "/completion", stopped.dump()).json_body();
    CHECK(at_stop["stop_type"] == "word");
    CHECK(at_stop["stopping_word"] == second_word);
    const json ids = http(port, "POST", "/tokenize", json{{"content", "Once upon"}}.dump()).json_body()["tokens"];
    json mixed = request;
    mixed["prompt"] = ids;
    mixed["prompt"].push_back(" a time");
    CHECK(http(port, "POST", "/completion", mixed.dump()).json_body()["content"] == openai["choices"][0]["text"]);
    json banned = request;
    banned["logit_bias"] = json::array({json::array({tokens[0], false})});
    CHECK(http(port, "POST", "/completion", banned.dump()).json_body()["content"] != openai["choices"][0]["text"]);

    // What it cannot do is a 400 naming the field; the key, the JSON and the prompt as elsewhere.
    check_error(http(port, "POST", "/completion", R"({"prompt": "x", "post_sampling_probs": true})"), 400,
                "unsupported_parameter");
    check_error(http(port, "POST", "/completion", R"({"prompt": "x", "echo": true})"), 400, "unsupported_parameter");
    check_error(http(port, "POST", "/completion", R"({"prompt": ["a", "b"]})"), 400, "unsupported_parameter");
    check_error(http(port, "POST", "/completion", R"({"n_predict": 3})"), 400, "missing_prompt");
    check_error(http(port, "POST", "/completion", "{"), 400, "invalid_json");
    check_error(http(port, "POST", "/completions", R"({"prompt": "x"})", "wrong-key"), 401, "invalid_api_key");
}

TEST_CASE("smol-server: prompts reach the log only with --log-prompts, the key never") {
    for (const bool logged : {false, true}) {
        CAPTURE(logged);
        std::vector<std::string> flags = {"--api-key", kKey, "-c", "512", "--parallel", "1"};
        if (logged) flags.push_back("--log-prompts");
        ServerProcess server(flags);
        CHECK(http(server.port(), "POST", "/v1/chat/completions", chat("my-private-prompt-42", 2, false).dump()).status == 200);
        CHECK(http(server.port(), "POST", "/v1/completions", R"({"prompt": "another-private-text", "max_tokens": 2})").status == 200);
        const std::string log = server.log();
        CHECK(log.find("POST /v1/chat/completions 200") != std::string::npos);
        CHECK((log.find("my-private-prompt-42") != std::string::npos) == logged);
        CHECK((log.find("another-private-text") != std::string::npos) == logged);
        CHECK(log.find(kKey) == std::string::npos);
        if (!logged) continue;
        // A body with a newline and a terminal escape in it is logged as one line of JSON.
        CHECK(http(server.port(), "POST", "/v1/completions",
                   json{{"prompt", "line one\nFAKE 127.0.0.1 GET /admin 200\x1b[2J"}, {"max_tokens", 1}}.dump())
                  .status == 200);
        const std::string after = server.log();
        CHECK(after.find("\nFAKE 127.0.0.1") == std::string::npos);
        CHECK(after.find("\x1b") == std::string::npos);
        CHECK(after.find("line one\\nFAKE 127.0.0.1 GET /admin 200\\u001b[2J") != std::string::npos);
        // A body that is not JSON (a raw newline inside a string) is not logged as sent.
        const Response raw = raw_http(server.port(), request_text("POST", "/v1/completions",
                                                                  "{\"prompt\": \"x\nFAKE 127.0.0.2 GET /admin 200\x1b[2J\"}", kKey));
        CHECK(raw.status == 400);
        const std::string last = server.log();
        CHECK(last.find("\nFAKE 127.0.0.2") == std::string::npos);
        CHECK(last.find("\x1b") == std::string::npos);
        CHECK(last.find("body: (not JSON within the limits)") != std::string::npos);
    }
}

TEST_CASE("smol-server: what a client controls reaches the log escaped, one line per request") {
    ServerProcess server({"-c", "256", "--parallel", "1"});
    // httplib decodes %0a in a path to a newline; a forged line must not appear.
    const Response r = raw_http(server.port(), "GET /x%0a127.0.0.1%20GET%20/forged%20200%1b[2J HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                               "Connection: close\r\n\r\n");
    CHECK(r.status == 404);
    const std::string log = server.log();
    CAPTURE(log);
    CHECK(log.find("\n127.0.0.1 GET /forged") == std::string::npos);
    CHECK(log.find("\x1b") == std::string::npos);
    CHECK(log.find("GET /x\\x0a127.0.0.1 GET /forged 200\\x1b[2J 404") != std::string::npos);
    // Long paths are cut.
    CHECK(raw_http(server.port(), "GET /" + std::string(5000, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
              .status == 404);
    CHECK(server.log().find("/" + std::string(255, 'a') + "... 404") != std::string::npos);  // 256 bytes of the path
    CHECK(server.log().find(std::string(300, 'a')) == std::string::npos);
}

TEST_CASE("smol-server: the RoPE scaling flags turn YaRN on and say so") {
    ServerProcess server({"-c", "512", "--parallel", "1", "--rope-scaling", "yarn", "--rope-scale", "2", "--yarn-orig-ctx", "256"});
    CHECK(server.log().find("RoPE scaling: YaRN, factor 2 over 256 tokens") != std::string::npos);
    const Response reply = http(server.port(), "POST", "/v1/chat/completions", chat("Hi", 4, false).dump());
    CHECK(reply.status == 200);
    CHECK(reply.json_body()["usage"]["completion_tokens"] == 4);
}

TEST_CASE("smol-server: --alias, /props, /slots, --cors, and the key on everything but the page and /health") {
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "3", "--alias", "smol-test", "--cors",
                          "https://a.example,https://b.example", "--temp", "0.25", "--top-k", "7"});
    const int port = server.port();
    CHECK(http(port, "GET", "/v1/models").json_body()["data"][0]["id"] == "smol-test");
    CHECK(http(port, "POST", "/v1/chat/completions", chat("Hi", 2, false).dump()).json_body()["model"] == "smol-test");

    const json props = http(port, "GET", "/props").json_body();
    CHECK(props["total_slots"] == 3);
    CHECK(props["model_alias"] == "smol-test");
    CHECK(props["default_generation_settings"]["n_ctx"] == 512);
    // The defaults a request starts from are the server's sampling flags.
    CHECK(props["default_generation_settings"]["params"]["temperature"].get<double>() == doctest::Approx(0.25));
    CHECK(props["default_generation_settings"]["params"]["top_k"] == 7);
    CHECK(props["default_generation_settings"]["params"]["max_tokens"] == -1);
    // The file's name only: its absolute path would tell callers how the host is laid out.
    CHECK(props["model_path"] == fs::path(kModel).filename().string());

    const json slots = http(port, "GET", "/slots").json_body();
    REQUIRE(slots.size() == 3);
    int with_cache = 0;
    for (std::size_t i = 0; i < slots.size(); ++i) {
        CHECK(slots[i]["id"] == int(i));
        CHECK(slots[i]["n_ctx"] == 512);
        CHECK(slots[i]["is_processing"] == false);
        with_cache += slots[i]["n_cached_tokens"].get<int>() > 0;
    }
    CHECK(with_cache == 1);  // the chat above

    // The key by rule: the page, its files and /health are open; everything else is not, even
    // paths that do not exist.
    for (const char* open : {"/", "/index.html", "/app.js", "/health", "/v1/health"}) {
        CAPTURE(open);
        CHECK(http(port, "GET", open, "", "").status == 200);
    }
    for (const char* closed : {"/props", "/slots", "/metrics", "/v1/models", "/nothing"}) {
        CAPTURE(closed);
        check_error(http(port, "GET", closed, "", ""), 401, "invalid_api_key");
    }
    check_error(http(port, "POST", "/tokenize", R"({"content": "x"})", ""), 401, "invalid_api_key");
    check_error(http(port, "POST", "/apply-template", R"({"messages": []})", ""), 401, "invalid_api_key");
    check_error(http(port, "POST", "/slots/0?action=erase", "{}", ""), 401, "invalid_api_key");
    // Without --slot-save-path the slot actions are off, as llama-server's are.
    check_error(http(port, "POST", "/slots/0?action=save", R"({"filename": "a.bin"})"), 501, "not_supported");
    check_error(http(port, "POST", "/slots/0?action=erase", "{}"), 501, "not_supported");

    // CORS: an allowed origin may read replies and gets its preflight answered; others get nothing.
    const auto get_from = [&](const std::string& origin) {
        return raw_http(port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nOrigin: " + origin + "\r\n\r\n");
    };
    CHECK(get_from("https://a.example").headers["access-control-allow-origin"] == "https://a.example");
    CHECK(get_from("https://b.example").headers["access-control-allow-origin"] == "https://b.example");
    CHECK(get_from("https://evil.example").headers.count("access-control-allow-origin") == 0);
    const Response preflight = raw_http(port,
        "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nOrigin: https://a.example\r\n"
        "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, content-type\r\n\r\n");
    CHECK(preflight.status == 204);
    CHECK(preflight.headers.at("access-control-allow-origin") == "https://a.example");
    CHECK(preflight.headers.at("access-control-allow-methods").find("POST") != std::string::npos);
    CHECK(preflight.headers.at("access-control-allow-headers").find("Authorization") != std::string::npos);
    // Errors the connection gate answers itself carry the same fields, so a page sees a 413
    // rather than an opaque CORS failure.
    const auto too_large_from = [&](const std::string& origin) {
        return raw_http(port, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: " + origin +
                                  "\r\nContent-Type: application/json\r\nContent-Length: 999999999999\r\n\r\n{");
    };
    Response allowed = too_large_from("https://b.example");
    CHECK(allowed.status == 413);
    CHECK(allowed.headers["access-control-allow-origin"] == "https://b.example");
    CHECK(allowed.headers["vary"] == "Origin");
    CHECK(allowed.json_body()["error"]["code"] == "payload_too_large");
    const Response refused = too_large_from("https://evil.example");
    CHECK(refused.status == 413);
    CHECK(refused.headers.count("access-control-allow-origin") == 0);
}

TEST_CASE("smol-server: keys from repeated --api-key, --api-key-file and SMOL_API_KEY all work; bad ones exit 2") {
    const fs::path key_file = fs::temp_directory_path() / ("smol-keys-" + std::to_string(::getpid()) + ".txt");
    {
        std::ofstream out(key_file);
        out << "# rotated keys\n\n  file-key-1  \r\nfile-key-2\n";
    }
    ::setenv("SMOL_API_KEY", "env-key", 1);  // the child inherits it
    ServerProcess server({"--api-key", kKey, "--api-key", "second-key", "--api-key-file", key_file.string(), "-c", "256",
                          "--parallel", "1"});
    ::unsetenv("SMOL_API_KEY");
    const int port = server.port();
    for (const std::string& key : {kKey, std::string("second-key"), std::string("file-key-1"), std::string("file-key-2"), std::string("env-key")}) {
        CAPTURE(key);
        CHECK(http(port, "GET", "/v1/models", "", key).status == 200);
    }
    const Response anthropic = raw_http(port, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                                              "x-api-key: file-key-2\r\n\r\n");
    CHECK(anthropic.status == 200);
    for (const std::string wrong : {"# rotated keys", "file-key", "env-key2", "second-key2"}) {
        CAPTURE(wrong);
        check_error(http(port, "GET", "/v1/models", "", wrong), 401, "invalid_api_key");
    }

    // Bad keys are refused before the model is read, saying what and where; `timeout` ends a
    // server that wrongly started (status 124).
    const fs::path empty_file = key_file.string() + ".empty";
    { std::ofstream(empty_file) << "# no keys yet\n\n"; }
    const fs::path spaced_file = key_file.string() + ".spaced";
    { std::ofstream(spaced_file) << "good-key\nhas space\n"; }
    const std::string start = "timeout 30 " + kServer + " -m " + kModel + " --port 0 ";
    const std::vector<std::pair<std::string, std::string>> refused = {
        {"--api-key ''", "--api-key: expected a non-empty key, found an empty one"},
        {"--api-key-file " + empty_file.string(),
         "--api-key-file '" + empty_file.string() + "': expected one key a line, found none"},
        {"--api-key-file " + spaced_file.string(),
         "--api-key-file '" + spaced_file.string() + "' line 2: expected printable ASCII without spaces, found byte 32"},
        {"--api-key-file /nonexistent/keys", "--api-key-file '/nonexistent/keys': cannot open it"},
    };
    for (const auto& refusal : refused) {
        // Named copies: clang 14 cannot capture a structured binding in a lambda (CAPTURE is one).
        const std::string& flags = refusal.first;
        const std::string& message = refusal.second;
        CAPTURE(flags);
        const CommandResult r = run_command(start + flags + " 2>&1");
        CHECK(r.status == 2);
        CHECK_MESSAGE(r.output.find("smol-server: " + message) != std::string::npos, r.output);
    }
    const CommandResult empty_env = run_command("SMOL_API_KEY= " + start + "2>&1");
    CHECK(empty_env.status == 2);
    CHECK(empty_env.output.find("the SMOL_API_KEY environment variable: expected a non-empty key") != std::string::npos);
    for (const fs::path& f : {key_file, empty_file, spaced_file}) fs::remove(f);
}

// A long prompt's usage, sent under `key` with an optional cache_salt.
json usage_of(int port, const std::string& key, const std::string& salt = "") {
    json request = chat("Tell me, in plain words, what a key-value cache in a transformer keeps between steps", 4, false);
    if (!salt.empty()) request["cache_salt"] = salt;
    const Response r = http(port, "POST", "/v1/chat/completions", request.dump(), key);
    CAPTURE(r.body);
    REQUIRE(r.status == 200);
    return r.json_body();
}

TEST_CASE("smol-server: a cached prompt is reused within a key or cache_salt, never across them") {
    ServerProcess server({"--api-key", "tenant-a", "--api-key", "tenant-b", "-c", "512", "--parallel", "1"});
    const int port = server.port();
    const auto cached = [](const json& reply) { return reply["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); };
    const json a1 = usage_of(port, "tenant-a");
    CHECK(cached(a1) == 0);
    const json b1 = usage_of(port, "tenant-b");  // the one slot holds a's prompt: b may not use it
    CHECK(cached(b1) == 0);
    CHECK(b1["choices"][0]["message"] == a1["choices"][0]["message"]);
    const json b2 = usage_of(port, "tenant-b");
    CHECK(cached(b2) > 0);
    CHECK(b2["choices"][0]["message"] == a1["choices"][0]["message"]);
    // Within a key, a salt separates caches the same way.
    CHECK(cached(usage_of(port, "tenant-b", "team-1")) == 0);
    CHECK(cached(usage_of(port, "tenant-b", "team-2")) == 0);
    const json salted = usage_of(port, "tenant-b", "team-2");
    CHECK(cached(salted) > 0);
    CHECK(salted["choices"][0]["message"] == a1["choices"][0]["message"]);
    // Every generating API takes cache_salt; a bad one is a 400 naming it.
    const json messages = {{"model", "m"}, {"max_tokens", 2}, {"cache_salt", "s"},
                           {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}};
    CHECK(http(port, "POST", "/v1/messages", messages.dump(), "tenant-a").status == 200);
    const json responses = {{"input", "Hi"}, {"max_output_tokens", 16}, {"cache_salt", "s"}};
    CHECK(http(port, "POST", "/v1/responses", responses.dump(), "tenant-a").status == 200);
    CHECK(http(port, "POST", "/v1/completions", R"({"prompt": "Hi", "max_tokens": 2, "cache_salt": "s"})", "tenant-a")
              .status == 200);
    json bad = chat("Hi", 2, false);
    bad["cache_salt"] = 7;
    check_error(http(port, "POST", "/v1/chat/completions", bad.dump(), "tenant-a"), 400, "invalid_type");
    bad["cache_salt"] = "";
    check_error(http(port, "POST", "/v1/chat/completions", bad.dump(), "tenant-a"), 400, "invalid_value");

    // --cache-share-keys: keys share again.
    ServerProcess shared({"--api-key", "tenant-a", "--api-key", "tenant-b", "--cache-share-keys", "-c", "512",
                          "--parallel", "1"});
    CHECK(cached(usage_of(shared.port(), "tenant-a")) == 0);
    CHECK(cached(usage_of(shared.port(), "tenant-b")) > 0);
}

TEST_CASE("smol-server: a follow-up turn reuses the cached conversation") {
    ServerProcess server({"--api-key", kKey, "-c", "1024", "--parallel", "2"});
    const int port = server.port();
    json first = chat("What is a KV cache?", 8, false);
    first["chat_template_kwargs"] = {{"enable_thinking", false}};
    const json turn1 = http(port, "POST", "/v1/chat/completions", first.dump()).json_body();
    REQUIRE(turn1.contains("choices"));
    const int prompt1 = turn1["usage"]["prompt_tokens"];
    CHECK(turn1["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);

    json second = first;
    second["messages"].push_back({{"role", "assistant"}, {"content", turn1["choices"][0]["message"]["content"]}});
    second["messages"].push_back({{"role", "user"}, {"content", "And why does it help?"}});
    const json turn2 = http(port, "POST", "/v1/chat/completions", second.dump()).json_body();
    REQUIRE(turn2.contains("usage"));
    const int prompt2 = turn2["usage"]["prompt_tokens"];
    const int cached2 = turn2["usage"]["prompt_tokens_details"]["cached_tokens"];
    CAPTURE(prompt1);
    CAPTURE(prompt2);
    CAPTURE(cached2);
    CHECK(prompt2 > prompt1);
    CHECK(cached2 >= prompt1);  // at least the whole first prompt was not run again
    CHECK(cached2 < prompt2);
    CHECK(turn2["timings"]["prompt_n"] == prompt2 - cached2);
    CHECK(server.metric("smol_prompt_tokens_cached_total") == double(cached2));

    // Tools given to the template are listed in the default system turn: the prompt grows.
    json plain = {{"messages", json::array({{{"role", "user"}, {"content", "Weather?"}}})}, {"max_tokens", 1}};
    json with_tools = plain;
    with_tools["chat_template_kwargs"]["xml_tools"] = json::array(
        {{{"name", "get_weather"}, {"description", "Weather for a city"}, {"parameters", {{"city", "string"}}}}});
    const json untooled = http(port, "POST", "/v1/chat/completions", plain.dump()).json_body();
    const json tooled = http(port, "POST", "/v1/chat/completions", with_tools.dump()).json_body();
    CAPTURE(tooled.dump());
    REQUIRE(tooled.contains("usage"));
    REQUIRE(untooled.contains("usage"));
    CHECK(tooled["usage"]["prompt_tokens"].get<int>() > untooled["usage"]["prompt_tokens"].get<int>() + 10);
}

TEST_CASE("smol-server: --reasoning-budget closes the think block after that many tokens, and the answer follows") {
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "1", "--reasoning-budget", "4"});
    const int port = server.port();
    // Forced into thinking by a prefill; the budget, not the model, ends the block.
    json thinking = chat("Think about it", 14, true);
    thinking["temperature"] = 1.0;
    thinking["seed"] = 3;
    thinking["stream_options"] = {{"include_usage", true}};
    thinking["messages"].push_back({{"role", "assistant"}, {"content", "<think>\n"}});
    const Response r = http(port, "POST", "/v1/chat/completions", thinking.dump());
    REQUIRE(r.status == 200);
    std::string reasoning, content;
    bool reasoning_after_content = false;
    json usage;
    for (const auto& e : sse_data(r.body)) {
        if (e == "[DONE]") continue;
        const json chunk = json::parse(e);
        if (chunk.contains("usage") && chunk["usage"].is_object()) usage = chunk["usage"];
        if (chunk["choices"].empty()) continue;
        const json delta = chunk["choices"][0]["delta"];
        if (delta.contains("reasoning_content")) {
            reasoning += delta["reasoning_content"].get<std::string>();
            reasoning_after_content = reasoning_after_content || !content.empty();
        }
        if (delta.contains("content") && delta["content"].is_string()) content += delta["content"].get<std::string>();
    }
    CAPTURE(reasoning);
    CAPTURE(content);
    CHECK(!reasoning.empty());
    CHECK(!content.empty());
    CHECK_FALSE(reasoning_after_content);
    CHECK(usage["completion_tokens_details"]["reasoning_tokens"] == 4);
    // A request's own budget wins over the server's; out of range is a 400 naming the field.
    json own = thinking;
    own["reasoning_effort"] = "low";
    own["stream"] = false;
    const json low = http(port, "POST", "/v1/chat/completions", own.dump()).json_body();
    CHECK(low["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>() > 4);
    own["reasoning_effort"] = "max";
    const Response bad = http(port, "POST", "/v1/chat/completions", own.dump());
    check_error(bad, 400, "invalid_value");
    CHECK(bad.body.find("reasoning_effort") != std::string::npos);
}

TEST_CASE("smol-server: reasoning is streamed as reasoning_content, the answer as content") {
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "1"});
    const int port = server.port();
    // A trailing assistant message is continued (prefill). Opening a think block makes the
    // generated text reasoning; closing it makes it the answer.
    json thinking = chat("Think about it", 6, true);
    thinking["temperature"] = 1.0;
    thinking["seed"] = 3;
    thinking["messages"].push_back({{"role", "assistant"}, {"content", "<think>\nLet me see."}});
    const Response r = http(port, "POST", "/v1/chat/completions", thinking.dump());
    REQUIRE(r.status == 200);
    std::string reasoning, content;
    for (const auto& e : sse_data(r.body)) {
        if (e == "[DONE]") continue;
        const json delta = json::parse(e)["choices"][0]["delta"];
        if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
        if (delta.contains("content")) content += delta["content"].get<std::string>();
    }
    CHECK(!reasoning.empty());
    CHECK(content.empty());

    thinking["stream"] = false;
    const json plain = http(port, "POST", "/v1/chat/completions", thinking.dump()).json_body();
    CHECK(plain["choices"][0]["message"]["reasoning_content"] == reasoning);  // same seed, same text
    CHECK(plain["choices"][0]["message"]["content"] == "");

    json answered = thinking;
    answered["messages"].back()["content"] = "<think>\nDone.\n</think>\n";
    const json after = http(port, "POST", "/v1/chat/completions", answered.dump()).json_body();
    CHECK(!after["choices"][0]["message"].contains("reasoning_content"));
    CHECK(after["choices"][0]["message"]["content"] != "");
}

// How many tokens a generation may run past its client's hang-up. The server notices at the next
// token (it peeks the socket between tokens) and the worker stops before the one after, so 1-3
// is usual; the rest is room for the HTTP thread waiting for a core on a busy 2-core machine
// while the compute thread keeps going. A server that does not cancel runs to max_tokens.
constexpr double kTokensPastHangup = 12;

TEST_CASE("smol-server: a client that disconnects mid-stream has its generation cancelled") {
    // One compute thread leaves a core to the HTTP threads, so noticing the hang-up is not
    // queued behind the model on a 2-core machine.
    ServerProcess server({"--api-key", kKey, "-c", "1024", "--parallel", "1", "-t", "1"});
    const int port = server.port();
    const int max_tokens = 800;
    const int fd = connect_to(port);
    send_all(fd, request_text("POST", "/v1/chat/completions", chat("Tell me a long story", max_tokens, true).dump(), kKey));
    // Read until some text arrived, take whatever else is already here, then hang up.
    std::string raw;
    char buffer[4096];
    while (delivered_text(raw).chunks < 3) {
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) FAIL("the stream ended before any content: " << raw);
        raw.append(buffer, std::size_t(n));
    }
    read_available(fd, raw);
    ::close(fd);
    // The tokens generated by the hang-up, counted from what the client got: the delivered text
    // tokenizes back to the tokens that made it (checked below on a finished reply), and each
    // chunk holds at least one token.
    const Delivered delivered = delivered_text(raw);
    const Response tokenized =
        http(port, "POST", "/tokenize", json{{"content", delivered.text}, {"parse_special", false}}.dump());
    REQUIRE(tokenized.status == 200);
    const double delivered_tokens =
        std::max<double>(double(tokenized.json_body()["tokens"].size()), double(delivered.chunks));

    auto settled = server.settled_metrics();
    CHECK(settled["smol_requests_cancelled_total"] == 1);
    CHECK(settled["smol_requests_finished_total"] == 0);
    const double generated = settled["smol_tokens_generated_total"];
    CAPTURE(delivered_tokens);
    CAPTURE(generated);
    CHECK(generated >= delivered_tokens);
    CHECK(generated <= delivered_tokens + kTokensPastHangup);
    CHECK(generated < max_tokens / 4);

    // The freed slot serves the next request. Its text tokenizes back to its token count, which
    // is what the count of delivered tokens above relies on.
    const Response next = http(port, "POST", "/v1/chat/completions", chat("Tell me a long story", 40, false).dump());
    REQUIRE(next.status == 200);
    const json message = next.json_body()["choices"][0]["message"];
    const std::string text = message.value("reasoning_content", "") + message["content"].get<std::string>();
    const Response retokenized = http(port, "POST", "/tokenize", json{{"content", text}, {"parse_special", false}}.dump());
    CHECK(retokenized.json_body()["tokens"].size() == next.json_body()["usage"]["completion_tokens"].get<std::size_t>());
}

TEST_CASE("smol-server: a non-streaming client that disconnects has its generation cancelled") {
    ServerProcess server({"--api-key", kKey, "-c", "1024", "--parallel", "1", "-t", "1"});
    const int port = server.port();
    const int max_tokens = 900;
    const int fd = connect_to(port);
    send_all(fd, request_text("POST", "/v1/chat/completions", chat("Tell me a long story", max_tokens, false).dump(), kKey));
    // Hang up once generation is well under way (nothing of the reply arrives before its end).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    double generated_before = 0;
    while ((generated_before = server.metric("smol_tokens_generated_total")) < 10) {
        if (std::chrono::steady_clock::now() > deadline) FAIL("generation did not start");
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ::close(fd);

    auto settled = server.settled_metrics();
    CHECK(settled["smol_requests_cancelled_total"] == 1);
    CHECK(settled["smol_requests_finished_total"] == 0);
    CHECK(settled["smol_active_sessions"] == 0);
    const double generated = settled["smol_tokens_generated_total"];
    CAPTURE(generated_before);
    CAPTURE(generated);
    // generated_before was read a little before the hang-up, so this allows a few more tokens
    // than the streaming test does; a request left running would reach max_tokens.
    CHECK(generated <= generated_before + kTokensPastHangup + 8);
    CHECK(generated < max_tokens / 4);

    const Response next = http(port, "POST", "/v1/chat/completions", chat("Hi", 3, false).dump());
    CHECK(next.status == 200);
    CHECK(next.json_body()["usage"]["completion_tokens"] == 3);
}

TEST_CASE("smol-server: bad input gets the right 4xx with an OpenAI-style error body") {
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "2", "--max-body", "65536"});
    const int port = server.port();
    const std::string path = "/v1/chat/completions";
    check_error(http(port, "POST", path, "{not json"), 400, "invalid_json");
    // Invalid UTF-8 anywhere in the JSON is a 400 on every endpoint, never a 500; the message
    // quotes the bytes as U+FFFD.
    const std::pair<const char*, std::string> invalid_utf8[] = {
        {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi \xff\xfe there\"}]}"},
        {"/v1/chat/completions", "{\"messages\": [{\"role\": \"us\xc3\", \"content\": \"hi\"}]}"},
        {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stop\": [\"\xed\xa0\x80\"]}"},
        {"/v1/completions", "{\"prompt\": \"hi \xc3 there\"}"},
        {"/completion", "{\"prompt\": \"hi \xc3 there\"}"},
        {"/tokenize", "{\"content\": \"\xff\"}"},
    };
    for (const auto& endpoint_and_body : invalid_utf8) {
        const std::string endpoint = endpoint_and_body.first;  // a named copy: clang 14 cannot capture a binding
        CAPTURE(endpoint);
        const Response r = http(port, "POST", endpoint, endpoint_and_body.second);
        check_error(r, 400, "invalid_json");
        CHECK(r.body.find("\xef\xbf\xbd") != std::string::npos);
    }
    check_error(http(port, "POST", path, "[1, 2]"), 400, "invalid_request");
    check_error(http(port, "POST", path, R"({"max_tokens": 5})"), 400, "missing_messages");
    check_error(http(port, "POST", path, R"({"messages": "hello"})"), 400, "invalid_type");
    check_error(http(port, "POST", path, R"({"messages": []})"), 400, "invalid_value");
    check_error(http(port, "POST", path, R"({"messages": [{"role": "wizard", "content": "hi"}]})"), 400, "invalid_role");
    check_error(http(port, "POST", path, R"({"messages": [{"role": 3, "content": "hi"}]})"), 400, "invalid_type");
    check_error(http(port, "POST", path, R"({"messages": [{"role": "user"}]})"), 400, "missing_content");
    check_error(http(port, "POST", path, R"({"messages": [{"role": "user", "content": 42}]})"), 400, "invalid_type");
    check_error(http(port, "POST", path, R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": "ten"})"),
                400, "invalid_type");
    check_error(http(port, "POST", path, R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})"), 400,
                "invalid_value");
    check_error(http(port, "POST", path, R"({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"})"),
                400, "invalid_type");
    check_error(http(port, "POST", path, R"({"messages": [{"role": "user", "content": "hi"}], "top_p": 1.5})"), 400,
                "invalid_value");
    check_error(http(port, "POST", path, R"({"messages": [{"role": "user", "content": "hi"}], "stop": 7})"), 400,
                "invalid_type");
    check_error(http(port, "POST", path, R"({"messages": [{"role": "user", "content": "hi"}], "stream": "yes"})"), 400,
                "invalid_type");
    check_error(http(port, "POST", path,
                     R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": 1}})"),
                400, "invalid_type");
    check_error(http(port, "POST", path,
                     R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"xml_tools": {}}})"),
                400, "invalid_type");
    // A field smol-server does not implement is refused by name (test_openai_api covers them all).
    const Response audio = http(port, "POST", path, R"({"messages": [{"role": "user", "content": "hi"}], "audio": {"voice": "x"}})");
    check_error(audio, 400, "unsupported_parameter");
    CHECK(audio.json_body()["error"]["message"].get<std::string>().find("'audio'") != std::string::npos);
    // Content as a list of text parts is accepted (joined), other parts are not.
    CHECK(http(port, "POST", path,
               R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 2})")
              .status == 200);
    check_error(http(port, "POST", path,
                     R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]})"),
                400, "invalid_content");

    // A prompt longer than the context.
    std::string long_text;
    for (int i = 0; i < 400; ++i) long_text += "word" + std::to_string(i) + " ";
    check_error(http(port, "POST", path, chat(long_text, 4, false).dump()), 400, "context_length_exceeded");
    check_error(http(port, "POST", path, chat(long_text, 4, true).dump()), 400, "context_length_exceeded");

    // A body over the size limit.
    json huge = chat(std::string(100000, 'a'), 4, false);
    check_error(http(port, "POST", path, huge.dump()), 413, "payload_too_large");

    // API key: missing or wrong is 401; health and the page stay open.
    check_error(http(port, "POST", path, chat("hi", 2, false).dump(), ""), 401, "invalid_api_key");
    check_error(http(port, "POST", path, chat("hi", 2, false).dump(), "wrong-key"), 401, "invalid_api_key");
    check_error(http(port, "GET", "/v1/models", "", "wrong-key"), 401, "invalid_api_key");
    CHECK(http(port, "GET", "/health", "", "").status == 200);
    CHECK(http(port, "GET", "/", "", "").status == 200);

    check_error(http(port, "GET", "/v1/nothing"), 404, "not_found");
    // What llama-server or ollama answers and smol-server cannot is a 404 that says why.
    const Response embeddings = http(port, "POST", "/v1/embeddings", R"({"input": "hi"})");
    check_error(embeddings, 404, "not_found");
    CHECK(embeddings.json_body()["error"]["message"].get<std::string>().find("no embeddings") != std::string::npos);
    const Response infill = http(port, "POST", "/infill", R"({"input_prefix": "def f(", "input_suffix": "x"})");
    CHECK(infill.json_body()["error"]["message"].get<std::string>().find("fill-in-the-middle") != std::string::npos);
    const Response pull = http(port, "POST", "/api/pull", R"({"model": "x"})");
    CHECK(pull.status == 404);
    CHECK(pull.json_body()["error"].get<std::string>().find("the one model") != std::string::npos);  // ollama's shape

    // Still serving after all that.
    const Response ok = http(port, "POST", path, chat("Still there?", 3, false).dump());
    CHECK(ok.status == 200);
    CHECK(ok.json_body()["usage"]["completion_tokens"] == 3);
    CHECK(server.metric("smol_http_client_errors_total") >= 20);
}

TEST_CASE("smol-server: hostile requests get a 4xx within seconds, and other users are not held up") {
    ServerProcess server({"-c", "512", "--parallel", "2"});
    const int port = server.port();
    // From here on (a /health poll that waited for the model was a 503).
    const double server_errors_before = server.metric("smol_http_server_errors_total");
    const std::string path = "/v1/chat/completions";
    const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };

    // Nesting 1.5 million deep (3 MB) in every field that is copied or walked: refused while
    // parsing, before anything recursive sees it. It used to overflow a worker's stack.
    const std::string deep = std::string(1500000, '[') + std::string(1500000, ']');
    const std::string deep_bodies[] = {
        "{\"tokens\": " + deep + "}",
        "{\"prompt\": " + deep + "}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\", \"extra\": " + deep + "}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"logit_bias\": {\"5\": " + deep + "}}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"chat_template_kwargs\": {\"xml_tools\": " + deep + "}}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"response_format\": {\"type\": \"json_schema\", "
        "\"json_schema\": {\"schema\": {\"enum\": " + deep + "}}}}",
    };
    for (const char* endpoint : {"/detokenize", "/v1/completions", "/completion", "/v1/chat/completions"})
        for (const std::string& body : deep_bodies) {
            CAPTURE(endpoint);
            check_error(http(port, "POST", endpoint, body), 400, "json_too_complex");
        }
    // Just inside the cap is parsed as usual (and refused for what it holds, not how deep).
    const std::string inside = std::string(63, '[') + "1" + std::string(63, ']');
    check_error(http(port, "POST", "/detokenize", "{\"tokens\": " + inside + "}"), 400, "invalid_type");
    // Many small values: the parsed JSON would cost 20 times the body.
    std::string many = "{\"tokens\": [";
    for (int i = 0; i < 300000; ++i) many += i ? ",0" : "0";
    check_error(http(port, "POST", "/detokenize", many + "]}"), 400, "json_too_complex");

    // Grammar bombs: each refused (or compiled) within seconds, while a plain structured
    // request sent at the same time is answered as if alone.
    const auto chat_with = [&](const std::string& key, const json& value) {
        json body = chat("hi", 4, false);
        body[key] = value;
        return body.dump();
    };
    std::string wide_literal(40000, 'x');
    const std::pair<std::string, std::string> bombs[] = {
        // Counted repetition: 100,000 nested optional rules, which compile in linear time now.
        {chat_with("grammar", "root ::= \"a\"{0,100000}"), ""},
        // A 40 KB literal copied 100,000 times would be 4 billion elements.
        {chat_with("grammar", "root ::= \"" + wide_literal + "\"{100000}"), "grammar_too_complex"},
        // Groups nested a million deep.
        {chat_with("grammar", "root ::= " + std::string(1000000, '(') + "\"a\"" + std::string(1000000, ')')),
         "grammar_too_complex"},
        // One reference branching into 2^40 ways without consuming a character.
        {[] {
             std::string g = "root ::= r0\n";
             // Appended piece by piece: GCC 12 warns (-Wrestrict, its bug 105329) on "r" + to_string(i).
             for (int i = 0; i < 40; ++i) {
                 const std::string next = std::to_string(i + 1);
                 g.append("r").append(std::to_string(i)).append(" ::= r").append(next).append(" | r").append(next).append("\n");
             }
             g += "r40 ::= \"a\"\n";
             return json{{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"grammar", g}}.dump();
         }(),
         "grammar_too_complex"},
    };
    for (const auto& bomb_case : bombs) {
        // Named copies: clang 14 cannot capture a structured binding in a lambda.
        const std::string& body = bomb_case.first;
        const std::string& code = bomb_case.second;
        CAPTURE(code);
        std::atomic<bool> bomb_done{false};
        Response bomb_reply;
        const auto start = std::chrono::steady_clock::now();
        std::thread bomb([&] {
            bomb_reply = http(port, "POST", path, body);
            bomb_done = true;
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const auto plain_start = std::chrono::steady_clock::now();
        json plain = chat("hi", 3, false);
        plain["response_format"] = {{"type", "json_object"}};
        CHECK(http(port, "POST", path, plain.dump()).status == 200);
        CHECK(seconds_since(plain_start) < 10);
        bomb.join();
        CHECK(seconds_since(start) < 10);
        if (code.empty()) CHECK(bomb_reply.status == 200);
        else check_error(bomb_reply, 400, code);
    }

    // A JSON schema whose 'type' lists double the work at every level (2^30 subschemas before).
    json schema = {{"type", "string"}};
    for (int i = 0; i < 30; ++i) schema = {{"type", json::array({"object", "object"})}, {"properties", {{"a", schema}}}};
    const auto schema_start = std::chrono::steady_clock::now();
    check_error(http(port, "POST", path,
                     chat_with("response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}})),
                400, "grammar_too_complex");
    CHECK(seconds_since(schema_start) < 10);

    // A grammar that compiles but whose ways to continue double with every "a" (every sentence
    // has at least 13): generation ends with an error naming the limit, a client error.
    const std::string doubling = "root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"a\"{12} \"d\"\n";
    json doubling_request = json::parse(chat_with("grammar", doubling));
    doubling_request["max_tokens"] = 64;
    const Response doubled = http(port, "POST", path, doubling_request.dump());
    CHECK(doubled.status == 200);  // the error comes in the body: the reply had begun
    const json stopped = doubled.json_body();
    CAPTURE(stopped.dump());
    REQUIRE(stopped.contains("error"));
    CHECK(stopped["error"]["code"] == "grammar_too_complex");
    CHECK(stopped["error"]["message"].get<std::string>().find("ways to continue") != std::string::npos);

    // Smaller ways in: a content part whose type is not a string, a response_format without a
    // type, a stop string past its length limit.
    check_error(http(port, "POST", path, R"({"messages": [{"role": "user", "content": [{"type": 5, "text": "hi"}]}]})"), 400,
                "invalid_content");
    check_error(http(port, "POST", path, chat_with("response_format", json::object())), 400, "invalid_value");
    check_error(http(port, "POST", path, chat_with("stop", json::array({std::string(5000, 's')}))), 400, "invalid_value");

    // Nothing above was a 5xx (nor a generation that failed), and the server still answers.
    CHECK_MESSAGE(server.metric("smol_http_server_errors_total") == server_errors_before, server.log());
    CHECK(http(port, "POST", path, chat("Still there?", 2, false).dump()).status == 200);
}

TEST_CASE("smol-server: the largest replies and parses a body can cause are bounded; four at once stay under 256 MiB") {
    ServerProcess server({"-c", "512", "--parallel", "1"});
    const int port = server.port();
    // The baseline has answered each route once.
    const Response asset = http(port, "GET", "/vendor/marked.min.js", "", "");
    REQUIRE(asset.status == 200);
    REQUIRE(http(port, "POST", "/tokenize", R"({"content": "warm up", "with_pieces": true})", "").status == 200);

    // JSON inside a string: a Responses function_call whose arguments nest a million deep (this
    // once ended the process), and one whose arguments hold 2 million values.
    const auto responses_call = [](const std::string& arguments) {
        return json{{"model", "smol"},
                    {"input", json::array({{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", arguments}},
                                           {{"type", "function_call_output"}, {"call_id", "c"}, {"output", "x"}}})}}
            .dump();
    };
    std::string flat = "[0";
    for (int i = 1; i < 1'500'000; ++i) flat += ",0";
    flat += "]";
    // Several byte ranges of a public asset (2,000 of the whole file in an 8 KB header).
    std::string ranges = "GET /vendor/marked.min.js HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nRange: bytes=0-";
    for (int i = 1; i < 2000; ++i) ranges += ",0-";
    ranges += "\r\n\r\n";
    // /tokenize of 2 million tokens with their pieces: 94 MB of reply before the cap.
    std::string zeros;
    for (int i = 0; i < 2'000'000; ++i) zeros += "0 ";
    const std::string tokenize_body = json{{"content", zeros}, {"with_pieces", true}}.dump();

    struct Attack {
        const char* name;
        std::function<Response()> send;
        std::function<void(const Response&)> check;
    };
    const std::vector<Attack> attacks = {
        {"deep arguments", [&] { return http(port, "POST", "/v1/responses", responses_call(std::string(1'000'000, '[') + std::string(1'000'000, ']')), ""); },
         [](const Response& r) { check_error(r, 400, "json_too_complex"); }},
        {"wide arguments", [&] { return http(port, "POST", "/v1/responses", responses_call(flat), ""); },
         [](const Response& r) { check_error(r, 400, "json_too_complex"); }},
        {"2,000 ranges", [&] { return raw_http(port, ranges); },
         [&](const Response& r) {
             CHECK(r.status == 200);  // the whole file once, not 2,000 times
             CHECK(r.body == asset.body);
         }},
        {"tokenize 2M", [&] { return http(port, "POST", "/tokenize", tokenize_body, ""); },
         [](const Response& r) {
             check_error(r, 400, "too_many_tokens");
             CHECK(r.body.find("--max-tokenize") != std::string::npos);
         }},
    };
    const std::uint64_t rss_before = server.rss_bytes();
    for (const Attack& attack : attacks) {
        CAPTURE(attack.name);
        attack.check(attack.send());
        CHECK(server.peak_rss_bytes() < rss_before + (std::uint64_t(64) << 20));
    }
    for (const Attack& attack : attacks) {
        CAPTURE(attack.name);
        std::vector<Response> replies(4);
        std::vector<std::thread> clients;
        for (Response& reply : replies) clients.emplace_back([&] { reply = attack.send(); });
        for (std::thread& c : clients) c.join();
        for (const Response& reply : replies) attack.check(reply);
    }
    const std::uint64_t peak = server.peak_rss_bytes();
    MESSAGE("RSS before ", rss_before >> 20, " MiB, peak ", peak >> 20, " MiB");
    CHECK(peak < rss_before + (std::uint64_t(256) << 20));

    // At the cap a reply is built, and holds what was asked.
    const Response at_cap = http(port, "POST", "/tokenize", json{{"content", std::string(256, 'x')}, {"with_pieces", true}}.dump(), "");
    REQUIRE(at_cap.status == 200);
    CHECK(at_cap.json_body()["tokens"].size() <= 512);
    CHECK(at_cap.json_body()["tokens"][0]["piece"].is_string());
    check_error(http(port, "POST", "/detokenize", json{{"tokens", std::vector<int>(513, 5)}}.dump(), ""), 400, "too_many_tokens");
    CHECK(http(port, "GET", "/health", "", "").status == 200);
}

TEST_CASE("smol-server: a page on another site cannot drive a loopback server") {
    ServerProcess server({"-c", "256", "--parallel", "1"});
    const int port = server.port();
    const std::string body = chat("hi", 2, false).dump();
    const auto request = [&](const std::string& host, const std::string& content_type) {
        return "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\nContent-Type: " +
               content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    };
    // A form post or text/plain body needs no CORS preflight: refused, whatever it holds.
    check_error(raw_http(port, request("127.0.0.1", "text/plain;charset=UTF-8")), 415, "unsupported_media_type");
    check_error(raw_http(port, request("127.0.0.1", "application/x-www-form-urlencoded")), 415, "unsupported_media_type");
    check_error(raw_http(port, request_text("POST", "/tokenize", R"({"content": "x"})", "", "text/plain")), 415,
                "unsupported_media_type");
    CHECK(raw_http(port, request("127.0.0.1", "Application/JSON; charset=utf-8")).status == 200);
    // DNS rebinding: the page's own name in Host. Loopback names pass with any port.
    check_error(raw_http(port, request("evil.example", "application/json")), 403, "host_not_allowed");
    check_error(raw_http(port, "GET /props HTTP/1.1\r\nHost: evil.example:" + std::to_string(port) +
                                   "\r\nConnection: close\r\n\r\n"),
                403, "host_not_allowed");
    for (const std::string& host : std::vector<std::string>{"localhost", "LOCALHOST:" + std::to_string(port), "127.0.0.1:1", "[::1]:8080"})
        CHECK(raw_http(port, "GET /health HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n").status == 200);

    // --allowed-hosts adds a reverse proxy's name.
    ServerProcess proxied({"-c", "256", "--parallel", "1", "--allowed-hosts", "chat.internal,other"});
    CHECK(raw_http(proxied.port(), "GET /health HTTP/1.1\r\nHost: chat.internal:443\r\nConnection: close\r\n\r\n").status ==
          200);
    CHECK(raw_http(proxied.port(), "GET /health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n").status == 403);
}

TEST_CASE("smol-server: with --queue 0 a request runs when the slot is free and gets 503 while it is busy") {
    ServerProcess server({"-c", "2048", "--parallel", "1", "--queue", "0"});
    const int port = server.port();
    // No queue: a request that finds the only slot free runs (a limit of 0 once refused all)...
    json endless = chat("Go on and on", 1500, true);
    endless["ignore_eos"] = true;  // it holds the slot until the test closes its connection
    const int fd = connect_to(port);
    send_all(fd, request_text("POST", "/v1/chat/completions", endless.dump(), ""));
    server.wait_for_active_sessions(1, "the first request never started: with --queue 0 it found the slot free");
    // ...the next, which would have to wait, is refused...
    check_error(http(port, "POST", "/v1/chat/completions", chat("Me too", 2, false).dump(), ""), 503, "server_busy");
    // ...and once the hung-up client's generation stops, the slot takes a request again.
    ::close(fd);
    server.wait_for_active_sessions(0, "the closed connection's generation did not stop");
    CHECK(http(port, "POST", "/v1/chat/completions", chat("Now me", 2, false).dump(), "").status == 200);
}

TEST_CASE("smol-server: 8 concurrent streaming clients all complete, batched together") {
    ServerProcess server({"--api-key", kKey, "-c", "256", "--parallel", "4"});
    const int port = server.port();
    const int clients = 8;
    const int max_tokens = 16;
    std::vector<Response> responses(clients);
    std::vector<std::thread> threads;
    for (int i = 0; i < clients; ++i)
        threads.emplace_back([&, i] {
            json request = chat("Client number " + std::to_string(i) + " says hello", max_tokens, true);
            request["stream_options"] = {{"include_usage", true}};
            responses[std::size_t(i)] = http(port, "POST", "/v1/chat/completions", request.dump());
        });
    for (auto& t : threads) t.join();
    int total_tokens = 0;
    for (int i = 0; i < clients; ++i) {
        CAPTURE(i);
        const Response& r = responses[std::size_t(i)];
        REQUIRE(r.status == 200);
        const auto events = sse_data(r.body);
        REQUIRE(events.size() >= 3);
        CHECK(events.back() == "[DONE]");
        const json usage = json::parse(events[events.size() - 2])["usage"];
        total_tokens += usage["completion_tokens"].get<int>();
        CHECK(usage["completion_tokens"].get<int>() >= 1);
    }
    CHECK(server.metric("smol_tokens_generated_total") == double(total_tokens));
    // Decode steps were shared: far fewer forward passes than tokens.
    CHECK(server.metric("smol_forward_passes_total") < double(total_tokens) * 0.6);
    CHECK(server.metric("smol_active_sessions") == 0);
}

TEST_CASE("smol-server: /health is 503 while the model loads, and a bad model ends the server") {
    // A named pipe as the model file: opening it blocks until someone writes, which holds the
    // server in its loading phase for as long as the test wants.
    const fs::path fifo = fs::temp_directory_path() / ("smol-server-test-model-" + std::to_string(::getpid()) + ".gguf");
    fs::remove(fifo);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    {
        ServerProcess server({"--api-key", kKey}, fifo.string(), /*wait_ready=*/false);
        const Response health = http(server.port(), "GET", "/health", "", "");
        CHECK(health.status == 503);
        CHECK(health.json_body()["status"] == "loading");
        check_error(http(server.port(), "POST", "/v1/chat/completions", chat("hi", 2, false).dump()), 503,
                    "model_loading");
        check_error(http(server.port(), "GET", "/v1/models"), 503, "model_loading");
        // An empty "file": the load fails and the server exits with an error message.
        const int fd = ::open(fifo.c_str(), O_WRONLY);
        REQUIRE(fd >= 0);
        ::close(fd);
        CHECK(server.wait_exit(30) == 1);
        CHECK(server.log().find("cannot load the model") != std::string::npos);
    }
    fs::remove(fifo);
}

TEST_CASE("smol-server: SIGTERM with --drain-timeout 0 cancels running generations, ends their replies and exits 0") {
    ServerProcess server({"--api-key", kKey, "-c", "2048", "--parallel", "2", "-t", "1", "--drain-timeout", "0"});
    // Two long requests, one streaming and one not: left alone they would run for many seconds.
    const int max_tokens = 1500;
    RepliesUnderWay replies = start_two_replies(server, max_tokens, kKey);
    const int streaming = replies.streaming;
    const int plain = replies.plain;
    std::string& streamed = replies.streamed;

    const auto signalled = std::chrono::steady_clock::now();
    server.send_signal(SIGTERM);
    const int status = server.wait_exit(10);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
    CAPTURE(server.log());
    CHECK(status == 0);
    // About a second at most by design; the bound leaves room for a busy machine while staying
    // far below the time the two generations would take.
    CHECK(seconds < 4);
    CHECK(server.log().find("smol-server: SIGTERM: no longer taking requests; cancelled 2 generations; exiting") !=
          std::string::npos);

    // The streaming client got a proper end: an error event saying why, [DONE] and the last chunk.
    streamed += read_to_end(streaming, 5);
    ::close(streaming);
    CHECK(streamed.size() >= 5);
    CHECK(streamed.substr(streamed.size() - 5) == "0\r\n\r\n");
    const auto events = sse_data(parse_response(streamed).body);
    REQUIRE(events.size() >= 3);
    CHECK(events.back() == "[DONE]");
    const json last = json::parse(events[events.size() - 2]);
    CHECK(last["error"]["code"] == "server_shutting_down");
    CHECK(delivered_text(streamed).chunks < max_tokens / 4);

    // The non-streaming client's 200 was already sent; its body is the error.
    const std::string answered = read_to_end(plain, 5);
    ::close(plain);
    CHECK(answered.size() >= 5);
    CHECK(answered.substr(answered.size() - 5) == "0\r\n\r\n");
    const Response r = parse_response(answered);
    CHECK(r.status == 200);
    const json error = json::parse(r.body, nullptr, false);
    REQUIRE(error.is_object());
    CHECK(error["error"]["code"] == "server_shutting_down");
    CHECK(error["error"]["type"] == "unavailable_error");
}

TEST_CASE("smol-server: SIGTERM drains: /health and new requests get 503 while the replies under way finish") {
    ServerProcess server({"-c", "2048", "--parallel", "2", "-t", "1", "--drain-timeout", "60", "--replica-name", "r-7"});
    const int port = server.port();
    // Every reply names the replica, and /metrics carries it as a label.
    const Response health = http(port, "GET", "/health", "", "");
    CHECK(health.status == 200);
    CHECK(health.headers.at("x-smol-replica") == "r-7");
    CHECK(http(port, "GET", "/metrics", "", "").body.find("smol_replica_info{replica=\"r-7\"} 1") != std::string::npos);
    CHECK(server.metric("smol_draining") == 0);

    // Two requests of a known length (about 2 s each here), one streaming and one not, running
    // when SIGTERM comes.
    const int max_tokens = 400;
    RepliesUnderWay replies = start_two_replies(server, max_tokens, "");
    const int streaming = replies.streaming;
    const int plain = replies.plain;
    std::string& streamed = replies.streamed;
    server.send_signal(SIGTERM);
    // The drain starts: a balancer's health check and any new request are turned away.
    const auto drain_seen = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    Response during = http(port, "GET", "/health", "", "");
    while (during.status == 200 && std::chrono::steady_clock::now() < drain_seen) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        during = http(port, "GET", "/health", "", "");
    }
    CAPTURE(server.log());
    CHECK(during.status == 503);
    CHECK(during.json_body()["status"] == "draining");
    const Response refused = http(port, "POST", "/v1/chat/completions", chat("Late", 4, false).dump(), "");
    CHECK(refused.status == 503);
    CHECK(refused.headers.at("retry-after") == "1");
    CHECK(refused.json_body()["error"]["code"] == "server_draining");

    // The replies under way finish whole, and the server then exits 0 without waiting out the timeout.
    CHECK(server.wait_exit(50) == 0);
    CHECK(server.log().find("smol-server: SIGTERM: draining: 2 replies under way may finish within 60 s") !=
          std::string::npos);
    CHECK(server.log().find("smol-server: drained: every reply under way finished") != std::string::npos);
    streamed += read_to_end(streaming, 5);
    ::close(streaming);
    const auto events = sse_data(parse_response(streamed).body);
    REQUIRE(events.size() >= 3);
    CHECK(events.back() == "[DONE]");
    CHECK(streamed.find("server_shutting_down") == std::string::npos);
    // Ended by the model or max_tokens (the tiny model may end early), never cut off.
    const json last = json::parse(events[events.size() - 2]);
    CHECK_FALSE(last.contains("error"));
    const Response answered = parse_response(read_to_end(plain, 5));
    ::close(plain);
    CHECK(answered.status == 200);
    const json reply = json::parse(answered.body, nullptr, false);
    REQUIRE(reply.is_object());
    CHECK_FALSE(reply.contains("error"));
    const std::string finish = reply["choices"][0]["finish_reason"].get<std::string>();
    CHECK((finish == "length" || finish == "stop"));
}

TEST_CASE("smol-server: requests racing SIGTERM get a 503 before any byte or their whole reply, never a cut one") {
    // A request is under way from its admission on: one parsed, tokenized or queued when the
    // drain begins is waited for, not cancelled at shutdown as one not yet generating once was.
    ServerProcess server({"-c", "2048", "--parallel", "2", "-t", "1", "--drain-timeout", "30"});
    const int port = server.port();
    std::string long_message;  // some parsing and tokenizing before each request is queued
    for (int i = 0; i < 300; ++i) long_message += "word" + std::to_string(i) + " ";
    const std::string body = chat(long_message, 4, false).dump();
    const std::string request = request_text("POST", "/v1/chat/completions", body, "");

    // One exchange without doctest assertions (they are not for other threads): the status, or
    // 0 when the connection was refused or closed before any byte; and whether a 200 is whole.
    struct Outcome {
        int status = 0;
        bool whole = false;
        std::string start;
    };
    const auto exchange = [&] {
        Outcome o;
        const int fd = try_connect(port);
        if (fd < 0) return o;
        timeval timeout{20, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
        (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
        std::string raw;
        char buffer[16384];
        for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) raw.append(buffer, std::size_t(n));
        ::close(fd);
        if (raw.size() < 12) return o;
        o.status = std::atoi(raw.substr(9, 3).c_str());
        o.start = raw.substr(0, 300);
        const std::size_t header_end = raw.find("\r\n\r\n");
        if (o.status == 200 && header_end != std::string::npos) {
            const std::string rest = raw.substr(header_end + 4);
            const std::string text = raw.find("chunked") < header_end ? dechunk(rest) : rest;
            const json reply = json::parse(text, nullptr, false);
            o.whole = reply.is_object() && !reply.contains("error") && reply.contains("choices") &&
                      reply["choices"][0]["finish_reason"].is_string();
        }
        return o;
    };

    std::atomic<bool> stop{false};
    std::mutex mutex;
    std::vector<Outcome> outcomes;
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; ++c)
        clients.emplace_back([&] {
            while (!stop.load()) {
                const Outcome o = exchange();
                std::lock_guard lock(mutex);
                outcomes.push_back(o);
                if (o.status != 200) return;  // turned away: the drain has begun
            }
        });
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    server.send_signal(SIGTERM);
    CHECK(server.wait_exit(40) == 0);
    stop = true;
    for (std::thread& c : clients) c.join();
    int served = 0, refused = 0;
    for (const Outcome& o : outcomes) {
        CAPTURE(o.start);
        if (o.status == 200) {
            CHECK(o.whole);
            ++served;
        } else {
            CHECK((o.status == 503 || o.status == 0));
            ++refused;
        }
    }
    MESSAGE(served, " replies whole, ", refused, " refused before any byte");
    CHECK(served > 0);
}

TEST_CASE("smol-server: --replica-name takes 1 to 128 letters, digits and '-_.:', else exits 2 saying what it expected") {
    // The name goes into a header and a Prometheus label as it is: anything that could break
    // either (a space, a quote, a slash, a byte past ASCII) or an overlong name is refused.
    const std::vector<std::string> bad = {"", "has space", "a\"quote", "a/b", "caf\xc3\xa9", std::string(129, 'a')};
    for (const std::string& name : bad) {
        CAPTURE(name);
        // The name is checked with the other options, before the model is read; a server that
        // took the name would run on, so `timeout` ends it (status 124).
        const CommandResult r =
            run_command("timeout 30 " + kServer + " -m " + kModel + " --port 0 --replica-name '" + name + "' 2>&1");
        CHECK(r.status == 2);
        CHECK(r.output.find("smol-server: --replica-name: expected 1 to 128 letters, digits and '-_.:', found '" + name +
                            "'") != std::string::npos);
        CHECK(r.output.find("usage: smol-server") != std::string::npos);
    }
    // The longest name, with every kind of character allowed, is echoed whole.
    const std::string longest = "Replica-0_1.zone:2" + std::string(110, 'x');
    REQUIRE(longest.size() == 128);
    ServerProcess server({"-c", "256", "--parallel", "1", "--replica-name", longest});
    const Response health = http(server.port(), "GET", "/health", "", "");
    CHECK(health.status == 200);
    CHECK(health.headers.at("x-smol-replica") == longest);
    CHECK(http(server.port(), "GET", "/metrics", "", "").body.find("smol_replica_info{replica=\"" + longest + "\"} 1") !=
          std::string::npos);
}

TEST_CASE("smol-server: SIGINT exits 0 promptly, also with an idle keep-alive connection or while loading") {
    {
        ServerProcess server({"-c", "256", "--parallel", "1"});
        // A kept-alive connection waits up to 5 s in httplib for its next request; shutdown
        // does not wait for it.
        const int fd = connect_to(server.port());
        send_all(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        CHECK(read_one_response(fd).status == 200);
        const auto signalled = std::chrono::steady_clock::now();
        server.send_signal(SIGINT);
        CHECK(server.wait_exit(10) == 0);
        CHECK(std::chrono::steady_clock::now() - signalled < std::chrono::seconds(4));
        CHECK(server.log().find("smol-server: SIGINT: no longer taking requests; cancelled 0 generations; exiting") !=
              std::string::npos);
        ::close(fd);
    }
    {
        // A named pipe as the model holds the server in its loading phase (see the next test).
        const fs::path fifo =
            fs::temp_directory_path() / ("smol-server-test-sigint-" + std::to_string(::getpid()) + ".gguf");
        fs::remove(fifo);
        REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
        ServerProcess server({}, fifo.string(), /*wait_ready=*/false);
        CHECK(http(server.port(), "GET", "/health", "", "").status == 503);
        server.send_signal(SIGINT);
        CHECK(server.wait_exit(5) == 0);
        CHECK(server.log().find("SIGINT while loading the model; exiting") != std::string::npos);
        fs::remove(fifo);
    }
}

TEST_CASE("smol-server: at shutdown a request not yet at the server gets 503 with Retry-After, never a silent close") {
    // A balancer retries a 503 on another replica, but not a request that got no reply at all
    // (the replica may have died of that request): closing these connections without a word
    // would lose their requests.
    ServerProcess server({"-c", "256", "--parallel", "1", "--drain-timeout", "0"});
    const int port = server.port();
    const std::string body = chat("Hello", 4, false).dump();
    const int half_header = connect_to(port);
    send_all(half_header, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    const int half_body = connect_to(port);
    send_all(half_body, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, 5));
    const int nothing_sent = connect_to(port);
    // Between requests on a kept-alive connection nothing is lost by closing it (its client sees
    // the close before it sends), as at the drain's start.
    const int kept_alive = connect_to(port);
    send_all(kept_alive, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    CHECK(read_one_response(kept_alive).status == 200);

    server.send_signal(SIGTERM);
    for (const int fd : {half_header, half_body, nothing_sent}) {
        const Response r = parse_response(read_to_end(fd, 10));
        ::close(fd);
        check_error(r, 503, "server_shutting_down");
        CHECK(r.headers.count("retry-after") == 1);
    }
    CHECK(read_to_end(kept_alive, 10).empty());
    ::close(kept_alive);
    CHECK(server.wait_exit(10) == 0);
}

// A Messages API request as Anthropic's clients send it: the key in x-api-key (none when empty).
Response anthropic_http(int port, const std::string& path, const json& body, const std::string& key = kKey) {
    const std::string text = body.dump();
    std::string r = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (!key.empty()) r += "x-api-key: " + key + "\r\n";
    r += "anthropic-version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(text.size()) + "\r\n\r\n" + text;
    return raw_http(port, r);
}

// An error in Anthropic's shape: {"type": "error", "error": {"type", "message"}}.
void check_anthropic_error(const Response& r, int status, const std::string& type, const std::string& mentions) {
    CAPTURE(r.body);
    CHECK(r.status == status);
    const json e = json::parse(r.body, nullptr, false);
    REQUIRE(e.is_object());
    CHECK(e["type"] == "error");
    CHECK(e["error"]["type"] == type);
    CHECK(e["error"]["message"].get<std::string>().find(mentions) != std::string::npos);
}

// The (event name, data) pairs of an SSE body of named events (Anthropic's, OpenAI Responses').
std::vector<std::pair<std::string, json>> named_sse_events(const std::string& body) {
    std::vector<std::pair<std::string, json>> out;
    std::size_t pos = 0;
    while (pos < body.size()) {
        std::size_t end = body.find("\n\n", pos);
        if (end == std::string::npos) end = body.size();
        const std::string block = body.substr(pos, end - pos);
        pos = end + 2;
        if (block.rfind("event: ", 0) != 0) continue;
        const std::size_t newline = block.find('\n');
        REQUIRE(newline != std::string::npos);
        REQUIRE(block.compare(newline + 1, 6, "data: ") == 0);
        out.emplace_back(block.substr(7, newline - 7), json::parse(block.substr(newline + 7)));
    }
    return out;
}

TEST_CASE("smol-server: the Messages API answers as Anthropic's, streamed and not, with tools, count_tokens and errors") {
    ServerProcess server({"--api-key", kKey, "-c", "2048", "--parallel", "1"});
    const int port = server.port();
    const json hello = {{"model", "smol"},
                        {"max_tokens", 12},
                        {"temperature", 0},
                        {"system", "Be brief./system_override"},
                        {"messages", json::array({{{"role", "user"}, {"content", "Hello"}}})}};

    const Response plain = anthropic_http(port, "/v1/messages", hello);
    REQUIRE(plain.status == 200);
    const json message = plain.json_body();
    CAPTURE(message.dump());
    CHECK(message["type"] == "message");
    CHECK(message["role"] == "assistant");
    CHECK(message["id"].get<std::string>().starts_with("msg_"));
    CHECK(message["stop_reason"] == "max_tokens");
    CHECK(message["stop_sequence"].is_null());
    CHECK(message["usage"]["output_tokens"] == 12);
    REQUIRE(message["content"].size() == 1);
    CHECK(message["content"][0]["type"] == "text");
    const std::string text = message["content"][0]["text"];

    json counting = hello;
    counting.erase("max_tokens");
    counting.erase("temperature");
    const Response counted = anthropic_http(port, "/v1/messages/count_tokens", counting);
    REQUIRE(counted.status == 200);
    // The whole prompt: what the message ran plus what it read from the cache.
    const int prompt_tokens =
        message["usage"]["input_tokens"].get<int>() + message["usage"]["cache_read_input_tokens"].get<int>();
    CHECK(counted.json_body() == json{{"input_tokens", prompt_tokens}});

    // Streamed: the same text (temperature 0), in Anthropic's event order.
    json streaming = hello;
    streaming["stream"] = true;
    const Response streamed = anthropic_http(port, "/v1/messages", streaming);
    REQUIRE(streamed.status == 200);
    CHECK(streamed.headers.at("content-type").find("text/event-stream") != std::string::npos);
    const auto events = named_sse_events(streamed.body);
    REQUIRE(events.size() >= 6);
    CHECK(events.front().first == "message_start");
    CHECK(events.front().second["message"]["usage"]["input_tokens"] == prompt_tokens);
    CHECK(events.back().first == "message_stop");
    CHECK(events[events.size() - 2].first == "message_delta");
    CHECK(events[events.size() - 2].second["delta"]["stop_reason"] == "max_tokens");
    std::string streamed_text;
    for (const auto& e : events)
        if (e.first == "content_block_delta") streamed_text += e.second["delta"]["text"].get<std::string>();
    CHECK(streamed_text == text);

    // A stop sequence taken from the reply ends it there and is named.
    std::string stop;
    for (const char c : text.substr(1))
        if (std::isalpha(static_cast<unsigned char>(c))) {
            stop = std::string(1, c);
            break;
        }
    if (!stop.empty()) {
        json stopping = hello;
        stopping["stop_sequences"] = json::array({"\x01never", stop});
        const json stopped = anthropic_http(port, "/v1/messages", stopping).json_body();
        CAPTURE(stopped.dump());
        CHECK(stopped["stop_reason"] == "stop_sequence");
        CHECK(stopped["stop_sequence"] == stop);
        const std::string cut = text.substr(0, text.find(stop));
        CHECK((cut.empty() ? stopped["content"] == json::array() : stopped["content"][0]["text"] == cut));
    }

    // A forced call (tool_choice any) comes back as a tool_use block whose input follows the
    // schema; streamed, its input_json_delta pieces join into the same kind of object.
    json tooled = hello;
    tooled["max_tokens"] = 60;
    tooled["tools"] = json::parse(R"([{"name": "get_weather", "description": "Weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}])");
    tooled["tool_choice"] = {{"type", "any"}};
    const json called = anthropic_http(port, "/v1/messages", tooled).json_body();
    CAPTURE(called.dump());
    CHECK(called["stop_reason"] == "tool_use");
    REQUIRE(called["content"].size() == 1);
    const json use = called["content"][0];
    CHECK(use["type"] == "tool_use");
    CHECK(use["id"].get<std::string>().starts_with("toolu_"));
    CHECK(use["name"] == "get_weather");
    CHECK(use["input"]["city"].is_string());
    tooled["stream"] = true;
    const auto call_events = named_sse_events(anthropic_http(port, "/v1/messages", tooled).body);
    std::string partial_json;
    int tool_blocks = 0;
    for (const auto& e : call_events) {
        if (e.first == "content_block_start" && e.second["content_block"]["type"] == "tool_use") ++tool_blocks;
        if (e.first == "content_block_delta") partial_json += e.second["delta"]["partial_json"].get<std::string>();
    }
    CHECK(tool_blocks == 1);
    CHECK(json::parse(partial_json)["city"].is_string());

    // The call and its result handed back: the conversation goes on.
    json round_trip = hello;
    round_trip["tools"] = tooled["tools"];
    round_trip["messages"] = json::array(
        {{{"role", "user"}, {"content", "Weather in Paris?"}},
         {{"role", "assistant"}, {"content", json::array({use})}},
         {{"role", "user"},
          {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", use["id"]}, {"content", "sunny"}}})}}});
    CHECK(anthropic_http(port, "/v1/messages", round_trip).status == 200);

    // Errors in Anthropic's shape, on every Messages path; the key by either header.
    json no_max = hello;
    no_max.erase("max_tokens");
    check_anthropic_error(anthropic_http(port, "/v1/messages", no_max), 400, "invalid_request_error", "'max_tokens'");
    json unknown_field = hello;
    unknown_field["top_logprobs"] = 2;
    check_anthropic_error(anthropic_http(port, "/v1/messages", unknown_field), 400, "invalid_request_error",
                          "'top_logprobs'");
    check_anthropic_error(anthropic_http(port, "/v1/messages", hello, ""), 401, "authentication_error", "x-api-key");
    check_anthropic_error(anthropic_http(port, "/v1/messages", hello, "wrong"), 401, "authentication_error", "invalid");
    check_anthropic_error(anthropic_http(port, "/v1/messages/batches", hello), 404, "not_found_error", "/v1/messages/batches");
    CHECK(http(port, "POST", "/v1/messages", hello.dump()).status == 200);  // Authorization: Bearer works too
    // The OpenAI routes keep OpenAI's error shape, and accept x-api-key as well.
    const Response openai_unauthorized = http(port, "POST", "/v1/chat/completions", chat("Hi", 2, false).dump(), "");
    check_error(openai_unauthorized, 401, "invalid_api_key");
    CHECK(anthropic_http(port, "/v1/chat/completions", chat("Hi", 2, false)).status == 200);
    CHECK(server.metric("smol_messages_total") >= 6);
}

TEST_CASE("smol-server: the Responses API answers as OpenAI's, streamed and not, with a forced call, input_tokens and errors") {
    ServerProcess server({"--api-key", kKey, "-c", "2048", "--parallel", "1"});
    const int port = server.port();
    const json hello = {{"model", "smol"},
                        {"max_output_tokens", 12},
                        {"temperature", 0},
                        {"instructions", "Be brief./system_override"},
                        {"reasoning", {{"effort", "none"}}},
                        {"input", "Hello"}};

    const Response plain = http(port, "POST", "/v1/responses", hello.dump());
    REQUIRE(plain.status == 200);
    const json response = plain.json_body();
    CAPTURE(response.dump());
    CHECK(response["object"] == "response");
    CHECK(response["id"].get<std::string>().starts_with("resp_"));
    CHECK(response["status"] == "incomplete");
    CHECK(response["incomplete_details"]["reason"] == "max_output_tokens");
    CHECK(response["usage"]["output_tokens"] == 12);
    REQUIRE(response["output"].size() == 1);
    CHECK(response["output"][0]["type"] == "message");
    const std::string text = response["output_text"];
    CHECK(response["output"][0]["content"][0]["text"] == text);

    json counting = hello;
    counting.erase("max_output_tokens");
    counting.erase("temperature");
    const Response counted = http(port, "POST", "/v1/responses/input_tokens", counting.dump());
    REQUIRE(counted.status == 200);
    CHECK(counted.json_body() ==
          json{{"object", "response.input_tokens"}, {"input_tokens", response["usage"]["input_tokens"]}});

    // Streamed: the same text (temperature 0), the events numbered in order.
    json streaming = hello;
    streaming["stream"] = true;
    const Response streamed = http(port, "POST", "/v1/responses", streaming.dump());
    REQUIRE(streamed.status == 200);
    CHECK(streamed.headers.at("content-type").find("text/event-stream") != std::string::npos);
    const auto events = named_sse_events(streamed.body);
    REQUIRE(events.size() >= 8);
    CHECK(events.front().first == "response.created");
    CHECK(events.back().first == "response.incomplete");
    std::string streamed_text;
    for (std::size_t i = 0; i < events.size(); ++i) {
        CHECK(events[i].second["sequence_number"] == i);
        if (events[i].first == "response.output_text.delta") streamed_text += events[i].second["delta"].get<std::string>();
    }
    CHECK(streamed_text == text);
    CHECK(events.back().second["response"]["output_text"] == text);

    // A forced call comes back as a function_call item whose arguments follow the schema.
    json tooled = hello;
    tooled["max_output_tokens"] = 60;
    tooled["tools"] = json::parse(R"([{"type": "function", "name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])");
    tooled["tool_choice"] = "required";
    const json called = http(port, "POST", "/v1/responses", tooled.dump()).json_body();
    CAPTURE(called.dump());
    CHECK(called["status"] == "completed");
    REQUIRE(called["output"].size() == 1);
    const json call = called["output"][0];
    CHECK(call["type"] == "function_call");
    CHECK(call["name"] == "get_weather");
    CHECK(json::parse(call["arguments"].get<std::string>())["city"].is_string());

    // The call and its output handed back: the conversation goes on.
    json round_trip = hello;
    round_trip["tools"] = tooled["tools"];
    round_trip["input"] = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}, call,
                                       {{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "sunny"}}});
    CHECK(http(port, "POST", "/v1/responses", round_trip.dump()).status == 200);

    // Refusals in OpenAI's shape, naming the field.
    json stored = hello;
    stored["previous_response_id"] = "resp_1";
    check_error(http(port, "POST", "/v1/responses", stored.dump()), 400, "unsupported_parameter");
    CHECK(http(port, "POST", "/v1/responses", stored.dump()).body.find("previous_response_id") != std::string::npos);
    check_error(http(port, "POST", "/v1/responses", hello.dump(), ""), 401, "invalid_api_key");
    CHECK(server.metric("smol_responses_total") >= 4);
}

// `body` with `field` set to `value`.
json with_field(json body, const std::string& field, json value) {
    body[field] = std::move(value);
    return body;
}

// The objects of an NDJSON body, one a line, each parsed.
std::vector<json> ndjson_lines(const std::string& body) {
    std::vector<json> out;
    std::size_t at = 0;
    while (at < body.size()) {
        const std::size_t end = body.find('\n', at);
        REQUIRE_MESSAGE(end != std::string::npos, "an NDJSON line without its newline: " << body.substr(at));
        out.push_back(json::parse(body.substr(at, end - at)));
        at = end + 1;
    }
    return out;
}

// An error in ollama's shape: {"error": "message"}.
void check_ollama_error(const Response& r, int status, const std::string& mentions) {
    CAPTURE(r.body);
    CHECK(r.status == status);
    CHECK(r.headers.at("content-type").find("application/json") != std::string::npos);
    const json e = json::parse(r.body, nullptr, false);
    REQUIRE(e.is_object());
    REQUIRE(e["error"].is_string());
    CHECK(e["error"].get<std::string>().find(mentions) != std::string::npos);
}

TEST_CASE("smol-server: the ollama API answers as ollama's, NDJSON streamed and not, with format, the model routes and errors") {
    ServerProcess server({"--api-key", kKey, "-c", "2048", "--parallel", "1", "--alias", "smol-tiny"});
    const int port = server.port();
    const json hello = {{"model", "smol-tiny"},
                        {"messages", json::array({{{"role", "system"}, {"content", "Be brief./system_override"}},
                                                  {{"role", "user"}, {"content", "Hello"}}})},
                        {"think", false},
                        {"options", {{"temperature", 0}, {"num_predict", 12}}}};

    // Not streamed, then streamed by default: the same text (temperature 0), one object a line.
    const Response plain = http(port, "POST", "/api/chat", with_field(hello, "stream", false).dump());
    REQUIRE(plain.status == 200);
    const json reply = plain.json_body();
    CAPTURE(reply.dump());
    CHECK(reply["model"] == "smol-tiny");
    CHECK(reply["done"] == true);
    CHECK(reply["done_reason"] == "length");
    CHECK(reply["eval_count"] == 12);
    CHECK(reply["prompt_eval_count"].get<int>() > 0);
    CHECK(reply["total_duration"].get<std::int64_t>() >= reply["eval_duration"].get<std::int64_t>());
    CHECK(reply["message"]["role"] == "assistant");
    const std::string text = reply["message"]["content"];
    const Response streamed = http(port, "POST", "/api/chat", hello.dump());
    REQUIRE(streamed.status == 200);
    CHECK(streamed.headers.at("content-type").find("application/x-ndjson") != std::string::npos);
    const std::vector<json> lines = ndjson_lines(streamed.body);
    REQUIRE(lines.size() >= 2);
    std::string streamed_text;
    for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
        CHECK(lines[i]["done"] == false);
        streamed_text += lines[i]["message"]["content"].get<std::string>();
    }
    CHECK(streamed_text == text);
    CHECK(lines.back()["done"] == true);
    CHECK(lines.back()["eval_count"] == 12);

    // generate: the same conversation through the template gives the same text.
    const json generate = {{"model", "smol-tiny"}, {"prompt", "Hello"}, {"system", "Be brief./system_override"},
                           {"think", false}, {"stream", false}, {"options", {{"temperature", 0}, {"num_predict", 12}}}};
    const json generated = http(port, "POST", "/api/generate", generate.dump()).json_body();
    CHECK(generated["response"] == text);
    CHECK(generated["done_reason"] == "length");

    // format as a schema: the reply is JSON that follows it.
    json structured = with_field(hello, "stream", false);
    structured["format"] = json::parse(R"({"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]})");
    structured["options"]["num_predict"] = 60;
    const json formatted = http(port, "POST", "/api/chat", structured.dump()).json_body();
    CAPTURE(formatted.dump());
    const json parsed = json::parse(formatted["message"]["content"].get<std::string>(), nullptr, false);
    CHECK(parsed.is_object());
    CHECK(parsed["age"].is_number_integer());

    // A load request is answered at once.
    const json loaded = http(port, "POST", "/api/chat", json{{"model", "smol-tiny"}, {"messages", json::array()}}.dump()).json_body();
    CHECK(loaded["done_reason"] == "load");

    // The model routes.
    const json tags = http(port, "GET", "/api/tags").json_body();
    REQUIRE(tags["models"].size() == 1);
    CHECK(tags["models"][0]["name"] == "smol-tiny");
    CHECK(tags["models"][0]["size"] == fs::file_size(kModel));
    CHECK(tags["models"][0]["digest"].get<std::string>().size() == 64);
    CHECK(tags["models"][0]["details"]["format"] == "gguf");
    const json shown = http(port, "POST", "/api/show", json{{"model", "smol-tiny"}}.dump()).json_body();
    CHECK(shown["template"].get<std::string>().find("<|im_start|>") != std::string::npos);
    CHECK(shown["capabilities"] == json::array({"completion", "tools", "thinking"}));
    CHECK(shown["details"] == tags["models"][0]["details"]);
    CHECK(shown["model_info"]["general.architecture"] == "smollm3");
    CHECK(shown["parameters"].get<std::string>().find("num_ctx 2048") != std::string::npos);
    CHECK(http(port, "GET", "/api/version").json_body()["version"].is_string());
    const json ps = http(port, "GET", "/api/ps").json_body();
    REQUIRE(ps["models"].size() == 1);
    CHECK(ps["models"][0]["context_length"] == 2048);
    CHECK(ps["models"][0]["size_vram"] == 0);

    // Errors in ollama's shape, naming what was refused; the key as on every route.
    check_ollama_error(http(port, "POST", "/api/chat", with_field(hello, "options", {{"tfs_z", 0.9}}).dump()), 400,
                       "options.tfs_z");
    json pictured = hello;
    pictured["messages"][1]["images"] = json::array({"iVBORw0KGgo="});
    check_ollama_error(http(port, "POST", "/api/chat", pictured.dump()), 400, "images");
    check_ollama_error(http(port, "POST", "/api/chat", "{not json"), 400, "not valid JSON");
    check_ollama_error(http(port, "POST", "/api/chat", "{\"messages\": " + std::string(100000, '[') + "}"), 400, "64 deep");
    check_ollama_error(http(port, "POST", "/api/chat", hello.dump(), ""), 401, "API key");
    check_ollama_error(http(port, "GET", "/api/tags", "", "wrong"), 401, "invalid API key");
    check_ollama_error(http(port, "POST", "/api/pull", json{{"model", "x"}}.dump()), 404, "/api/pull");
    CHECK(server.metric("smol_ollama_total") == 4);
}

TEST_CASE("smol-server: \"speculative\" drafts for one request or for none, over --spec, the reply the same") {
    // Prompts that repeat themselves, so prompt lookup finds drafts.
    const std::vector<std::string> prompts = {
        "one two three four one two three four one two three four one two three",
        "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef add(a, b):\n",
        "a a a a a a a a a a a a a a a a"};
    // Each prompt's greedy completion with `speculative` set to `value` (absent when null), and
    // how many tokens the server drafted meanwhile (/metrics).
    struct Completions {
        std::vector<std::string> texts;
        double drafted = 0;
    };
    const auto complete_all = [&prompts](const ServerProcess& server, const json& value) {
        Completions out;
        const double before = server.settled_metrics().at("smol_draft_tokens_total");
        for (const std::string& prompt : prompts) {
            json body = {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}};
            if (!value.is_null()) body["speculative"] = value;
            const Response r = http(server.port(), "POST", "/v1/completions", body.dump());
            CAPTURE(r.body);
            REQUIRE(r.status == 200);
            out.texts.push_back(r.json_body()["choices"][0]["text"].get<std::string>());
        }
        out.drafted = server.settled_metrics().at("smol_draft_tokens_total") - before;
        return out;
    };
    std::vector<std::string> plain;  // without --spec and without the field: plain decoding
    for (const bool spec_flag : {false, true}) {
        CAPTURE(spec_flag);
        std::vector<std::string> flags = {"--api-key", kKey, "-c", "512", "--parallel", "1"};
        if (spec_flag) flags.insert(flags.end(), {"--spec", "ngram"});
        ServerProcess server(flags);
        const Completions unset = complete_all(server, nullptr);
        if (!spec_flag) plain = unset.texts;
        const Completions on = complete_all(server, true);
        const Completions off = complete_all(server, false);
        CHECK(unset.texts == plain);
        CHECK(on.texts == plain);
        CHECK(off.texts == plain);
        CHECK((unset.drafted > 0) == spec_flag);  // absent: as --spec says
        CHECK(on.drafted > 0);                    // true: drafts even without --spec
        CHECK(off.drafted == 0);                  // false: none even with --spec
        MESSAGE("--spec ", std::string(spec_flag ? "ngram" : "none"), ": drafted absent ", unset.drafted, ", true ",
                on.drafted, ", false ", off.drafted);

        // Anything but a boolean or null is refused, by every API that generates.
        if (spec_flag) continue;
        json chat_body = chat("Hi", 4, false);
        chat_body["speculative"] = "yes";
        check_error(http(server.port(), "POST", "/v1/chat/completions", chat_body.dump()), 400, "invalid_type");
        const json text_body = {{"prompt", "x"}, {"speculative", 1}};
        check_error(http(server.port(), "POST", "/v1/completions", text_body.dump()), 400, "invalid_type");
        const json messages_body = {{"max_tokens", 4},
                                    {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                                    {"speculative", json::object()}};
        check_anthropic_error(anthropic_http(server.port(), "/v1/messages", messages_body), 400,
                              "invalid_request_error", "'speculative' must be true, false or null");
        const json responses_body = {{"input", "Hi"}, {"speculative", "true"}};
        check_error(http(server.port(), "POST", "/v1/responses", responses_body.dump()), 400, "invalid_type");
    }
}

TEST_CASE("smol-server: tools are rendered, <tool_call> blocks come back as tool_calls, streamed and not") {
    ServerProcess server({"--api-key", kKey, "-c", "2048", "--parallel", "1"});
    const int port = server.port();
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "f", "description": "Does f.",
        "parameters": {"type": "object", "properties": {}}}}])");
    // The random model would never close a call by itself. The reply is prefilled with an open
    // call, and a user message full of </tool_call> with a strongly negative frequency penalty
    // (the penalty window sees the prompt) makes the closing tag the greedy choice.
    std::string closing;
    for (int i = 0; i < 50; ++i) closing += "</tool_call>";
    json request = {{"messages", json::array({{{"role", "user"}, {"content", closing}},
                                              {{"role", "assistant"},
                                               {"content", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n"}}})},
                    {"tools", tools},
                    {"max_tokens", 1},
                    {"temperature", 0},
                    {"frequency_penalty", -2.0}};
    const json reply = http(port, "POST", "/v1/chat/completions", request.dump()).json_body();
    CAPTURE(reply.dump());
    const json message = reply["choices"][0]["message"];
    REQUIRE(message.contains("tool_calls"));
    REQUIRE(message["tool_calls"].size() == 1);
    const json call = message["tool_calls"][0];
    CHECK(call["type"] == "function");
    CHECK(call["id"].get<std::string>().starts_with("call_"));
    CHECK(call["function"]["name"] == "f");
    CHECK(json::parse(call["function"]["arguments"].get<std::string>()) == json{{"x", 1}});
    CHECK(message["content"].is_null());
    CHECK(reply["choices"][0]["finish_reason"] == "length");  // max_tokens ended it before the end of turn

    request["stream"] = true;
    const Response streamed = http(port, "POST", "/v1/chat/completions", request.dump());
    REQUIRE(streamed.status == 200);
    json streamed_call;
    for (const auto& e : sse_data(streamed.body)) {
        if (e == "[DONE]") continue;
        const json delta = json::parse(e)["choices"][0]["delta"];
        if (!delta.contains("tool_calls")) continue;
        CHECK(streamed_call.is_null());  // one call, in one chunk
        streamed_call = delta["tool_calls"][0];
    }
    REQUIRE(streamed_call.is_object());
    CHECK(streamed_call["index"] == 0);
    CHECK(streamed_call["id"].get<std::string>().starts_with("call_"));
    CHECK(streamed_call["function"]["name"] == "f");
    CHECK(streamed_call["function"]["arguments"] == call["function"]["arguments"]);

    // tool_choice "none": the tools are not rendered and the block stays text.
    request["stream"] = false;
    request["tool_choice"] = "none";
    const json untooled = http(port, "POST", "/v1/chat/completions", request.dump()).json_body();
    CHECK(!untooled["choices"][0]["message"].contains("tool_calls"));
    CHECK(untooled["usage"]["prompt_tokens"] < reply["usage"]["prompt_tokens"]);

    // History with an assistant call (no content) and the tool's result renders and runs.
    json history = {{"messages", json::parse(R"([
        {"role": "user", "content": "Call f"},
        {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                                              "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"}])")},
                    {"tools", tools},
                    {"max_tokens", 2}};
    CHECK(http(port, "POST", "/v1/chat/completions", history.dump()).status == 200);

    // Bad tool definitions and what smol cannot do yet are 400s.
    const std::string path = "/v1/chat/completions";
    auto with = [&](const char* field, const json& value) {
        json r = chat("hi", 2, false);
        r[field] = value;
        return http(port, "POST", path, r.dump());
    };
    check_error(with("tools", "f"), 400, "invalid_type");
    check_error(with("tools", json::array({{{"type", "retrieval"}}})), 400, "invalid_value");
    check_error(with("tools", json::parse(R"([{"type": "function", "function": {"name": "bad name"}}])")), 400,
                "invalid_value");
    check_error(with("tool_choice", "sometimes"), 400, "invalid_value");
    // tool_choice "required" (or naming f) forces a call, even from the random-weight model.
    json required = chat("hi", 60, false);
    required["tools"] = tools;
    required["tool_choice"] = "required";
    required["temperature"] = 1;
    for (const json& choice : {json("required"), json{{"type", "function"}, {"function", {{"name", "f"}}}}}) {
        required["tool_choice"] = choice;
        const json forced = http(port, "POST", path, required.dump()).json_body();
        CAPTURE(forced.dump());
        const json& message = forced["choices"][0]["message"];
        REQUIRE(message.contains("tool_calls"));
        CHECK(message["tool_calls"][0]["function"]["name"] == "f");
        CHECK(json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>()).is_object());
        CHECK(forced["choices"][0]["finish_reason"] == "tool_calls");
    }
    required["tool_choice"] = {{"type", "function"}, {"function", {{"name", "g"}}}};
    check_error(http(port, "POST", path, required.dump()), 400, "invalid_value");
    json both = chat("hi", 2, false);
    both["tools"] = tools;
    both["chat_template_kwargs"] = {{"xml_tools", json::array({{{"name", "g"}}})}};
    check_error(http(port, "POST", path, both.dump()), 400, "invalid_value");
}

// ---- slow and idle clients: the connection gate ----------------------------------------------------

namespace {

// Raises this process's open-file limit to its hard limit (1,000 connections are past the
// usual soft limit of 1024); what it is now.
rlim_t raise_open_file_limit() {
    rlimit limit{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
    if (limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? rlim_t(1) << 20 : limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    return limit.rlim_cur;
}

// Everything the server sends on `fd` until it closes the connection; "timeout" in `ended` if
// it is still open after `seconds`, else how it ended ("eof" or "reset").
std::string read_until_closed(int fd, double seconds, std::string& ended) {
    std::string raw;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    char buffer[4096];
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) == 0) {
            ended = "timeout";
            return raw;
        }
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n > 0) {
            raw.append(buffer, std::size_t(n));
            continue;
        }
        ended = n == 0 ? "eof" : "reset";
        return raw;
    }
}

// Whether the server still holds `fd` open: nothing to read and no end of the connection.
bool still_open(int fd) {
    char byte;
    const ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("smol-server: with 1,000 slow or idle connections open, /health and a chat are answered within 1 s") {
    constexpr int kConnections = 1000;
    const rlim_t files = raise_open_file_limit();
    REQUIRE_MESSAGE(files >= rlim_t(kConnections + 100),
                    "the open-file hard limit (" << files << ") is too low for " << kConnections << " connections");
    // A short header deadline keeps the test short; kept-alive connections wait 5 s (the default).
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "2", "--header-timeout", "3"});
    const int port = server.port();

    // A quarter each: half a header then nothing; a header a byte at a time; nothing at all;
    // a whole request answered, then idle on a kept-alive connection.
    const std::string slow_header = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: a-slow-client\r\n\r\n";
    std::vector<int> half_header, trickle, idle, kept_alive;
    const auto opened = std::chrono::steady_clock::now();
    for (int i = 0; i < kConnections; ++i) {
        const int fd = connect_to(port);
        switch (i % 4) {
        case 0:
            send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le");
            half_header.push_back(fd);
            break;
        case 1:
            send_all(fd, slow_header.substr(0, 1));
            trickle.push_back(fd);
            break;
        case 2: idle.push_back(fd); break;
        case 3: kept_alive.push_back(fd); break;
        }
    }
    for (const int fd : kept_alive) {
        send_all(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        REQUIRE(read_one_response(fd).status == 200);
    }
    // One more byte of each trickling header every 100 ms, which would take 6 s in all.
    std::atomic<bool> stop_trickling{false};
    std::thread trickler([&] {
        for (std::size_t at = 1; at < slow_header.size() && !stop_trickling.load(); ++at) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            for (const int fd : trickle) (void)!::send(fd, slow_header.data() + at, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
    });
    const double setup_seconds = seconds_since(opened);

    // While all of them are open, a fresh client is answered at once, twice over.
    const auto open_now = server.metric("smol_connections_open");
    CHECK(open_now >= kConnections);
    for (int round = 0; round < 2; ++round) {
        auto start = std::chrono::steady_clock::now();
        const Response health = http(port, "GET", "/health", "", "");
        const double health_seconds = seconds_since(start);
        start = std::chrono::steady_clock::now();
        const Response reply = http(port, "POST", "/v1/chat/completions", chat("Hi", 4, false).dump());
        const double chat_seconds = seconds_since(start);
        MESSAGE(kConnections, " slow or idle connections open (", open_now, " in /metrics, set up in ", setup_seconds,
                " s): /health answered in ", health_seconds * 1000, " ms, a 4-token chat in ", chat_seconds * 1000, " ms");
        CHECK(health.status == 200);
        CHECK(health_seconds < 1.0);
        REQUIRE(reply.status == 200);
        CHECK(reply.json_body()["usage"]["completion_tokens"] == 4);
        CHECK(chat_seconds < 1.0);
    }
    CHECK(seconds_since(opened) < 3.0);  // all of that happened before any deadline passed
    CHECK(server.metric("smol_connections_open") >= kConnections);

    // Past the header deadline, every client without a whole header was closed: those that sent
    // part of one got a 408 first. The kept-alive ones are still open (for 5 s after their reply).
    const auto wait_from_open = [&](double seconds) {
        const double left = seconds - seconds_since(opened);
        if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double>(left));
    };
    wait_from_open(3.3);
    stop_trickling.store(true);
    trickler.join();
    int answered_408 = 0, closed = 0;
    for (const auto* group : {&half_header, &trickle}) {
        for (const int fd : *group) {
            std::string ended;
            const std::string raw = read_until_closed(fd, 2.0, ended);
            answered_408 += raw.rfind("HTTP/1.1 408 ", 0) == 0 && raw.find("\"request_timeout\"") != std::string::npos;
            closed += ended != "timeout";
            ::close(fd);
        }
    }
    CHECK(answered_408 == kConnections / 2);
    CHECK(closed == kConnections / 2);
    // How many of `fds` the server closes within `seconds` without a word; each is closed here after.
    const auto closed_silently = [](const std::vector<int>& fds, double seconds) {
        int n = 0;
        for (const int fd : fds) {
            std::string ended;
            n += read_until_closed(fd, seconds, ended).empty() && ended == "eof";
            ::close(fd);
        }
        return n;
    };
    CHECK(closed_silently(idle, 2.0) == kConnections / 4);
    int kept = 0;
    for (const int fd : kept_alive) kept += still_open(fd);
    CHECK(kept == kConnections / 4);
    // ...until the keep-alive timeout.
    CHECK(closed_silently(kept_alive, 4.0) == kConnections / 4);

    // A header past the limit (16 KiB) is a 431 with an OpenAI error body.
    const Response big = raw_http(port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
    check_error(big, 431, "header_too_large");
    CHECK(big.headers.at("connection") == "close");

    // The server is as it was: normal requests work and /metrics counts what happened.
    CHECK(http(port, "GET", "/v1/models").status == 200);
    CHECK(http(port, "POST", "/v1/chat/completions", chat("Still there?", 3, false).dump()).status == 200);
    const auto m = server.metrics();
    CHECK(m.at("smol_connections_timed_out_total") == 3 * kConnections / 4);
    CHECK(m.at("smol_connections_idle_closed_total") == kConnections / 4);
    CHECK(m.at("smol_connections_accepted_total") >= kConnections);
    CHECK(m.at("smol_connections_refused_total") == 0);
    CHECK(m.at("smol_connections_open") == 1);  // this /metrics request
    CHECK(m.at("smol_http_client_errors_total") == kConnections / 2 + 1);  // the 408s and the 431
    const std::string log = server.log();
    CHECK(log.find("127.0.0.1 - - 408 (connection gate: request_timeout)") != std::string::npos);
    CHECK(log.find("127.0.0.1 - - 431 (connection gate: header_too_large)") != std::string::npos);
}

TEST_CASE("smol-server: the gate keeps connections alive, pipelines, takes chunked bodies and caps connections") {
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "1", "--max-connections", "4", "--header-timeout",
                          "1", "--body-timeout", "1", "--keep-alive-timeout", "2", "--replica-name", "gate-r1"});
    const int port = server.port();
    // Every POST here is JSON (smol-server answers other bodies 415).
    const std::string auth = "Authorization: Bearer " + kKey + "\r\nContent-Type: application/json\r\n";
    const std::string body = R"({"content": "Hello"})";
    const auto chunk = [](const std::string& data) {
        char size[32];
        std::snprintf(size, sizeof size, "%zx\r\n", data.size());
        return size + data + "\r\n";
    };
    {
        // Three requests on one connection, the last two pipelined in one write: a Content-Length
        // body and a chunked one. A client's own X-Smol-Client is not believed.
        const int fd = connect_to(port);
        send_all(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Smol-Client: 6.6.6.6\r\n\r\n");
        const Response health = read_one_response(fd);
        CHECK(health.status == 200);
        CHECK(health.headers.at("keep-alive") == "timeout=2, max=99");
        send_all(fd, "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth +
                         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body +
                         "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth +
                         "Transfer-Encoding: chunked\r\n\r\n" + chunk(body.substr(0, 5)) + chunk(body.substr(5)) +
                         "0\r\n\r\n");
        std::string rest;
        const Response first = read_one_response(fd, &rest);
        REQUIRE(first.status == 200);
        const Response second = read_one_response(fd, &rest);
        REQUIRE(second.status == 200);
        CHECK(rest.empty());
        CHECK(second.json_body() == first.json_body());
        // Expect: 100-continue is answered before the body is sent.
        send_all(fd, "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + "Expect: 100-continue\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n");
        std::string interim(25, '\0');
        REQUIRE(::recv(fd, interim.data(), interim.size(), MSG_WAITALL) == 25);
        CHECK(interim == "HTTP/1.1 100 Continue\r\n\r\n");
        send_all(fd, body);
        CHECK(read_one_response(fd).json_body() == first.json_body());
        ::close(fd);
        CHECK(server.log().find("6.6.6.6") == std::string::npos);
        CHECK(server.log().find("127.0.0.1 GET /health 200") != std::string::npos);
    }
    {
        // A streamed reply, then the next request on the same connection.
        const int fd = connect_to(port);
        const std::string request = chat("Hi", 5, true).dump();
        send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth +
                         "Content-Length: " + std::to_string(request.size()) + "\r\n\r\n" + request);
        std::string raw;
        char buffer[4096];
        while (raw.find("\r\n0\r\n\r\n") == std::string::npos) {
            const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
            REQUIRE(n > 0);
            raw.append(buffer, std::size_t(n));
        }
        CHECK(sse_data(parse_response(raw).body).back() == "[DONE]");
        send_all(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        CHECK(read_one_response(fd).status == 200);
        ::close(fd);
    }
    {
        // A body that stops short gets 408 after --body-timeout; malformed chunks get 400.
        const int slow = connect_to(port);
        send_all(slow, "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"content\"");
        const int bad = connect_to(port);
        send_all(bad, "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        std::string ended;
        const Response bad_reply = parse_response(read_until_closed(bad, 5, ended));
        check_error(bad_reply, 400, "invalid_request");
        const auto start = std::chrono::steady_clock::now();
        const Response timed_out = parse_response(read_until_closed(slow, 5, ended));
        check_error(timed_out, 408, "request_timeout");
        CHECK(timed_out.headers.at("x-smol-replica") == "gate-r1");  // the gate's replies say who answered too
        CHECK(seconds_since(start) < 2);
        ::close(slow);
        ::close(bad);
        // The gate's 413 and 431 carry the replica's name as well.
        const Response too_large = raw_http(port, "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                                  "application/json\r\nContent-Length: 999999999999\r\n\r\n{");
        check_error(too_large, 413, "payload_too_large");
        CHECK(too_large.headers.at("x-smol-replica") == "gate-r1");
        const Response header_too_large =
            raw_http(port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
        check_error(header_too_large, 431, "header_too_large");
        CHECK(header_too_large.headers.at("x-smol-replica") == "gate-r1");
    }
    {
        // --max-connections 4: a fifth connection gets 503 and is closed; once one closes, a
        // new client is served again.
        std::vector<int> held;
        for (int i = 0; i < 4; ++i) held.push_back(connect_to(port));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const int fifth = connect_to(port);
        send_all(fifth, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        std::string ended;
        const Response refused = parse_response(read_until_closed(fifth, 5, ended));
        check_error(refused, 503, "too_many_connections");
        CHECK(refused.headers.at("x-smol-replica") == "gate-r1");
        CHECK(refused.headers.at("retry-after") == "1");
        ::close(fifth);
        ::close(held.back());
        held.pop_back();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        CHECK(http(port, "GET", "/health", "", "").status == 200);
        for (const int fd : held) ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        CHECK(server.metric("smol_connections_refused_total") == 1);
    }
}

// ---- the gate's budget for request bytes (--max-buffered) -------------------------------------

namespace {

// One connection of a flood: its request, how much of it went out, and what came back.
struct FloodClient {
    int fd = -1;
    std::string request;
    std::size_t sent = 0;
    std::string reply;
    std::string ended;  // "" while open, then "eof" or "reset"
};

// Opens `count` connections, each to send a whole request with a `body_bytes` body that is not
// JSON (the server answers it 400 once it has it all).
std::vector<FloodClient> open_flood(int port, int count, std::size_t body_bytes) {
    std::vector<FloodClient> clients(static_cast<std::size_t>(count));
    for (FloodClient& c : clients) {
        c.fd = connect_to(port);
        REQUIRE(::fcntl(c.fd, F_SETFL, ::fcntl(c.fd, F_GETFL) | O_NONBLOCK) == 0);
        c.request = request_text("POST", "/tokenize", std::string(body_bytes, 'x'), "");
    }
    return clients;
}

// Sends each client's request but its last `hold_back` bytes, as fast as the server takes them,
// and reads what comes back; returns once every connection ended, after `seconds`, or once
// nothing moved for `stall_seconds`.
void pump(std::vector<FloodClient>& clients, std::size_t hold_back, double seconds, double stall_seconds) {
    const auto start = std::chrono::steady_clock::now();
    auto last_progress = start;
    while (seconds_since(start) < seconds && seconds_since(last_progress) < stall_seconds) {
        std::vector<pollfd> fds;
        std::vector<FloodClient*> who;
        for (FloodClient& c : clients) {
            if (!c.ended.empty()) continue;
            const bool more = c.sent + hold_back < c.request.size();
            fds.push_back({c.fd, short(POLLIN | (more ? POLLOUT : 0)), 0});
            who.push_back(&c);
        }
        if (fds.empty()) return;
        if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
        for (std::size_t i = 0; i < fds.size(); ++i) {
            FloodClient& c = *who[i];
            if (fds[i].revents & POLLOUT) {
                const ssize_t n = ::send(c.fd, c.request.data() + c.sent, c.request.size() - hold_back - c.sent,
                                         MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) {
                    c.sent += std::size_t(n);
                    last_progress = std::chrono::steady_clock::now();
                }
            }
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                char buffer[65536];
                const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, MSG_DONTWAIT);
                if (n > 0) c.reply.append(buffer, std::size_t(n));
                else if (n == 0) c.ended = "eof";
                else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) c.ended = "reset";
                if (n >= 0) last_progress = std::chrono::steady_clock::now();
            }
        }
    }
}

// The status of a reply, 0 if none came.
int status_of(const std::string& reply) {
    return reply.rfind("HTTP/1.1 ", 0) == 0 && reply.size() >= 12 ? std::atoi(reply.substr(9, 3).c_str()) : 0;
}

}  // namespace

TEST_CASE("smol-server: a flood of maximum-size bodies stays within --max-buffered, /health is answered meanwhile") {
    // 96 connections each send a 1 MiB body (--max-body) but its last byte: unbounded, the gate
    // would hold 96 MiB. With 8 MiB of budget, five bodies are let in at a time (a big request
    // may take three quarters of it); the others wait unread in their sockets.
    constexpr int kFlood = 96;
    constexpr std::size_t kBody = 1 << 20;
    constexpr std::size_t kBudget = std::size_t(8) << 20;
    ServerProcess server({"-c", "512", "--parallel", "1", "--queue", "0", "--max-body", std::to_string(kBody),
                          "--max-buffered", std::to_string(kBudget >> 20), "--body-timeout", "30"});
    const int port = server.port();
    CHECK(server.metric("smol_gate_buffer_budget_bytes") == doctest::Approx(double(kBudget)));
    // The baseline has served bodies of the largest size already (httplib's threads, the
    // allocator's pools), one at a time.
    for (int i = 0; i < 3; ++i) CHECK(http(port, "POST", "/tokenize", std::string(kBody, 'x'), "").status == 400);
    const std::uint64_t rss_before = server.rss_bytes();

    std::vector<FloodClient> flood = open_flood(port, kFlood, kBody);
    pump(flood, 1, 5.0, 0.3);  // every body in, but for its last byte, as far as the gate reads
    const auto during = server.metrics();
    CHECK(during.at("smol_gate_buffered_bytes") <= double(kBudget));
    CHECK(during.at("smol_gate_buffered_bytes") >= double(4 * kBody));  // it is full of big bodies
    CHECK(during.at("smol_gate_budget_waits_total") >= kFlood - 6);
    for (int round = 0; round < 2; ++round) {
        const auto start = std::chrono::steady_clock::now();
        const Response health = http(port, "GET", "/health", "", "");
        const double took = seconds_since(start);
        MESSAGE("/health during the flood: ", took * 1000, " ms");
        CHECK(health.status == 200);
        CHECK(took < 1.0);
    }

    // The last bytes: the bodies let in are answered, making room for the next ones, until
    // every request had its answer (the server's 400 for a body that is not JSON).
    const auto start = std::chrono::steady_clock::now();
    pump(flood, 0, 30.0, 10.0);
    const double drained = seconds_since(start);
    std::map<int, int> statuses;
    int clean = 0;
    for (FloodClient& c : flood) {
        statuses[status_of(c.reply)]++;
        clean += c.ended == "eof";
        ::close(c.fd);
    }
    CAPTURE(statuses[0]);
    CHECK(statuses[400] == kFlood);
    CHECK(clean == kFlood);
    const std::uint64_t peak = server.peak_rss_bytes();
    MESSAGE(kFlood, " x ", kBody >> 10, " KiB bodies with --max-buffered ", kBudget >> 20, " MiB: answered in ", drained,
            " s; RSS before ", rss_before >> 20, " MiB, peak ", peak >> 20, " MiB (", (peak - std::min(peak, rss_before)) >> 20,
            " MiB more)");
    // Past the baseline: the budget, plus what httplib's threads hold of the requests they
    // answer (at most --parallel + --queue + 8 bodies, each read into a growing string), plus
    // slack; well short of the 96 MiB an unbounded gate would hold.
    CHECK(peak < rss_before + kBudget + 9 * 2 * kBody + (std::uint64_t(16) << 20));

    // Alive and back to nothing held.
    CHECK(http(port, "GET", "/health", "", "").status == 200);
    const auto after = server.metrics();
    CHECK(after.at("smol_gate_buffered_bytes") < 64 << 10);  // at most this /metrics request's own
    CHECK(after.at("smol_gate_budget_refused_total") == 0);
}

TEST_CASE("smol-server: a request that waits too long for room in --max-buffered gets 503 with Retry-After") {
    // 1 MiB of budget takes two ~300 KB bodies at once (a big request may take three quarters);
    // six clients send all of theirs but the last byte. The two let in wait for their byte; the
    // four others wait for room, unread, and get 503 once they waited --header-timeout (1 s).
    constexpr std::size_t kBody = 300000;
    ServerProcess server({"-c", "512", "--parallel", "1", "--max-body", std::to_string(kBody), "--max-buffered", "1",
                          "--header-timeout", "1", "--body-timeout", "20"});
    const int port = server.port();
    // (/health polled while the model loaded may have been 503s already.)
    const double server_errors = server.metric("smol_http_server_errors_total");
    std::vector<FloodClient> flood = open_flood(port, 6, kBody);
    const auto start = std::chrono::steady_clock::now();
    pump(flood, 1, 3.0, 0.3);
    CHECK(server.metric("smol_gate_budget_waits_total") == 4);
    CHECK(http(port, "GET", "/health", "", "").status == 200);  // small requests still have room
    // Those waiting for room get their 503 at a second; the two let in are still waiting for
    // their last byte.
    std::vector<FloodClient*> refused, let_in;
    while (seconds_since(start) < 4.0 && refused.size() < 4) {
        pump(flood, 1, 0.1, 0.1);
        refused.clear();
        for (FloodClient& c : flood)
            if (!c.ended.empty()) refused.push_back(&c);
    }
    const double waited = seconds_since(start);
    CHECK(waited >= 0.9);
    CHECK(waited < 2.5);
    REQUIRE(refused.size() == 4);
    for (FloodClient* c : refused) {
        CHECK(c->ended == "eof");
        Response r = parse_response(c->reply);
        check_error(r, 503, "server_busy");
        CHECK(r.headers["retry-after"] == "1");
        CHECK(r.headers["connection"] == "close");
    }
    for (FloodClient& c : flood)
        if (c.ended.empty()) let_in.push_back(&c);
    REQUIRE(let_in.size() == 2);
    // Their last byte: they are answered as usual.
    pump(flood, 0, 10.0, 5.0);
    for (FloodClient* c : let_in) {
        CHECK(status_of(c->reply) == 400);
        CHECK(c->ended == "eof");
    }
    for (FloodClient& c : flood) ::close(c.fd);
    const auto m = server.metrics();
    CHECK(m.at("smol_gate_budget_refused_total") == 4);
    CHECK(m.at("smol_http_server_errors_total") == server_errors + 4);
    CHECK(m.at("smol_gate_buffered_bytes") < 64 << 10);
    CHECK(server.log().find("127.0.0.1 POST /tokenize 503 (connection gate: server_busy)") != std::string::npos);
}

TEST_CASE("smol-server: a body larger than --max-buffered allows gets 413 at once") {
    // 1 MiB of budget: a big request may take 768 KiB of it, so a 900 KB body never fits.
    ServerProcess server({"-c", "512", "--parallel", "1", "--max-body", "1000000", "--max-buffered", "1"});
    CHECK(server.log().find("--max-buffered 1 MiB holds bodies of up to") != std::string::npos);
    const Response r = http(server.port(), "POST", "/tokenize", std::string(900000, 'x'), "");
    check_error(r, 413, "payload_too_large");
    CHECK(http(server.port(), "POST", "/tokenize", std::string(700000, 'x'), "").status == 400);  // fits: the server's answer
    // A chunked body's share grows as it arrives (64 KiB, then doubling), to the same bound.
    const auto chunked = [](std::size_t bytes) {
        std::string r = "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
        for (std::size_t sent = 0; sent < bytes; sent += 10000) r += "2710\r\n" + std::string(10000, 'x') + "\r\n";
        return r + "0\r\n\r\n";
    };
    CHECK(raw_http(server.port(), chunked(700000)).status == 400);
    check_error(raw_http(server.port(), chunked(900000)), 413, "payload_too_large");
    // On the Messages API's paths (query string and all) the gate answers in Anthropic's shape.
    const Response messages = http(server.port(), "POST", "/v1/messages?beta=true", std::string(900000, 'x'), "");
    CHECK(messages.status == 413);
    const json anthropic = json::parse(messages.body);
    CHECK(anthropic["type"] == "error");
    CHECK(anthropic["error"]["type"] == "request_too_large");
    CHECK(server.metric("smol_gate_budget_refused_total") == 3);
    CHECK(server.metric("smol_gate_buffered_bytes") < 64 << 10);
}

// ---- soak: many users at once, some hanging up ---------------------------------------------------

namespace {

// One client's exchange, without doctest assertions (they run on many threads): the raw
// reply, or what went wrong.
struct Exchange {
    enum Kind { chat, chat_stream, chat_hang_up, text } kind = chat;
    int status = 0;
    std::string body;  // de-chunked
    bool hung_up = false;
    std::string problem;  // empty when the reply is whole: a complete 200, or a JSON error
};

Exchange soak_exchange(int port, Exchange::Kind kind, int prompt_words, int max_tokens) {
    Exchange e;
    e.kind = kind;
    std::string words;
    for (int i = 0; i < prompt_words; ++i) words += i % 7 ? "word " : "story ";
    json body = kind == Exchange::text ? json{{"prompt", words}, {"max_tokens", max_tokens}}
                                       : chat(words, max_tokens, kind != Exchange::chat);
    body["temperature"] = 1.0;
    const std::string request = request_text("POST", kind == Exchange::text ? "/v1/completions" : "/v1/chat/completions",
                                             body.dump(), kKey);
    const int fd = try_connect(port);
    if (fd < 0) {
        e.problem = "cannot connect";
        return e;
    }
    send_all(fd, request);
    std::string raw;
    char buffer[16384];
    ssize_t n;
    while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) {
        raw.append(buffer, std::size_t(n));
        if (kind == Exchange::chat_hang_up && raw.find("data: {") != std::string::npos) {
            e.hung_up = true;  // leave mid-stream: the server must cancel the generation
            break;
        }
    }
    ::close(fd);
    const std::size_t header_end = raw.find("\r\n\r\n");
    if (raw.size() < 12 || header_end == std::string::npos) {
        e.problem = "no HTTP reply (" + std::to_string(raw.size()) + " bytes)";
        return e;
    }
    e.status = std::atoi(raw.substr(9, 3).c_str());
    if (e.hung_up) return e;
    const std::string rest = raw.substr(header_end + 4);
    const bool chunked = raw.substr(0, header_end).find("Transfer-Encoding: chunked") != std::string::npos;
    e.body = chunked ? dechunk(rest) : rest;
    if (e.status != 200) {
        const json error = json::parse(e.body, nullptr, false);
        if (!error.is_object() || !error.contains("error")) e.problem = "a " + std::to_string(e.status) + " without a JSON error";
        else if (e.status != 503) e.problem = "unexpected " + std::to_string(e.status) + ": " + e.body.substr(0, 200);
        return e;
    }
    if (kind == Exchange::chat || kind == Exchange::text) {
        const json reply = json::parse(e.body, nullptr, false);
        if (!reply.is_object() || !reply.contains("choices") || reply["usage"]["completion_tokens"].get<int>() < 1)
            e.problem = "an incomplete reply: " + e.body.substr(0, 200);
        return e;
    }
    const std::vector<std::string> events = sse_data(e.body);
    if (events.empty() || events.back() != "[DONE]") e.problem = "a stream without [DONE]: ..." + e.body.substr(e.body.size() > 200 ? e.body.size() - 200 : 0);
    for (std::size_t i = 0; i + 1 < events.size() && e.problem.empty(); ++i) {
        const json chunk = json::parse(events[i], nullptr, false);
        if (!chunk.is_object() || chunk.contains("error")) e.problem = "a bad stream event: " + events[i].substr(0, 200);
    }
    return e;
}

}  // namespace

TEST_CASE("smol-server soak: 32 users with hang-ups; replies whole or JSON errors, metrics add up, RSS levels off") {
    // SMOL_SOAK_SECONDS sets the length (CI: 20 s; a few minutes for the long version).
    const char* env = std::getenv("SMOL_SOAK_SECONDS");
    const int seconds = env ? std::max(4, std::atoi(env)) : 20;
    ServerProcess server({"--api-key", kKey, "-c", "1024", "--parallel", "4", "--queue", "12"});
    const int port = server.port();
    // Counters from here on: the /health polls that waited for the model count as 5xx (503
    // while loading), a few of them on a slow (sanitized) run.
    const auto start = server.metrics();
    constexpr int kUsers = 32;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    std::vector<std::vector<Exchange>> done(kUsers);
    std::vector<std::thread> users;
    for (int u = 0; u < kUsers; ++u)
        users.emplace_back([&, u] {
            std::mt19937 rng(1000u + unsigned(u));
            while (std::chrono::steady_clock::now() < deadline) {
                const auto kind = Exchange::Kind(rng() % 4);
                done[std::size_t(u)].push_back(soak_exchange(port, kind, 1 + int(rng() % 120), 4 + int(rng() % 40)));
                // A busy server asks clients to come back later, as real ones do.
                if (done[std::size_t(u)].back().status == 503)
                    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 200));
            }
        });
    // RSS once a second; the second half must not keep climbing over the first.
    std::vector<std::uint64_t> rss;
    while (std::chrono::steady_clock::now() < deadline) {
        rss.push_back(server.rss_bytes());
        std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    for (auto& t : users) t.join();

    int complete = 0, rejected = 0, hung_up = 0;
    std::vector<std::string> problems;
    for (const auto& list : done)
        for (const Exchange& e : list) {
            if (!e.problem.empty()) problems.push_back(e.problem);
            else if (e.hung_up) ++hung_up;
            else if (e.status == 503) ++rejected;
            else ++complete;
        }
    for (std::size_t i = 0; i < std::min<std::size_t>(problems.size(), 5); ++i) MESSAGE(problems[i]);
    CHECK(problems.empty());
    // Replies keep coming throughout. Under TSan on 2 cores a CI run saw 36 in 20 s, and one on a
    // busier host 28 (2026-11-25), so the bound is half the users; a stalled server finishes a
    // handful.
    CHECK(complete >= kUsers / 2);
    CHECK(hung_up > 0);
    MESSAGE(complete, " complete replies, ", rejected, " busy (503), ", hung_up, " hung up, in ", seconds, " s");

    // The server's own count: every accepted request finished, was cancelled or was refused.
    const auto m = server.settled_metrics();
    const double finished = m.at("smol_requests_finished_total"), cancelled = m.at("smol_requests_cancelled_total");
    CHECK(m.at("smol_requests_rejected_total") == rejected);
    CHECK(finished + cancelled == complete + hung_up);
    CHECK(m.at("smol_chat_completions_total") + m.at("smol_text_completions_total") == complete + hung_up);
    CHECK(cancelled >= 1);  // hang-ups mid-stream cancel their generation
    // The only 5xx are the 503s the clients counted: no generation failed, hang-ups included.
    const double server_errors = m.at("smol_http_server_errors_total") - start.at("smol_http_server_errors_total");
    if (server_errors != rejected) {
        // The server logs each failed generation with its error, and every 5xx it answered.
        std::istringstream log(server.log());
        std::string line, failures;
        while (std::getline(log, line))
            if (line.find("generation failed") != std::string::npos || line.find(" 500 ") != std::string::npos ||
                line.find(" 502 ") != std::string::npos)
                failures += line + "\n";
        MESSAGE(server_errors, " server errors for ", rejected, " busy replies; from the log:\n", failures);
    }
    CHECK(server_errors == rejected);
    CHECK(m.at("smol_active_sessions") == 0);

    REQUIRE(rss.size() >= 4);
    const std::size_t half = rss.size() / 2;
    const std::uint64_t first_peak = *std::max_element(rss.begin(), rss.begin() + std::ptrdiff_t(half));
    const std::uint64_t second_peak = *std::max_element(rss.begin() + std::ptrdiff_t(half), rss.end());
    MESSAGE("server RSS: first half peak ", first_peak >> 20, " MiB, second half peak ", second_peak >> 20, " MiB");
    CHECK(second_peak <= first_peak + first_peak / 10 + (16u << 20));
}

TEST_CASE("smol-load drives the server and reports what its users saw") {
    ServerProcess server({"--api-key", kKey, "-c", "1024", "--parallel", "2"});
    const std::string load = std::string(SMOL_BIN_DIR) + "/smol-load";
    REQUIRE_MESSAGE(fs::exists(load), load << " is missing: build the smol-load target first");
    const auto run_load = [&](const std::string& args) {
        return run_command(load + " --url http://127.0.0.1:" + std::to_string(server.port()) + " --api-key " + kKey +
                           " --pid " + std::to_string(server.pid()) + " -o json " + args + " 2>&1");
    };
    const CommandResult result = run_load("-u 1,3 -d 2 --max-tokens 12 --prompt-words 4,32 --hang-up 0.3");
    const int status = result.status;
    const std::string out = result.output;
    REQUIRE_MESSAGE(status == 0, out);
    const json runs = json::parse(out);
    REQUIRE(runs.size() == 2);
    CHECK(runs[0]["users"] == 1);
    CHECK(runs[1]["users"] == 3);
    for (const json& r : runs) {
        CAPTURE(r.dump());
        CHECK(r["errors"] == 0);
        CHECK(r["requests_completed"].get<int>() + r["requests_hung_up"].get<int>() > 0);
        CHECK(r["generated_tokens_per_s"].get<double>() > 0);
        // Without errors every streamed delta belongs to a counted reply, and holds one token or
        // (a character split over byte tokens) up to four: a random-weight model emits many, and
        // one 12-token reply came as 6 deltas (TSan, 2026-11-25).
        CHECK(r["streamed_tokens_per_s"].get<double>() <= r["generated_tokens_per_s"].get<double>() * 1.0001);
        CHECK(r["streamed_tokens_per_s"].get<double>() >= r["generated_tokens_per_s"].get<double>() * 0.25);
        CHECK(r["ttft_ms_p50"].get<double>() > 0);
        CHECK(r["ttft_ms_p99"].get<double>() >= r["ttft_ms_p50"].get<double>());
        CHECK(r["itl_ms_p99"].get<double>() >= r["itl_ms_p50"].get<double>());
        CHECK(r["server_rss_max_bytes"].get<double>() > 1e6);
    }
    // The server counted the same requests: completed ones finished, hang-ups were cancelled
    // or finished first.
    const auto m = server.settled_metrics();
    const int sent = runs[0]["requests_completed"].get<int>() + runs[0]["requests_hung_up"].get<int>() +
                     runs[1]["requests_completed"].get<int>() + runs[1]["requests_hung_up"].get<int>();
    CHECK(m.at("smol_requests_finished_total") + m.at("smol_requests_cancelled_total") == sent);
    // Text completions: the bare prompt to /v1/completions, its streamed `text` counted as tokens.
    const CommandResult text = run_load("-u 2 -d 2 --max-tokens 8 --prompt-words 4 --hang-up 0 --endpoint completions");
    REQUIRE_MESSAGE(text.status == 0, text.output);
    const json text_runs = json::parse(text.output);
    REQUIRE(text_runs.size() == 1);
    CHECK(text_runs[0]["errors"] == 0);
    CHECK(text_runs[0]["requests_completed"].get<int>() > 0);
    CHECK(text_runs[0]["ttft_ms_p50"].get<double>() > 0);
    CHECK(text_runs[0]["generated_tokens_per_s"].get<double>() > 0);
    CHECK(server.settled_metrics().at("smol_text_completions_total") == text_runs[0]["requests_completed"].get<int>());
    CHECK(run_load("-u 1 -d 1 --endpoint embeddings").status != 0);
    // A refused request (a wrong key) is an error, and the exit status says so.
    const CommandResult bad = run_load("-u 1 -d 1 --api-key wrong");
    CHECK(bad.status == 1);
    CHECK(bad.output.find("HTTP 401") != std::string::npos);
}

namespace {

std::string file_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A slot action's reply, required to be a 200.
json slot_action(int port, int slot, const std::string& action, const json& body, const std::string& key = kKey) {
    const Response r = http(port, "POST", "/slots/" + std::to_string(slot) + "?action=" + action, body.dump(), key);
    CAPTURE(r.body);
    REQUIRE(r.status == 200);
    return r.json_body();
}

}  // namespace

TEST_CASE("smol-server: a slot saved, then restored after a restart, gives the same next reply bit for bit") {
    const fs::path dir = fs::temp_directory_path() / ("smol-slots-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::vector<std::string> flags = {"--api-key", kKey, "--api-key", "other-key", "-c", "512", "--parallel", "2",
                                            "--slot-save-path", dir.string()};
    json first = chat("Tell me about the sea", 6, false);
    first["id_slot"] = 1;
    json follow_up;  // the next turn, with its log-probabilities: a cache restored wrong shows there
    json expected;   // its reply from the server that ran the first turn
    json saved;
    {
        ServerProcess server(flags);
        const int port = server.port();
        const Response r = http(port, "POST", "/v1/chat/completions", first.dump());
        REQUIRE(r.status == 200);
        saved = slot_action(port, 1, "save", {{"filename", "sea.bin"}});
        CHECK(saved["id_slot"] == 1);
        CHECK(saved["filename"] == "sea.bin");
        CHECK(saved["n_saved"].get<int>() > 0);
        CHECK(saved["n_written"] == fs::file_size(dir / "sea.bin"));
        CHECK(saved["timings"]["save_ms"].is_number());
        const json slots = http(port, "GET", "/slots").json_body();
        CHECK(slots[1]["n_cached_tokens"] == saved["n_saved"]);
        // Another key may neither save this key's prompt nor restore its file.
        check_error(http(port, "POST", "/slots/1?action=save", R"({"filename": "b.bin"})", "other-key"), 403,
                    "slot_of_another_tenant");
        check_error(http(port, "POST", "/slots/0?action=restore", R"({"filename": "sea.bin"})", "other-key"), 403,
                    "slot_of_another_tenant");

        follow_up = first;
        follow_up["messages"].push_back(r.json_body()["choices"][0]["message"]);
        follow_up["messages"].push_back({{"role", "user"}, {"content", "And the sky?"}});
        follow_up["logprobs"] = true;
        follow_up["top_logprobs"] = 3;
        expected = http(port, "POST", "/v1/chat/completions", follow_up.dump()).json_body();
        CHECK(expected["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() > 0);
    }
    ServerProcess server(flags);
    const int port = server.port();
    const json restored = slot_action(port, 0, "restore", {{"filename", "sea.bin"}});
    CHECK(restored["id_slot"] == 0);
    CHECK(restored["n_restored"] == saved["n_saved"]);
    CHECK(restored["n_read"] == saved["n_written"]);
    CHECK(restored["timings"]["restore_ms"].is_number());
    slot_action(port, 0, "save", {{"filename", "again.bin"}});
    CHECK(file_text(dir / "again.bin") == file_text(dir / "sea.bin"));  // the cache came back bit for bit
    follow_up["id_slot"] = 0;
    const json reply = http(port, "POST", "/v1/chat/completions", follow_up.dump()).json_body();
    CHECK(reply["choices"] == expected["choices"]);
    CHECK(reply["usage"] == expected["usage"]);

    // Erase forgets the slot's cache.
    const json erased = slot_action(port, 0, "erase", json::object());
    CHECK(erased["id_slot"] == 0);
    CHECK(erased["n_erased"].get<int>() > 0);
    CHECK(http(port, "GET", "/slots").json_body()[0]["n_cached_tokens"] == 0);
    fs::remove_all(dir);
}

TEST_CASE("smol-server: slot actions refuse bad ids, actions, file names, files and bodies with a 4xx") {
    const fs::path dir = fs::temp_directory_path() / ("smol-slots-hostile-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "inner");
    ServerProcess server({"-c", "256", "--parallel", "2", "--slot-save-path", (dir / "inner").string(), "--max-body",
                          "65536"});
    const int port = server.port();
    for (const char* path : {"/slots/2?action=erase", "/slots/-1?action=erase", "/slots/abc?action=erase",
                             "/slots/?action=erase", "/slots/99999999999999999999?action=erase", "/slots/0x1?action=erase"}) {
        CAPTURE(path);
        check_error(http(port, "POST", path, "{}"), 400, "invalid_slot_id");
    }
    const Response traversal = http(port, "POST", "/slots/../../etc/passwd?action=save", R"({"filename": "x"})");
    CHECK(traversal.status >= 400);
    CHECK(traversal.status < 500);
    for (const char* action : {"", "delete", "SAVE", "save%00"}) {
        CAPTURE(action);
        check_error(http(port, "POST", std::string("/slots/0?action=") + action, R"({"filename": "a"})"), 400,
                    "invalid_action");
    }
    check_error(http(port, "POST", "/slots/0", "{}"), 400, "invalid_action");
    const std::string longest(200, 'a');
    slot_action(port, 0, "save", {{"filename", longest}});
    CHECK(fs::exists(dir / "inner" / longest));
    for (const json& name : {json("../outside.bin"), json(".."), json("."), json("a/b"), json("/tmp/x"), json(".hidden"),
                             json("a..b"), json(""), json(std::string(201, 'a')), json("a\\b"), json("x\n"), json("x y"),
                             json("caf\u00e9"), json(7), json(nullptr), json::array({"a"})}) {
        CAPTURE(name.dump());
        for (const char* action : {"save", "restore"})
            check_error(http(port, "POST", std::string("/slots/0?action=") + action, json{{"filename", name}}.dump()), 400,
                        "invalid_filename");
    }
    check_error(http(port, "POST", "/slots/0?action=save", "{}"), 400, "invalid_filename");
    CHECK_FALSE(fs::exists(dir / "outside.bin"));
    CHECK(fs::directory_iterator(dir)->path() == dir / "inner");  // nothing was written beside the folder

    check_error(http(port, "POST", "/slots/0?action=restore", R"({"filename": "missing.bin"})"), 404, "cache_file_not_found");
    std::ofstream(dir / "inner" / "junk.bin") << "not a cache";
    check_error(http(port, "POST", "/slots/0?action=restore", R"({"filename": "junk.bin"})"), 400, "invalid_cache_file");
    const std::string whole = file_text(dir / "inner" / longest);
    std::ofstream(dir / "inner" / "cut.bin", std::ios::binary) << whole.substr(0, whole.size() / 2);
    check_error(http(port, "POST", "/slots/1?action=restore", R"({"filename": "cut.bin"})"), 400, "invalid_cache_file");
    check_error(http(port, "POST", "/slots/0?action=save", R"({"filename": "a", "path": "/tmp"})"), 400,
                "unsupported_parameter");
    check_error(http(port, "POST", "/slots/0?action=erase", R"({"filename": "a"})"), 400, "unsupported_parameter");
    check_error(http(port, "POST", "/slots/0?action=save", "[1,"), 400, "invalid_json");
    check_error(http(port, "POST", "/slots/0?action=save", "{\"filename\": \"" + std::string(70000, 'a') + "\"}"), 413,
                "payload_too_large");
    // The server is still there, and the slots still work.
    CHECK(http(port, "POST", "/v1/chat/completions", chat("Hi", 2, false).dump()).status == 200);
    fs::remove_all(dir);
}

TEST_CASE("smol-server: llama-server's paths and fields: /apply-template, chat without /v1, /v1/health, id_slot, n_predict") {
    ServerProcess server({"--api-key", kKey, "-c", "512", "--parallel", "2"});
    const int port = server.port();
    CHECK(http(port, "GET", "/v1/health", "", "").json_body()["status"] == "ok");

    const json messages = chat("Hi", 3, false)["messages"];
    const Response rendered = http(port, "POST", "/apply-template", json{{"messages", messages}}.dump());
    REQUIRE(rendered.status == 200);
    const std::string prompt = rendered.json_body()["prompt"];
    CHECK(prompt.find("Be brief.") != std::string::npos);
    CHECK(prompt.find("<|im_start|>assistant") != std::string::npos);
    check_error(http(port, "POST", "/apply-template", R"({"messages": "x"})"), 400, "invalid_type");
    check_error(http(port, "POST", "/apply-template", R"({"messages": [{"role": "user", "content": "x"}], "n": 2})"), 400,
                "unsupported_parameter");

    // Chat without /v1: the same handler, so the same reply (greedy) and the same errors.
    const std::string hi = chat("Hi", 3, false).dump();
    const json with_v1 = http(port, "POST", "/v1/chat/completions", hi).json_body();
    const json without = http(port, "POST", "/chat/completions", hi).json_body();
    CHECK(with_v1["choices"] == without["choices"]);
    CHECK(with_v1["object"] == without["object"]);
    check_error(http(port, "POST", "/chat/completions", "{"), 400, "invalid_json");
    check_error(http(port, "POST", "/chat/completions", hi, ""), 401, "invalid_api_key");

    // id_slot runs the request in that slot; n_predict is max_tokens.
    json pinned = chat("Tell me a story about a fox", 4, false);
    pinned.erase("max_tokens");
    pinned["n_predict"] = 4;
    pinned["id_slot"] = 1;
    const json reply = http(port, "POST", "/v1/chat/completions", pinned.dump()).json_body();
    CHECK(reply["usage"]["completion_tokens"] == 4);
    const json slots = http(port, "GET", "/slots").json_body();
    CHECK(slots[1]["n_cached_tokens"].get<int>() >= reply["usage"]["prompt_tokens"].get<int>());
    pinned["id_slot"] = 2;
    check_error(http(port, "POST", "/v1/chat/completions", pinned.dump()), 400, "invalid_value");
    pinned["id_slot"] = "1";
    check_error(http(port, "POST", "/v1/chat/completions", pinned.dump()), 400, "invalid_type");
    pinned["id_slot"] = 0;
    pinned["n_keep"] = 8;
    check_error(http(port, "POST", "/chat/completions", pinned.dump()), 400, "unsupported_parameter");
    pinned.erase("n_keep");
    pinned["ignore_eos"] = true;
    pinned["n_probs"] = 2;
    const json endless = http(port, "POST", "/chat/completions", pinned.dump()).json_body();
    CHECK(endless["choices"][0]["finish_reason"] == "length");
    CHECK(endless["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size() == 2);
}

}  // namespace test_server
