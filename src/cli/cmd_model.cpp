// ember model inspect | quantize | synth: thin over src/gguf (summary, convert, synth).
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/limits.h"
#include "gguf/arch.h"
#include "gguf/convert.h"
#include "gguf/gguf_file.h"
#include "gguf/identity.h"
#include "gguf/summary.h"
#include "gguf/synth.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"

namespace ember::cli {
namespace {

gguf::TensorType parse_target(const std::string& s, bool allow_float) {
  const auto t = gguf::parse_type_name(s);
  const bool ok = t && gguf::is_model_target_type(*t) &&
                  (allow_float || gguf::traits(*t).block_elems > 1);
  if (!ok)
    fail_field("--type", "value",
               allow_float ? "f32, f16, q8_0, q4_0, q4_k or q6_k" : "q8_0, q4_0, q4_k or q6_k",
               "'" + s + "'");
  return *t;
}

void register_inspect(CLI::App& model) {
  auto* cmd = model.add_subcommand("inspect", "Architecture, geometry, RoPE, tokenizer, tensors "
                                              "and identity hash of a GGUF model");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("FILE", *path, "GGUF file")->required();
  cmd->add_flag("--json", *json, "Machine-readable output (fixed key order)");
  cmd->callback([path, json] {
    const gguf::GgufFile f = gguf::GgufFile::open(*path);
    const gguf::ModelSummary s = gguf::summarize(f);
    if (*json) {
      std::cout << printable_json(gguf::summary_json(s), 2) << "\n";
    } else {
      std::cout << gguf::summary_text(s);
    }
  });
}

void register_quantize(CLI::App& model) {
  auto* cmd = model.add_subcommand("quantize", "Rewrite a model with its matrices in another "
                                               "type (norms and 1-D tensors stay F32)");
  struct Args {
    std::string in, out, type;
    bool force = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("IN", a->in, "input GGUF")->required();
  cmd->add_option("OUT", a->out, "output GGUF")->required();
  cmd->add_option("--type", a->type, "q8_0 | q4_0 | q4_k | q6_k")->required();
  cmd->add_flag("--force", a->force, "Overwrite OUT if it exists");
  cmd->callback([a] {
    refuse_output_is_input(a->out, {a->in});
    const gguf::TensorType target = parse_target(a->type, false);
    const gguf::GgufFile in = gguf::GgufFile::open(a->in);
    const auto report = gguf::convert_model(in, target, a->out, a->force);
    size_t fell_back = 0;
    for (const auto& t : report) {
      if (!t.fell_back) continue;
      ++fell_back;
      std::printf("  %s: row length not a multiple of the %s block: stored as %s\n",
                  printable(t.name).c_str(), gguf::type_name(uint32_t(target)).c_str(),
                  gguf::type_name(uint32_t(t.to)).c_str());
    }
    const gguf::GgufFile out = gguf::GgufFile::open(a->out);
    std::printf("wrote %s: %zu tensors as %s (%zu fell back), %llu bytes, identity %s\n",
                printable(a->out).c_str(), report.size(), gguf::type_name(uint32_t(target)).c_str(),
                fell_back, (unsigned long long)out.file_size(),
                gguf::model_identity(out).hex().c_str());
  });
}

void register_synth(CLI::App& model) {
  auto* cmd = model.add_subcommand("synth", "Write a deterministic random-weight model with a "
                                            "built-in byte-level tokenizer");
  struct Args {
    gguf::SynthSpec spec;
    std::string preset, type = "f32", out, derive_from, outliers;
    int64_t share_layers = -1;
    bool force = false;
  };
  auto a = std::make_shared<Args>();
  gguf::SynthSpec& s = a->spec;
  std::string presets;
  for (const std::string& p : gguf::synth_preset_names()) presets += (presets.empty() ? "" : " | ") + p;
  cmd->add_option("--preset", a->preset, presets + " (other flags override it)");
  auto* arch = cmd->add_option("--arch", s.arch, gguf::arch_names(" | "));
  auto* layers = cmd->add_option("--layers", s.layers, "transformer blocks");
  auto* hidden = cmd->add_option("--hidden", s.hidden, "embedding size");
  auto* heads = cmd->add_option("--heads", s.heads, "query heads");
  auto* kv = cmd->add_option("--kv-heads", s.kv_heads, "key/value heads");
  auto* hd = cmd->add_option("--head-dim", s.head_dim, "per-head size (default hidden/heads)");
  auto* ffn = cmd->add_option("--ffn", s.ffn, "SwiGLU inner size");
  auto* vocab = cmd->add_option("--vocab", s.vocab, "vocabulary size (>= 258)");
  auto* ctx = cmd->add_option("--context", s.context, "context_length metadata (default 4096)");
  auto* theta = cmd->add_option("--rope-theta", s.rope_theta, "RoPE base (default per arch)");
  // The architectures that require each feature (gguf/arch.h).
  const std::string bias_archs = gguf::arch_names(
      ", ", " or ", [](const gguf::ArchInfo& i) { return i.qkv_bias == gguf::Feature::required; });
  const std::string qkn_archs = gguf::arch_names(
      ", ", " or ", [](const gguf::ArchInfo& i) { return i.qk_norm == gguf::Feature::required; });
  auto* bias = cmd->add_flag("--qkv-bias", s.qkv_bias, "Q/K/V biases (" + bias_archs + ")");
  auto* qkn = cmd->add_flag("--qk-norm", s.qk_norm, "per-head Q/K RMSNorm (" + qkn_archs + ")");
  auto* tied = cmd->add_flag("--tied", s.tied, "no output.weight: the LM head is token_embd");
  auto* type = cmd->add_option("--type", a->type, "f32 | f16 | q8_0 | q4_0 | q4_k | q6_k (matrices)");
  auto* derive = cmd->add_option("--derive-from", a->derive_from,
                                 "Base GGUF: keep its embeddings and layers < --share-layers byte for byte, "
                                 "re-draw the rest (same geometry and types)");
  auto* outliers = cmd->add_option("--outliers", a->outliers,
                                   "K outlier pairs and a BOS attention sink: pairs=N,scale=S[,sink=G] or sink=G "
                                   "(docs/formats/gguf.md)");
  auto* share = cmd->add_option("--share-layers", a->share_layers, "With --derive-from: the layers kept (s)");
  cmd->add_option("--seed", s.seed, "random seed")->required()->check(seed_value());
  s.pre_tokenizer = "bloom";  // the command's default: a file llama.cpp loads too
  cmd->add_option("--pre-tokenizer", s.pre_tokenizer,
                              "tokenizer.ggml.pre: bloom (llama.cpp loads it) | ember-bytes (before)")
                  ->check(CLI::IsMember({"bloom", "ember-bytes"}))
                  ->capture_default_str();
  cmd->add_option("-o,--output", a->out, "output GGUF")->required();
  cmd->add_flag("--force", a->force, "Overwrite the output if it exists");
  cmd->callback([=] {
    if (derive->count() || share->count()) {
      if (!derive->count() || !share->count())
        fail_field("synth", derive->count() ? "--share-layers" : "--derive-from", "given with the other", "missing");
      for (const CLI::Option* o : {arch, layers, hidden, heads, kv, hd, ffn, vocab, ctx, theta, bias, qkn, tied, type, outliers})
        if (o->count()) fail_field("synth", o->get_name(), "not given with --derive-from (the base fixes it)", "given");
      if (!a->preset.empty()) fail_field("synth", "--preset", "not given with --derive-from", "'" + a->preset + "'");
      const gguf::GgufFile base = gguf::GgufFile::open(a->derive_from);
      gguf::derive_model(base, a->share_layers, a->spec.seed).write_file(a->out, a->force);
      const gguf::GgufFile out = gguf::GgufFile::open(a->out);
      std::printf("wrote %s: %zu tensors, %llu bytes, identity %s (shares embeddings and layers < %lld with %s)\n",
                  printable(a->out).c_str(), out.tensors().size(), (unsigned long long)out.file_size(),
                  gguf::model_identity(out).hex().c_str(), (long long)a->share_layers,
                  printable(a->derive_from).c_str());
      return;
    }
    gguf::SynthSpec spec = a->spec;
    if (!a->preset.empty()) {
      // Start from the preset; flags given explicitly override its values.
      gguf::SynthSpec p = gguf::synth_preset(a->preset);
      if (arch->count()) p.arch = spec.arch;
      if (layers->count()) p.layers = spec.layers;
      if (hidden->count()) p.hidden = spec.hidden;
      if (heads->count()) p.heads = spec.heads;
      if (kv->count()) p.kv_heads = spec.kv_heads;
      if (hd->count()) p.head_dim = spec.head_dim;
      if (ffn->count()) p.ffn = spec.ffn;
      if (vocab->count()) p.vocab = spec.vocab;
      if (ctx->count()) p.context = spec.context;
      if (theta->count()) p.rope_theta = spec.rope_theta;
      if (bias->count()) p.qkv_bias = true;
      if (qkn->count()) p.qk_norm = true;
      if (tied->count()) p.tied = true;
      p.seed = spec.seed;
      p.pre_tokenizer = spec.pre_tokenizer;
      spec = p;
    } else {
      for (auto* o : {arch, layers, hidden, heads, kv, ffn, vocab})
        if (!o->count())
          fail_field("synth", o->get_name(), "a value (or --preset)", "nothing");
    }
    spec.type = parse_target(a->type, true);
    if (outliers->count()) spec.outliers = gguf::OutlierSpec::parse(a->outliers);
    std::vector<gguf::SynthTensorNote> fallbacks;
    const gguf::GgufWriter w = gguf::synth_model(spec, &fallbacks);
    for (const auto& f : fallbacks)
      std::printf("  %s: row length not a multiple of the %s block: stored as %s\n",
                  f.name.c_str(), a->type.c_str(), gguf::type_name(uint32_t(f.type)).c_str());
    w.write_file(a->out, a->force);
    const gguf::GgufFile out = gguf::GgufFile::open(a->out);
    std::printf("wrote %s: %zu tensors, %llu bytes, identity %s\n", printable(a->out).c_str(),
                out.tensors().size(), (unsigned long long)out.file_size(),
                gguf::model_identity(out).hex().c_str());
  });
}

}  // namespace

void register_model_commands(CLI::App& app) {
  CLI::App* model = app.add_subcommand("model", "GGUF models: inspect, quantize, synthesize");
  model->require_subcommand(1);
  register_inspect(*model);
  register_quantize(*model);
  register_synth(*model);
  register_model_import_hf(*model);
}

}  // namespace ember::cli
