// GGUF tokenizer.ggml.* metadata <-> TokenizerSpec (llama.cpp's keys and conventions).
// Reads only the Value structs, so it works on any metadata list (a file, or one built in
// memory by a converter or a test).
#include <algorithm>

#include "tokenizer/spec.h"
#include "util/error.h"

namespace ember::tok {
namespace {

using gguf::Value;
using gguf::ValueType;

// Local so that this file needs nothing from the reader's implementation.
const char* type_name(ValueType t) {
  static const char* const names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                      "bool", "string", "array", "uint64", "int64", "float64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "unknown type";
}

class Meta {
 public:
  Meta(const std::vector<std::pair<std::string, Value>>& md, std::string_view where) : md_(md), where_(where) {}
  const std::string& where() const { return where_; }
  const Value* find(std::string_view key) const {
    for (const auto& [k, v] : md_)
      if (k == key) return &v;
    return nullptr;
  }
  [[noreturn]] void bad(std::string_view key, std::string_view expected, std::string_view found) const {
    fail_field(where_, key, expected, found);
  }
  static bool is_int(ValueType t) {
    return t == ValueType::UINT8 || t == ValueType::INT8 || t == ValueType::UINT16 || t == ValueType::INT16 ||
           t == ValueType::UINT32 || t == ValueType::INT32 || t == ValueType::UINT64 || t == ValueType::INT64;
  }
  static bool is_signed(ValueType t) {
    return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
  }
  static int64_t int_of(const Value& v) { return is_signed(v.type) ? v.i : static_cast<int64_t>(v.u); }

  std::optional<std::string> str(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != ValueType::STRING) bad(key, "a string", type_name(v->type));
    return v->str;
  }
  std::optional<bool> boolean(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != ValueType::BOOL) bad(key, "a bool", type_name(v->type));
    return v->u != 0;
  }
  // A token id: absent, or 0xFFFFFFFF / -1 (llama.cpp's "none"), gives nullopt.
  std::optional<int32_t> token_id(std::string_view key, size_t n_vocab) const {
    const Value* v = find(key);
    if (!v) return std::nullopt;
    if (!is_int(v->type)) bad(key, "an integer token id", type_name(v->type));
    const int64_t id = int_of(*v);
    if (id == -1 || (!is_signed(v->type) && v->u == 0xFFFFFFFFu) ||
        (!is_signed(v->type) && v->u == ~uint64_t(0)))
      return std::nullopt;
    if (id < 0 || static_cast<uint64_t>(id) >= n_vocab)
      bad(key, "a token id below " + std::to_string(n_vocab), std::to_string(id));
    return static_cast<int32_t>(id);
  }
  const std::vector<Value>* array(std::string_view key, ValueType elem, bool required) const {
    const Value* v = find(key);
    if (!v) {
      if (required) bad(key, std::string("an array of ") + type_name(elem), "nothing (key missing)");
      return nullptr;
    }
    if (v->type != ValueType::ARRAY) bad(key, "an array", type_name(v->type));
    const bool ok = elem == ValueType::INT32 ? is_int(v->array_type)
                    : elem == ValueType::FLOAT32 ? (v->array_type == ValueType::FLOAT32 || v->array_type == ValueType::FLOAT64)
                                                 : v->array_type == elem;
    if (!ok)
      bad(key, std::string("an array of ") + type_name(elem),
          std::string("an array of ") + type_name(v->array_type));
    return &v->array;
  }

 private:
  const std::vector<std::pair<std::string, Value>>& md_;
  std::string where_;
};

Value str_value(std::string s) {
  Value v;
  v.type = ValueType::STRING;
  v.str = std::move(s);
  return v;
}
Value u32_value(uint32_t x) {
  Value v;
  v.type = ValueType::UINT32;
  v.u = x;
  v.i = x;
  return v;
}
Value bool_value(bool b) {
  Value v;
  v.type = ValueType::BOOL;
  v.u = b;
  v.i = b;
  return v;
}

}  // namespace

