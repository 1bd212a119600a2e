// smol-cli: chat with a SmolLM3 GGUF in the terminal, answer one prompt and exit, or (with
// only a vocabulary) tokenize text and print the exact prompt the model would see.
// Flags follow llama-cli's names where it has them.
//
//   smol-cli -m model.gguf                       interactive chat (on a terminal)
//   smol-cli -m model.gguf -p "Hi" -n 256        one answer, then exit
//   smol-cli -m vocab.gguf --tokenize -p "Hi"    token ids as a JSON array
//   smol-cli --print-prompt --messages chat.json the rendered chat template
//
// chat_input.hpp reads the chat's commands and multi-line messages, line_reader.hpp the
// terminal (libedit when built with it), ../program_args.hpp the flags.

#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <smol/hub.hpp>

#include "chat_input.hpp"
#include "line_reader.hpp"
#include "program_args.hpp"

namespace {

using smol::args::UsageError;

constexpr const char* kUsage =
    "usage: smol-cli [-m MODEL | -hf REPO[:QUANT]] [options]\n"
    "\n"
    "Modes:\n"
    "  (default)                  interactive chat when stdin is a terminal and no -p/-f is given\n"
    "  -p, --prompt TEXT          answer TEXT and exit\n"
    "  -f, --file FILE            answer the contents of FILE and exit\n"
    "  -i, --interactive          chat even when stdin is not a terminal (e.g. driven through a pipe);\n"
    "                             with -p/-f that text is the first message\n"
    "  --messages FILE            OpenAI-style JSON array of {role, content} messages: the conversation to\n"
    "                             continue (the format /save writes), or with --print-prompt the one to render\n"
    "  --tokenize                 print the token ids of -p/-f as a JSON array and exit (no BOS is added;\n"
    "                             -m may be a vocabulary-only GGUF)\n"
    "  --no-parse-special         with --tokenize: treat control-token text such as <|im_start|> as plain text\n"
    "  --print-prompt             print the prompt the model would see for --messages and exit\n"
    "  --no-generation-prompt     with --print-prompt: leave out the assistant header at the end\n"
    "\n"
    "Model and generation:\n"
    "  -m, --model FILE           GGUF model file\n"
    "  -hf, --hf-repo REPO[:QUANT]  download the model from the Hugging Face Hub into the cache (default\n"
    "                             quant Q4_K_M), e.g. ggml-org/SmolLM3-3B-GGUF; without -m or -hf the\n"
    "                             default ggml-org/SmolLM3-3B-GGUF:Q4_K_M is used if it is cached\n"
    "  --hf-file NAME             with -hf: the file in the repository to use\n"
    "  -sys, --system-prompt TEXT system message\n"
    "  -n, --n-predict N          tokens to generate at most (-1: until the model ends its turn; default -1)\n"
    "  -c, --ctx-size N           context size in tokens (0: 4096; default 0); past the trained 65536\n"
    "                             YaRN turns on (up to 131072)\n"
    "  --rope-scaling none|yarn   RoPE frequency scaling (default: YaRN when -c is past the trained context)\n"
    "  --rope-scale F             YaRN context factor (default: context / original context)\n"
    "  --yarn-orig-ctx N          YaRN: the context the model was trained at (default: the model's)\n"
    "  -ctk, --cache-type-k T     KV cache type for keys: f16 (default), q8_0, q4_0\n"
    "  -ctv, --cache-type-v T     KV cache type for values: f16 (default), q8_0, q4_0\n"
    "  -nr, --no-repack           keep the weights as the file lays them out: slower decode, but no\n"
    "                             copy of the Q4_K matrices in memory (the output is the same)\n"
    "  -t, --threads N            CPU threads (default: OpenMP's choice)\n"
    "  -s, --seed N               sampling seed (-1: random; default -1)\n"
    "  --temp T                   temperature, 0 = greedy (default 0.6)\n"
    "  --top-k N                  top-k, 0 = off (default 40)\n"
    "  --top-p P                  top-p, 1 = off (default 0.95)\n"
    "  --min-p P                  min-p, 0 = off (default 0.05)\n"
    "  --repeat-penalty R         repeat penalty, 1 = off (default 1.0)\n"
    "  --repeat-last-n N          tokens the penalty looks back over (default 64)\n"
    "  --dry-multiplier N, --xtc-probability P, --typical P, --top-nsigma N, --mirostat N, --samplers LIST\n"
    "                             and the others listed at the end of --help: llama.cpp's samplers\n"
    "  -r, --reverse-prompt TEXT  stop before TEXT (repeatable; also --stop)\n"
    "  --think / --no-think       reasoning mode on (default) or off\n"
    "  --show-thinking            one-shot mode: print the reasoning before the answer\n"
    "  --date \"21 November 2026\"  date written into the system block (default: today)\n"
    "  --tools FILE               JSON array of OpenAI-style tools [{\"type\": \"function\", \"function\":\n"
    "                             {name, description, parameters}}]; the model's calls are shown as\n"
    "                             [ tool call: NAME ARGUMENTS ], and /tool RESULT answers them in a chat\n"
    "  --xml-tools FILE           JSON array of tool definitions (XML tool-calling section)\n"
    "  --python-tools FILE        JSON array of tool definitions (Python tool-calling section)\n"
    "  --grammar GBNF             the reply must be a sentence of this GBNF grammar (llama.cpp's notation)\n"
    "  --grammar-file FILE        the same, read from FILE; --grammar json: any JSON object\n"
    "  --json-schema FILE         the reply must be JSON valid under this JSON schema. Reasoning is off\n"
    "                             with a grammar or a schema (it holds the whole reply)\n"
    "  --spec none|ngram          speculative decoding: ngram drafts the next tokens from the context (the\n"
    "                             longest earlier match of its tail) and checks them in one forward pass;\n"
    "                             the reply is the same either way, only faster where it repeats what came\n"
    "                             before (default none)\n"
    "  --draft-max N              with --spec ngram: tokens drafted per step at most, 1..64 (default 16)\n"
    "  --draft-min N              with --spec ngram: a shorter draft is not checked (default 1)\n"
    "  -h, --help                 show this help\n"
    "\n"
    "Chat commands (/help lists them): /clear, /regen, /save FILE, /load FILE, /tool RESULT, /think,\n"
    "/no_think, /exit. A line ending in \\ continues on the next line. Ctrl-C stops a reply.\n";

struct Options {
    std::string model;
    std::string hf_repo;  // -hf
    std::string hf_file;  // --hf-file
    std::optional<std::string> prompt;
    std::optional<std::string> prompt_file;
    std::string system_prompt;
    std::string messages_file;
    std::string tools_file;  // --tools: OpenAI-style
    std::string xml_tools_file;
    std::string python_tools_file;
    std::optional<std::string> grammar;       // --grammar text
    std::optional<std::string> grammar_file;  // --grammar-file
    std::optional<std::string> json_schema_file;  // --json-schema
    std::string date;
    int n_predict = -1;
    int context = 0;
    int threads = 0;
    smol::RopeScalingRequest rope_scaling;
    smol::KvCacheTypes cache_types;
    bool repack = true;  // -nr
    smol::SamplerParams sampling;
    bool dry_breakers_given = false;  // a --dry-sequence-breaker replaced the defaults
    // --spec, --draft-max, --draft-min. On by default here: one conversation, where the draft
    // length adapts to what the text repeats and costs at most ~1% when it repeats nothing
    // (docs/speculative-decoding.md); the server leaves it to --spec or the request.
    smol::SpeculationParams speculation{.type = smol::SpeculationType::ngram};
    std::vector<std::string> stops;
    std::optional<bool> think;
    bool show_thinking = false;
    bool interactive = false;
    bool tokenize = false;
    bool parse_special = true;
    bool print_prompt = false;
    bool generation_prompt = true;
    bool help = false;
};

Options parse_args(int argc, char** argv) {
    Options o;
    smol::args::ArgReader args(argc, argv);
    while (args.next()) {
        if (read_rope_scaling_flag(args, o.rope_scaling) || read_kv_cache_type_flag(args, o.cache_types) ||
            read_repack_flag(args, o.repack) || read_speculation_flag(args, o.speculation) ||
            read_sampling_flag(args, o.sampling, o.dry_breakers_given))
            continue;
        if (args.is("-m", "--model")) o.model = args.value();
        else if (args.is("-hf", "--hf-repo")) o.hf_repo = args.value();
        else if (args.is("--hf-file")) o.hf_file = args.value();
        else if (args.is("-p", "--prompt")) o.prompt = args.value();
        else if (args.is("-f", "--file")) o.prompt_file = args.value();
        else if (args.is("-sys", "--system-prompt")) o.system_prompt = args.value();
        else if (args.is("-n", "--n-predict")) o.n_predict = args.integer<int>();
        else if (args.is("-c", "--ctx-size")) o.context = args.integer<int>(0);
        else if (args.is("-t", "--threads")) o.threads = args.integer<int>(0);
        else if (args.is("-s", "--seed")) {
            const long long seed = args.integer<long long>(-1);
            o.sampling.seed = seed == -1 ? SMOL_DEFAULT_SEED : std::uint64_t(seed);
        } else if (args.is("--temp")) o.sampling.temperature = args.number<float>();
        else if (args.is("--top-k")) o.sampling.top_k = args.integer<int>();
        else if (args.is("--top-p")) o.sampling.top_p = args.number<float>();
        else if (args.is("--min-p")) o.sampling.min_p = args.number<float>();
        else if (args.is("--repeat-penalty")) o.sampling.repeat_penalty = args.number<float>();
        else if (args.is("--repeat-last-n")) o.sampling.penalty_last_n = args.integer<int>();
        else if (args.is("-r", "--reverse-prompt") || args.is("--stop")) o.stops.push_back(args.value());
        else if (args.is("--think")) o.think = true;
        else if (args.is("--no-think")) o.think = false;
        else if (args.is("--show-thinking")) o.show_thinking = true;
        else if (args.is("-i", "--interactive")) o.interactive = true;
        else if (args.is("--tokenize")) o.tokenize = true;
        else if (args.is("--no-parse-special")) o.parse_special = false;
        else if (args.is("--print-prompt")) o.print_prompt = true;
        else if (args.is("--messages")) o.messages_file = args.value();
        else if (args.is("--no-generation-prompt")) o.generation_prompt = false;
        else if (args.is("--date")) o.date = args.value();
        else if (args.is("--tools")) o.tools_file = args.value();
        else if (args.is("--xml-tools")) o.xml_tools_file = args.value();
        else if (args.is("--python-tools")) o.python_tools_file = args.value();
        else if (args.is("--grammar")) o.grammar = args.value();
        else if (args.is("--grammar-file")) o.grammar_file = args.value();
        else if (args.is("--json-schema")) o.json_schema_file = args.value();
        else if (args.is("-h", "--help")) o.help = true;
        else args.unknown();
    }

    if (o.help) return o;
    if (o.prompt && o.prompt_file) throw UsageError("give -p or -f, not both");
    if (int(o.grammar.has_value()) + int(o.grammar_file.has_value()) + int(o.json_schema_file.has_value()) > 1)
        throw UsageError("give one of --grammar, --grammar-file and --json-schema");
    if ((o.grammar || o.grammar_file || o.json_schema_file) && o.think.value_or(false))
        throw UsageError("a grammar holds the whole reply, so it cannot be combined with --think");
    if (o.tokenize && o.print_prompt) throw UsageError("give --tokenize or --print-prompt, not both");
    if (!o.tools_file.empty() && !o.xml_tools_file.empty())
        throw UsageError("give --tools (OpenAI's shape) or --xml-tools (the template's), not both");
    if (o.print_prompt && o.messages_file.empty()) throw UsageError("--print-prompt needs --messages FILE");
    if (o.tokenize && !o.prompt && !o.prompt_file) throw UsageError("--tokenize needs the text: -p TEXT or -f FILE");
    if (!o.print_prompt && o.model.empty()) {
        // -hf downloads (with a progress bar) when needed; no flag at all takes the cached default.
        const auto hub = smol::hub::default_options();
        const auto path = smol::hub::resolve_model_source({o.model, o.hf_repo, o.hf_file}, hub);
        if (!path) throw UsageError(smol::hub::no_model_message(hub));
        o.model = path->string();
    }
    if (!o.model.empty() && !std::filesystem::is_regular_file(o.model))
        throw UsageError("model file not found: '" + o.model + "'");
    for (const auto& stop : o.stops)
        if (stop.empty()) throw UsageError("-r/--stop: a stop string cannot be empty");
    try {
        smol::Sampler check(o.sampling, 1);  // validates every sampling flag before the model loads
        o.speculation.validate();            // --draft-min against --draft-max
    } catch (const smol::Error& e) {
        throw UsageError(e.what());
    }
    return o;
}

std::string read_file(const std::string& path, const char* what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) smol::fail(what, ": cannot open '", path, "': ", std::strerror(errno));
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

nlohmann::ordered_json read_json(const std::string& path, const char* what) {
    const std::string text = read_file(path, what);
    try {
        return smol::parse_json<nlohmann::ordered_json>(text, "'" + path + "'");  // ordered: tool keys in file order
    } catch (const smol::JsonError& e) {
        smol::fail(what, ": ", e.what());
    }
}

std::string prompt_text(const Options& o) {
    if (o.prompt) return *o.prompt;
    if (o.prompt_file) return read_file(*o.prompt_file, "-f");
    return {};
}

smol::ChatOptions template_options(const Options& o) {
    smol::ChatOptions chat;
    chat.enable_thinking = o.think.value_or(!o.grammar && !o.grammar_file && !o.json_schema_file);
    chat.add_generation_prompt = o.generation_prompt;
    chat.date = o.date;
    if (!o.tools_file.empty())
        chat.xml_tools = smol::cli::functions_from_tools(read_json(o.tools_file, "--tools"), "--tools '" + o.tools_file + "'");
    if (!o.xml_tools_file.empty()) chat.xml_tools = read_json(o.xml_tools_file, "--xml-tools");
    if (!o.python_tools_file.empty()) chat.python_tools = read_json(o.python_tools_file, "--python-tools");
    return chat;
}

void write_out(std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
}

int run_tokenize(const Options& o) {
    // The vocabulary is all that is needed, so this works on vocabulary-only files too.
    const smol::gguf::File file = smol::gguf::File::open(o.model);
    const smol::text::Tokenizer tokenizer = smol::text::Tokenizer::from_gguf(file);
    const std::vector<std::int32_t> ids = tokenizer.encode(prompt_text(o), o.parse_special);
    write_out(nlohmann::json(ids).dump());
    write_out("\n");
    return 0;
}

int run_print_prompt(const Options& o) {
    if (!o.model.empty()) smol::gguf::File::open(o.model);  // a bad -m is still an error
    const nlohmann::ordered_json messages = read_json(o.messages_file, "--messages");
    write_out(smol::render_chat(messages, template_options(o)).text);  // exactly the prompt: no newline added
    return 0;
}

// --- Chat -------------------------------------------------------------------------------

// The session a Ctrl-C should stop; null while waiting for input (Ctrl-C then quits).
std::atomic<smol::ChatSession*> g_generating{nullptr};

extern "C" void on_interrupt(int) {
    if (smol::ChatSession* session = g_generating.load()) {
        session->cancel();
        return;
    }
    constexpr char newline = '\n';
    [[maybe_unused]] const auto ignored = ::write(STDOUT_FILENO, &newline, 1);
    ::_exit(130);
}

void install_interrupt_handler() {
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
}

// Streams one reply to stdout: reasoning (dimmed on a terminal) then the answer.
class ReplyPrinter {
public:
    ReplyPrinter(bool show_reasoning, bool color) : show_reasoning_(show_reasoning), color_(color) {}

