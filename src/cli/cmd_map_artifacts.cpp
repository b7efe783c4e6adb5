// ember map collect|fit|apply|replay|hybrid (docs/mapping.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/limits.h"
#include "cli/map_commands.h"
#include "cli/model_loader.h"
#include "cli/prompt_list.h"
#include "cli/store_flags.h"
#include "cli/token_ids.h"
#include "cli/trust_flags.h"
#include "contract/receipt.h"
#include "contract/registry.h"
#include "kv/import.h"
#include "kv/state.h"
#include "kv/state.h"
#include "map/anchor.h"
#include "map/hybrid.h"
#include "map/collect.h"
#include "map/mapper.h"
#include "map/metrics.h"
#include "map/shared.h"
#include "map/target_coords.h"
#include "model/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"
#include "util/sha256.h"

namespace ember::cli {
namespace {

using Loaded = LoadedModel;

// --relation (docs/mapping.md, "Relation"): what the user states about the pair, recorded in the
// mapper, the mapped cache and the receipt; ember never infers it.
CLI::Option* add_relation_option(CLI::App* c, std::string& relation, const std::string& help) {
  return c->add_option("--relation", relation, "quantization-boundary | same-base | cross-model: " + help)
      ->check(CLI::IsMember({kv::kRelations[0], kv::kRelations[1], kv::kRelations[2]}));
}

// The relation of a command that reads a mapper: the mapper's own, and a --relation given
// must say the same.
std::string relation_of(const map::Mapper& mp, const std::string& given, const std::string& where) {
  if (!given.empty() && given != mp.relation)
    fail_field(where, "--relation", mp.relation + " (the mapper's relation)", given);
  return mp.relation;
}

void require_same_tokenizer(const Loaded& s, const Loaded& t, const std::string& where) {
  if (s.tokenizer->identity() != t.tokenizer->identity())
    fail_field(where, "tokenizer identity", s.tokenizer->identity() + " (the source's; the same tokenizer is required)",
               t.tokenizer->identity());
}

// The source's RoPE semantics as a snapshot records them (enough for map_layers).
model::ModelConfig rope_config_of(const kv::SnapshotManifest& m) {
  model::ModelConfig c;
  c.arch = model::parse_arch(m.model.architecture);
  c.n_layers = m.geometry.layers;
  c.n_kv_heads = m.geometry.kv_heads;
  c.head_dim = m.geometry.head_dim;
  c.n_embd = m.model.embedding_size;
  c.n_heads = m.model.query_heads;
  c.rope_layout = m.rope.layout == "neox" ? model::RopeLayout::neox : model::RopeLayout::normal;
  c.rope_theta = m.rope.theta;
  c.rope_scaling.type = m.rope.scaling_type;
  c.rope_scaling.factor = m.rope.scaling_factor;
  c.rope_scaling.original_context = m.rope.original_context;
  c.rope_scaling.low_freq_factor = m.rope.low_freq_factor;
  c.rope_scaling.high_freq_factor = m.rope.high_freq_factor;
  return c;
}


// Receipts (schemas/bridge-receipt.schema.json): written beside every artifact, status
// "research" (a single fit or handoff is not the held-out evaluation a "validated" claim needs).
contract::Endpoint endpoint(const map::ModelGeometry& g, const std::string& tok) {
  return {g.identity, g.arch, tok, ""};
}

// The mapped cache's `registration`: "unregistered" without --registry; with it, the gate
// (contract::require_registered) refuses, before anything is computed or written, a mapper
// the registry does not vouch for.
std::string registration_of(const std::string& registry, const contract::RegistryQuery& q) {
  if (registry.empty()) return "unregistered";
  const contract::Registration r = contract::require_registered(registry, q);
  std::fprintf(stderr, "ember: registry %s: mapper validated as entry %s\n", printable(registry).c_str(),
               printable(r.id).c_str());
  return r.label();
}

void add_registry_option(CLI::App* c, std::string& registry) {
  c->add_option("--registry", registry,
                "Translator registry (contract registry add): refuse a mapper it does not list as validated "
                "for these models");
}

contract::LayerPlan plan_of(const std::vector<std::string>& roles) {
  contract::LayerPlan p;
  for (size_t l = 0; l < roles.size(); ++l) {
    if (roles[l] == "reused") p.reused.push_back(int(l));
    else if (roles[l] == "mapped") p.mapped.push_back(int(l));
    else p.recomputed.push_back(int(l));
  }
  return p;
}

std::string receipt_path_for(const std::string& output, const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  std::string o = output;
  while (o.size() > 1 && o.back() == '/') o.pop_back();
  return o + ".receipt.json";
}

// Streams the greedy continuation to stdout, then a newline.
void print_greedy(model::Engine& e, tok::Tokenizer& t, model::KvCache& cache, std::vector<float> logits, int n) {
  map::greedy_continue(e, cache, std::move(logits), n, [&](int32_t id) { return t.is_eog(id); },
                       [&](int32_t id) { std::cout << t.token_bytes(id) << std::flush; });
  std::cout << "\n";
}

void add_collect(CLI::App& m) {
  auto* c = m.add_subcommand("collect",
                             "Run both models on the same prompts and store the fits' statistics (X^T X, X^T Y)");
  struct Opts {
    std::string source, target, tokenizer, split = "320:80", output;
    PromptListArgs prompts;
    uint64_t seed = 1;
    int threads = 1;
    bool force = false, no_residual = false;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("--source", o->source, "Source model (GGUF)")->required();
  c->add_option("--target", o->target, "Target model (GGUF)")->required();
  c->add_option("--tokenizer", o->tokenizer, "Hugging Face tokenizer.json for both models (default: each GGUF's own)");
  add_prompt_list_flags(c, o->prompts);
  c->add_option("--split", o->split, "calib:eval prompt counts (frozen split)");
  c->add_option("--seed", o->seed, "Split seed")->check(seed_value());
  add_threads_option(c, o->threads);
  c->add_flag("--no-residual-maps", o->no_residual,
              "Keep no residual statistics (smaller; map fit --residual-maps then refuses the set)");
  c->add_option("-o,--output", o->output, "Calibration directory")->required();
  c->add_flag("--force", o->force, "Replace an existing output");
  c->callback([o] {
    refuse_output_is_input(o->output, {o->source, o->target, o->prompts.prompts, o->prompts.prompt_ids, o->tokenizer,
                                       o->prompts.chat.tokenizer_config});
    const auto [nc, ne] = map::parse_split_counts(o->split, "map collect");
    const Loaded s = load_model({o->source, o->tokenizer, ""}), t = load_model({o->target, o->tokenizer, ""});
    require_same_tokenizer(s, t, "map collect");
    const map::SharedLayers shared = map::shared_layers(s.model->file(), s.model->config(), t.model->file(), t.model->config());
    PromptListArgs pl = o->prompts;
    pl.chat.model = o->source;
    const std::vector<std::vector<int32_t>> prompts = read_prompt_list(
        pl, *s.tokenizer, std::min(s.model->config().n_vocab, t.model->config().n_vocab), "map collect");
    std::vector<std::string> hashes;
    for (const auto& p : prompts) hashes.push_back(map::prompt_hash(p));
    const map::PromptSplit split = map::PromptSplit::make(hashes, nc, ne, o->seed);
    const int threads = resolve_threads(o->threads);
    model::Engine se(s.model, {threads}), te(t.model, {threads});
    if (!o->force && path_exists(o->output))
      fail(o->output, "already exists; refusing to overwrite it (pass --force)");  // before minutes of work
    map::CollectOptions co;
    co.residual = !o->no_residual;
    co.threads = threads;
    const map::CalibrationSet set = map::collect_calibration(se, s.model->identity(), te, t.model->identity(), prompts,
                                                             split, s.tokenizer->identity(), shared.layers, co);
    set.write(o->output, o->force);
    const int64_t rows = set.rows(map::SplitPart::calib) + set.rows(map::SplitPart::eval);
    std::cout << "calibration: " << nc << " calib + " << ne << " eval prompts, " << rows << " rows, shared layers "
              << shared.layers << ", split " << split.hash() << "\nwrote " << o->output << "\n";
  });
}

void add_fit(CLI::App& m) {
  auto* c = m.add_subcommand("fit", "Fit per-layer, per-head K/V maps (closed-form ridge/affine in f64)");
  struct Opts {
    std::string calibration, output, kind = "ridge", receipt, relation;
    double lambda = 1e-3;
    int threads = 1;
    bool anchor = false, residual = false, force = false;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("--calibration", o->calibration, "Calibration directory (map collect)")->required();
  c->add_option("--kind", o->kind, "identity | ridge | affine")->check(CLI::IsMember({"identity", "ridge", "affine"}));
  c->add_option("--lambda", o->lambda, "The one declared penalty (> 0)");
  c->add_flag("--anchor-identity", o->anchor, "Penalize ||W - I||^2 instead of ||W||^2");
  c->add_flag("--residual-maps", o->residual, "Also fit residual maps at boundaries (s, L) for anchors a > s");
  c->add_option("-o,--output", o->output, "Mapper directory")->required();
  c->add_option("--receipt", o->receipt, "Bridge receipt path (default: OUTPUT.receipt.json)");
  add_relation_option(c, o->relation, "how source and target relate (required; recorded, never inferred)")->required();
  add_threads_option(c, o->threads);
  c->add_flag("--force", o->force, "Replace an existing output");
  c->callback([o] {
    for (const std::string& out : {o->output, receipt_path_for(o->output, o->receipt)})
      refuse_output_is_input(out, {o->calibration});
    const map::CalibrationSet set = map::CalibrationSet::read(o->calibration);
    map::MapperOptions mo;
    mo.kind = map::parse_mapper_kind(o->kind, "map fit");
    mo.lambda = o->lambda;
    mo.anchor_identity = o->anchor;
    mo.residual_maps = o->residual;
    mo.relation = o->relation;
    mo.threads = resolve_threads(o->threads);
    const map::Mapper mp = map::fit_mapper(set, mo);
    const std::string rpath = receipt_path_for(o->output, o->receipt);
    if (!o->force && path_exists(rpath)) fail(rpath, "already exists; refusing to overwrite it (pass --force)");
    mp.write(o->output, o->force);
    contract::BridgeReceipt r;
    r.source = endpoint(mp.source, mp.tokenizer_identity);
    r.target = endpoint(mp.target, mp.tokenizer_identity);
    r.kind = map::mapper_kind_name(mp.kind);
    r.relation = mp.relation;
    r.mapper_hash = mp.kind == map::MapperKind::identity ? "" : mp.hash();
    std::vector<std::string> roles;
    for (int l = 0; l < mp.target.n_layers; ++l) roles.push_back(l < mp.shared_layers ? "reused" : "mapped");
    r.layers = plan_of(roles);
    if (mp.kind != map::MapperKind::identity) {
      if (mp.anchor_identity) r.anchor_lambda = mp.lambda; else r.lambda = mp.lambda;
      r.calibration = contract::Calibration{mp.split_hash, int64_t(set.split.calib.size()), int64_t(set.split.eval.size())};
      r.held_out = true;  // R² over the evaluation prompts, which no fit read
      double km = 0, vm = 0, kmin = 1, vmin = 1;
      int n = 0;
      for (int l = mp.shared_layers; l < mp.target.n_layers; ++l)
        for (int h = 0; h < mp.target.n_kv_heads; ++h) {
          const auto& hm = mp.head(l, h);
          if (!std::isfinite(hm.k_r2_eval) || !std::isfinite(hm.v_r2_eval)) continue;
          km += hm.k_r2_eval; vm += hm.v_r2_eval; ++n;
          kmin = std::min(kmin, hm.k_r2_eval); vmin = std::min(vmin, hm.v_r2_eval);
        }
      if (n > 0) {
        r.metrics["k_r2_mean"] = km / n; r.metrics["v_r2_mean"] = vm / n;
        r.metrics["k_r2_min"] = kmin; r.metrics["v_r2_min"] = vmin;
      }
    }
    r.created_by = "ember map fit";
    r.notes = "K/V reconstruction R² over mapped layers on held-out prompts; no behavioural evaluation";
    contract::write_receipt(rpath, r, o->force);
    std::printf("mapper %s (%s, %s, lambda %g%s), split %s\n", mp.hash().c_str(), map::mapper_kind_name(mp.kind),
                mp.relation.c_str(), mp.lambda, mp.anchor_identity ? ", anchored at identity" : "", mp.split_hash.c_str());
    std::printf("%-6s %-5s %12s %12s %12s %12s\n", "layer", "head", "K R2 train", "K R2 eval", "V R2 train", "V R2 eval");
    for (int l = 0; l < mp.target.n_layers; ++l)
      for (int h = 0; h < mp.target.n_kv_heads; ++h) {
        const auto& hm = mp.head(l, h);
        std::printf("%-6d %-5d %12.6f %12.6f %12.6f %12.6f\n", l, h, hm.k_r2_train, hm.k_r2_eval, hm.v_r2_train, hm.v_r2_eval);
      }
    for (const auto& rm : mp.residual)
      std::printf("residual map at boundary %d: R2 train %.6f eval %.6f\n", rm.boundary, rm.r2_train, rm.r2_eval);
    std::printf("wrote %s and %s\n", printable(o->output).c_str(), printable(rpath).c_str());
  });
}

void add_apply(CLI::App& m) {
  auto* c = m.add_subcommand("apply", "Map a source snapshot into a mapped cache for the target (ember.kv-mapped.v1)");
  struct Opts {
    std::string mapper, snapshot, target, tokenizer, output, receipt, sign, registry, relation;
    bool force = false;
    kv::TrustRequirements trust;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("--mapper", o->mapper, "Mapper directory (map fit)")->required();
  add_relation_option(c, o->relation, "default: the mapper's (a different one is refused)");
  c->add_option("--snapshot", o->snapshot, "Source snapshot (directory or .kvc)")->required();
  c->add_option("--target", o->target, "Target model (GGUF): its coordinates go into the mapped cache")->required();
  c->add_option("--tokenizer", o->tokenizer, "Hugging Face tokenizer.json of the target (default: the GGUF's own)");
  c->add_option("-o,--output", o->output, "Mapped cache directory")->required();
  c->add_option("--receipt", o->receipt, "Bridge receipt path (default: OUTPUT.receipt.json)");
  c->add_flag("--force", o->force, "Replace an existing output");
  add_sign_flag(c, o->sign);
  add_trust_flags(c, o->trust);  // on the source snapshot
  add_registry_option(c, o->registry);
  c->callback([o] {
    const std::string where = "map apply";
    for (const std::string& out : {o->output, receipt_path_for(o->output, o->receipt)})
      refuse_output_is_input(out, {o->mapper, o->snapshot, o->target, o->tokenizer});
    const map::Mapper mp = map::Mapper::read(o->mapper);
    const kv::VerifiedState verified = open_state_ref(o->snapshot);
    const kv::KvState& src = verified.state();
    check_artifact_trust(o->snapshot, src.manifest, o->trust);
    if (src.manifest.model.identity != mp.source.identity)
      fail_field(where, "snapshot model identity", mp.source.identity + " (the mapper's source)", src.manifest.model.identity);
    if (src.manifest.tokenizer.identity != mp.tokenizer_identity)
      fail_field(where, "snapshot tokenizer identity", mp.tokenizer_identity, src.manifest.tokenizer.identity);
    const Loaded t = load_model({o->target, o->tokenizer, ""});
    if (t.model->identity() != mp.target.identity)
      fail_field(where, "target model identity", mp.target.identity + " (the mapper's target)", t.model->identity());
    model::Engine te(t.model, {});
    contract::RegistryQuery q;
    q.source = {src.manifest.model.identity, src.manifest.model.architecture, src.manifest.tokenizer.identity, ""};
    q.target = {t.model->identity(), model::arch_name(te.config().arch), t.tokenizer->identity(), ""};
    q.kind = map::mapper_kind_name(mp.kind);
    q.mapper_hash = mp.hash();
    const std::string registration = registration_of(o->registry, q);
    kv::KvState out;
    kv::MappedProvenance mapping;
    out.manifest = map::target_coordinates(te, t.tokenizer->identity());
    out.manifest.prefix = src.manifest.prefix;
    out.manifest.resume = src.manifest.resume;
    const model::ModelConfig& tc = te.config();
    out.cache = model::KvCache(tc.n_layers, tc.n_kv_heads, tc.head_dim, src.cache.n_pos);
    out.cache.n_pos = src.cache.n_pos;
    map::map_layers(mp, rope_config_of(src.manifest), tc, src.cache, mp.shared_layers, 0, tc.n_layers, out.cache);
    mapping.kind = map::mapper_kind_name(mp.kind);
    mapping.relation = relation_of(mp, o->relation, where);
    mapping.mapper_hash = mp.hash();
    mapping.calibration_split_hash = mp.split_hash;
    mapping.shared_layers = mp.shared_layers;
    mapping.anchor = tc.n_layers;
    for (int l = 0; l < tc.n_layers; ++l) mapping.layer_roles.push_back(l < mp.shared_layers ? "reused" : "mapped");
    mapping.source_model_identity = src.manifest.model.identity;
    mapping.source_manifest_sha256 = sha256_hex(verified.manifest_text());
    mapping.source_prefix_sha256 = src.manifest.prefix.sha256;
    mapping.registration = registration;
    out.provenance = mapping;
    const std::string rpath = receipt_path_for(o->output, o->receipt);
    if (!o->force && path_exists(rpath)) fail(rpath, "already exists; refusing to overwrite it (pass --force)");
    const int positions = out.cache.n_pos;
    const kv::VerifiedState sealed = kv::seal(std::move(out), o->output, o->sign);
    kv::write_state_dir(sealed, o->output, o->force);
    contract::BridgeReceipt r;
    r.source = endpoint(mp.source, mp.tokenizer_identity);
    r.target = endpoint(mp.target, mp.tokenizer_identity);
    r.kind = mapping.kind;
    r.relation = mapping.relation;
    r.mapper_hash = mp.kind == map::MapperKind::identity ? "" : mp.hash();
    r.layers = plan_of(mapping.layer_roles);
    if (mp.kind != map::MapperKind::identity)
      r.calibration = contract::Calibration{mp.split_hash, mp.calib_rows > 0 ? 1 : 0, 0};
    if (r.calibration) r.calibration->n_calib = std::max<int64_t>(1, r.calibration->n_calib);
    r.created_by = "ember map apply";
    r.notes = "mapped cache of " + std::to_string(positions) + " positions; not evaluated";
    contract::write_receipt(rpath, r, o->force);
    std::cout << "mapped cache (" << mapping.kind << ", " << mapping.relation << ", mapper " << mapping.mapper_hash << ") of "
              << positions << " positions: layers [0, " << mp.shared_layers << ") reused, ["
              << mp.shared_layers << ", " << tc.n_layers << ") mapped\nwrote " << printable(o->output) << "\n";
    print_seal(sealed.manifest());
  });
}

void add_map_replay(CLI::App& m) {
  auto* c = m.add_subcommand("replay", "Resume the target model from a mapped cache (ember.kv-mapped.v1)");
  struct Opts {
    std::string mapped, model, tokenizer;
    int n = 16, threads = 0;
    bool allow_past_context = false;
    kv::TrustRequirements trust;
  };
  auto o = std::make_shared<Opts>();
  add_trust_flags(c, o->trust);
  c->add_option("--mapped", o->mapped, "Mapped cache directory")->required();
  c->add_option("-m,--model", o->model, "Target model (GGUF)")->required();
  c->add_option("--tokenizer", o->tokenizer, "Hugging Face tokenizer.json (default: the GGUF's own)");
  c->add_option("-n", o->n, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  add_threads_option(c, o->threads);
  add_past_context_flag(c, o->allow_past_context);
  c->callback([o] {
    kv::VerifiedState st = open_state_ref(o->mapped, {kv::Accept::mapped});
    check_artifact_trust(o->mapped, st.manifest(), o->trust);
    const Loaded t = load_model({o->model, o->tokenizer, ""});
    model::Engine te(t.model, {resolve_threads(o->threads), o->allow_past_context});
    check_positions(te, int64_t(st.cache().n_pos) + 1, o->mapped, "geometry.positions + the resume token",
                    o->n, "-n");
    // The same checked import as kv replay (the coordinates; the state was verified when it
    // was read). No room is reserved: the engine grows the cache as it fills.
    const kv::MappedProvenance mapping = *st.header().mapping();
    const int32_t resume = st.manifest().resume.token;
    model::KvCache cache = kv::import_checked(std::move(st), map::target_coordinates(te, t.tokenizer->identity()),
                                              0, "map replay " + o->mapped);
    std::fprintf(stderr, "ember: resuming from a MAPPED cache (%s, mapper %s, s = %d, a = %d), not a native snapshot\n",
                 mapping.kind.c_str(), mapping.mapper_hash.c_str(), mapping.shared_layers, mapping.anchor);
    print_greedy(te, *t.tokenizer, cache, te.forward(cache, std::span<const int32_t>(&resume, 1)), o->n);
  });
}

// The bridge receipt of one handoff, with the check's metrics when there was one.
contract::BridgeReceipt hybrid_receipt(const Loaded& s, const Loaded& t, const map::Mapper* mp,
                                       const map::HybridOutcome& out, const std::string& relation) {
  const map::HybridRun& run = out.run;
  contract::BridgeReceipt rc;
  rc.source = {s.model->identity(), model::arch_name(s.model->config().arch), s.tokenizer->identity(), ""};
  rc.target = {t.model->identity(), model::arch_name(t.model->config().arch), t.tokenizer->identity(), ""};
  rc.kind = "hybrid";
  rc.mapper_hash = mp ? mp->hash() : "";
  rc.layers = plan_of(map::layer_role_names(run.report));
  if (mp) rc.calibration = contract::Calibration{mp->split_hash, 1, 0};
  rc.created_by = "ember map hybrid";
  rc.notes = "s = " + std::to_string(run.s) + ", a = " + std::to_string(run.a) + "; target prefill work saved " +
             std::to_string(100 * run.report.prefill_work_saved()) + "% (weight MACs)";
  rc.relation = relation;
  if (out.check) {
    rc.n_comparisons = 1;
    rc.metrics["next_token_agreement"] = out.check->first.same_argmax ? 1.0 : 0.0;
    rc.metrics["mean_rel_logit_error"] = out.check->first.rel_l2;
    rc.metrics["max_abs_logit_diff"] = out.check->first.max_abs;
    rc.held_out = !mp;  // no fit involved: the prompt cannot have been seen by one
  }
  return rc;
}

void add_hybrid(CLI::App& m) {
  auto* c = m.add_subcommand("hybrid", "Recompute-anchor handoff: reuse shared layers, map [s, a), recompute [a, L)");
  struct Opts {
    std::string source, target, prompt, prompt_ids, tokenizer, mapper, output, json_out, receipt, registry, relation;
    int anchor = -1, n = 16, threads = 1;
    bool check = false, force = false;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("--source", o->source, "Source model (GGUF)")->required();
  c->add_option("--target", o->target, "Target model (GGUF)")->required();
  c->add_option("--tokenizer", o->tokenizer, "Hugging Face tokenizer.json for both models (default: each GGUF's own)");
  auto* prompt = c->add_option("-p,--prompt", o->prompt, "Prompt text");
  auto* prompt_ids = c->add_option("--prompt-ids", o->prompt_ids, "Prompt as comma-separated token ids (no BOS added)");
  prompt->excludes(prompt_ids);
  add_relation_option(c, o->relation, "required with --output/--receipt unless --mapper (then: the mapper's)");
  c->add_option("--anchor", o->anchor, "Anchor a (default: s, the exact hybrid)");
  c->add_option("--mapper", o->mapper, "Mapper directory (needed when a > s)");
  c->add_option("-n", o->n, "Tokens to generate")->check(CLI::Range(1, 1 << 16));
  add_threads_option(c, o->threads);
  c->add_flag("--check", o->check, "Also run the target's full prefill and compare (bit-exact expected at a == s)");
  c->add_option("-o,--output", o->output, "Write the handed-over prefix as a mapped cache (ember.kv-mapped.v1)");
  c->add_option("--json-out", o->json_out, "Write a JSON report to this file");
  c->add_option("--receipt", o->receipt, "Write a bridge receipt (default with --output: OUTPUT.receipt.json)");
  c->add_flag("--force", o->force, "Replace existing outputs");
  add_registry_option(c, o->registry);
  c->callback([o, prompt, prompt_ids] {
    const std::string where = "map hybrid";
    for (const std::string& out : {o->output, o->json_out, o->receipt})
      refuse_output_is_input(out, {o->source, o->target, o->mapper, o->tokenizer});
    if (prompt->count() + prompt_ids->count() == 0)
      fail_field(where, "prompt", "--prompt TEXT or --prompt-ids LIST", "neither");
    const Loaded s = load_model({o->source, o->tokenizer, ""}), t = load_model({o->target, o->tokenizer, ""});
    require_same_tokenizer(s, t, where);
    std::unique_ptr<map::Mapper> mp;
    if (!o->mapper.empty()) mp = std::make_unique<map::Mapper>(map::Mapper::read(o->mapper));
    // The registry gate runs before anything is computed (run_hybrid checks the mapper's
    // identities and shared layers against these models).
    contract::RegistryQuery q;
    q.source = {s.model->identity(), model::arch_name(s.model->config().arch), s.tokenizer->identity(), ""};
    q.target = {t.model->identity(), model::arch_name(t.model->config().arch), t.tokenizer->identity(), ""};
    q.kind = "hybrid";
    q.mapper_hash = mp ? mp->hash() : "";
    const std::string registration = registration_of(o->registry, q);
    std::string relation = mp ? relation_of(*mp, o->relation, where) : o->relation;
    if (relation.empty() && (!o->output.empty() || !o->receipt.empty()))
      fail_field(where, "--relation", "quantization-boundary, same-base or cross-model (an artifact is written)", "none");
    const bool by_ids = prompt_ids->count() > 0;
    const std::vector<int32_t> ids =
        by_ids ? parse_token_ids("--prompt-ids", o->prompt_ids) : s.tokenizer->encode(o->prompt, s.tokenizer->add_bos_default());
    for (int32_t id : ids)
      if (id >= s.model->config().n_vocab || id >= t.model->config().n_vocab)
        fail_field(where, "--prompt-ids", "ids below both vocabulary sizes", std::to_string(id));
    if (ids.size() < 2)
      fail_field(where, by_ids ? "--prompt-ids" : "--prompt", "at least 2 tokens (BOS included)", std::to_string(ids.size()));
    const int threads = resolve_threads(o->threads);
    model::Engine se(s.model, {threads}), te(t.model, {threads});
    map::HybridOptions ho;
    ho.anchor = o->anchor;
    ho.n = o->n;
    ho.check = o->check;
    ho.is_end_of_generation = [&](int32_t id) { return t.tokenizer->is_eog(id); };
    ho.on_handoff = [&](const map::HybridRun& run) {
      if (!o->output.empty()) {
        kv::KvState st = map::hybrid_mapped_state(run, te, t.tokenizer->identity(), s.model->identity(), mp.get());
        kv::MappedProvenance& mapping = std::get<kv::MappedProvenance>(st.provenance);
        mapping.registration = registration;
        mapping.relation = relation;
        kv::write_state_dir(kv::seal(std::move(st), o->output), o->output, o->force);
      }
      std::fprintf(stderr, "ember: %s\n", map::handoff_line(run).c_str());
      if (!by_ids) std::cout << o->prompt;
    };
    ho.on_token = [&](int32_t id) { std::cout << t.tokenizer->token_bytes(id) << std::flush; };
    const map::HybridOutcome out = map::hybrid_handoff(se, te, *s.model, *t.model, mp.get(), ids, ho, where);
    std::cout << "\n";
    if (out.check)
      std::fprintf(stderr, "ember: check vs full target prefill: first logits %s (rel err %.3e), greedy %s\n",
                   out.check->first.bit_identical ? "bit-identical" : "differ", out.check->first.rel_l2,
                   out.check->same_greedy ? "identical" : "differs");
    const std::string rpath = o->receipt.empty() && !o->output.empty() ? receipt_path_for(o->output, "") : o->receipt;
    if (!rpath.empty()) contract::write_receipt(rpath, hybrid_receipt(s, t, mp.get(), out, relation), o->force);
    if (!o->json_out.empty())
      write_file_atomic(o->json_out, out.report(s.model->identity(), t.model->identity(), mp.get()).dump(2) + "\n", o->force);
    if (out.check && out.check->exact_hybrid_differs) throw CheckFailed{"the exact hybrid (a == s) differs from the target's full prefill"};
  });
}

}  // namespace

void register_map_artifact_commands(CLI::App& m) {
  add_collect(m);
  add_fit(m);
  add_apply(m);
  add_map_replay(m);
  add_hybrid(m);
}

}  // namespace ember::cli
