#pragma once
// Input layout shared by the fuzz targets whose documents are a JSON manifest plus a binary
// payload it hashes (mapper: manifest.json + weights.f64le; calibration set: manifest.json +
// stats.f64le). One input is the manifest text, the separator line "\n@@payload@@\n", then the
// payload bytes. Before parsing, "@SHA256@" in the manifest becomes the payload's real SHA-256
// and "@BYTES@" its size, so the fuzzer, which cannot invert SHA-256, still reaches every
// check after the hash: the seeds (fuzz/corpus/mapper, fuzz/corpus/calibration) use the
// placeholders, and mutations of the payload keep passing the hash check.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/sha256.h"

namespace ember::fuzz {

struct ManifestAndPayload {
  std::string manifest;
  std::string payload;
};

inline ManifestAndPayload split_manifest_and_payload(const uint8_t* data, size_t size) {
  static constexpr std::string_view kSeparator = "\n@@payload@@\n";
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  ManifestAndPayload out;
  const size_t at = in.find(kSeparator);
  out.manifest = std::string(in.substr(0, at));
  if (at != std::string_view::npos) out.payload = std::string(in.substr(at + kSeparator.size()));
  const auto replace_all = [&](std::string_view from, const std::string& to) {
    for (size_t p = out.manifest.find(from); p != std::string::npos; p = out.manifest.find(from, p + to.size()))
      out.manifest.replace(p, from.size(), to);
  };
  replace_all("@SHA256@", sha256_hex(out.payload));
  replace_all("@BYTES@", std::to_string(out.payload.size()));
  return out;
}

}  // namespace ember::fuzz
