// smol-cli end to end: runs the built binary (SMOL_BIN_DIR) against the fixture files.

#include <doctest/doctest.h>

#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "smol/generate/engine.hpp"
#include "smol/generate/session.hpp"

// The cases in a namespace of their own: the file shares a unity build with its group
// (tests/CMakeLists.txt).
namespace test_cli {

namespace fs = std::filesystem;

namespace {

const fs::path kData = SMOL_TEST_DATA_DIR;
const fs::path kBin = SMOL_BIN_DIR;
const fs::path kFloatModel = kData / "tiny-f32" / "smollm3-tiny-f32.gguf";
const fs::path kVocab = kData / "vocab" / "smollm3-vocab.gguf";

std::string quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string cli() {
    const fs::path path = kBin / "smol-cli";
    REQUIRE_MESSAGE(fs::exists(path), "smol-cli not found at ", path.string(),
                    ": build the smol-cli target before running this test (cmake --build <build> --target smol-cli)");
    return quote(path.string());
}

struct Run {
    std::string out;
    int status = -1;
};

// Runs a shell command line and returns its standard output and exit status.
Run run(const std::string& command) {
    Run r;
    std::FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE_MESSAGE(pipe != nullptr, "popen failed for: ", command);
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.out.append(buffer, n);
    const int raw = ::pclose(pipe);
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    return r;
}

// A scratch directory for the files one test passes to the CLI.
struct TempDir {
    fs::path path;
    TempDir() {
        static std::atomic<int> counter{0};
        path = fs::temp_directory_path() / ("smol-test-cli-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string write(const std::string& name, const std::string& bytes) const {
        const fs::path file = path / name;
        std::ofstream out(file, std::ios::binary);
        out << bytes;
        return file.string();
    }
};

std::size_t count(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
    return n;
}

}  // namespace

TEST_CASE("cli: one-shot greedy output is deterministic and is the library's answer") {
    const std::string command = cli() + " -m " + quote(kFloatModel.string()) +
                                " -p 'Tell me a story' --temp 0 -n 24 --no-think --date '21 November 2026' -t 1 2>/dev/null";
    const Run first = run(command);
    const Run second = run(command);
    REQUIRE(first.status == 0);
    REQUIRE(second.status == 0);
    CHECK(first.out == second.out);

    smol::Engine engine(kFloatModel);
    smol::ChatSession session(engine, 0);
    smol::ChatOptions options;
    options.date = "21 November 2026";
    options.enable_thinking = false;
    session.set_template_options(options);
    smol::GenerationParams params;
    params.sampling.temperature = 0.0f;
    params.max_tokens = 24;
    const smol::GenerationResult expected = session.send("Tell me a story", params);
    REQUIRE_FALSE(expected.answer.empty());
    const std::string line_end = expected.answer.back() == '\n' ? "" : "\n";
    CHECK(first.out == expected.answer + line_end);
}

TEST_CASE("cli: --grammar and --grammar-file make even the random-weight model answer in the grammar") {
    const std::string base = cli() + " -m " + quote(kFloatModel.string()) + " -p 'A cat as JSON' --temp 1 -t 1 ";
    for (const int seed : {1, 2, 3}) {
        const Run json_reply = run(base + "--grammar json -n 24 -s " + std::to_string(seed) + " 2>/dev/null");
        REQUIRE(json_reply.status == 0);
        CAPTURE(json_reply.out);
        CHECK(nlohmann::json::parse(json_reply.out, nullptr, false).is_object());
    }
    TempDir dir;
    const std::string file = dir.write("answer.gbnf", "# yes or no\nroot ::= (\"yes\" | \"no\") \"!\"\n");
    const Run answer = run(base + "--grammar-file " + quote(file) + " -n 8 2>/dev/null");
    REQUIRE(answer.status == 0);
    CHECK((answer.out == "yes!\n" || answer.out == "no!\n"));

    const std::string schema = dir.write("schema.json", R"({"type": "object", "required": ["n"], "additionalProperties": false,
        "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 9}}})");
    for (const int seed : {1, 2}) {
        const Run typed = run(base + "--json-schema " + quote(schema) + " -n 30 -s " + std::to_string(seed) + " 2>/dev/null");
        REQUIRE(typed.status == 0);
        CAPTURE(typed.out);
        const auto value = nlohmann::json::parse(typed.out, nullptr, false);
        REQUIRE(value.is_object());
        CHECK(value.size() == 1);
        CHECK(value["n"].get<int>() >= 3);
        CHECK(value["n"].get<int>() <= 9);
    }
    const std::string unsupported = dir.write("pattern.json", R"({"type": "string", "pattern": "^(?<=a)b"})");  // a lookbehind: no grammar holds it
    const Run refused = run(base + "--json-schema " + quote(unsupported) + " 2>&1");
    CHECK(refused.status != 0);
    CHECK(refused.out.find("lookahead or lookbehind") != std::string::npos);

    const Run bad = run(base + "--grammar 'root ::= [a' 2>&1");
    CHECK(bad.status != 0);
    CHECK(bad.out.find("expected a closing ']'") != std::string::npos);
    CHECK(run(base + "--reasoning-budget 0 --think 2>&1").status == 2);
    CHECK(run(base + "--reasoning-budget -2 2>&1").status == 2);
    CHECK(run(base + "--grammar json --grammar-file " + quote(file) + " 2>&1").status == 2);
}

TEST_CASE("cli: -f reads the prompt file as raw bytes, same as -p") {
    TempDir dir;
    const std::string file = dir.write("prompt.txt", "Tell me a story");
    const std::string base = cli() + " -m " + quote(kFloatModel.string()) + " --temp 0 -n 8 --no-think --date '21 November 2026' ";
    const Run from_file = run(base + "-f " + quote(file) + " 2>/dev/null");
    const Run from_flag = run(base + "-p 'Tell me a story' 2>/dev/null");
    REQUIRE(from_file.status == 0);
    CHECK(from_file.out == from_flag.out);
}

TEST_CASE("cli: --tokenize reproduces the reference tokenizations") {
    std::ifstream in(kData / "vocab" / "tokenize.jsonl");
    REQUIRE(in.good());
    std::vector<nlohmann::json> cases;
    int line_number = 0;
    for (std::string line; std::getline(in, line); ++line_number) {
        if (line.empty()) continue;
        nlohmann::json c = nlohmann::json::parse(line);
        const std::string text = c["text"];
        // The cases with chat-template special tokens, and two of every 40 others (each run loads
        // the 128K vocabulary, so a handful keeps the test quick).
        const bool special = text.find("<|im_") != std::string::npos || text.find("<think>") != std::string::npos ||
                             text.find("<|end_of_text|>") != std::string::npos;
        if (special || line_number % 40 == 0 || line_number % 40 == 21) cases.push_back(std::move(c));
    }
    REQUIRE(cases.size() >= 10);
    TempDir dir;
    int checked_special = 0, checked_plain = 0;
    for (const auto& c : cases) {
        const std::string text = c["text"];
        const bool parse_special = c["parse_special"];
        CAPTURE(text);
        CAPTURE(parse_special);
        // Through a file, so every byte arrives unchanged whatever the shell would do.
        const std::string file = dir.write("text.bin", text);
        const Run r = run(cli() + " -m " + quote(kVocab.string()) + " --tokenize -f " + quote(file) +
                          (parse_special ? "" : " --no-parse-special"));
        REQUIRE(r.status == 0);
        REQUIRE_FALSE(r.out.empty());
        CHECK(r.out.back() == '\n');
        CHECK(r.out.find('\n') == r.out.size() - 1);  // one line
        CHECK(nlohmann::json::parse(r.out) == c["ids"]);
        (parse_special ? checked_special : checked_plain)++;
    }
    CHECK(checked_special >= 5);
    CHECK(checked_plain >= 5);

    // -p works the same way.
    const Run r = run(cli() + " -m " + quote(kVocab.string()) + " --tokenize -p '<|im_start|>user'");
    REQUIRE(r.status == 0);
    CHECK(nlohmann::json::parse(r.out) == nlohmann::json::array({128011, 882}));
}

TEST_CASE("cli: --print-prompt reproduces the rendered chat template cases") {
    std::ifstream in(kData / "chat" / "cases.json");
    REQUIRE(in.good());
    const nlohmann::ordered_json cases = nlohmann::ordered_json::parse(in);  // ordered: tool keys keep their order
    REQUIRE(cases.size() >= 10);
    TempDir dir;
    int with_tools = 0;
    for (const auto& c : cases) {
        CAPTURE(c["name"].get<std::string>());
        std::string command = cli() + " -m " + quote(kVocab.string()) + " --print-prompt --messages " +
                              quote(dir.write("messages.json", c["messages"].dump()));
        command += " --date " + quote(c["date"].get<std::string>());
        if (c.contains("enable_thinking")) command += c["enable_thinking"].get<bool>() ? " --think" : " --no-think";
        if (!c["add_generation_prompt"].get<bool>()) command += " --no-generation-prompt";
        if (c.contains("xml_tools")) {
            command += " --xml-tools " + quote(dir.write("xml.json", c["xml_tools"].dump()));
            ++with_tools;
        }
        if (c.contains("python_tools")) {
            command += " --python-tools " + quote(dir.write("python.json", c["python_tools"].dump()));
            ++with_tools;
        }
        const Run r = run(command);
        REQUIRE(r.status == 0);
        CHECK(r.out == c["expected"].get<std::string>());
    }
    CHECK(with_tools >= 3);
}

TEST_CASE("cli: interactive mode through a pipe keeps the conversation, handles /clear and /exit") {
    TempDir dir;
    const std::string input = dir.write("input.txt", "Hello\n/clear\nHello\nHello\n/exit\nNever read\n");
    const Run r = run(cli() + " -m " + quote(kFloatModel.string()) +
                      " -i --temp 0 -n 12 --no-think --date '21 November 2026' -t 1 < " + quote(input) + " 2>/dev/null");
    REQUIRE(r.status == 0);
    CHECK(count(r.out, "[ conversation cleared ]") == 1);
    // Three replies, each followed by its timing line; nothing after /exit.
    const std::string timing = "[ Prompt: ";
    REQUIRE(count(r.out, timing) == 3);
    CHECK(count(r.out, " t/s | Generation: ") == 3);
    std::vector<std::string> replies;
    std::size_t from = 0;
    for (int i = 0; i < 3; ++i) {
        const std::size_t prompt = r.out.find("> \n", from);
        const std::size_t line = r.out.find(timing, from);
        REQUIRE(prompt != std::string::npos);
        REQUIRE(line != std::string::npos);
        // The reply of this turn starts after the last prompt marker before its timing line.
        const std::size_t start = r.out.rfind("> \n", line) + 3;
        replies.push_back(r.out.substr(start, line - start));
        from = r.out.find('\n', line) + 1;
    }
    CHECK_FALSE(replies[0].empty());
    CHECK(replies[1] == replies[0]);  // after /clear the same message gets the same greedy reply
    CHECK(replies[2] != replies[1]);  // without /clear the conversation so far changes the reply
}

TEST_CASE("cli: a chat past the context drops its oldest turns, says so once, and keeps the system prompt") {
    TempDir dir;
    std::string lines;
    for (int i = 0; i < 10; ++i) lines += "Message " + std::to_string(i) + " about the weather today.\n";
    const std::string input = dir.write("input.txt", lines + "/save " + (dir.path / "after.json").string() + "\n");
    const Run r = run(cli() + " -m " + quote(kFloatModel.string()) + " -c 200 -sys 'Be terse./system_override'" +
                      " -i --temp 0 -n 16 --no-think -t 1 < " + quote(input) + " 2>/dev/null");
    REQUIRE(r.status == 0);
    CHECK(count(r.out, "[ Prompt: ") == 10);  // every message was answered
    CHECK(count(r.out, "[ context full: the oldest turns were dropped to make room; the system prompt stays ]") == 1);
    CHECK(r.out.find("[ error") == std::string::npos);
    std::ifstream saved(dir.path / "after.json");
    const auto messages = nlohmann::json::parse(saved);
    REQUIRE(messages.size() >= 3);
    CHECK(messages.size() < 21);
    CHECK(messages[0]["role"] == "system");
    CHECK(messages[0]["content"] == "Be terse./system_override");
    CHECK(messages[messages.size() - 2]["content"] == "Message 9 about the weather today.");
}

TEST_CASE("cli: bad flags and missing models exit non-zero with the usage") {
    const std::string model = " -m " + quote(kFloatModel.string());
    const std::vector<std::string> bad = {
        " --no-such-flag",
        " -p hi",                                    // no model
        " -m /nonexistent/model.gguf -p hi",         // missing model file
        model + " -p hi --temp warm",                // not a number
        model + " -p hi -n",                         // missing value
        model + " -p hi --top-p 0",                  // out of range
        model + " -p hi -f /dev/null",               // -p and -f together
        model + " --tokenize",                       // nothing to tokenize
        model + " -p hi --rope-scaling linear",      // not a scaling smol has
        model + " -p hi --yarn-orig-ctx 0",          // not a context
        " --print-prompt",                           // no --messages
    };
    for (const std::string& args : bad) {
        CAPTURE(args);
        // An empty cache: "no model" must not find a default model a developer downloaded.
        const Run r = run("SMOL_CACHE=/nonexistent-smol-cache HF_HUB_OFFLINE=1 " + cli() + args + " 2>&1 </dev/null");
        CHECK(r.status == 2);
        CHECK(r.out.find("usage: smol-cli") != std::string::npos);
    }
    const Run help = run(cli() + " --help");
    CHECK(help.status == 0);
    CHECK(help.out.find("usage: smol-cli") != std::string::npos);

    // A file that is not a model: an error naming it, non-zero.
    TempDir dir;
    const std::string junk = dir.write("junk.gguf", "not a gguf file");
    const Run r = run(cli() + " -m " + quote(junk) + " -p hi 2>&1");
    CHECK(r.status != 0);
    CHECK(r.out.find("junk.gguf") != std::string::npos);
}

TEST_CASE("cli: the RoPE scaling flags turn YaRN on, say so, and change the answer") {
    const std::string base = cli() + " -m " + quote(kFloatModel.string()) + " -p 'Tell me a story' --temp 0 -n 12 --no-think -t 1";
    const std::string flags = " --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 16";
    const Run plain = run(base + " 2>/dev/null");
    const Run yarn = run(base + flags + " 2>/dev/null");
    const Run plain_log = run(base + " 2>&1 >/dev/null");
    const Run yarn_log = run(base + flags + " 2>&1 >/dev/null");
    REQUIRE(plain.status == 0);
    REQUIRE(yarn.status == 0);
    REQUIRE_FALSE(plain.out.empty());
    CHECK(plain_log.out.find("RoPE scaling") == std::string::npos);
    CHECK(yarn_log.out.find("smol-cli: RoPE scaling: YaRN, factor 4 over 16 tokens\n") != std::string::npos);
    // The prompt runs past the 16-token original context, so the rotation, and the answer, differ.
    CHECK(plain.out != yarn.out);
}

TEST_CASE("cli: without -m the default model is taken from the cache, with no network") {
    // The cache layout is <cache>/<owner>/<repo>/<file>; the tiny model stands in for the 3B file.
    const fs::path cache = fs::temp_directory_path() / ("smol-cli-cache-" + std::to_string(::getpid()));
    const fs::path folder = cache / "ggml-org" / "SmolLM3-3B-GGUF";
    fs::create_directories(folder);
    fs::copy_file(kFloatModel, folder / "SmolLM3-3B-Q4_K_M.gguf", fs::copy_options::overwrite_existing);
    const std::string env = "SMOL_CACHE=" + quote(cache.string()) + " HF_HUB_OFFLINE=1 SMOL_HF_ENDPOINT=http://127.0.0.1:9 ";
    const std::string args = " -p 'Tell me a story' --temp 0 -n 8 --no-think --date '21 November 2026' -t 1 2>/dev/null";
    const Run by_default = run(env + cli() + args);
    const Run explicit_model = run(cli() + " -m " + quote(kFloatModel.string()) + args);
    CHECK(by_default.status == 0);
    CHECK(by_default.out == explicit_model.out);
    const Run by_hf = run(env + cli() + " -hf ggml-org/SmolLM3-3B-GGUF:Q4_K_M" + args);
    CHECK(by_hf.status == 0);
    CHECK(by_hf.out == explicit_model.out);

    fs::remove_all(cache);
    const Run missing = run(env + cli() + args + " 2>&1");
    CHECK(missing.status == 2);
    CHECK(missing.out.find("-hf ggml-org/SmolLM3-3B-GGUF:Q4_K_M") != std::string::npos);
}

namespace {

nlohmann::ordered_json read_json_file(const std::string& path) {
    std::ifstream in(path);
    REQUIRE_MESSAGE(in.good(), "not written: ", path);
    return nlohmann::ordered_json::parse(in);
}

// The chat's flags for the tests below: a fixed seed, so sampled replies are reproducible.
std::string sampled_chat() {
    return cli() + " -m " + quote(kFloatModel.string()) + " --temp 1 -s 3 -n 8 --no-think --date '21 November 2026' -t 1";
}

}  // namespace

TEST_CASE("cli: \\ continues a message; /save, /regen and /load keep the conversation --messages reads") {
    TempDir dir;
    const std::string s1 = (dir.path / "s1.json").string(), s2 = (dir.path / "s2.json").string(),
                      s3 = (dir.path / "s3.json").string(), s4 = (dir.path / "s4.json").string();
    const std::string input = dir.write("input.txt", "Hello \\\nworld\n/save " + s1 + "\n/regen\n/save " + s2 +
                                                         "\nNext\n/save " + s3 + "\n/load " + s1 + "\nContinue\n/save " +
                                                         s4 + "\n/exit\n");
    const Run r = run(sampled_chat() + " -i < " + quote(input) + " 2>/dev/null");
    REQUIRE(r.status == 0);
    CAPTURE(r.out);
    CHECK(count(r.out, "[ Prompt: ") == 4);  // the first message, /regen, Next, Continue
    CHECK(count(r.out, "[ saved ") == 4);
    CHECK(count(r.out, "[ loaded 2 messages from ") == 1);

    // The two lines arrive as one message, joined with a newline.
    const nlohmann::ordered_json first = read_json_file(s1);
    REQUIRE(first.size() == 2);
    CHECK(first[0] == nlohmann::ordered_json{{"role", "user"}, {"content", "Hello \nworld"}});
    CHECK(first[1]["role"] == "assistant");

    // /regen replaced the reply with a new sample and added no turn.
    const nlohmann::ordered_json regenerated = read_json_file(s2);
    REQUIRE(regenerated.size() == 2);
    CHECK(regenerated[0] == first[0]);
    CHECK(regenerated[1]["role"] == "assistant");
    CHECK(regenerated[1]["content"] != first[1]["content"]);

    const nlohmann::ordered_json next = read_json_file(s3);
    REQUIRE(next.size() == 4);
    CHECK(next[1] == regenerated[1]);
    CHECK(next[2]["content"] == "Next");

    // After /load the chat went on from the loaded conversation, not the one before it...
    const nlohmann::ordered_json continued = read_json_file(s4);
    REQUIRE(continued.size() == 4);
    CHECK(continued[0] == first[0]);
    CHECK(continued[1] == first[1]);
    CHECK(continued[2] == nlohmann::ordered_json{{"role", "user"}, {"content", "Continue"}});
    // ...and replied as a fresh run given the saved file with --messages does.
    const Run one_shot = run(sampled_chat() + " --messages " + quote(s1) + " -p Continue 2>/dev/null");
    REQUIRE(one_shot.status == 0);
    const std::string reply = continued[3]["content"];
    REQUIRE_FALSE(reply.empty());  // the seed is one where the random model says something
    CHECK(one_shot.out == reply + (reply.back() == '\n' ? "" : "\n"));

    // The saved file is what --print-prompt --messages reads: both turns are in the prompt.
    const Run prompt = run(cli() + " --print-prompt --no-think --date '21 November 2026' --messages " + quote(s1));
    REQUIRE(prompt.status == 0);
    CHECK(prompt.out.find("<|im_start|>user\nHello \nworld<|im_end|>\n<|im_start|>assistant\n") != std::string::npos);
    CHECK(count(prompt.out, "<|im_start|>user\n") == 1);
    CHECK(count(prompt.out, "<|im_start|>assistant\n") == 2);  // the reply, then the generation prompt
}

TEST_CASE("cli: bad /load files, a /regen with no reply and unknown commands are errors; the chat goes on") {
    TempDir dir;
    const std::string not_json = dir.write("not.json", "[{\"role\": \"user\",");
    const std::string object = dir.write("object.json", R"({"role": "user", "content": "Hi"})");
    const std::string no_content = dir.write("no_content.json", R"([{"role": "user"}])");
    const std::string kept = (dir.path / "kept.json").string();
    const std::string input = dir.write("input.txt", "/regen\nHi\n/load " + (dir.path / "missing.json").string() +
                                                         "\n/load " + not_json + "\n/load " + object + "\n/load " +
                                                         no_content + "\n/load\n/frobnicate\n/help\n/save " + kept +
                                                         "\nAgain\n");
    const Run r = run(sampled_chat() + " -i < " + quote(input) + " 2>/dev/null");
    REQUIRE(r.status == 0);
    CAPTURE(r.out);
    CHECK(r.out.find("[ error: regenerate: expected the conversation to end with an assistant reply, found no messages ]") !=
          std::string::npos);
    CHECK(r.out.find("[ error: /load: cannot open '" + (dir.path / "missing.json").string() + "': No such file") !=
          std::string::npos);
    CHECK(r.out.find("[ error: /load: '" + not_json + "' is not valid JSON: ") != std::string::npos);
    CHECK(r.out.find("[ error: /load: '" + object + "': chat messages: expected an array of {role, content} messages, found object ]") !=
          std::string::npos);
    CHECK(r.out.find("[ error: /load: '" + no_content + "': chat message 0 (user): missing \"content\" ]") != std::string::npos);
    CHECK(r.out.find("[ /load needs a file name: /load FILE ]") != std::string::npos);
    CHECK(r.out.find("[ unknown command /frobnicate; /help lists the commands ]") != std::string::npos);
    for (const char* command : {"/regen", "/save FILE", "/load FILE", "/tool RESULT", "/clear", "/exit"})
        CHECK(r.out.find(std::string("\n  ") + command + " ") != std::string::npos);

    // None of it touched the conversation, and both messages were answered.
    CHECK(count(r.out, "[ Prompt: ") == 2);
    const nlohmann::ordered_json saved = read_json_file(kept);
    REQUIRE(saved.size() == 2);
    CHECK(saved[0]["content"] == "Hi");
}

TEST_CASE("cli: --tools puts the tools in the prompt; calls are shown and /tool answers them") {
    TempDir dir;
    const char* function = R"({"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}})";
    const std::string tools = dir.write("tools.json", std::string(R"([{"type": "function", "function": )") + function + "}]");
    const std::string messages = dir.write("messages.json", R"([{"role": "user", "content": "Weather in Paris?"}])");

    // The prompt lists the function objects, exactly as the template's own --xml-tools does.
    const std::string print = cli() + " --print-prompt --date '21 November 2026' --messages " + quote(messages);
    const Run with_tools = run(print + " --tools " + quote(tools));
    REQUIRE(with_tools.status == 0);
    CHECK(with_tools.out.find("### Tools") != std::string::npos);
    CHECK(with_tools.out.find("<tools>\n{'name': 'get_weather', 'description': 'Get the weather', 'parameters': "
                              "{'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}}\n</tools>") !=
          std::string::npos);
    const Run as_xml_tools = run(print + " --xml-tools " + quote(dir.write("functions.json", std::string("[") + function + "]")));
    REQUIRE(as_xml_tools.status == 0);
    CHECK(with_tools.out == as_xml_tools.out);
    CHECK(run(print).out.find("### Tools") == std::string::npos);

    // A grammar makes the random-weight model call the tool; the call is shown, not its tags.
    const std::string grammar = dir.write("call.gbnf",
        R"(root ::= "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>")" "\n");
    const std::string base = sampled_chat() + " -n 40 --tools " + quote(tools) + " --grammar-file " + quote(grammar);
    const Run call = run(base + " -p 'Weather in Paris?' 2>/dev/null");
    REQUIRE(call.status == 0);
    CHECK(call.out == "[ tool call: get_weather {\"city\":\"Paris\"} ]\n");

    const std::string saved = (dir.path / "saved.json").string();
    const std::string input = dir.write("input.txt", "Weather in Paris?\n/tool {\"temp_c\": 21}\n/tool\n/save " + saved + "\n");
    const Run chat = run(base + " -i < " + quote(input) + " 2>/dev/null");
    REQUIRE(chat.status == 0);
    CAPTURE(chat.out);
    CHECK(count(chat.out, "[ tool call: get_weather {\"city\":\"Paris\"} ]\n[ answer with /tool RESULT ]") == 2);
    CHECK(chat.out.find("[ /tool needs the result: /tool RESULT ]") != std::string::npos);
    const nlohmann::ordered_json conversation = read_json_file(saved);
    REQUIRE(conversation.size() == 4);
    CHECK(conversation[1]["role"] == "assistant");
    CHECK(conversation[1]["tool_calls"][0]["function"]["name"] == "get_weather");
    CHECK(conversation[1]["tool_calls"][0]["function"]["arguments"] == "{\"city\":\"Paris\"}");
    CHECK(conversation[2] == nlohmann::ordered_json{{"role", "tool"}, {"content", "{\"temp_c\": 21}"}});
    CHECK(conversation[3]["role"] == "assistant");

    // A tools file that cannot be read or has the wrong shape stops before the model loads, like
    // the other file flags (exit 1); --tools beside --xml-tools is a usage error (exit 2).
    const Run missing = run(base + " -p hi --tools " + quote((dir.path / "missing.json").string()) + " 2>&1");
    CHECK(missing.status == 1);
    CHECK(missing.out.find("smol-cli: error: --tools: cannot open '") != std::string::npos);
    CHECK(missing.out.find("loaded in") == std::string::npos);
    const Run wrong = run(print + " --tools " + quote(dir.write("functions.json", std::string("[") + function + "]")) + " 2>&1");
    CHECK(wrong.status == 1);
    CHECK(wrong.out.find("tools[0]: expected \"type\": \"function\", found no \"type\"") != std::string::npos);
    const Run both = run(print + " --tools " + quote(tools) + " --xml-tools " + quote(tools) + " 2>&1");
    CHECK(both.status == 2);
    CHECK(both.out.find("give --tools (OpenAI's shape) or --xml-tools (the template's), not both") != std::string::npos);
}

