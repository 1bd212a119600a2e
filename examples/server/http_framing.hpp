#pragma once
// HTTP/1.1 message framing for smol-server's connection gate (connection_gate.hpp): where a
// request's header and body end in the bytes read so far, what the gate forwards of it, and
// where the response to it ends in the bytes relayed back. Pure: no sockets and no clocks;
// tests/test_http_framing.cpp tests it directly.
//
// Only as much of HTTP as framing needs (RFC 9112): the request line, header fields, a body by
// Content-Length or chunked transfer coding. What the request means is cpp-httplib's business
// behind the gate; what is refused here is what would make the two disagree about where a
// request ends (smuggling: both Content-Length and Transfer-Encoding, two lengths, a field name
// with a space before its colon, a folded line) or what is over the limits. At the end, the two
// header values smol-server checks before routing (Content-Type and Host), read with the same
// helpers.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace smol_server::http {

// What the gate answers instead of forwarding a request: the status, the OpenAI-style error
// code and a sentence for the client.
struct Refusal {
    int status = 400;
    std::string code;
    std::string message;
};

inline Refusal bad_request(std::string message) { return {400, "invalid_request", std::move(message)}; }

struct Field {
    std::string name;
    std::string value;  // without the whitespace around it
};

// How a message's body is delimited.
struct BodyFraming {
    enum class Kind { none, length, chunked, until_close } kind = Kind::none;
    std::uint64_t length = 0;  // with Kind::length
};

// The request line and header fields of a request, once all of them have arrived.
struct RequestHead {
    std::size_t size = 0;  // bytes from the request's start through the blank line
    std::size_t skipped = 0;  // empty lines before the request line (part of size), which clients may send
    std::string method;
    std::string target;
    std::string version;  // "HTTP/1.1" or "HTTP/1.0"
    std::vector<Field> fields;
    BodyFraming body;
    bool keep_alive = false;       // HTTP/1.1 without "Connection: close", or 1.0 with "keep-alive"
    bool expect_continue = false;  // "Expect: 100-continue" with a body to come
};

// What the start of a buffer holds: not yet a whole header, a header, or a request to refuse.
struct RequestHeadParse {
    enum class State { incomplete, complete, refused } state = State::incomplete;
    RequestHead head;
    Refusal refusal;
};

namespace detail {

inline char lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

inline bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

// RFC 9110 tchar: what a method or a field name is made of.
inline bool token_char(char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

inline std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// Calls f(token) for each element of a comma-separated list ("close, Keep-Alive").
template <class F>
void each_token(std::string_view list, F f) {
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        f(trim(list.substr(0, comma)));
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
}

inline std::optional<std::uint64_t> parse_decimal(std::string_view s) {
    if (s.empty() || s.size() > 18) return std::nullopt;
    std::uint64_t n = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + std::uint64_t(c - '0');
    }
    return n;
}

// The header fields of a message from just after its start line through the blank line
// (`lines` ends with that line's CRLF, the blank line's excluded); a refusal message, or empty.
inline std::string parse_fields(std::string_view lines, std::vector<Field>& fields) {
    while (!lines.empty()) {
        const std::size_t eol = lines.find("\r\n");
        const std::string_view line = lines.substr(0, eol);
        lines.remove_prefix(eol == std::string_view::npos ? lines.size() : eol + 2);
        if (line.front() == ' ' || line.front() == '\t') return "a folded header line (obsolete line folding)";
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) return "a header line without a field name and colon";
        const std::string_view name = line.substr(0, colon);
        for (char c : name)
            if (!token_char(c)) return "a header field name with a character that is not allowed there";
        const std::string_view value = trim(line.substr(colon + 1));
        for (char c : value)
            if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
                return "a control character in a header field value";
        fields.push_back({std::string(name), std::string(value)});
    }
    return {};
}

// The request line, METHOD SP TARGET SP HTTP/1.x, into `head`; why it is refused, if it is.
inline std::optional<Refusal> parse_request_line(std::string_view line, RequestHead& head) {
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp1 == 0 || sp2 == sp1 + 1 ||
        line.find(' ', sp2 + 1) != std::string_view::npos)
        return bad_request("the request line is not 'METHOD TARGET HTTP/1.x'");
    head.method = std::string(line.substr(0, sp1));
    head.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
    head.version = std::string(line.substr(sp2 + 1));
    for (char c : head.method)
        if (!token_char(c)) return bad_request("the request method is not a token");
    for (char c : head.target)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
            return bad_request("a control character in the request target");
    if (head.version != "HTTP/1.1" && head.version != "HTTP/1.0")
        return bad_request("only HTTP/1.0 and HTTP/1.1 are served, not '" + head.version.substr(0, 16) + "'");
    return std::nullopt;
}