    bool operator()(const smol::StreamPiece& piece) {
        if (show_reasoning_ && !piece.reasoning.empty()) {
            if (color_ && !in_reasoning_) write_out("\x1b[2m");
            in_reasoning_ = true;
            print(piece.reasoning);
        }
        if (!piece.answer.empty()) {
            end_reasoning();
            print(piece.answer);
        }
        // With tools the session parses calls out of the answer; each is shown on its own line.
        for (const smol::ToolCall& call : piece.tool_calls) {
            end_reasoning();
            if (printed_any_ && last_ != '\n') write_out("\n");
            print(smol::cli::describe_tool_call(call.name, call.arguments) + "\n");
        }
        std::fflush(stdout);
        return true;
    }

    // Closes the dim block and leaves the cursor at the start of a line.
    void finish() {
        end_reasoning();
        if (printed_any_ && last_ != '\n') write_out("\n");
        std::fflush(stdout);
    }

private:
    void print(std::string_view text) {
        write_out(text);
        printed_any_ = true;
        last_ = text.back();
    }
    void end_reasoning() {
        if (!in_reasoning_) return;
        if (color_) write_out("\x1b[0m");
        in_reasoning_ = false;
        write_out(last_ == '\n' ? "\n" : "\n\n");  // a blank line between reasoning and answer
        last_ = '\n';
    }

