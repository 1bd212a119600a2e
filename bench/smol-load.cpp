// smol-load: drives a running OpenAI-compatible server (smol-server, llama-server) with N
// concurrent users for T seconds and reports what a user of the server sees: requests/s,
// generated tokens/s over all users, time to first token and time between tokens (p50/p99),
// errors, hang-ups, and the server's RSS over time when its pid is given.
//
//   smol-load --url http://127.0.0.1:8080 -u 1,4,16 -d 60 [--max-tokens 128] [--hang-up 0.05]
//             [--prompt-words 16,128,512] [--ban-tokens ID,ID] [--api-key KEY] [--pid PID]
//             [--endpoint chat|completions] [-o md|json]
//
// Every request is a streamed chat completion (thinking off, temperature 1, a per-request seed),
// or with --endpoint completions a streamed text completion of the bare prompt (no chat
// template), whose prompt is drawn from the --prompt-words lengths; a --hang-up share of them
// closes the connection after a few tokens, as a user who leaves. Tokens of complete replies are
// counted from the stream's own usage chunk (stream_options.include_usage), giving "gen t/s";
// every streamed delta is taken as one token for "streamed t/s" and the timings, from all
// streams, including those that end in an error after their tokens (llama-server ends some
// replies of a random-weight model so, its output parser refusing the text it generated). Plain
// sockets and HTTP/1.1 with Connection: close, so both servers are measured the same way, with no
// client library in between.

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "program_args.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

struct Options {
    std::string host = "127.0.0.1";
    int port = 8080;
    std::vector<std::int64_t> users = {1, 4, 16};
    int duration_s = 60;
    int max_tokens = 128;
    std::vector<std::int64_t> prompt_words = {16, 128, 512};
    double hang_up = 0.05;
    std::vector<std::int64_t> ban_tokens;
    std::string api_key;
    std::string model = "default";
    bool chat = true;  // /v1/chat/completions, else /v1/completions
    int pid = 0;
    std::uint64_t seed = 1;
    std::string format = "md";
};

// "http://host:port" (no path, no TLS).
void parse_url(const std::string& url, Options& o) {
    using smol::args::UsageError;
    const std::string_view prefix = "http://";
    if (url.rfind(prefix, 0) != 0) throw UsageError("--url: expected http://HOST:PORT, found '" + url + "'");
    std::string rest = url.substr(prefix.size());
    if (!rest.empty() && rest.back() == '/') rest.pop_back();
    const auto colon = rest.rfind(':');
    o.host = colon == std::string::npos ? rest : rest.substr(0, colon);
    if (colon != std::string::npos) o.port = smol::args::parse_integer<int>("--url port", rest.substr(colon + 1), 1, 65535);
    if (o.host.empty()) throw UsageError("--url: expected a host, found '" + url + "'");
}

// What one request saw.
struct RequestResult {
    bool ok = false;          // a complete stream ending in [DONE] (or a deliberate hang-up)
    bool hung_up = false;
    int status = 0;
    std::string error;        // when not ok
    double ttft_ms = -1;      // send to first delta
    std::vector<double> itl_ms;  // between consecutive deltas
    int completion_tokens = 0;   // from the usage chunk (deltas seen, for hang-ups)
    int streamed = 0;            // deltas received, whatever became of the request
    double end_s = 0;            // seconds since the run started, when the request ended
};

// Incremental decoding of a chunked HTTP body, so events are timed as they arrive.
class Dechunker {
public:
    // Appends the body bytes `in` holds to `out`; false on a malformed stream.
    bool feed(std::string_view in, std::string& out) {
        pending_.append(in);
        while (true) {
            if (remaining_ == 0) {
                const auto eol = pending_.find("\r\n");
                if (eol == std::string::npos) return true;
                if (eol == 0) {  // the CRLF after a chunk's data
                    pending_.erase(0, 2);
                    continue;
                }
                char* end = nullptr;
                const unsigned long size = std::strtoul(pending_.c_str(), &end, 16);
                if (end == pending_.c_str()) return false;
                pending_.erase(0, eol + 2);
                if (size == 0) {
                    done_ = true;
                    return true;
                }
                remaining_ = size;
            }
            const std::size_t take = std::min<std::size_t>(remaining_, pending_.size());
            if (take == 0) return true;
            out.append(pending_, 0, take);
            pending_.erase(0, take);
            remaining_ -= take;
        }
    }
    bool done() const { return done_; }

private:
    std::string pending_;
    std::size_t remaining_ = 0;
    bool done_ = false;
};

