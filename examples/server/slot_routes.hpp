#pragma once
// llama-server's slot actions: POST /slots/{id}?action=save|restore|erase. A slot's prompt
// cache (its tokens and their keys and values) goes to a file in --slot-save-path and back
// (smol/generate/cache_file.hpp), so a long system prompt or document is run once and reused
// after a restart or in another slot. Without --slot-save-path the actions are a 501, as
// llama-server answers. File names are plain names inside that folder: no path, no "..".

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "api_request.hpp"
#include "outgoing_text.hpp"
#include "server_state.hpp"
#include "smol/smol.hpp"
#include "tenants.hpp"

namespace smol_server {

// Longest file name taken; with the ".partial" and count of the temporary file a save writes
// first (write_cache_file) it stays under the 255 bytes Linux file systems allow.
inline constexpr std::size_t kMaxSlotFileNameBytes = 200;

// The slot id in /slots/{id}: digits naming an existing slot, else a 400 saying which exist.
inline int slot_id(std::string_view text, int slots) {
    long long id = -1;
    const bool digits = !text.empty() && text.size() <= 9 &&
                        text.find_first_not_of("0123456789") == std::string_view::npos;
    if (digits) id = std::stoll(std::string(text));
    if (!digits || id >= slots)
        reject(400,
               "the slot id must be 0 to " + std::to_string(slots - 1) + " (--parallel), found '" +
                   loggable(std::string(text.substr(0, 64))) + "'",
               "invalid_slot_id");
    return int(id);
}

// A file name that stays inside --slot-save-path: 1 to kMaxSlotFileNameBytes letters, digits,
// '.', '_' and '-', not starting with '.' and without "..", so no path, no parent, no hidden
// file and nothing a shell or a log would read differently.
inline std::string slot_file_name(const json& body) {
    const auto it = body.find("filename");
    if (it == body.end() || !it->is_string())
        reject(400,
               std::string("'filename' is required: the cache file's name in --slot-save-path, found ") +
                   (it == body.end() ? "nothing" : it->type_name()),
               "invalid_filename");
    const std::string& name = it->get_ref<const std::string&>();
    bool plain = !name.empty() && name.size() <= kMaxSlotFileNameBytes && name.front() != '.' &&
                 name.find("..") == std::string::npos;
    for (const char c : name)
        plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                          c == '_' || c == '-');
    if (!plain)
        reject(400,
               "'filename' must be 1 to " + std::to_string(kMaxSlotFileNameBytes) +
                   " letters, digits, '.', '_' or '-', not starting with '.' and without \"..\" (a name inside "
                   "--slot-save-path, never a path), found " +
                   std::to_string(name.size()) + " bytes '" + loggable(name.substr(0, 64)) + "'",
               "invalid_filename");
    return name;
}

inline double milliseconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The slot operation's error as the client's: a busy slot is a 503 (retry), a bad id a 400.
template <class Action>
auto slot_action(Action action) {
    try {
        return action();
    } catch (const smol::SlotBusyError& e) {
        reject(503, e.what(), "slot_busy");
    } catch (const smol::CacheFileError& e) {
        reject(400, e.what(), "invalid_cache_file");
    }
}

inline json save_slot(ServerState& server, int id, const std::string& name, const std::string& partition) {
    smol::Scheduler& scheduler = server.model.require_scheduler();
    const auto start = std::chrono::steady_clock::now();
    smol::Scheduler::SlotCopy copy = slot_action([&] { return scheduler.copy_slot(id); });
    // Another tenant's prompt would be restorable, and so readable through its timing and
    // cached_tokens, by whoever restores the file.
    if (!copy.tokens.empty() && copy.partition != partition)
        reject(403, "slot " + std::to_string(id) + " holds a prompt cached under another API key or cache_salt",
               "slot_of_another_tenant");
    if (!copy.cache) copy.cache = scheduler.make_slot_cache();
    const std::uint64_t written =
        smol::write_cache_file(std::filesystem::path(server.options.slot_save_path) / name, *copy.cache, copy.tokens,
                               smol::cache_model_identity(scheduler.engine()), copy.partition);
    return json{{"id_slot", id},
                {"filename", name},
                {"n_saved", copy.tokens.size()},
                {"n_written", written},
                {"timings", {{"save_ms", milliseconds_since(start)}}}};
}

inline json restore_slot(ServerState& server, int id, const std::string& name, const std::string& partition) {
    smol::Scheduler& scheduler = server.model.require_scheduler();
    const auto start = std::chrono::steady_clock::now();
    const std::filesystem::path path = std::filesystem::path(server.options.slot_save_path) / name;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        reject(404, "no cache file '" + name + "' in --slot-save-path", "cache_file_not_found");
    smol::KvCache cache = scheduler.make_slot_cache();
    smol::RestoredCache restored = slot_action([&] {
        return smol::read_cache_file(path, cache, smol::cache_model_identity(scheduler.engine()),
                                     scheduler.engine().n_vocab());
    });
    if (restored.partition != partition)
        reject(403, "the cache file '" + name + "' was saved under another API key or cache_salt",
               "slot_of_another_tenant");
    const std::size_t n = restored.tokens.size();
    slot_action([&] {
        scheduler.restore_slot(id, std::move(cache), std::move(restored.tokens), restored.partition);
        return 0;
    });
    return json{{"id_slot", id},
                {"filename", name},
                {"n_restored", n},
                {"n_read", restored.bytes_read},
                {"timings", {{"restore_ms", milliseconds_since(start)}}}};
}

// POST /slots/{id}?action=save|restore|erase.
inline void slot_actions(ServerState& server, const httplib::Request& req, httplib::Response& res) {
    smol::Scheduler& scheduler = server.model.require_scheduler();
    if (server.options.slot_save_path.empty())
        reject(501, "slot actions are off on this server: start it with --slot-save-path DIR", "not_supported");
    const int id = slot_id(req.matches.size() > 1 ? std::string_view(req.matches[1].str()) : std::string_view(),
                           scheduler.options().slots);
    const std::string action = req.get_param_value("action");
    const json body = req.body.empty() ? json::object() : parse_json_body(req.body);
    json reply;
    if (action == "erase") {
        check_fields(body, {}, "");
        reply = {{"id_slot", id}, {"n_erased", slot_action([&] { return scheduler.erase_slot(id); })}};
    } else if (action == "save" || action == "restore") {
        check_fields(body, {"filename", "cache_salt"}, "");
        const std::string name = slot_file_name(body);
        const std::string partition = cache_partition(server.options, req, body);
        reply = action == "save" ? save_slot(server, id, name, partition) : restore_slot(server, id, name, partition);
    } else {
        reject(400, "'action' must be save, restore or erase, found '" + loggable(action.substr(0, 64)) + "'",
               "invalid_action");
    }
    res.set_content(to_wire(reply), "application/json");
}

}  // namespace smol_server