// The body's framing (Content-Length or chunked), and what the client asked of the connection
// (Connection, Expect), from the fields in `head`; why the request is refused, if it is.
inline std::optional<Refusal> read_framing(RequestHead& head, std::uint64_t max_body_bytes) {
    std::optional<std::uint64_t> length;
    bool chunked = false, has_transfer_encoding = false, close = false, keep_alive = false, expect = false;
    for (const Field& f : head.fields) {
        if (iequals(f.name, "Content-Length")) {
            const auto n = parse_decimal(f.value);
            if (!n) return bad_request("Content-Length is not a number of bytes: '" + f.value.substr(0, 32) + "'");
            if (length && *length != *n) return bad_request("two different Content-Length fields");
            length = n;
        } else if (iequals(f.name, "Transfer-Encoding")) {
            if (has_transfer_encoding || !iequals(f.value, "chunked"))
                return Refusal{501, "not_implemented",
                               "the only transfer coding accepted on requests is 'chunked', found '" +
                                   f.value.substr(0, 32) + "'"};
            has_transfer_encoding = chunked = true;
        } else if (iequals(f.name, "Connection")) {
            each_token(f.value, [&](std::string_view t) {
                close = close || iequals(t, "close");
                keep_alive = keep_alive || iequals(t, "keep-alive");
            });
        } else if (iequals(f.name, "Expect")) {
            expect = iequals(f.value, "100-continue");
        }
    }
    if (chunked && length) return bad_request("both Content-Length and Transfer-Encoding");
    if (chunked && head.version == "HTTP/1.0") return bad_request("Transfer-Encoding on an HTTP/1.0 request");
    if (length && *length > max_body_bytes)
        return Refusal{413, "payload_too_large", "the request body is larger than the server accepts"};
    if (chunked) head.body = {BodyFraming::Kind::chunked, 0};
    else if (length && *length > 0) head.body = {BodyFraming::Kind::length, *length};
    head.keep_alive = head.version == "HTTP/1.1" ? !close : keep_alive && !close;
    head.expect_continue = expect && head.body.kind != BodyFraming::Kind::none && head.version == "HTTP/1.1";
    return std::nullopt;
}

}  // namespace detail

// Looks for a whole request header at the start of `data`. `searched` says how much of it an
// earlier call already found without a blank line, so a header arriving a byte at a time is
// not searched from its start each time (pass 0 the first time; the call updates it).
// Refuses: 431 past max_header_bytes, 413 for a Content-Length past max_body_bytes, 501 for a
// transfer coding other than chunked, 400 for what is not HTTP/1.x or frames ambiguously.
inline RequestHeadParse parse_request_head(std::string_view data, std::size_t max_header_bytes,
                                           std::uint64_t max_body_bytes, std::size_t* searched = nullptr) {
    using State = RequestHeadParse::State;
    RequestHeadParse out;
    const auto refuse = [&](Refusal r) {
        out.state = State::refused;
        out.refusal = std::move(r);
        return out;
    };
    // Empty lines before a request line are ignored (RFC 9112 2.2), a few of them.
    std::size_t skipped = 0;
    while (skipped + 2 <= data.size() && data.compare(skipped, 2, "\r\n") == 0 && skipped < 8) skipped += 2;
    const std::size_t from = searched && *searched > skipped + 3 ? *searched - 3 : skipped;
    const std::size_t end = data.find("\r\n\r\n", from);
    const auto too_large = [&] {
        return refuse({431, "header_too_large",
                       "the request header is larger than the server accepts (" + std::to_string(max_header_bytes) +
                           " bytes)"});
    };
    if (end == std::string_view::npos) {
        if (searched) *searched = data.size();
        if (data.size() > max_header_bytes) return too_large();
        // A request line that cannot be HTTP/1.x is refused before the rest of it arrives.
        const std::size_t eol = data.find("\r\n", skipped);
        if (eol != std::string_view::npos && data.substr(skipped, eol - skipped).find(" HTTP/1.") == std::string_view::npos)
            return refuse(bad_request("the request line is not 'METHOD TARGET HTTP/1.x'"));
        return out;
    }
    const std::size_t head_size = end + 4;
    if (head_size > max_header_bytes) return too_large();
    RequestHead& head = out.head;
    head.size = head_size;
    head.skipped = skipped;

    // Request line: METHOD SP TARGET SP HTTP/1.x
    const std::size_t line_end = data.find("\r\n", skipped);
    const std::string_view line = data.substr(skipped, line_end - skipped);
    if (std::optional<Refusal> refused = detail::parse_request_line(line, head)) return refuse(std::move(*refused));

    if (const std::string why = detail::parse_fields(data.substr(line_end + 2, end + 2 - (line_end + 2)), head.fields);
        !why.empty())
        return refuse(bad_request("malformed header: " + why));

    if (std::optional<Refusal> refused = detail::read_framing(head, max_body_bytes)) return refuse(std::move(*refused));
    out.state = State::complete;
    return out;
}

