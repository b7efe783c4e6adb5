// libFuzzer target for the contract documents ember reads: bridge receipts, parity receipts,
// translator registries, tool allowlists and DOMCAP1 capability packs. One input is one JSON
// document; it goes through the strict JSON reader, then every compiled-in schema validator,
// receipt_consistency() (what the schema cannot say), and contract::check_pack_text (the
// checks `ember run --pack` applies, with an allowlist of two tools and a token counter).
// Contract under test: any input is accepted or refused with an ember::Error or a list of
// violations; never a crash, hang, or unbounded recursion (nesting is bounded by the strict
// reader). Seeds: schemas/examples/ (valid and invalid examples of every schema).
#include <cstddef>
#include <cstdint>
#include <string>

#include "contract/json_schema.h"
#include "contract/pack.h"
#include "contract/receipt.h"
#include "util/error.h"
#include "util/json_strict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json doc;
  try {
    doc = ember::parse_json_strict(text, "fuzz/document.json");
  } catch (const ember::Error&) {
    return 0;
  }
  size_t violations = 0;
  for (const std::string& schema : ember::contract::builtin_schema_names())
    violations += ember::contract::builtin_schema(schema).validate(doc).size();
  violations += ember::contract::validate_receipt(doc).size();
  violations += ember::contract::receipt_consistency(doc).size();
  ember::contract::ToolAllowlist allow;
  allow.path = "fuzz/allowlist.json";
  allow.tools = {"sql.query", "calc"};
  const ember::contract::TokenCounter count = [](std::string_view s) { return s.size() / 4; };
  try {
    const auto report = ember::contract::check_pack_text(text, "fuzz/pack.json", allow, {}, &count);
    violations += report.errors.size();
  } catch (const ember::Error&) {
  }
  if (violations == size_t(-1)) __builtin_trap();  // keep the work observable
  return 0;
}
