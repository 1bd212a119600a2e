// Unit tests of http_framing.hpp, the request and reply framing smol-server's connection gate
// relies on (examples/server/connection_gate.hpp): where a header and a body end, what is
// refused, what is forwarded, and where a reply ends; and of gate_budget.hpp, its server-wide
// budget for request bytes (who may take how much, who waits, who is let in when).

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "gate_budget.hpp"
#include "http_framing.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_http_framing {

using namespace smol_server::http;
using State = RequestHeadParse::State;

namespace {

constexpr std::size_t kMaxHeader = 1024;
constexpr std::uint64_t kMaxBody = 4096;

RequestHeadParse parse(std::string_view data) { return parse_request_head(data, kMaxHeader, kMaxBody); }

// The refusal status of a request header, or 0 if it is accepted.
int refused_with(std::string_view data) {
    const RequestHeadParse p = parse(data);
    REQUIRE(p.state != State::incomplete);
    return p.state == State::refused ? p.refusal.status : 0;
}

// Feeds a chunked body in pieces of `piece` bytes; the status at the end and the bytes used.
std::pair<ChunkedScanner::Status, std::size_t> scan_chunked(std::string_view body, std::size_t piece,
                                                            std::uint64_t max = UINT64_MAX) {
    ChunkedScanner scanner(max);
    std::size_t used = 0;
    for (std::size_t at = 0; at < body.size(); at += piece) {
        const auto step = scanner.feed(body.substr(at, piece));
        used += step.used;
        if (step.status != ChunkedScanner::Status::more) return {step.status, used};
    }
    return {ChunkedScanner::Status::more, used};
}

}  // namespace