    bool show_reasoning_;
    bool color_;
    bool in_reasoning_ = false;
    bool printed_any_ = false;
    char last_ = '\n';
};

std::string timings_line(const smol::GenerationUsage& u) {
    char line[192];
    int n = std::snprintf(line, sizeof line, "[ Prompt: %.1f t/s | Generation: %.1f t/s", u.prompt_tokens_per_second(),
                          u.tokens_per_second());
    if (u.drafted_tokens > 0)  // speculation: how much of the draft the model took
        n += std::snprintf(line + n, sizeof line - std::size_t(n), " | Draft: %d of %d accepted (%.0f%%)",
                           u.accepted_tokens, u.drafted_tokens, 100.0 * u.accepted_tokens / u.drafted_tokens);
    std::snprintf(line + n, sizeof line - std::size_t(n), " ]");
    return line;
}

void note(std::string_view text, bool color) {
    if (color) write_out("\x1b[2m");
    write_out(text);
    if (color) write_out("\x1b[0m");
    write_out("\n");
    std::fflush(stdout);
}

// One way of producing a reply (send a message, answer a tool result, regenerate), given the
// callback that streams it.
using ReplyGenerator = std::function<smol::GenerationResult(const smol::PieceCallback&)>;

// Generates one reply and prints it as it streams; returns the result (also on Ctrl-C).
smol::GenerationResult stream_reply(smol::ChatSession& session, const ReplyGenerator& generate, bool show_reasoning,
                                    bool color) {
    ReplyPrinter printer(show_reasoning, color);
    g_generating = &session;
    smol::GenerationResult result;
    try {
        result = generate([&](const smol::StreamPiece& p) { return printer(p); });
    } catch (...) {
        g_generating = nullptr;
        printer.finish();
        throw;
    }
    g_generating = nullptr;
    printer.finish();
    return result;
}

void report_stop(const smol::GenerationResult& r, const smol::ChatSession& session, bool interactive, bool color) {
    std::string text;
    if (r.finish_reason == smol::FinishReason::context_full)
        text = "[ context full (" + std::to_string(session.context_size()) + " tokens)" +
               (interactive ? ": the reply was cut; the next turn drops the oldest ones, or raise -c ]" : ": raise -c ]");
    else if (r.finish_reason == smol::FinishReason::cancelled)
        text = "[ stopped ]";
    if (text.empty()) return;
    if (interactive) note(text, color);
    else std::fprintf(stderr, "%s\n", text.c_str());
}

// Replaces the session's conversation with the one saved in `path` (--messages, /load); errors
// name the file and, for a bad message, its index.
void load_conversation(smol::ChatSession& session, const std::string& path, const char* what) {
    nlohmann::ordered_json messages = read_json(path, what);
    try {
        session.set_messages(std::move(messages));
    } catch (const smol::Error& e) {
        smol::fail(what, ": '", path, "': ", e.what());
    }
}

// Writes the conversation in the format load_conversation reads.
void save_conversation(const smol::ChatSession& session, const std::string& path) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) smol::fail("/save: cannot write '", path, "': ", std::strerror(errno));
    out << session.messages().dump(2) << "\n";
    out.close();
    if (!out) smol::fail("/save: writing '", path, "' failed: ", std::strerror(errno));
}