TEST_CASE("cli: --prompt-cache writes the cache after the reply and reads it back; the output is the same") {
    const TempDir dir;
    const std::string cache = (dir.path / "prompt.cache").string();
    const std::string command = cli() + " -m " + quote(kFloatModel.string()) +
                                " -p 'Tell me a story' --temp 0 -n 12 --no-think --date '21 November 2026' -t 1"
                                " --prompt-cache " + quote(cache);
    const Run first = run(command + " 2>" + quote((dir.path / "first.err").string()));
    REQUIRE(first.status == 0);
    REQUIRE(fs::exists(cache));
    const auto text = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string written = text(cache);
    CHECK(text(dir.path / "first.err").find("written to") != std::string::npos);
    CHECK(text(dir.path / "first.err").find("read from") == std::string::npos);

    const Run second = run(command + " 2>" + quote((dir.path / "second.err").string()));
    REQUIRE(second.status == 0);
    CHECK(second.out == first.out);
    CHECK(text(dir.path / "second.err").find("tokens read from") != std::string::npos);
    CHECK(text(cache) == written);  // the same conversation, the same bits

    // Another model's cache, or a file that is no cache, is an error that says so.
    const Run other = run(cli() + " -m " + quote((kData / "tiny" / "smollm3-tiny-Q4_K_M.gguf").string()) +
                          " -p 'Hi' -n 2 --prompt-cache " + quote(cache) + " 2>&1");
    CHECK(other.status == 1);
    CHECK(other.out.find("another model") != std::string::npos);
    const Run junk = run(cli() + " -m " + quote(kFloatModel.string()) + " -p 'Hi' -n 2 --prompt-cache " +
                         quote(dir.write("junk", "not a cache")) + " 2>&1");
    CHECK(junk.status == 1);
    CHECK(junk.out.find("not a smol KV cache file") != std::string::npos);
}

}  // namespace test_cli