TokenizerSpec spec_from_gguf_metadata(const std::vector<std::pair<std::string, Value>>& md, std::string_view where) {
  const Meta m(md, where);
  TokenizerSpec spec;
  spec.source = std::string(where);
  const std::optional<std::string> model = m.str("tokenizer.ggml.model");
  if (!model) m.bad("tokenizer.ggml.model", "\"gpt2\" or \"llama\"", "nothing (the file has no tokenizer)");
  if (*model == "gpt2") {
    spec.model = ModelKind::Bpe;
  } else if (*model == "llama") {
    spec.model = ModelKind::Spm;
  } else {
    m.bad("tokenizer.ggml.model", "\"gpt2\" (byte-level BPE) or \"llama\" (SentencePiece-style)", "\"" + *model + "\"");
  }

  const auto* tokens = m.array("tokenizer.ggml.tokens", ValueType::STRING, true);
  const size_t n = tokens->size();
  if (n == 0) m.bad("tokenizer.ggml.tokens", "at least one token", "an empty array");
  if (n > (size_t(1) << 31) - 1) m.bad("tokenizer.ggml.tokens", "< 2^31 tokens", std::to_string(n));
  spec.tokens.reserve(n);
  for (const Value& v : *tokens) spec.tokens.push_back(v.str);
  spec.types.assign(n, TokenType::Normal);
  if (const auto* types = m.array("tokenizer.ggml.token_type", ValueType::INT32, false)) {
    if (types->size() != n)
      m.bad("tokenizer.ggml.token_type", std::to_string(n) + " entries (one per token)", std::to_string(types->size()));
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = Meta::int_of((*types)[i]);
      if (t < 1 || t > 6)
        m.bad("tokenizer.ggml.token_type[" + std::to_string(i) + "]", "1..6 (normal..byte)", std::to_string(t));
      spec.types[i] = static_cast<TokenType>(t);
    }
  }

  if (spec.model == ModelKind::Bpe) {
    const std::string pre = m.str("tokenizer.ggml.pre").value_or("default");
    if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
      spec.pre = PreKind::LlamaBpe;
      spec.ignore_merges = true;  // as the Llama 3 tokenizer.json says, and llama.cpp does
    } else if (pre == "qwen2") {
      spec.pre = PreKind::Qwen2;
      spec.normalizer = NormalizerKind::Nfc;  // the Qwen tokenizer.json normalizer
    } else if (pre == "default" || pre == "gpt2" || pre == "gpt-2") {
      spec.pre = PreKind::Gpt2;
    } else if (pre == "ember-bytes") {
      spec.pre = PreKind::EmberBytes;
    } else if (pre == "bloom") {
      spec.pre = PreKind::Bloom;
    } else {
      m.bad("tokenizer.ggml.pre", "llama-bpe, qwen2, gpt2/default, bloom or ember-bytes", "\"" + pre + "\"");
    }
    const auto* merges = m.array("tokenizer.ggml.merges", ValueType::STRING, spec.pre != PreKind::EmberBytes);
    if (merges) {
      spec.merges.reserve(merges->size());
      for (size_t r = 0; r < merges->size(); ++r) {
        const std::string& s = (*merges)[r].str;
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
          m.bad("tokenizer.ggml.merges[" + std::to_string(r) + "]", "\"left right\"", "\"" + s + "\"");
        spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      }
    }
    spec.add_bos = m.boolean("tokenizer.ggml.add_bos_token").value_or(spec.pre == PreKind::LlamaBpe);
  } else {
    const auto* scores = m.array("tokenizer.ggml.scores", ValueType::FLOAT32, true);
    if (scores->size() != n)
      m.bad("tokenizer.ggml.scores", std::to_string(n) + " entries (one per token)", std::to_string(scores->size()));
    spec.scores.reserve(n);
    for (const Value& v : *scores) spec.scores.push_back(static_cast<float>(v.f));
    spec.add_bos = m.boolean("tokenizer.ggml.add_bos_token").value_or(true);
    spec.add_space_prefix = m.boolean("tokenizer.ggml.add_space_prefix").value_or(true);
    spec.unk = m.token_id("tokenizer.ggml.unknown_token_id", n);
  }
  spec.bos = m.token_id("tokenizer.ggml.bos_token_id", n);
  spec.eos = m.token_id("tokenizer.ggml.eos_token_id", n);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (auto id = m.token_id(key, n)) spec.extra_eog.push_back(*id);
  if (spec.add_bos && !spec.bos)
    m.bad("tokenizer.ggml.bos_token_id", "a BOS id (add_bos_token is true)", "nothing");
  return spec;
}