// Hop-by-hop fields the gate drops from what it forwards: it speaks to the client and to the
// server behind it on two connections of its own (and answers Expect: 100-continue itself).
inline bool hop_by_hop(std::string_view name) {
    for (const char* h : {"Connection", "Keep-Alive", "Proxy-Connection", "Expect", "TE", "Upgrade"})
        if (detail::iequals(name, h)) return true;
    return false;
}

// Whether the request asks for more than one byte range (in one Range field or several).
inline bool asks_several_ranges(const RequestHead& head) {
    std::size_t ranges = 0;
    for (const Field& f : head.fields)
        if (detail::iequals(f.name, "Range")) ranges += 1 + std::size_t(std::count(f.value.begin(), f.value.end(), ','));
    return ranges > 1;
}

// The header the gate sends the server behind it for `head`: the request line and fields as
// they came, less hop-by-hop fields and any field named `client_field` (only the gate says who
// the client is), plus `client_field: client` and "Connection: close" (one request per
// connection, so no server thread waits on an idle one).
// A request for several byte ranges goes on without its Range fields and so gets the whole
// resource (RFC 9110 lets a server ignore Range): cpp-httplib builds a multi-range reply in
// memory with no cap on the number of ranges, and an 8 KB header of "0-," asks for a
// resource thousands of times over. One range is passed on: a reply no larger than the resource.
inline std::string forwarded_head(const RequestHead& head, std::string_view client_field, std::string_view client) {
    std::string out = head.method + " " + head.target + " " + head.version + "\r\n";
    const bool drop_ranges = asks_several_ranges(head);
    for (const Field& f : head.fields) {
        if (hop_by_hop(f.name) || detail::iequals(f.name, client_field)) continue;
        if (drop_ranges && (detail::iequals(f.name, "Range") || detail::iequals(f.name, "If-Range"))) continue;
        out += f.name;
        out += ": ";
        out += f.value;
        out += "\r\n";
    }
    out += client_field;
    out += ": ";
    out += client;
    out += "\r\nConnection: close\r\n\r\n";
    return out;
}

// Finds where a chunked body ends, fed its bytes piece by piece as they arrive. Chunk
// extensions and trailer fields are passed over; `max_bytes` caps the body as sent (sizes,
// extensions and trailers included), which bounds what a client can make the gate hold.
class ChunkedScanner {
public:
    enum class Status { more, done, invalid, too_large };
    struct Step {
        Status status = Status::more;
        std::size_t used = 0;  // bytes of this piece that belong to the body (all unless it ended inside)
    };

    explicit ChunkedScanner(std::uint64_t max_bytes = UINT64_MAX) : max_bytes_(max_bytes) {}

