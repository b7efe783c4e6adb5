// Hugging Face tokenizer.json -> TokenizerSpec. Supported: model BPE (byte-level, no
// continuing-subword prefix or end-of-word suffix, no byte fallback), pre_tokenizer
// Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)] with one of the family
// regexes, or ByteLevel(use_regex=true) alone (GPT-2); normalizer null or NFC; post_processor
// ByteLevel and/or TemplateProcessing that prepends one special token (BOS). Anything else
// is an Error naming the file and the field. tokenizer_config.json beside it, if present,
// supplies add_bos_token, bos_token and eos_token.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tokenizer/pretokenize.h"
#include "tokenizer/spec.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_strict.h"

namespace ember::tok {
namespace {

using json = nlohmann::json;

std::string brief(const json& j) {
  std::string s = j.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// The strict parse every ember input goes through: a duplicated key (say a vocab entry
// listed twice with two ids) is refused by its dotted path instead of keeping the last value.
json parse_json_text(std::string_view text, const std::string& path) {
  return ember::parse_json_strict(text, path);
}

// A member that must be a string/bool/etc. when present.
const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

bool opt_bool(const std::string& path, const json& obj, const char* key, const std::string& field, bool fallback) {
  const json* v = member(obj, key);
  if (!v || v->is_null()) return fallback;
  if (!v->is_boolean()) fail_field(path, field, "true or false", brief(*v));
  return v->get<bool>();
}

std::string type_of(const std::string& path, const json& obj, const std::string& field) {
  const json* t = member(obj, "type");
  if (!t || !t->is_string()) fail_field(path, field + ".type", "a string", t ? brief(*t) : "nothing");
  return t->get<std::string>();
}

// A token named in tokenizer_config.json: a string, {"content": ...}, or null.
std::optional<std::string> config_token(const std::string& path, const json& cfg, const char* key) {
  const json* v = member(cfg, key);
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object()) {
    const json* c = member(*v, "content");
    if (c && c->is_string()) return c->get<std::string>();
  }
  fail_field(path, key, "a token string, {\"content\": ...} or null", brief(*v));
}

void read_pre_tokenizer(const std::string& path, const json& pre, TokenizerSpec& spec) {
  const std::string t = type_of(path, pre, "pre_tokenizer");
  if (t == "ByteLevel") {
    if (opt_bool(path, pre, "add_prefix_space", "pre_tokenizer.add_prefix_space", true))
      fail_field(path, "pre_tokenizer.add_prefix_space", "false", "true");
    if (!opt_bool(path, pre, "use_regex", "pre_tokenizer.use_regex", true))
      fail_field(path, "pre_tokenizer.use_regex", "true (a lone ByteLevel splits like GPT-2)", "false");
    spec.pre = PreKind::Gpt2;
    return;
  }
  const json* list = member(pre, "pretokenizers");
  if (t != "Sequence" || !list || !list->is_array() || list->size() != 2)
    fail_field(path, "pre_tokenizer", "Sequence[Split, ByteLevel] or ByteLevel", brief(pre));
  const json& split = (*list)[0];
  const json& bl = (*list)[1];
  if (type_of(path, split, "pre_tokenizer.pretokenizers[0]") != "Split")
    fail_field(path, "pre_tokenizer.pretokenizers[0].type", "Split", brief(split["type"]));
  const json* pattern = member(split, "pattern");
  const json* regex = pattern ? member(*pattern, "Regex") : nullptr;
  if (!regex || !regex->is_string())
    fail_field(path, "pre_tokenizer.pretokenizers[0].pattern", "{\"Regex\": ...}", pattern ? brief(*pattern) : "nothing");
  const json* behavior = member(split, "behavior");
  if (!behavior || *behavior != "Isolated")
    fail_field(path, "pre_tokenizer.pretokenizers[0].behavior", "Isolated", behavior ? brief(*behavior) : "nothing");
  if (opt_bool(path, split, "invert", "pre_tokenizer.pretokenizers[0].invert", false))
    fail_field(path, "pre_tokenizer.pretokenizers[0].invert", "false", "true");
  const std::string re = regex->get<std::string>();
  if (re == split_pattern_llama_bpe()) {
    spec.pre = PreKind::LlamaBpe;
  } else if (re == split_pattern_qwen2()) {
    spec.pre = PreKind::Qwen2;
  } else if (re == split_pattern_gpt2()) {
    spec.pre = PreKind::Gpt2;
  } else {
    fail_field(path, "pre_tokenizer.pretokenizers[0].pattern.Regex",
               "the llama-bpe, qwen2 or gpt2 split regex (docs/tokenizer.md)", brief(*regex));
  }
  if (type_of(path, bl, "pre_tokenizer.pretokenizers[1]") != "ByteLevel")
    fail_field(path, "pre_tokenizer.pretokenizers[1].type", "ByteLevel", brief(bl["type"]));
  if (opt_bool(path, bl, "add_prefix_space", "pre_tokenizer.pretokenizers[1].add_prefix_space", true))
    fail_field(path, "pre_tokenizer.pretokenizers[1].add_prefix_space", "false", "true");
  if (opt_bool(path, bl, "use_regex", "pre_tokenizer.pretokenizers[1].use_regex", true))
    fail_field(path, "pre_tokenizer.pretokenizers[1].use_regex", "false", "true");
}

void read_normalizer(const std::string& path, const json& norm, TokenizerSpec& spec) {
  if (norm.is_null()) return;
  std::string t = type_of(path, norm, "normalizer");
  if (t == "Sequence") {
    const json* list = member(norm, "normalizers");
    if (list && list->is_array() && list->empty()) return;
    if (!list || !list->is_array() || list->size() != 1)
      fail_field(path, "normalizer", "null, NFC or Sequence[NFC]", brief(norm));
    t = type_of(path, (*list)[0], "normalizer.normalizers[0]");
  }
  if (t != "NFC") fail_field(path, "normalizer.type", "NFC (or no normalizer)", t);
  spec.normalizer = NormalizerKind::Nfc;
}

// Returns the token content a TemplateProcessing prepends (BOS), if any.
std::optional<std::string> read_post_processor(const std::string& path, const json& pp) {
  if (pp.is_null()) return std::nullopt;
  const std::string t = type_of(path, pp, "post_processor");
  if (t == "ByteLevel") return std::nullopt;
  if (t == "Sequence") {
    const json* list = member(pp, "processors");
    if (!list || !list->is_array()) fail_field(path, "post_processor.processors", "an array", brief(pp));
    std::optional<std::string> bos;
    for (const json& p : *list) {
      if (auto b = read_post_processor(path, p)) bos = b;
    }
    return bos;
  }
  if (t != "TemplateProcessing")
    fail_field(path, "post_processor.type", "ByteLevel, TemplateProcessing or Sequence", t);
  const json* single = member(pp, "single");
  // Supported: [SpecialToken X, Sequence A] (BOS X) or [Sequence A].
  if (!single || !single->is_array() || single->empty() || single->size() > 2 ||
      !member(single->back(), "Sequence"))
    fail_field(path, "post_processor.single", "[{SpecialToken: BOS}, {Sequence: A}] or [{Sequence: A}]",
               single ? brief(*single) : "nothing");
  if (single->size() == 1) return std::nullopt;
  const json* st = member((*single)[0], "SpecialToken");
  const json* id = st ? member(*st, "id") : nullptr;
  if (!id || !id->is_string())
    fail_field(path, "post_processor.single[0]", "{\"SpecialToken\": {\"id\": ...}}", brief((*single)[0]));
  return id->get<std::string>();
}

}  // namespace

TokenizerSpec spec_from_json_file(const std::string& path) {
  const std::string text = read_file(path, size_t(1) << 30);
  const std::string cfg_path = (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  std::string cfg_text;
  const bool has_cfg = std::filesystem::exists(cfg_path);
  if (has_cfg) cfg_text = read_file(cfg_path, size_t(1) << 26);
  return spec_from_json_text(text, path, has_cfg ? &cfg_text : nullptr, cfg_path);
}

TokenizerSpec spec_from_json_text(std::string_view text, const std::string& path, const std::string* config_text,
                                  const std::string& config_path) {
  const json doc = parse_json_text(text, path);
  TokenizerSpec spec;
  spec.source = path;
  if (!doc.is_object()) fail_field(path, "(document)", "a JSON object", brief(doc));
  const json* model = member(doc, "model");
  if (!model || !model->is_object()) fail_field(path, "model", "an object", model ? brief(*model) : "nothing");
  if (const json* t = member(*model, "type"); t && *t != "BPE")
    fail_field(path, "model.type", "BPE (WordPiece, Unigram and WordLevel are not supported)", brief(*t));
  if (opt_bool(path, *model, "byte_fallback", "model.byte_fallback", false))
    fail_field(path, "model.byte_fallback", "false (byte-level BPE)", "true");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = member(*model, key);
    if (v && !v->is_null() && !(v->is_string() && v->get<std::string>().empty()))
      fail_field(path, std::string("model.") + key, "null or empty", brief(*v));
  }
  if (const json* d = member(*model, "dropout"); d && !d->is_null() && !(d->is_number() && d->get<double>() == 0.0))
    fail_field(path, "model.dropout", "null", brief(*d));
  spec.ignore_merges = opt_bool(path, *model, "ignore_merges", "model.ignore_merges", false);

  // Vocabulary: model.vocab plus added_tokens; ids must cover 0..n-1 exactly.
  const json* vocab = member(*model, "vocab");
  if (!vocab || !vocab->is_object()) fail_field(path, "model.vocab", "an object", vocab ? brief(*vocab) : "nothing");
  const json* added = member(doc, "added_tokens");
  if (added && !added->is_null() && !added->is_array()) fail_field(path, "added_tokens", "an array", brief(*added));
  const size_t limit = vocab->size() + (added && added->is_array() ? added->size() : 0);
  std::vector<bool> seen(limit, false);
  spec.tokens.resize(limit);
  spec.types.assign(limit, TokenType::Normal);
  size_t n = 0;
  const auto place = [&](int64_t id, const std::string& content, const std::string& field) {
    if (id < 0 || static_cast<size_t>(id) >= limit)
      fail_field(path, field, "an id in 0.." + std::to_string(limit - 1) + " (ids are dense over the " +
                 std::to_string(limit) + " vocab and added entries)", std::to_string(id));
    const auto i = static_cast<size_t>(id);
    if (seen[i] && spec.tokens[i] != content)
      fail_field(path, field, "id " + std::to_string(id) + " used once", "\"" + spec.tokens[i] + "\" and \"" + content + "\"");
    seen[i] = true;
    spec.tokens[i] = content;
    n = std::max(n, i + 1);
  };
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer())
      fail_field(path, "model.vocab[\"" + it.key() + "\"]", "an integer id", brief(it.value()));
    place(it.value().get<int64_t>(), it.key(), "model.vocab[\"" + it.key() + "\"]");
  }
  if (added && added->is_array()) {
    for (size_t k = 0; k < added->size(); ++k) {
      const json& a = (*added)[k];
      const std::string field = "added_tokens[" + std::to_string(k) + "]";
      const json* id = member(a, "id");
      const json* content = member(a, "content");
      if (!id || !id->is_number_integer()) fail_field(path, field + ".id", "an integer", brief(a));
      if (!content || !content->is_string()) fail_field(path, field + ".content", "a string", brief(a));
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (opt_bool(path, a, flag, field + "." + flag, false))
          fail_field(path, field + "." + flag, "false (not supported)", "true");
      place(id->get<int64_t>(), content->get<std::string>(), field + ".id");
      const bool special = opt_bool(path, a, "special", field + ".special", false);
      spec.types[static_cast<size_t>(id->get<int64_t>())] = special ? TokenType::Control : TokenType::UserDefined;
    }
  }
  spec.tokens.resize(n);
  spec.types.resize(n);
  for (size_t i = 0; i < n; ++i)
    if (!seen[i]) fail_field(path, "model.vocab", "ids 0.." + std::to_string(n - 1) + " without gaps", "no token with id " + std::to_string(i));

  const json* merges = member(*model, "merges");
  if (!merges || !merges->is_array()) fail_field(path, "model.merges", "an array", merges ? brief(*merges) : "nothing");
  spec.merges.reserve(merges->size());
  for (size_t r = 0; r < merges->size(); ++r) {
    const json& m = (*merges)[r];
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
        fail_field(path, "model.merges[" + std::to_string(r) + "]", "\"left right\"", brief(m));
      spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail_field(path, "model.merges[" + std::to_string(r) + "]", "\"left right\" or [\"left\", \"right\"]", brief(m));
    }
  }

  if (const json* norm = member(doc, "normalizer")) read_normalizer(path, *norm, spec);
  const json* pre = member(doc, "pre_tokenizer");
  if (!pre || pre->is_null()) fail_field(path, "pre_tokenizer", "a byte-level pre-tokenizer", "null");
  read_pre_tokenizer(path, *pre, spec);
  if (const json* dec = member(doc, "decoder"); dec && !dec->is_null()) {
    const std::string t = type_of(path, *dec, "decoder");
    if (t != "ByteLevel") fail_field(path, "decoder.type", "ByteLevel", t);
  }
  std::optional<std::string> bos_name;
  if (const json* pp = member(doc, "post_processor")) bos_name = read_post_processor(path, *pp);
  spec.add_bos = bos_name.has_value();

  // tokenizer_config.json beside the file.
  std::optional<std::string> eos_name;
  if (config_text) {
    const std::string& cfg_path = config_path;
    const json cfg = parse_json_text(*config_text, cfg_path);
    spec.add_bos = opt_bool(cfg_path, cfg, "add_bos_token", "add_bos_token", spec.add_bos);
    if (member(cfg, "bos_token")) bos_name = config_token(cfg_path, cfg, "bos_token");
    eos_name = config_token(cfg_path, cfg, "eos_token");
  }
  const auto find_id = [&](const std::string& name, const char* field) -> int32_t {
    for (size_t i = spec.tokens.size(); i-- > 0;)
      if (spec.tokens[i] == name) return static_cast<int32_t>(i);
    fail_field(path, field, "a token of the vocabulary", "\"" + name + "\"");
  };
  if (bos_name) spec.bos = find_id(*bos_name, "bos token");
  if (eos_name) spec.eos = find_id(*eos_name, "eos token");
  if (spec.add_bos && !spec.bos) fail_field(path, "add_bos_token", "a BOS token when true", "no bos_token");
  return spec;
}

}  // namespace ember::tok
