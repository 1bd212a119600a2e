// libFuzzer target for http_framing.hpp, how smol-server's connection gate reads what clients
// send (and what httplib replies). For any input bytes:
//   - a request header parsed as it arrives, a few bytes at a time (the split taken from the
//     input), gives the same answer as parsing it whole: the same size and fields once whole,
//     a refusal (any status) where the whole is refused;
//   - a whole header is no longer than the input and within the limit, and the header the gate
//     forwards parses again to the same method, target, version and body framing, with one
//     X-Smol-Client field and Connection: close (so httplib cannot see a different request);
//   - a chunked body after the header ends at the same byte fed whole or a byte at a time;
//   - the input read as a reply: its rewritten header parses again to the same status.
// A crash, a sanitizer report or a broken property is a finding.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http_framing.hpp"

namespace {

using namespace smol_server::http;

constexpr std::size_t kMaxHeader = 2048;
constexpr std::uint64_t kMaxBody = 4096;

[[noreturn]] void finding(const char* what) {
    std::fprintf(stderr, "fuzz_http_framing: %s\n", what);
    std::abort();
}

void check(bool ok, const char* what) {
    if (!ok) finding(what);
}

ChunkedScanner::Step scan(std::string_view body, std::size_t piece) {
    ChunkedScanner scanner(kMaxBody);
    std::size_t used = 0;
    for (std::size_t at = 0; at < body.size(); at += piece) {
        const auto step = scanner.feed(body.substr(at, piece));
        used += step.used;
        if (step.status != ChunkedScanner::Status::more) return {step.status, used};
    }
    return {ChunkedScanner::Status::more, used};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::size_t piece = 1 + data[0] % 16;
    const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

    const ResponseHeadParse reply = parse_response_head(input, 4096);
    if (reply.state == ResponseHeadParse::State::complete) {
        const std::string rewritten = client_response_head(reply.head, 5, 10);
        const ResponseHeadParse reread = parse_response_head(rewritten, 1 << 20);
        check(reread.state == ResponseHeadParse::State::complete && reread.head.status == reply.head.status &&
                  reread.head.size == rewritten.size(),
              "the rewritten reply header does not parse to the same status");
        (void)response_body(reply.head, "GET");
    }

    const RequestHeadParse whole = parse_request_head(input, kMaxHeader, kMaxBody);
    // As the gate sees it: longer and longer prefixes, the search resumed each time.
    std::size_t searched = 0;
    RequestHeadParse last;
    for (std::size_t n = std::min(piece, input.size());; n = std::min(n + piece, input.size())) {
        last = parse_request_head(input.substr(0, n), kMaxHeader, kMaxBody, &searched);
        if (last.state != RequestHeadParse::State::incomplete || n == input.size()) break;
    }
    using State = RequestHeadParse::State;
    if (last.state == State::refused) {
        check(whole.state == State::refused, "a prefix was refused but the whole input is not");
    } else {
        check(last.state == whole.state, "incremental and whole parses disagree");
    }
    if (whole.state != State::complete || last.state != State::complete) return 0;
    const RequestHead& head = whole.head;
    check(last.head.size == head.size && last.head.fields.size() == head.fields.size(),
          "incremental and whole parses found different headers");
    check(head.size <= input.size() && head.size <= kMaxHeader, "a header larger than the input or the limit");

    const std::string forwarded = forwarded_head(head, "X-Smol-Client", "192.0.2.1");
    const RequestHeadParse again = parse_request_head(forwarded, 1 << 20, kMaxBody);
    check(again.state == State::complete, "the forwarded header does not parse");
    check(again.head.size == forwarded.size(), "the forwarded header has bytes after its end");
    check(again.head.method == head.method && again.head.target == head.target && again.head.version == head.version,
          "the forwarded request line differs");
    check(again.head.body.kind == head.body.kind && again.head.body.length == head.body.length,
          "the forwarded header frames the body differently");
    check(!again.head.keep_alive, "the forwarded header keeps the connection");
    int client_fields = 0;
    for (const Field& f : again.head.fields) client_fields += detail::iequals(f.name, "X-Smol-Client");
    check(client_fields == 1, "the forwarded header does not have exactly one X-Smol-Client");

    if (head.body.kind == BodyFraming::Kind::chunked) {
        const std::string_view body = input.substr(head.size);
        const auto at_once = scan(body, body.size() + 1);
        const auto bytewise = scan(body, 1);
        check(at_once.status == bytewise.status, "a chunked body scanned whole and bytewise ends differently");
        if (at_once.status == ChunkedScanner::Status::done)
            check(at_once.used == bytewise.used && at_once.used <= body.size(), "a chunked body's end moved");
    }
    return 0;
}