    Step feed(std::string_view piece) {
        // Long: one switch over the chunked grammar's states, in the order they follow each other;
        // cut up, a reader would lose the state machine's shape.
        std::size_t i = 0;
        const auto stop = [&](Status s) {
            status_ = s;
            return Step{s, i};
        };
        if (status_ != Status::more) return Step{status_, 0};
        while (i < piece.size()) {
            if (state_ == State::data) {
                const std::size_t n = std::size_t(std::min<std::uint64_t>(remaining_, piece.size() - i));
                i += n;
                remaining_ -= n;
                total_ += n;
                if (total_ > max_bytes_) return stop(Status::too_large);
                if (remaining_ == 0) state_ = State::data_cr;
                continue;
            }
            const char c = piece[i++];
            if (++total_ > max_bytes_) return stop(Status::too_large);
            switch (state_) {
            case State::size: {
                const int digit = hex_digit(c);
                if (digit >= 0) {
                    if (size_digits_ >= 15) return stop(Status::invalid);  // past 2^60 bytes
                    size_ = size_ * 16 + std::uint64_t(digit);
                    ++size_digits_;
                } else if (size_digits_ == 0) {
                    return stop(Status::invalid);
                } else if (c == ';' || c == ' ' || c == '\t') {
                    state_ = State::extension;
                } else if (c == '\r') {
                    state_ = State::size_lf;
                } else {
                    return stop(Status::invalid);
                }
                break;
            }
            case State::extension:
                if (c == '\r') state_ = State::size_lf;
                else if (c == '\n') return stop(Status::invalid);
                break;
            case State::size_lf:
                if (c != '\n') return stop(Status::invalid);
                if (size_ == 0) {
                    state_ = State::trailer_start;
                } else {
                    state_ = State::data;
                    remaining_ = size_;
                }
                size_ = 0;
                size_digits_ = 0;
                break;
            case State::data_cr:
                if (c != '\r') return stop(Status::invalid);
                state_ = State::data_lf;
                break;
            case State::data_lf:
                if (c != '\n') return stop(Status::invalid);
                state_ = State::size;
                break;
            case State::trailer_start:
                if (c == '\r') state_ = State::final_lf;
                else if (c == '\n') return stop(Status::invalid);
                else state_ = State::trailer;
                break;
            case State::trailer:
                if (c == '\r') state_ = State::trailer_lf;
                else if (c == '\n') return stop(Status::invalid);
                break;
            case State::trailer_lf:
                if (c != '\n') return stop(Status::invalid);
                state_ = State::trailer_start;
                break;
            case State::final_lf:
                if (c != '\n') return stop(Status::invalid);
                return stop(Status::done);
            case State::data:
                break;  // handled above
            }
        }
        return Step{Status::more, i};
    }

    std::uint64_t bytes() const { return total_; }  // of the body so far, as sent

private:
    enum class State { size, extension, size_lf, data, data_cr, data_lf, trailer_start, trailer, trailer_lf, final_lf };
    static int hex_digit(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    std::uint64_t max_bytes_;
    State state_ = State::size;
    Status status_ = Status::more;
    std::uint64_t size_ = 0;
    int size_digits_ = 0;
    std::uint64_t remaining_ = 0;
    std::uint64_t total_ = 0;
};

// Where a request's body ends, fed the bytes after its header as they arrive.
class BodyScanner {
public:
    using Status = ChunkedScanner::Status;
    using Step = ChunkedScanner::Step;

    BodyScanner() = default;
    BodyScanner(BodyFraming framing, std::uint64_t max_chunked_bytes) : framing_(framing), chunked_(max_chunked_bytes) {}

    Step feed(std::string_view piece) {
        switch (framing_.kind) {
        case BodyFraming::Kind::none:
            return Step{Status::done, 0};
        case BodyFraming::Kind::length: {
            const std::size_t n = std::size_t(std::min<std::uint64_t>(framing_.length - seen_, piece.size()));
            seen_ += n;
            return Step{seen_ == framing_.length ? Status::done : Status::more, n};
        }
        case BodyFraming::Kind::chunked:
            return chunked_.feed(piece);
        case BodyFraming::Kind::until_close:
            return Step{Status::more, piece.size()};
        }
        return Step{Status::invalid, 0};
    }

