// llama.cpp "ggsq" v3 sequence state: the checked reader and the f16 writer.
#include "kv/llamacpp_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "gguf/blocks.h"
#include "gguf/dequantize.h"
#include "gguf/quantize.h"
#include "gguf/types.h"
#include "util/error.h"
#include "util/f16.h"

namespace ember::kv {
namespace {

struct KvType {
  int32_t number;
  const char* name;
  uint32_t block_elems, block_bytes;
};
constexpr KvType kKvTypes[] = {
    {kGgmlF32, "f32", 1, 4},     {kGgmlF16, "f16", 1, 2},     {kGgmlBf16, "bf16", 1, 2},
    {kGgmlQ8_0, "q8_0", 32, 34}, {kGgmlQ4_0, "q4_0", 32, 18}, {kGgmlQ4_1, "q4_1", 32, 20},
    {kGgmlQ5_0, "q5_0", 32, 22}, {kGgmlQ5_1, "q5_1", 32, 24}, {kGgmlIq4Nl, "iq4_nl", 32, 18},
};

const KvType* kv_type(int32_t number) {
  for (const KvType& t : kKvTypes)
    if (t.number == number) return &t;
  return nullptr;
}

std::string type_list() {
  std::string s;
  for (const KvType& t : kKvTypes) s += (s.empty() ? "" : "|") + std::string(t.name);
  return s;
}

std::string describe_type(int32_t number) {
  if (const KvType* t = kv_type(number))
    return std::string(t->name) + " (" + std::to_string(number) + ")";
  if (number >= 0) return gguf::type_name(uint32_t(number)) + " (" + std::to_string(number) + ")";
  return std::to_string(number);
}

std::string layer_field(int l, const char* what) {
  return "layer[" + std::to_string(l) + "]." + what;
}

// One row of `n` elements of `type` to f16 bits, as ggml dequantizes it (f16 copied as is);
// with rot > 0, llama.cpp's Hadamard rotation is undone on every block of `rot` elements
// (blocks never straddle heads: rot divides head_dim).
void decode_row(int32_t type, const uint8_t* src, int64_t n, int rot, float* tmp, uint16_t* dst) {
  switch (type) {
    case kGgmlF16:
      std::memcpy(dst, src, size_t(n) * 2);
      return;
    case kGgmlF32:
      std::memcpy(tmp, src, size_t(n) * 4);
      break;
    default:
      gguf::dequantize_row(gguf::TensorType(uint32_t(type)), src, tmp, n);
      break;
  }
  if (rot > 0)
    for (int64_t i = 0; i < n; i += rot) llamacpp_hadamard(tmp + i, rot);
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(tmp[i]);
}

bool quantized(int32_t type) { return type != kGgmlF32 && type != kGgmlF16 && type != kGgmlBf16; }

// One element of a transposed V run (a per-element type: f32, f16 or bf16) to f16 bits.
uint16_t decode_element(int32_t type, const uint8_t* p) {
  if (type == kGgmlF16) return gguf::load_u16(p);
  if (type == kGgmlBf16) return f32_to_f16(bf16_to_f32(gguf::load_u16(p)));
  float f;
  std::memcpy(&f, p, 4);
  return f32_to_f16(f);
}

// The checks every layer's type header gets; returns the row size.
uint64_t check_type(ByteReader& r, int l, const char* part, int32_t want_type, int32_t* seen,
                    uint64_t n_embd) {
  const std::string tf = layer_field(l, (std::string(part) + "_type").c_str());
  const int32_t type = r.read_le<int32_t>(tf);
  const KvType* kt = kv_type(type);
  if (!kt)
    fail_field(r.where(), tf, "a cache type ember reads (" + type_list() + ")",
               describe_type(type));
  if (l > 0 && type != want_type)
    fail_field(r.where(), tf,
               describe_type(want_type) + " (layer 0's; llama.cpp uses one type per part)",
               describe_type(type));
  *seen = type;
  const uint64_t row = ggml_kv_row_bytes(type, n_embd);
  if (row == 0)
    fail_field(r.where(), tf,
               "a type whose block of " + std::to_string(kt->block_elems) + " divides the row of " +
                   std::to_string(n_embd) + " elements (kv_heads * head_dim)",
               describe_type(type));
  return row;
}

}  // namespace

void llamacpp_hadamard(float* x, int n) {
  EMBER_CHECK(n > 0 && n <= 4096 && (n & (n - 1)) == 0);
  const float scale = 1.0f / std::sqrt(float(n));
  for (int i = 0; i < n; ++i) x[i] *= scale;
  for (int len = 1; len < n; len *= 2)
    for (int i = 0; i < n; i += 2 * len)
      for (int j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
}

void llamacpp_store_row(int32_t type, int rot, const float* x, uint8_t* blocks, float* y,
                        int64_t n) {
  EMBER_CHECK(rot >= 0 && (rot == 0 || n % rot == 0));
  const auto t = gguf::TensorType(uint32_t(type));
  EMBER_CHECK(gguf::is_kv_cache_quant_type(t));
  if (rot > 0) {
    std::vector<float> r(x, x + n);
    for (int64_t i = 0; i < n; i += rot) llamacpp_hadamard(r.data() + i, rot);
    gguf::quantize_row_kv_cache(t, r.data(), blocks, n);
  } else {
    gguf::quantize_row_kv_cache(t, x, blocks, n);
  }
  gguf::dequantize_row(t, blocks, y, n);
  if (rot > 0)
    for (int64_t i = 0; i < n; i += rot) llamacpp_hadamard(y + i, rot);
}

int llamacpp_rotation(int head_dim, bool keys) {
  if (head_dim <= 0 || head_dim % 64 != 0) return 0;
  if (!keys) return 64;
  int n = 64;
  while (n <= 4096 && head_dim % (2 * n) == 0) n *= 2;
  return n;
}

std::string ggml_kv_type_name(int32_t type) {
  const KvType* t = kv_type(type);
  return t ? t->name : "";
}

uint64_t ggml_kv_row_bytes(int32_t type, uint64_t n) {
  const KvType* t = kv_type(type);
  if (!t || n % t->block_elems != 0) return 0;
  return n / t->block_elems * t->block_bytes;
}

LlamaCppState parse_llamacpp_state(std::span<const uint8_t> bytes, const LlamaCppTarget& t,
                                   const std::string& where) {
  EMBER_CHECK(t.layers > 0 && t.kv_heads > 0 && t.head_dim > 0 && t.context > 0 && t.vocab > 0);
  ByteReader r(bytes.data(), bytes.size(), where);
  const uint32_t magic = r.read_le<uint32_t>("magic");
  if (magic != kGgsqMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", magic);
    fail_field(where, "magic", "0x67677371 ('ggsq', llama_state_seq_save_file)", hex);
  }
  const uint32_t version = r.read_le<uint32_t>("version");
  if (version != kGgsqVersion)
    fail_field(where, "version", std::to_string(kGgsqVersion) + " (LLAMA_STATE_SEQ_VERSION read)",
               std::to_string(version));
  LlamaCppState s;
  const uint32_t n_tokens = r.read_le<uint32_t>("n_token_count");
  if (n_tokens == 0) fail_field(where, "n_token_count", "at least 1 token", "0");
  if (n_tokens > uint32_t(t.context))
    fail_field(where, "n_token_count",
               "at most " + std::to_string(t.context) + " (the model's context length)",
               std::to_string(n_tokens));
  if (uint64_t(n_tokens) * 4 > r.remaining())
    fail_field(where, "n_token_count",
               "at most " + std::to_string(r.remaining() / 4) +
                   " (the ids the rest of the file can hold: truncated, or a wrong count)",
               std::to_string(n_tokens));
  s.tokens.resize(n_tokens);
  for (uint32_t i = 0; i < n_tokens; ++i) {
    const int32_t id = r.read_le<int32_t>("tokens");
    if (id < 0 || id >= t.vocab)
      fail_field(where, "tokens[" + std::to_string(i) + "]",
                 "an id in [0, " + std::to_string(t.vocab) + ")", std::to_string(id));
    s.tokens[i] = id;
  }
  s.n_stream = r.read_le<uint32_t>("n_stream");
  if (s.n_stream < 1 || s.n_stream > kGgsqMaxStreams)
    fail_field(where, "n_stream", "1.." + std::to_string(kGgsqMaxStreams),
               std::to_string(s.n_stream));
  const uint64_t n_embd = uint64_t(t.kv_heads) * uint64_t(t.head_dim);
  bool have_cells = false;
  for (uint32_t st = 0; st < s.n_stream; ++st) {
    const std::string sf = "stream[" + std::to_string(st) + "].cell_count";
    const uint32_t cells = r.read_le<uint32_t>(sf);
    if (cells == 0) continue;
    if (have_cells)
      fail_field(where, sf, "0 (one sequence: another stream already held its cells)",
                 std::to_string(cells));
    have_cells = true;
    if (cells != n_tokens)
      fail_field(where, sf, std::to_string(n_tokens) + " (n_token_count: one cell per token)",
                 std::to_string(cells));
    for (uint32_t i = 0; i < cells; ++i) {
      const std::string cf = "cell[" + std::to_string(i) + "]";
      const int32_t pos = r.read_le<int32_t>(cf + ".pos");
      if (pos != int32_t(i))
        fail_field(where, cf + ".pos", std::to_string(i) + " (positions contiguous from 0)",
                   std::to_string(pos));
      const uint32_t n_seq = r.read_le<uint32_t>(cf + ".n_seq_id");
      if (n_seq != 1)
        fail_field(where, cf + ".n_seq_id", "1 (one sequence)", std::to_string(n_seq));
      const int32_t seq = r.read_le<int32_t>(cf + ".seq_id");
      if (i == 0) {
        if (seq < 0 || seq >= int32_t(kGgsqMaxStreams))
          fail_field(where, cf + ".seq_id", "0.." + std::to_string(kGgsqMaxStreams - 1),
                     std::to_string(seq));
        s.seq_id = seq;
      } else if (seq != s.seq_id) {
        fail_field(where, cf + ".seq_id", std::to_string(s.seq_id) + " (cell 0's: one sequence)",
                   std::to_string(seq));
      }
    }
    const uint32_t v_trans = r.read_le<uint32_t>("v_trans");
    if (v_trans > 1)
      fail_field(where, "v_trans", "0 (V in rows) or 1 (V transposed)", std::to_string(v_trans));
    s.v_trans = v_trans == 1;
    const uint32_t n_layer = r.read_le<uint32_t>("n_layer");
    if (n_layer != uint32_t(t.layers))
      fail_field(where, "n_layer", std::to_string(t.layers) + " (the model's layers)",
                 std::to_string(n_layer));
    // Before allocating the cache: the rest of the file must be able to hold K and V of every
    // layer in the smallest type that fits the row (so the cache is at most a few times the file).
    const uint64_t min_row = n_embd % 32 == 0 ? n_embd / 32 * 18 : n_embd * 2;
    const uint64_t least = uint64_t(t.layers) * 2 * (12 + uint64_t(cells) * min_row);
    if (least > r.remaining())
      fail_field(where, "layer data",
                 "at least " + std::to_string(least) + " bytes for " + std::to_string(cells) +
                     " cells of " + std::to_string(t.layers) + " layers",
                 std::to_string(r.remaining()) + " bytes left (truncated)");
    s.cache = model::KvCache(t.layers, t.kv_heads, t.head_dim, int(cells));
    s.cache.n_pos = int(cells);
    std::vector<float> tmp(n_embd);
    std::vector<uint16_t> row16(n_embd);
    auto scatter = [&](std::vector<uint16_t>& part, int l, uint32_t cell) {
      for (int h = 0; h < t.kv_heads; ++h)
        std::copy_n(row16.data() + size_t(h) * t.head_dim, t.head_dim,
                    part.data() + s.cache.index(l, h, int(cell)));
    };
    // One layer of cell rows (K, or V when not transposed): type, row size, then `cells` rows.
    const auto read_rows = [&](int l, const char* part, int32_t* type, int* rot, bool keys,
                               std::vector<uint16_t>& dst) {
      const uint64_t row = check_type(r, l, part, *type, type, n_embd);
      *rot = t.attn_rot && quantized(*type) ? llamacpp_rotation(t.head_dim, keys) : 0;
      const std::string rf = layer_field(l, (std::string(part) + "_size_row").c_str());
      const uint64_t got = r.read_le<uint64_t>(rf);
      if (got != row)
        fail_field(where, rf,
                   std::to_string(row) + " (ggml_row_size(" + ggml_kv_type_name(*type) + ", " +
                       std::to_string(n_embd) + "))",
                   std::to_string(got));
      const uint8_t* data = r.take(size_t(row * cells), layer_field(l, (std::string(part) + "_data").c_str()));
      for (uint32_t c = 0; c < cells; ++c) {
        decode_row(*type, data + c * row, int64_t(n_embd), *rot, tmp.data(), row16.data());
        scatter(dst, l, c);
      }
    };
    for (int l = 0; l < t.layers; ++l) read_rows(l, "k", &s.type_k, &s.rot_k, /*keys=*/true, s.cache.k);
    for (int l = 0; l < t.layers; ++l) {
      if (!s.v_trans) {
        read_rows(l, "v", &s.type_v, &s.rot_v, /*keys=*/false, s.cache.v);
        continue;
      }
      const std::string tf = layer_field(l, "v_type");
      const int32_t type = r.read_le<int32_t>(tf);
      if (type != kGgmlF32 && type != kGgmlF16 && type != kGgmlBf16)
        fail_field(where, tf,
                   "f32|f16|bf16 (a transposed V holds single elements; llama.cpp quantizes V only "
                   "with flash attention, v_trans 0)",
                   describe_type(type));
      if (l > 0 && type != s.type_v)
        fail_field(where, tf,
                   describe_type(s.type_v) + " (layer 0's; llama.cpp uses one type per part)",
                   describe_type(type));
      s.type_v = type;
      const uint32_t el = uint32_t(ggml_kv_row_bytes(type, 1));
      const std::string ef = layer_field(l, "v_size_el");
      const uint32_t got_el = r.read_le<uint32_t>(ef);
      if (got_el != el)
        fail_field(where, ef,
                   std::to_string(el) + " (ggml_type_size(" + ggml_kv_type_name(type) + "))",
                   std::to_string(got_el));
      const std::string nf = layer_field(l, "n_embd_v_gqa");
      const uint32_t got_n = r.read_le<uint32_t>(nf);
      if (got_n != n_embd)
        fail_field(where, nf, std::to_string(n_embd) + " (kv_heads * head_dim)",
                   std::to_string(got_n));
      const uint8_t* data = r.take(size_t(n_embd * cells * el), layer_field(l, "v_data"));
      for (uint64_t e = 0; e < n_embd; ++e) {
        const int h = int(e / uint64_t(t.head_dim)), d = int(e % uint64_t(t.head_dim));
        for (uint32_t c = 0; c < cells; ++c)
          s.cache.v[s.cache.index(l, h, int(c)) + size_t(d)] =
              decode_element(type, data + (e * cells + c) * el);
      }
    }
  }
  if (!have_cells)
    fail_field(where, "cell_count",
               std::to_string(n_tokens) + " cells in one stream (n_token_count)",
               "no stream with cells");
  if (r.remaining() != 0)
    fail_field(where, "trailing bytes", "the end of the file after the last layer",
               std::to_string(r.remaining()) + " more bytes");
  return s;
}

void write_llamacpp_state(const model::KvCache& c, std::span<const int32_t> tokens, bool v_trans,
                          ByteSink& out) {
  EMBER_CHECK(c.n_pos > 0 && tokens.size() == size_t(c.n_pos));
  const uint32_t P = uint32_t(c.n_pos);
  const uint32_t n_embd = uint32_t(c.n_kv_heads) * uint32_t(c.head_dim);
  out.write_le<uint32_t>(kGgsqMagic);
  out.write_le<uint32_t>(kGgsqVersion);
  out.write_le<uint32_t>(P);
  for (int32_t t : tokens) out.write_le<int32_t>(t);
  out.write_le<uint32_t>(1);  // n_stream
  out.write_le<uint32_t>(P);  // cell_count
  for (uint32_t i = 0; i < P; ++i) {
    out.write_le<int32_t>(int32_t(i));  // pos
    out.write_le<uint32_t>(1);          // n_seq_id
    out.write_le<int32_t>(0);           // seq_id
  }
  out.write_le<uint32_t>(v_trans ? 1 : 0);
  out.write_le<uint32_t>(uint32_t(c.n_layers));
  std::vector<uint16_t> row(n_embd);
  auto write_rows = [&](bool keys) {
    for (int l = 0; l < c.n_layers; ++l) {
      out.write_le<int32_t>(kGgmlF16);
      out.write_le<uint64_t>(uint64_t(n_embd) * 2);
      for (uint32_t p = 0; p < P; ++p) {
        for (int h = 0; h < c.n_kv_heads; ++h)
          std::copy_n(keys ? c.k_row(l, h, int(p)) : c.v_row(l, h, int(p)), c.head_dim,
                      row.data() + size_t(h) * c.head_dim);
        out.write(row.data(), row.size() * 2);
      }
    }
  };
  write_rows(true);
  if (!v_trans) {
    write_rows(false);
    return;
  }
  std::vector<uint16_t> run(P);
  for (int l = 0; l < c.n_layers; ++l) {
    out.write_le<int32_t>(kGgmlF16);
    out.write_le<uint32_t>(2);  // v_size_el
    out.write_le<uint32_t>(n_embd);
    for (int h = 0; h < c.n_kv_heads; ++h)
      for (int d = 0; d < c.head_dim; ++d) {
        for (uint32_t p = 0; p < P; ++p) run[p] = c.v_row(l, h, int(p))[d];
        out.write(run.data(), run.size() * 2);
      }
  }
}

}  // namespace ember::kv