TEST_CASE("http framing: a request header is whole at its blank line, with what framing needs") {
    const std::string get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    for (std::size_t n = 0; n < get.size(); ++n) CHECK(parse(get.substr(0, n)).state == State::incomplete);
    const RequestHeadParse p = parse(get + "GET /next HTTP/1.1\r\n");  // a pipelined request after it
    REQUIRE(p.state == State::complete);
    CHECK(p.head.size == get.size());
    CHECK(p.head.method == "GET");
    CHECK(p.head.target == "/health");
    CHECK(p.head.version == "HTTP/1.1");
    CHECK(p.head.keep_alive);
    CHECK(p.head.body.kind == BodyFraming::Kind::none);
    REQUIRE(p.head.fields.size() == 1);
    CHECK(p.head.fields[0].name == "Host");
    CHECK(p.head.fields[0].value == "x");

    const RequestHeadParse post = parse(
        "POST /v1/chat/completions HTTP/1.1\r\ncontent-length:  12 \r\nConnection: Close\r\nExpect: 100-continue\r\n\r\n");
    REQUIRE(post.state == State::complete);
    CHECK(post.head.body.kind == BodyFraming::Kind::length);
    CHECK(post.head.body.length == 12);
    CHECK_FALSE(post.head.keep_alive);
    CHECK(post.head.expect_continue);

    const RequestHeadParse chunked = parse("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n");
    REQUIRE(chunked.state == State::complete);
    CHECK(chunked.head.body.kind == BodyFraming::Kind::chunked);

    // HTTP/1.0 keeps the connection only when asked; empty lines before a request are skipped.
    CHECK_FALSE(parse("GET / HTTP/1.0\r\n\r\n").head.keep_alive);
    CHECK(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").head.keep_alive);
    const RequestHeadParse after_crlf = parse("\r\n\r\nGET / HTTP/1.1\r\n\r\n");
    REQUIRE(after_crlf.state == State::complete);
    CHECK(after_crlf.head.size == 22);
    CHECK(after_crlf.head.method == "GET");
    // Content-Length 0 is no body; the same length twice is one length.
    CHECK(parse("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").head.body.kind == BodyFraming::Kind::none);
    CHECK(refused_with("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n") == 0);
}

TEST_CASE("http framing: a header arriving a byte at a time is found once, without searching it all again") {
    const std::string get = "GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: y\r\n\r\n";
    std::size_t searched = 0;
    for (std::size_t n = 1; n < get.size(); ++n)
        REQUIRE(parse_request_head(std::string_view(get).substr(0, n), kMaxHeader, kMaxBody, &searched).state ==
                State::incomplete);
    CHECK(searched == get.size() - 1);
    const RequestHeadParse p = parse_request_head(get, kMaxHeader, kMaxBody, &searched);
    REQUIRE(p.state == State::complete);
    CHECK(p.head.size == get.size());
}

TEST_CASE("http framing: limits and what could frame two ways are refused with their status") {
    // Too large: a header past the limit, whole or not; a body longer than allowed.
    const std::string big(kMaxHeader, 'a');
    CHECK(parse("GET / HTTP/1.1\r\nX-Big: " + big).state == State::refused);
    CHECK(parse("GET / HTTP/1.1\r\nX-Big: " + big).refusal.status == 431);
    CHECK(refused_with("GET / HTTP/1.1\r\nX-Big: " + big + "\r\n\r\n") == 431);
    CHECK(refused_with("GET / HTTP/1.1\r\nX: " + std::string(kMaxHeader - 24, 'a') + "\r\n\r\n") == 0);
    const RequestHeadParse body = parse("POST / HTTP/1.1\r\nContent-Length: 4097\r\n\r\n");
    REQUIRE(body.state == State::refused);
    CHECK(body.refusal.status == 413);
    CHECK(body.refusal.code == "payload_too_large");

    // Ambiguous framing (request smuggling between the gate and httplib).
    CHECK(refused_with("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n") == 400);
    CHECK(refused_with("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n") == 400);
    CHECK(refused_with("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n") == 400);
    CHECK(refused_with("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n") == 400);
    CHECK(refused_with("POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n") == 400);
    CHECK(refused_with("POST / HTTP/1.1\r\nHost: x\r\n  folded\r\n\r\n") == 400);
    CHECK(refused_with("POST / HTTP/1.1\r\nX: a\nContent-Length: 5\r\n\r\n") == 400);
    CHECK(refused_with("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n") == 400);
    CHECK(refused_with("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") == 501);
    CHECK(refused_with("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n") == 501);

    // Not HTTP/1.x; refused as soon as the request line shows it.
    CHECK(refused_with("GET / HTTP/2.0\r\n\r\n") == 400);
    CHECK(refused_with("GET /\r\n\r\n") == 400);
    CHECK(refused_with("GET  / HTTP/1.1\r\n\r\n") == 400);
    CHECK(refused_with("G(T / HTTP/1.1\r\n\r\n") == 400);
    CHECK(parse("\x16\x03\x01 hello\r\nmore").state == State::refused);
    CHECK(parse("GET / HTTP/1.1\r\nHost: x").state == State::incomplete);
}

TEST_CASE("http framing: the forwarded header drops hop-by-hop fields and says who the client is") {
    const RequestHeadParse p =
        parse("POST /v1/x?q=1 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\nExpect: 100-continue\r\n"
              "x-smol-client: 6.6.6.6\r\nContent-Length: 2\r\nAuthorization: Bearer k\r\n\r\n");
    REQUIRE(p.state == State::complete);
    CHECK(forwarded_head(p.head, "X-Smol-Client", "10.0.0.7") ==
          "POST /v1/x?q=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nAuthorization: Bearer k\r\n"
          "X-Smol-Client: 10.0.0.7\r\nConnection: close\r\n\r\n");
}

TEST_CASE("http framing: one byte range is forwarded, several are dropped (the whole resource is sent)") {
    const auto forwarded = [](const std::string& fields) {
        const RequestHeadParse p = parse("GET /vendor/marked.min.js HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n");
        REQUIRE(p.state == State::complete);
        return forwarded_head(p.head, "X-Smol-Client", "10.0.0.7");
    };
    const std::string tail = "X-Smol-Client: 10.0.0.7\r\nConnection: close\r\n\r\n";
    CHECK(forwarded("Range: bytes=0-99\r\n") == "GET /vendor/marked.min.js HTTP/1.1\r\nHost: h\r\nRange: bytes=0-99\r\n" + tail);
    std::string many = "Range: bytes=0-";
    for (int i = 0; i < 300; ++i) many += ",0-";
    for (const std::string& several : {std::string("Range: bytes=0-1, 5-9\r\n"), many + "\r\n",
                                       std::string("range: bytes=0-1\r\nRange: bytes=4-5\r\nIf-Range: \"e\"\r\n")}) {
        CAPTURE(several.substr(0, 60));
        CHECK(forwarded(several) == "GET /vendor/marked.min.js HTTP/1.1\r\nHost: h\r\n" + tail);
    }
}

TEST_CASE("http framing: a chunked body ends after its last chunk and trailer, in any pieces") {
    const std::string body = "5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: t\r\n\r\n";
    for (std::size_t piece : {std::size_t(1), std::size_t(2), std::size_t(7), body.size()}) {
        CAPTURE(piece);
        const auto [status, used] = scan_chunked(body + "GET / HTTP/1.1\r\n", piece);
        CHECK(status == ChunkedScanner::Status::done);
        CHECK(used == body.size());
    }
    CHECK(scan_chunked("0\r\n\r\n", 1).first == ChunkedScanner::Status::done);
    CHECK(scan_chunked("5\r\nhello\r\n", 3).first == ChunkedScanner::Status::more);
    CHECK(scan_chunked("5\r\nhello\r\n0\r\n", 3).first == ChunkedScanner::Status::more);

    // Malformed: no size, a size with a sign or 0x, data longer than its size, bare LF, a size past 2^60.
    for (const char* bad : {"\r\n", "+5\r\nhello\r\n0\r\n\r\n", "0x5\r\nhello\r\n", "5\r\nhello!\r\n", "5\nhello\r\n",
                            "1000000000000000\r\n", "0\r\nX: y\n\r\n"}) {
        CAPTURE(bad);
        CHECK(scan_chunked(bad, 1).first == ChunkedScanner::Status::invalid);
    }
    // The cap counts the body as sent.
    CHECK(scan_chunked(body, 3, body.size()).first == ChunkedScanner::Status::done);
    CHECK(scan_chunked(body, 3, body.size() - 1).first == ChunkedScanner::Status::too_large);
}

TEST_CASE("http framing: a reply's end comes from its status, Content-Length or chunks, else its close") {
    const auto head = [](const std::string& text) {
        const ResponseHeadParse p = parse_response_head(text, 4096);
        REQUIRE(p.state == ResponseHeadParse::State::complete);
        return p.head;
    };
    const ResponseHead ok = head("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n"
                                 "Connection: close\r\n\r\n{\"status\":\"ok\"}");
    CHECK(ok.status == 200);
    CHECK(ok.size == 90);  // through the blank line, not the body
    auto framing = response_body(ok, "GET");
    REQUIRE(framing);
    CHECK(framing->kind == BodyFraming::Kind::length);
    CHECK(framing->length == 15);
    CHECK(response_body(ok, "HEAD")->kind == BodyFraming::Kind::none);
    CHECK(response_body(head("HTTP/1.1 204 No Content\r\n\r\n"), "OPTIONS")->kind == BodyFraming::Kind::none);
    CHECK(response_body(head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), "POST")->kind ==
          BodyFraming::Kind::chunked);
    CHECK(response_body(head("HTTP/1.1 200 OK\r\n\r\n"), "GET")->kind == BodyFraming::Kind::until_close);
    CHECK(!response_body(head("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), "GET"));
    CHECK(parse_response_head("HTTP/1.1 200 OK\r\nX: y\r\n", 4096).state == ResponseHeadParse::State::incomplete);
    CHECK(parse_response_head("HTTP/1.1 200 OK\r\nX: y\r\n", 8).state == ResponseHeadParse::State::invalid);
    CHECK(parse_response_head("ICY 200 OK\r\n\r\n", 4096).state == ResponseHeadParse::State::invalid);

    // The client's copy carries the gate's word on the connection, not the server's.
    CHECK(client_response_head(ok, 5, 99) ==
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n"
          "Connection: keep-alive\r\nKeep-Alive: timeout=5, max=99\r\n\r\n");
    CHECK(client_response_head(ok, 0, 99) ==
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\nConnection: close\r\n\r\n");

    // The body scanner for each framing.
    BodyScanner length({BodyFraming::Kind::length, 4}, 0);
    CHECK(length.feed("ab").status == BodyScanner::Status::more);
    const auto last = length.feed("cdEXTRA");
    CHECK(last.status == BodyScanner::Status::done);
    CHECK(last.used == 2);
    CHECK(BodyScanner({BodyFraming::Kind::none, 0}, 0).empty());
    CHECK(BodyScanner({BodyFraming::Kind::length, 0}, 0).empty());
    CHECK(BodyScanner({BodyFraming::Kind::until_close, 0}, 0).feed("abc").status == BodyScanner::Status::more);
}

TEST_CASE("http framing: the gate's own replies are whole and close the connection") {
    const std::string r = gate_response(431, "application/json", "{}");
    CHECK(r == "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
               "Connection: close\r\n\r\n{}");
}

// ---- the budget for request bytes (gate_budget.hpp) ----

using smol_server::BufferBudget;

namespace {

std::vector<std::uint64_t> ids(const std::vector<BufferBudget::Admitted>& admitted) {
    std::vector<std::uint64_t> out;
    for (const auto& a : admitted) out.push_back(a.id);
    return out;
}

}  // namespace

TEST_CASE("gate budget: big requests get three quarters, small ones all of it; what never fits is known") {
    BufferBudget b(1000, /*small_request=*/10);
    CHECK(b.cap_for(10) == 1000);  // small
    CHECK(b.cap_for(11) == 750);   // big
    CHECK(b.could_fit(750));
    CHECK(!b.could_fit(751));
    CHECK(b.try_take(700, 700));
    CHECK(!b.try_take(100, 100));  // 800 > 750 for a big one...
    CHECK(b.try_take(10, 10));     // ...but small ones have the quarter kept for them
    CHECK(b.try_take(290, 5));     // up to the whole budget
    CHECK(b.used() == 1000);
    CHECK(!b.try_take(1, 1));
    b.give(300);
    CHECK(b.used() == 700);
    b.give(5000);  // never below zero
    CHECK(b.used() == 0);
    b.take(1200);  // taken without asking: may pass the limit, and then nothing else fits
    CHECK(!b.try_take(1, 1));
}

TEST_CASE("gate budget: waiters are let in as bytes come back, big ones in turn, small ones past them") {
    BufferBudget b(1000, 10);
    REQUIRE(b.try_take(700, 700));
    // A big request that does not fit waits; a later big one that would fit waits behind it
    // rather than pass it over for ever.
    CHECK(!b.try_take(300, 300));
    b.wait(1, 300, 300);
    CHECK(!b.try_take(40, 40));
    b.wait(2, 40, 40);
    // A small one is not held back by them.
    CHECK(b.try_take(8, 8));
    CHECK(b.used() == 708);
    CHECK(b.waiting() == 2);
    CHECK(b.admit().empty());  // nothing came back

    b.give(400);  // 308 in use: the first big one fits (608 <= 750), then the second (648)
    const auto admitted = b.admit();
    CHECK(ids(admitted) == std::vector<std::uint64_t>{1, 2});
    CHECK(admitted[0].more == 300);
    CHECK(b.used() == 648);
    CHECK(b.waiting() == 0);

    // A small waiter goes in past a big one that still does not fit.
    b.wait(3, 500, 500);
    b.wait(4, 9, 9);
    CHECK(ids(b.admit()) == std::vector<std::uint64_t>{4});
    CHECK(b.used() == 657);
    // A waiter that left is forgotten, and no longer holds the big ones back.
    b.wait(5, 50, 50);
    CHECK(b.admit().empty());  // behind 3
    b.forget(3);
    b.forget(3);  // twice is harmless
    CHECK(ids(b.admit()) == std::vector<std::uint64_t>{5});
    CHECK(b.used() == 707);
    CHECK(b.try_take(40, 40));  // no big waiter left to pass over
}

TEST_CASE("browser safety: JSON content types, Host names and loopback addresses") {
    using smol_server::http::host_name_of;
    using smol_server::http::is_json_content_type;
    using smol_server::http::is_loopback_host;
    CHECK(is_json_content_type("application/json"));
    CHECK(is_json_content_type("Application/JSON; charset=utf-8"));
    CHECK(is_json_content_type(" application/json ;charset=utf-8"));
    CHECK_FALSE(is_json_content_type(""));
    CHECK_FALSE(is_json_content_type("text/plain;charset=UTF-8"));
    CHECK_FALSE(is_json_content_type("application/x-www-form-urlencoded"));
    CHECK_FALSE(is_json_content_type("multipart/form-data; boundary=x"));
    CHECK_FALSE(is_json_content_type("application/jsonp"));
    CHECK(host_name_of("LocalHost:8080") == "localhost");
    CHECK(host_name_of("[::1]:8080") == "[::1]");
    CHECK(host_name_of("127.0.0.1") == "127.0.0.1");
    CHECK(host_name_of("evil.example:80") == "evil.example");
    CHECK(is_loopback_host("127.0.0.1"));
    CHECK(is_loopback_host("127.1.2.3"));
    CHECK(is_loopback_host("localhost"));
    CHECK(is_loopback_host("::1"));
    CHECK_FALSE(is_loopback_host("0.0.0.0"));
    CHECK_FALSE(is_loopback_host("192.168.1.10"));
}

}  // namespace test_http_framing