std::vector<std::pair<std::string, Value>> spec_to_gguf_metadata(const TokenizerSpec& s) {
  validate_spec(s);
  std::vector<std::pair<std::string, Value>> md;
  const bool spm = s.model == ModelKind::Spm;
  if (!spm) {
    const bool nfc_implied = s.pre == PreKind::Qwen2;
    if ((s.normalizer == NormalizerKind::Nfc) != nfc_implied)
      fail_field(s.source, "normalizer", nfc_implied ? "NFC (GGUF qwen2 implies it)" : "none (GGUF has no normalizer key)",
                 s.normalizer == NormalizerKind::Nfc ? "NFC" : "none");
    if (s.ignore_merges != (s.pre == PreKind::LlamaBpe))
      fail_field(s.source, "ignore_merges", s.pre == PreKind::LlamaBpe ? "true" : "false",
                 s.ignore_merges ? "true" : "false");
  }
  md.emplace_back("tokenizer.ggml.model", str_value(spm ? "llama" : "gpt2"));
  if (!spm) md.emplace_back("tokenizer.ggml.pre", str_value(pre_kind_name(s.pre)));
  Value tokens;
  tokens.type = ValueType::ARRAY;
  tokens.array_type = ValueType::STRING;
  tokens.array.reserve(s.tokens.size());
  for (const std::string& t : s.tokens) tokens.array.push_back(str_value(t));
  md.emplace_back("tokenizer.ggml.tokens", std::move(tokens));
  if (spm) {
    Value scores;
    scores.type = ValueType::ARRAY;
    scores.array_type = ValueType::FLOAT32;
    for (float f : s.scores) {
      Value v;
      v.type = ValueType::FLOAT32;
      v.f = f;
      scores.array.push_back(v);
    }
    md.emplace_back("tokenizer.ggml.scores", std::move(scores));
  }
  Value types;
  types.type = ValueType::ARRAY;
  types.array_type = ValueType::INT32;
  types.array.reserve(s.types.size());
  for (TokenType t : s.types) {
    Value v;
    v.type = ValueType::INT32;
    v.i = static_cast<int64_t>(t);
    v.u = static_cast<uint64_t>(t);
    types.array.push_back(v);
  }
  md.emplace_back("tokenizer.ggml.token_type", std::move(types));
  if (!spm) {
    Value merges;
    merges.type = ValueType::ARRAY;
    merges.array_type = ValueType::STRING;
    merges.array.reserve(s.merges.size());
    for (const auto& [a, b] : s.merges) {
      if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
        fail_field(s.source, "merges", "sides without spaces (GGUF joins them with one)", "\"" + a + "\" / \"" + b + "\"");
      merges.array.push_back(str_value(a + " " + b));
    }
    md.emplace_back("tokenizer.ggml.merges", std::move(merges));
  }
  if (s.bos) md.emplace_back("tokenizer.ggml.bos_token_id", u32_value(static_cast<uint32_t>(*s.bos)));
  if (s.eos) md.emplace_back("tokenizer.ggml.eos_token_id", u32_value(static_cast<uint32_t>(*s.eos)));
  if (spm && s.unk) md.emplace_back("tokenizer.ggml.unknown_token_id", u32_value(static_cast<uint32_t>(*s.unk)));
  md.emplace_back("tokenizer.ggml.add_bos_token", bool_value(s.add_bos));
  if (spm) md.emplace_back("tokenizer.ggml.add_space_prefix", bool_value(s.add_space_prefix));
  return md;
}

}  // namespace ember::tok