// The interactive chat: reads messages (a line ending in \ continues) and runs the commands
// of chat_input.hpp until /exit or the end of input.
void chat_loop(smol::ChatSession& session, smol::ChatOptions chat, const smol::GenerationParams& params,
               const std::optional<std::string>& first_message, bool stdin_tty, bool stdout_tty) {
    const bool color = stdout_tty;
    if (stdin_tty)
        std::fprintf(stderr, "Chat: /help lists the commands, /exit quits; a line ending in \\ continues on the "
                             "next line; Ctrl-C stops a reply.\n");
    // A long chat goes on past a full context by dropping its oldest turns; said once.
    session.set_drop_oldest_turns(true);
    bool told_dropping = false;
    auto turn = [&](const ReplyGenerator& generate) {
        try {
            const smol::GenerationResult r = stream_reply(session, generate, /*show_reasoning=*/true, color);
            if (r.dropped_messages > 0 && !told_dropping) {
                note("[ context full: the oldest turns were dropped to make room; the system prompt stays ]", color);
                told_dropping = true;
            }
            report_stop(r, session, true, color);
            if (!r.tool_calls.empty()) note("[ answer with /tool RESULT ]", color);
            note(timings_line(r.usage), color);
        } catch (const smol::Error& e) {
            note(std::string("[ error: ") + e.what() + " ]", color);
        }
        write_out("\n");
    };
    auto send = [&](const std::string& text, const char* role) {
        turn([&](const smol::PieceCallback& on_piece) {
            return session.send_message({{"role", role}, {"content", text}}, params, on_piece);
        });
    };
    if (first_message) {
        write_out("> ");
        if (!stdin_tty) write_out("\n");
        send(*first_message, "user");
    }

    // A fixed seed restarts the same sequence on every call, so /regen would repeat the reply;
    // each regeneration takes the next seed instead, which keeps a session reproducible.
    std::uint64_t regenerations = 0;
    smol::cli::LineReader reader(stdin_tty && stdout_tty);
    smol::cli::MessageJoiner joiner;
    while (true) {
        // On a pipe only a message's first line shows a prompt, so each turn starts with "> ".
        const std::string prompt = !joiner.continuing() ? "> " : stdin_tty ? "... " : "";
        const std::optional<std::string> line = reader.read(prompt);
        if (!line) {
            write_out("\n");
            break;
        }
        if (!stdin_tty && !prompt.empty()) write_out("\n");  // the typed line ends the prompt's line on a terminal
        if (!joiner.add(*line)) continue;
        const std::string message = joiner.take();
        if (message.empty()) continue;

        const std::optional<smol::cli::ChatCommand> command = smol::cli::parse_command(message);
        if (!command) {
            send(message, "user");
            continue;
        }
        const std::string& name = command->name;
        const std::string& argument = command->argument;
        if (!smol::cli::is_known_command(name)) {
            note("[ unknown command " + name + "; /help lists the commands ]", color);
        } else if (name == "/exit" || name == "/quit") {
            break;
        } else if (name == "/help") {
            write_out(smol::cli::commands_help());
            std::fflush(stdout);
        } else if (name == "/clear") {
            session.clear();
            note("[ conversation cleared ]", color);
        } else if (name == "/think" || name == "/no_think") {
            chat.enable_thinking = name == "/think";
            session.set_template_options(chat);
            note(chat.enable_thinking ? "[ reasoning on ]" : "[ reasoning off ]", color);
        } else if (name == "/regen") {
            smol::GenerationParams again = params;
            if (again.sampling.seed != SMOL_DEFAULT_SEED) {
                again.sampling.seed += ++regenerations;
                if (again.sampling.seed == SMOL_DEFAULT_SEED) ++again.sampling.seed;  // that value means "random"
            }
            turn([&](const smol::PieceCallback& on_piece) { return session.regenerate(again, on_piece); });
        } else if (name == "/tool") {
            if (argument.empty()) note("[ /tool needs the result: /tool RESULT ]", color);
            else send(argument, "tool");
        } else if (name == "/save" || name == "/load") {
            if (argument.empty()) {
                note("[ " + name + " needs a file name: " + name + " FILE ]", color);
                continue;
            }
            try {
                if (name == "/save") save_conversation(session, argument);
                else load_conversation(session, argument, "/load");
                note("[ " + std::string(name == "/save" ? "saved " : "loaded ") + std::to_string(session.messages().size()) +
                         " messages " + (name == "/save" ? "to '" : "from '") + argument + "' ]",
                     color);
            } catch (const smol::Error& e) {
                note(std::string("[ error: ") + e.what() + " ]", color);
            }
        }
    }
    std::fflush(stdout);
}