int connect_to(const Options& o) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(o.host.c_str(), std::to_string(o.port).c_str(), &hints, &found) != 0 || !found) return -1;
    int fd = -1;
    for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            ::close(fd);
            fd = -1;
        }
    }
    ::freeaddrinfo(found);
    if (fd >= 0) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

std::string random_prompt(std::mt19937_64& rng, int words) {
    static const char* const kWords[] = {"the", "river", "engine", "quiet", "market", "seven", "garden", "signal",
                                         "winter", "bright", "paper", "follow", "north", "carry", "simple", "story"};
    std::string text = "Continue this text: ";
    for (int i = 0; i < words; ++i) {
        text += kWords[rng() % std::size(kWords)];
        text += ' ';
    }
    return text;
}

RequestResult run_request(const Options& o, std::mt19937_64& rng, Clock::time_point run_start) {
    RequestResult r;
    const int words = int(o.prompt_words[rng() % o.prompt_words.size()]);
    const bool hang_up = std::uniform_real_distribution<double>(0, 1)(rng) < o.hang_up;
    const int leave_after = 1 + int(rng() % 8);
    json body = {{"model", o.model},
                 {"max_tokens", o.max_tokens},
                 {"temperature", 1.0},
                 {"seed", rng() % 1000000},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    if (o.chat) {
        body["messages"] = json::array({{{"role", "user"}, {"content", random_prompt(rng, words)}}});
        body["chat_template_kwargs"] = {{"enable_thinking", false}};
    } else {
        body["prompt"] = random_prompt(rng, words);
    }
    if (!o.ban_tokens.empty()) {
        json bias = json::object();
        for (const auto id : o.ban_tokens) bias[std::to_string(id)] = -100;
        body["logit_bias"] = bias;
    }
    const std::string payload = body.dump();
    const char* path = o.chat ? "/v1/chat/completions" : "/v1/completions";
    std::string request = std::string("POST ") + path + " HTTP/1.1\r\nHost: " + o.host + "\r\nConnection: close\r\n" +
                          "Content-Type: application/json\r\nContent-Length: " + std::to_string(payload.size()) + "\r\n";
    if (!o.api_key.empty()) request += "Authorization: Bearer " + o.api_key + "\r\n";
    request += "\r\n" + payload;

    const auto finish = [&](std::string error) {
        r.error = std::move(error);
        r.ok = r.error.empty();
        r.end_s = std::chrono::duration<double>(Clock::now() - run_start).count();
        return r;
    };
    const int fd = connect_to(o);
    if (fd < 0) return finish("cannot connect");
    const auto sent_at = Clock::now();
    for (std::size_t sent = 0; sent < request.size();) {
        const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {
            ::close(fd);
            return finish("send failed");
        }
        sent += std::size_t(n);
    }

    std::string head, body_text, events;
    bool in_body = false, chunked = false, saw_done = false;
    Dechunker dechunker;
    Clock::time_point last_delta{};
    char buffer[16384];
    while (true) {
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        const auto now = Clock::now();
        std::string_view data(buffer, std::size_t(n));
        if (!in_body) {
            head.append(data);
            const auto end = head.find("\r\n\r\n");
            if (end == std::string::npos) continue;
            in_body = true;
            if (head.size() > 12) r.status = std::atoi(head.c_str() + 9);
            std::string lower = head.substr(0, end);
            for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
            chunked = lower.find("transfer-encoding: chunked") != std::string::npos;
            data = std::string_view(head).substr(end + 4);
        }
        std::string fresh;
        if (chunked) {
            if (!dechunker.feed(data, fresh)) {
                ::close(fd);
                return finish("malformed chunked body");
            }
        } else {
            fresh.assign(data);
        }
        if (r.status != 200) {
            body_text += fresh;
            continue;
        }
        events += fresh;
        // Whole SSE events ("data: ...\n\n") as they complete.
        for (auto end = events.find("\n\n"); end != std::string::npos; end = events.find("\n\n")) {
            const std::string event = events.substr(0, end);
            events.erase(0, end + 2);
            if (event.rfind("data: ", 0) != 0) continue;
            const std::string_view payload_text = std::string_view(event).substr(6);
            if (payload_text == "[DONE]") {
                saw_done = true;
                continue;
            }
            const json chunk = smol::try_parse_json(payload_text).value_or(json::value_t::discarded);
            if (!chunk.is_object()) {
                ::close(fd);
                return finish("a stream event that is not JSON");
            }
            if (chunk.contains("error")) {
                ::close(fd);
                return finish("an error in the stream: " + chunk["error"].dump());
            }
            if (chunk.contains("usage") && chunk["usage"].is_object())
                r.completion_tokens = chunk["usage"].value("completion_tokens", 0);
            const json& choices = chunk.contains("choices") ? chunk["choices"] : json::array();
            if (choices.empty() || !choices[0].is_object()) continue;
            const auto non_empty = [](const json& object, const char* key) {
                return object.contains(key) && object[key].is_string() && !object[key].get<std::string>().empty();
            };
            const json& choice = choices[0];
            const bool text = o.chat ? choice.contains("delta") && (non_empty(choice["delta"], "content") ||
                                                                    non_empty(choice["delta"], "reasoning_content"))
                                     : non_empty(choice, "text");
            if (!text) continue;
            if (r.streamed == 0) r.ttft_ms = std::chrono::duration<double, std::milli>(now - sent_at).count();
            else r.itl_ms.push_back(std::chrono::duration<double, std::milli>(now - last_delta).count());
            last_delta = now;
            ++r.streamed;
            if (hang_up && r.streamed >= leave_after) {
                ::close(fd);
                r.hung_up = true;
                r.completion_tokens = r.streamed;
                return finish("");
            }
        }
    }
    ::close(fd);
    if (r.status == 0) return finish("no HTTP reply");
    if (r.status != 200) return finish("HTTP " + std::to_string(r.status) + ": " + body_text.substr(0, 160));
    if (!saw_done) return finish("the stream ended without [DONE]");
    if (r.completion_tokens == 0) r.completion_tokens = r.streamed;
    return finish("");
}

std::uint64_t rss_bytes(int pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    return 0;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const double at = p / 100.0 * double(v.size() - 1);
    const std::size_t low = std::size_t(std::floor(at));
    const std::size_t high = std::min(v.size() - 1, low + 1);
    return v[low] + (v[high] - v[low]) * (at - double(low));
}

json run(const Options& o, int users) {
    std::vector<std::vector<RequestResult>> results(static_cast<std::size_t>(users));
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::seconds(o.duration_s);
    std::vector<std::thread> threads;
    for (int u = 0; u < users; ++u)
        threads.emplace_back([&, u] {
            std::mt19937_64 rng(o.seed * 1000003u + std::uint64_t(u) * 7919u + std::uint64_t(users));
            while (Clock::now() < deadline) {
                results[std::size_t(u)].push_back(run_request(o, rng, start));
                if (!results[std::size_t(u)].back().ok)  // a refused or failed request: back off a little
                    std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
        });
    json rss = json::array();
    while (Clock::now() < deadline) {
        if (o.pid > 0) rss.push_back({{"t_s", std::chrono::duration<double>(Clock::now() - start).count()},
                                      {"rss_bytes", rss_bytes(o.pid)}});
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    }
    for (auto& t : threads) t.join();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

    int completed = 0, hung_up = 0, errors = 0;
    long tokens = 0, streamed = 0;
    std::vector<double> ttft, itl;
    json error_samples = json::array();
    for (const auto& list : results)
        for (const RequestResult& r : list) {
            // What a user saw while tokens came counts for every stream, one that failed after
            // them included.
            streamed += r.streamed;
            if (r.ttft_ms >= 0) ttft.push_back(r.ttft_ms);
            itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
            if (!r.ok) {
                ++errors;
                if (error_samples.size() < 5) error_samples.push_back(r.error);
                continue;
            }
            (r.hung_up ? hung_up : completed)++;
            tokens += r.completion_tokens;
        }
    std::uint64_t rss_max = 0;
    for (const auto& s : rss) rss_max = std::max<std::uint64_t>(rss_max, s["rss_bytes"]);
    return {{"users", users},
            {"duration_s", elapsed},
            {"requests_completed", completed},
            {"requests_hung_up", hung_up},
            {"errors", errors},
            {"error_samples", error_samples},
            {"requests_per_s", double(completed) / elapsed},
            {"generated_tokens_per_s", double(tokens) / elapsed},
            {"streamed_tokens_per_s", double(streamed) / elapsed},
            {"ttft_ms_p50", percentile(ttft, 50)},
            {"ttft_ms_p99", percentile(ttft, 99)},
            {"itl_ms_p50", percentile(itl, 50)},
            {"itl_ms_p99", percentile(itl, 99)},
            {"server_rss_max_bytes", o.pid > 0 ? json(rss_max) : json(nullptr)},
            {"server_rss", rss}};
}

// smol-load's one table of flags: parsing, checking and --help all read it.
smol::args::FlagTable flag_table(Options& o, bool& have_url, bool& help) {
    using namespace smol::args;
    const auto url = [&o, &have_url](const std::string&, const std::string& text) {
        parse_url(text, o);
        have_url = true;
    };
    const auto endpoint = [&o](const std::string& text) {
        if (text != "chat" && text != "completions") return false;
        o.chat = text == "chat";
        return true;
    };
    FlagTable table("usage: smol-load --url http://HOST:PORT [options]\n"
                    "  Streams chat completions from N concurrent users for T seconds and reports requests/s,\n"
                    "  generated tokens/s, time to first token and between tokens (p50/p99), errors and RSS.\n"
                    "options (lists are comma-separated; each user count is one run):");
    table.add({{"--url"}, "URL", "the server (http only; required)", text_reader(url)})
        .add({{"-u", "--users"}, "N,...", "concurrent users", int_list_value(o.users, std::int64_t(1), std::int64_t(4096))})
        .add({{"-d", "--duration"}, "S", "seconds per run", integer_value(o.duration_s, 1, 86400)})
        .add({{"--max-tokens"}, "N", "tokens per reply at most", integer_value(o.max_tokens, 1, 1 << 20)})
        .add({{"--prompt-words"}, "N,...", "prompt lengths in words, drawn at random per request",
              int_list_value(o.prompt_words, std::int64_t(1), std::int64_t(1) << 20)})
        .add({{"--hang-up"}, "F", "share of requests that leave after a few tokens", number_value(o.hang_up, 0.0, 1.0)})
        .add({{"--ban-tokens"}, "ID,...", "logit_bias -100 on these ids (end-of-turn tokens: fixed-length replies)",
              int_list_value(o.ban_tokens, std::int64_t(0), std::int64_t(1) << 30, "token ids")})
        .add({{"--api-key"}, "KEY", "sent as 'Authorization: Bearer KEY'", text_value(o.api_key)})
        .add({{"--model"}, "NAME", "the request's model field", text_value(o.model)})
        .add({{"--endpoint"}, "chat|completions",
              "/v1/chat/completions, or /v1/completions with the bare prompt",
              checked_value("chat or completions", "chat", endpoint)})
        .add({{"--pid"}, "PID", "the server's process, for its RSS over time (/proc/PID/status)",
              with_default(integer_value(o.pid, 1, 1 << 30), "none")})
        .add({{"--seed"}, "N", "request seeds and prompt choice",
              integer_value(o.seed, std::uint64_t(0), std::uint64_t(1) << 40)})
        .add({{"-o", "--output"}, "md|json", "output format", choice_value(o.format, {"md", "json"})})
        .add(help_flag(help));
    return table;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    bool have_url = false;
    bool help = false;
    const smol::args::FlagTable table = flag_table(o, have_url, help);
    // std::exception: whatever reading the command line throws is answered as a usage mistake.
    if (const auto status = table.parse_or_exit_status<std::exception>(argc, argv, help, "smol-load", [&] {
            if (!have_url) throw smol::args::UsageError("--url is required");
        }))
        return *status;

    json runs = json::array();
    if (o.format == "md") {
        std::printf("| users | requests | req/s | gen t/s | streamed t/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | errors | hung up | server RSS |\n");
        std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        std::fflush(stdout);
    }
    int total_errors = 0;
    for (const auto users : o.users) {
        json r = run(o, int(users));
        total_errors += r["errors"].get<int>();
        if (o.format == "md") {
            char rss[32] = "-";
            if (r["server_rss_max_bytes"].is_number())
                std::snprintf(rss, sizeof rss, "%.0f MiB", r["server_rss_max_bytes"].get<double>() / (1 << 20));
            std::printf("| %d | %d | %.2f | %.2f | %.2f | %.0f | %.0f | %.1f | %.1f | %d | %d | %s |\n", int(users),
                        r["requests_completed"].get<int>(), r["requests_per_s"].get<double>(),
                        r["generated_tokens_per_s"].get<double>(), r["streamed_tokens_per_s"].get<double>(),
                        r["ttft_ms_p50"].get<double>(),
                        r["ttft_ms_p99"].get<double>(), r["itl_ms_p50"].get<double>(), r["itl_ms_p99"].get<double>(),
                        r["errors"].get<int>(), r["requests_hung_up"].get<int>(), rss);
            std::fflush(stdout);
            for (const auto& e : r["error_samples"]) std::fprintf(stderr, "smol-load: error: %s\n", e.get<std::string>().c_str());
        }
        runs.push_back(std::move(r));
    }
    if (o.format == "json") std::printf("%s\n", runs.dump(2).c_str());
    return total_errors > 0 ? 1 : 0;
}
