#include "serve/slot_files.h"

#include <chrono>
#include <filesystem>

#include "serve/api.h"
#include "util/atomic_file.h"
#include "util/byte_io.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ember::serve {

using nlohmann::json;

namespace {

constexpr const char* kSidecarFormat = "ember.slot-state.v1";
constexpr size_t kMaxStateBytes = size_t(1) << 36;  // 64 GiB: far past any cache this server makes

[[noreturn]] void refuse(int status, const std::string& message) {
  throw ApiError(status, status == 404 ? "not_found_error" : "invalid_request_error", message);
}

std::string checked_name(const std::string& body) {
  const json j = parse_object(body);
  if (!j.contains("filename") || !j.at("filename").is_string())
    refuse(400, "request: filename: expected a string");
  const std::string name = j.at("filename").get<std::string>();
  bool ok = !name.empty() && name.size() <= 200 && name[0] != '.';
  for (unsigned char c : name)
    ok = ok && (std::isalnum(c) || c == '.' || c == '_' || c == '-');
  if (!ok)
    refuse(400, "request: filename: expected a name of [A-Za-z0-9._-] (no '/', no leading '.'), found '" +
                    std::string(name.size() > 64 ? name.substr(0, 64) + "..." : name) + "'");
  if (name.size() > 11 && name.ends_with(".ember.json")) refuse(400, "request: filename: a sidecar's name");
  return name;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

json slot_action(const SlotFiles& files, Scheduler& scheduler, int id, const std::string& action,
                 const std::string& body) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (action == "erase") return json{{"id_slot", id}, {"n_erased", scheduler.erase_slot(id)}};
    if (action != "save" && action != "restore")
      refuse(400, "request: action: expected save, restore or erase, found '" + action.substr(0, 32) + "'");
    if (files.dir.empty()) throw ApiError(501, "not_supported_error", "slot files need --slot-save-path");
    const std::string name = checked_name(body);
    const std::string path = (std::filesystem::path(files.dir) / name).string();
    const std::string sidecar = path + ".ember.json";
    if (action == "save") {
      Scheduler::SlotCache c = scheduler.save_slot(id);
      // The state first, hashed as it is written; its sidecar last: a crash between them
      // leaves a file that restore refuses. V transposed: llama.cpp with flash attention off.
      AtomicFile file(path, /*force=*/true);
      HashingSink hashed(&file.sink());
      kv::write_llamacpp_state(c.cache, c.tokens, /*v_trans=*/true, hashed);
      const uint64_t written = hashed.n_bytes();
      const std::string state_hash = to_hex(hashed.finish());
      file.commit();
      const json meta = {{"format", kSidecarFormat},
                         {"state_sha256", state_hash},
                         {"state_bytes", written},
                         {"tokens", c.tokens.size()},
                         {"model_identity", files.model_identity},
                         {"engine", files.engine}};
      write_file_atomic(sidecar, meta.dump(2) + "\n", /*force=*/true);
      return json{{"id_slot", id}, {"filename", name}, {"n_saved", c.tokens.size()}, {"n_written", written},
                  {"timings", {{"save_ms", ms_since(t0)}}}};
    }
    if (!std::filesystem::exists(path)) refuse(404, "slots: " + name + ": no such file in --slot-save-path");
    const std::string data = read_file(path, kMaxStateBytes);
    json meta;
    try {
      meta = parse_object(read_file(sidecar, 1 << 16));
    } catch (const std::exception&) {
      refuse(400, "slots: " + name + ": no ember sidecar (" + name +
                      ".ember.json): not a state this engine computed; kv import-llamacpp makes a foreign state of it");
    }
    auto field = [&](const char* k) { return meta.contains(k) && meta.at(k).is_string() ? meta.at(k).get<std::string>() : ""; };
    if (field("format") != kSidecarFormat || field("state_sha256") != sha256_hex(data))
      refuse(400, "slots: " + name + ": state_sha256: expected the sidecar's hash of the file, found another file");
    if (field("model_identity") != files.model_identity)
      refuse(400, "slots: " + name + ": model_identity: expected " + files.model_identity + ", found " +
                      field("model_identity"));
    if (field("engine") != files.engine)
      refuse(400, "slots: " + name + ": engine: expected " + files.engine + ", found " + field("engine"));
    kv::LlamaCppState st = kv::parse_llamacpp_state(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()), files.target, path);
    if (!st.exact()) refuse(400, "slots: " + name + ": K/V types: expected f16, found another type");
    Scheduler::SlotCache c{std::move(st.tokens), std::move(st.cache)};
    const int n = scheduler.restore_slot(id, std::move(c));
    return json{{"id_slot", id}, {"filename", name}, {"n_restored", n}, {"n_read", data.size()},
                {"timings", {{"restore_ms", ms_since(t0)}}}};
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, "invalid_request_error", e.what());
  }
}

}  // namespace ember::serve