int run_chat(const Options& o) {
    const bool stdin_tty = ::isatty(STDIN_FILENO) != 0;
    const bool stdout_tty = ::isatty(STDOUT_FILENO) != 0;
    const bool has_prompt = o.prompt || o.prompt_file;
    const bool interactive = o.interactive || (!has_prompt && stdin_tty);
    if (!interactive && !has_prompt)
        throw UsageError("stdin is not a terminal: give -p TEXT, -f FILE, or -i to chat through the pipe");
    // The files the flags name are read before the (slow) model load, so their errors come first.
    const std::string first_message = prompt_text(o);
    const smol::ChatOptions chat = template_options(o);

    if (o.threads > 0) omp_set_num_threads(o.threads);
    const auto load_start = std::chrono::steady_clock::now();
    smol::LoadOptions load;
    load.context = o.context;
    load.rope_scaling = o.rope_scaling;
    load.cache_types = o.cache_types;
    load.repack = o.repack;
    if (::isatty(STDERR_FILENO))  // a bar while the weights are read; the line below reports the load otherwise
        load.on_progress = smol::stderr_load_progress(std::filesystem::path(o.model).filename().string());
    smol::Engine engine(o.model, load);
    smol::ChatSession session(engine, o.context, o.system_prompt);
    session.set_template_options(chat);
    if (!o.messages_file.empty()) load_conversation(session, o.messages_file, "--messages");
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    std::fprintf(stderr, "smol-cli: %s (%s), context %d tokens, loaded in %.2f s\n", o.model.c_str(),
                 engine.info().config_name.c_str(), session.context_size(), load_s);
    if (engine.info().rope_scaling.yarn())
        std::fprintf(stderr, "smol-cli: RoPE scaling: %s%s\n", smol::describe(engine.info().rope_scaling).c_str(),
                     engine.info().rope_scaling_automatic ? " (the context is past the trained one)" : "");

    smol::GenerationParams params;
    params.sampling = o.sampling;
    params.max_tokens = o.n_predict;
    params.stop = o.stops;
    params.speculation = o.speculation;
    if (o.grammar || o.grammar_file) {
        const std::string text = o.grammar_file ? read_file(*o.grammar_file, "--grammar-file") : *o.grammar;
        params.grammar = engine.compile_grammar(text == "json" ? smol::text::kJsonObjectGrammar : std::string_view(text));
    }
    if (o.json_schema_file)
        params.grammar = engine.compile_grammar(smol::text::json_schema_to_gbnf(read_json(*o.json_schema_file, "--json-schema")));
    install_interrupt_handler();

    if (!interactive) {
        const smol::GenerationResult r = stream_reply(
            session, [&](const smol::PieceCallback& on_piece) { return session.send(first_message, params, on_piece); },
            o.show_thinking, stdout_tty);
        std::fprintf(stderr, "%s\n", timings_line(r.usage).c_str());
        report_stop(r, session, false, stdout_tty);
        return r.finish_reason == smol::FinishReason::cancelled ? 130 : 0;
    }
    chat_loop(session, chat, params, has_prompt ? std::optional<std::string>(first_message) : std::nullopt, stdin_tty,
              stdout_tty);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    smol::use_short_openmp_spin(argv);  // see smol/core/threads.hpp: no long spins on a busy machine
    Options options;
    try {
        options = parse_args(argc, argv);
        if (options.help) {
            write_out(kUsage);
            write_out("\nMore samplers (llama.cpp's flags):\n");
            write_out(smol::args::kSamplingUsage);
            return 0;
        }
        if (options.tokenize) return run_tokenize(options);
        if (options.print_prompt) return run_print_prompt(options);
        return run_chat(options);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "smol-cli: %s\n\n%s", e.what(), kUsage);
        return 2;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "smol-cli: error: %s\n", e.what());
        return 1;
    }
}
