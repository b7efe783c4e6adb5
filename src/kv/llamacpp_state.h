#pragma once
// llama.cpp's sequence state file (magic "ggsq", LLAMA_STATE_SEQ_VERSION 3), as
// llama_state_seq_save_file writes it and llama_state_seq_load_file reads it (llama.cpp's
// src/llama-context.cpp and src/llama-kv-cache.cpp state_write / state_read are the
// specification; docs/formats/llamacpp-state.md gives every field, what is checked and the
// versions targeted).
//
// Design goals: read a real llama.cpp cache into ember's f16 layout with every field checked
// against the model it is claimed for (llama.cpp itself checks little more than the row
// sizes); write an f16 file that llama.cpp restores for the same GGUF. Non-goals: the whole-
// context session file ("ggsn", logits and embeddings included), several sequences in one
// file, recurrent or SWA caches.
//
//   u32 magic 0x67677371 ("ggsq")   u32 version 3
//   u32 n_token_count               i32 tokens[n_token_count]
//   u32 n_stream                    then per stream: u32 cell_count, and if cell_count > 0:
//     cells[cell_count]: i32 pos, u32 n_seq_id, i32 seq_id[n_seq_id]
//     u32 v_trans, u32 n_layer
//     per layer: i32 k_type, u64 k_size_row, cell_count rows of k_size_row bytes
//     v_trans == 0, per layer: i32 v_type, u64 v_size_row, cell_count rows
//     v_trans == 1, per layer: i32 v_type, u32 v_size_el, u32 n_embd_v_gqa,
//                  n_embd_v_gqa runs of cell_count elements (element e of every cell)
//   (all little-endian; a row is one cell: [n_kv_heads][head_dim] in the ggml type)
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/kv_cache.h"
#include "util/byte_io.h"

namespace ember::kv {

inline constexpr uint32_t kGgsqMagic = 0x67677371u;  // bytes "qsgg": 'ggsq' as a LE u32
inline constexpr uint32_t kGgsqVersion = 3;
inline constexpr uint32_t kGgsqMaxStreams = 256;  // LLAMA_MAX_SEQ

// ggml type numbers of the K/V cache types read (llama.cpp --cache-type-k/-v).
inline constexpr int32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3, kGgmlQ5_0 = 6,
                         kGgmlQ5_1 = 7, kGgmlQ8_0 = 8, kGgmlIq4Nl = 20, kGgmlBf16 = 30;
// "q8_0" for a type read, else "" (the reader names unknown numbers itself).
std::string ggml_kv_type_name(int32_t type);
// ggml_row_size(type, n) for a type read, or 0 when n is not a multiple of its block size.
uint64_t ggml_kv_row_bytes(int32_t type, uint64_t n);

// llama.cpp's attention rotation (llama-kv-cache.cpp attn_rot_k / attn_rot_v, on unless the
// environment sets LLAMA_ATTN_ROT_DISABLE): a quantized K (V) of a model whose head_dim is a
// multiple of 64 is stored rotated by an orthonormal Walsh-Hadamard matrix, per block of
// this many elements of each head (K: the largest power of 2 >= 64 dividing head_dim; V: 64).
// Returns 0 (no rotation) when head_dim is not a multiple of 64. Unquantized caches
// (f32/f16/bf16) are never rotated.
int llamacpp_rotation(int head_dim, bool keys);

// x <- H x for one block of n elements (n a power of 2, at most 4096), H the orthonormal
// Walsh-Hadamard matrix in Sylvester order (H[i][j] = (-1)^popcount(i & j) / sqrt(n),
// llama.cpp's ggml_gen_hadamard), computed exactly as llama.cpp's CPU backend does
// (ggml-cpu ops.cpp ggml_compute_forward_fwht, which replaces the mul_mat by this matrix):
// every element times f32 1/sqrtf(n) first, then log2(n) butterfly stages (a + b, a - b) of
// stride 1, 2, 4, ... in f32. Its SIMD stages do the same operations (a + b*(-1) is one
// rounding of a - b), so the bits do not depend on the SIMD width. H is its own inverse, so
// the same function rotates (what llama.cpp stores) and unrotates (what the importer and
// analysis/kv_quantize do, as llama.cpp's attention does for V); each pass rounds, so
// unrotate(rotate(x)) equals x only to within a few f32 ulps. The one rotation in ember:
// every reader and model of llama.cpp's rotated caches calls it.
void llamacpp_hadamard(float* x, int n);

// One cache row x[n] (f32) through llama.cpp's store path and back: rotated per block of `rot`
// elements (0: not rotated; rot divides n), quantized into `blocks` (ggml_kv_row_bytes(type, n)
// bytes: exactly what llama.cpp stores, with ggml's x86 CPU encoder), dequantized as ggml does
// and unrotated into y[n]. x and y may be the same array. `type` a quantized cache type
// (q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl). The one model of llama.cpp's quantized store: the import
// check (kv/foreign_check.h) and analysis/kv_quantize both call it.
void llamacpp_store_row(int32_t type, int rot, const float* x, uint8_t* blocks, float* y,
                        int64_t n);

// What the model says a state file must agree with.
struct LlamaCppTarget {
  int layers = 0, kv_heads = 0, head_dim = 0;
  int context = 0;  // most tokens a state may hold (the model's context length)
  int vocab = 0;    // token ids are < vocab
  // Undo llama.cpp's rotation of quantized K/V (llamacpp_rotation). false only for a file
  // written with LLAMA_ATTN_ROT_DISABLE=1 or by a llama.cpp before the rotation existed.
  bool attn_rot = true;
};

struct LlamaCppState {
  std::vector<int32_t> tokens;  // n_token_count ids (== cell positions 0..P-1)
  uint32_t n_stream = 1;        // streams in the file (exactly one holds cells)
  int32_t seq_id = 0;           // the one sequence every cell belongs to
  bool v_trans = false;         // V stored transposed (llama.cpp without flash attention)
  int32_t type_k = kGgmlF16, type_v = kGgmlF16;  // one type per part, every layer
  int rot_k = 0, rot_v = 0;  // Hadamard block undone on import (0: the rows were not rotated)
  model::KvCache cache;      // f16 [layer][kv_head][position][dim], capacity == n_pos == P
  bool exact() const { return type_k == kGgmlF16 && type_v == kGgmlF16; }
};

// Parses and checks every field, in file order, against `t`; the first failure is one Error
// "<where>: <field>: expected ..., found ...". K/V rows are decoded exactly as ggml does
// (gguf/dequantize.h), llama.cpp's rotation of quantized rows is undone (t.attn_rot), and the
// result rounded to f16 (nearest even) where the type is not f16. Sizes are
// checked against the bytes present before anything of their size is allocated; trailing
// bytes are refused.
LlamaCppState parse_llamacpp_state(std::span<const uint8_t> bytes, const LlamaCppTarget& t,
                                   const std::string& where);

// The one writer: f16 K and V of positions [0, c.n_pos), one stream, every cell in sequence
// 0 at position i, V transposed or in rows. tokens.size() must equal c.n_pos.
void write_llamacpp_state(const model::KvCache& c, std::span<const int32_t> tokens, bool v_trans,
                          ByteSink& out);

}  // namespace ember::kv
