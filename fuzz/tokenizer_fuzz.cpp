// libFuzzer target over the tokenizer (README "Fuzzing"). Contract under test: any input
// either works or throws ember::Error; it never crashes, hangs or reads out of bounds.
// The first byte picks what the rest is:
//   0: text for an in-memory SentencePiece-style tokenizer (pieces, byte fallback, specials)
//   1: text for an "ember-bytes" byte-level BPE with merges; must round-trip exactly
//   2: a tokenizer.json document (loaded, then used to encode a fixed text)
//   3: token ids (4 bytes each) for StreamDecoder and decode()
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "tokenizer/spec.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

using namespace ember::tok;

std::unique_ptr<Tokenizer> make_spm() {
  TokenizerSpec s;
  s.source = "fuzz-spm";
  s.model = ModelKind::Spm;
  for (const char* t : {"<unk>", "<s>", "</s>"}) s.tokens.push_back(t);
  s.types = {TokenType::Unknown, TokenType::Control, TokenType::Control};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    s.tokens.push_back(buf);
    s.types.push_back(TokenType::Byte);
  }
  for (const char* t : {"\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "a", "\xE2\x96\x81" "ab", "ba", "<tag>"}) {
    s.tokens.push_back(t);
    s.types.push_back(std::string(t) == "<tag>" ? TokenType::UserDefined : TokenType::Normal);
  }
  for (size_t i = 0; i < s.tokens.size(); ++i) s.scores.push_back(-float(i % 7));
  s.bos = 1;
  s.eos = 2;
  s.unk = 0;
  s.add_bos = true;
  return build_tokenizer(s);
}

std::unique_ptr<Tokenizer> make_bytes() {
  TokenizerSpec s;
  s.source = "fuzz-bytes";
  s.pre = PreKind::EmberBytes;
  for (int b = 0; b < 256; ++b) {
    s.tokens.push_back(ByteLevelMap::get().byte_to_utf8[size_t(b)]);
    s.types.push_back(TokenType::Normal);
  }
  const char* merges[][2] = {{"a", "a"}, {"aa", "a"}, {"\xC4\xA0", "a"}, {"a", "b"}, {"ab", "aa"}};
  for (auto& m : merges) {
    s.merges.emplace_back(m[0], m[1]);
    s.tokens.push_back(std::string(m[0]) + m[1]);
    s.types.push_back(TokenType::Normal);
  }
  s.tokens.push_back("<|eos|>");
  s.types.push_back(TokenType::Control);
  s.eos = int32_t(s.tokens.size()) - 1;
  return build_tokenizer(s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto spm = make_spm();
  static const auto bytes = make_bytes();
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: {
        const auto ids = spm->encode(rest, true, data[0] & 4);
        const std::string back = spm->decode(ids);
        if (!(data[0] & 4) && rest.find("<tag>") == std::string::npos && back != rest) __builtin_trap();
        break;
      }
      case 1: {
        const auto ids = bytes->encode(rest, false, false);
        if (bytes->decode(ids) != rest) __builtin_trap();  // ember-bytes round-trips any bytes
        break;
      }
      case 2: {
        const auto t = build_tokenizer(spec_from_json_text(rest, "fuzz.json", nullptr, ""));
        (void)t->encode("Hello, world! 123 \xC3\xA9", t->add_bos_default());
        break;
      }
      case 3: {
        StreamDecoder sd(*spm);
        for (size_t i = 0; i + 4 <= rest.size(); i += 4) {
          int32_t id;
          std::memcpy(&id, rest.data() + i, 4);
          (void)sd.push(id % 300);
        }
        (void)sd.flush();
        break;
      }
    }
  } catch (const ember::Error&) {
  }
  return 0;
}