    // Whether a body of this framing is complete before any of it arrived (none, or length 0).
    bool empty() const {
        return framing_.kind == BodyFraming::Kind::none ||
               (framing_.kind == BodyFraming::Kind::length && framing_.length == 0);
    }

private:
    BodyFraming framing_;
    ChunkedScanner chunked_;
    std::uint64_t seen_ = 0;
};

// The status line and header fields of a response from the server behind the gate.
struct ResponseHead {
    std::size_t size = 0;  // through the blank line
    std::string status_line;  // without CRLF
    int status = 0;
    std::vector<Field> fields;
};

struct ResponseHeadParse {
    enum class State { incomplete, complete, invalid } state = State::incomplete;
    ResponseHead head;
};

inline ResponseHeadParse parse_response_head(std::string_view data, std::size_t max_bytes) {
    using State = ResponseHeadParse::State;
    ResponseHeadParse out;
    const std::size_t end = data.find("\r\n\r\n");
    if (end == std::string_view::npos) {
        if (data.size() > max_bytes) out.state = State::invalid;
        return out;
    }
    ResponseHead& head = out.head;
    head.size = end + 4;
    const std::size_t line_end = data.find("\r\n");
    head.status_line = std::string(data.substr(0, line_end));
    // HTTP/1.x SP 3DIGIT [SP reason]
    if (head.status_line.size() < 12 || head.status_line.compare(0, 7, "HTTP/1.") != 0 || head.status_line[8] != ' ') {
        out.state = State::invalid;
        return out;
    }
    const auto status = detail::parse_decimal(std::string_view(head.status_line).substr(9, 3));
    if (!status || *status < 100) {
        out.state = State::invalid;
        return out;
    }
    head.status = int(*status);
    if (!detail::parse_fields(data.substr(line_end + 2, end + 2 - (line_end + 2)), head.fields).empty()) {
        out.state = State::invalid;
        return out;
    }
    out.state = State::complete;
    return out;
}

// How the body of `head`, the reply to a `request_method` request, is delimited; nullopt when
// its fields contradict each other.
inline std::optional<BodyFraming> response_body(const ResponseHead& head, std::string_view request_method) {
    if (request_method == "HEAD" || head.status < 200 || head.status == 204 || head.status == 304)
        return BodyFraming{BodyFraming::Kind::none, 0};
    std::optional<std::uint64_t> length;
    bool chunked = false;
    for (const Field& f : head.fields) {
        if (detail::iequals(f.name, "Transfer-Encoding")) {
            // Chunked must be the last coding; anything else is read until the connection closes.
            const std::size_t comma = f.value.rfind(',');
            chunked = detail::iequals(detail::trim(comma == std::string::npos ? std::string_view(f.value)
                                                                                : std::string_view(f.value).substr(comma + 1)),
                                      "chunked");
            if (!chunked) return BodyFraming{BodyFraming::Kind::until_close, 0};
        } else if (detail::iequals(f.name, "Content-Length")) {
            const auto n = detail::parse_decimal(f.value);
            if (!n || (length && *length != *n)) return std::nullopt;
            length = n;
        }
    }
    if (chunked) return BodyFraming{BodyFraming::Kind::chunked, 0};
    if (length) return BodyFraming{BodyFraming::Kind::length, *length};
    return BodyFraming{BodyFraming::Kind::until_close, 0};
}

// The header the client gets for `head`: as the server wrote it, with the gate's own say on
// the connection in place of the server's (which always closes: see forwarded_head).
// `keep_alive_seconds` > 0 keeps the connection open for that long for the next request.
inline std::string client_response_head(const ResponseHead& head, int keep_alive_seconds, int requests_left) {
    std::string out = head.status_line + "\r\n";
    for (const Field& f : head.fields) {
        if (detail::iequals(f.name, "Connection") || detail::iequals(f.name, "Keep-Alive")) continue;
        out += f.name;
        out += ": ";
        out += f.value;
        out += "\r\n";
    }
    if (keep_alive_seconds > 0)
        out += "Connection: keep-alive\r\nKeep-Alive: timeout=" + std::to_string(keep_alive_seconds) +
               ", max=" + std::to_string(requests_left) + "\r\n\r\n";
    else out += "Connection: close\r\n\r\n";
    return out;
}

inline const char* reason_phrase(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

// A whole response the gate writes itself (always closing the connection).
// `extra_fields`: more header lines, each ending in CRLF.
inline std::string gate_response(int status, std::string_view content_type, std::string_view body,
                                 std::string_view extra_fields = {}) {
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
    out += extra_fields;
    out += "Content-Type: ";
    out += content_type;
    out += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    out += body;
    return out;
}

// ---- header values the server checks before routing (routes.hpp) --------------------------

// Whether a Content-Type value says JSON: application/json, any case, parameters allowed
// ("application/json; charset=utf-8").
inline bool is_json_content_type(std::string_view value) {
    return detail::iequals(detail::trim(value.substr(0, value.find(';'))), "application/json");
}

// The host name of a Host value, lowercased, without its port: "LocalHost:8080" -> "localhost",
// "[::1]:8080" -> "[::1]".
inline std::string host_name_of(std::string_view host) {
    const std::size_t close = host.find(']');
    std::string name(!host.empty() && host.front() == '[' ? host.substr(0, close == std::string_view::npos ? close : close + 1)
                                                          : host.substr(0, host.find(':')));
    for (char& c : name) c = detail::lower(c);
    return name;
}

// Whether a listening address (--host) is a loopback one: localhost, 127.0.0.0/8 or ::1.
inline bool is_loopback_host(std::string_view address) {
    return detail::iequals(address, "localhost") || address == "::1" || address == "[::1]" || address.starts_with("127.");
}

}  // namespace smol_server::http
