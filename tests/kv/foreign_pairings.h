#pragma once
// Every shared llama.cpp fixture (../shared/models/llamacpp-state/README.md) with the GGUF that
// computed it (right) and with the other GGUFs of its geometry (wrong: another fine-tune,
// another weight quantization), for the model check and kv doctor tests.
namespace ember::kv::foreign_pairings {

struct Pairing {
  const char* file;   // NAME of NAME.seq
  const char* model;  // under ../shared/models
  bool right;         // the GGUF that computed the file
};

#define STORIES_WRONG(NAME, ...)                                                   \
  {NAME, "stories260K-kjv-top.gguf", false}, {NAME, "stories260K-Q8_0.gguf", false}, \
      {NAME, "stories260K-Q4_0.gguf", false}, {NAME, "stories260K-Q4_K_M.gguf", false}, \
      {NAME, "stories260K-F16.gguf", false}, {NAME, "stories260K-kjv-top-Q8_0.gguf", false}

inline const Pairing kPairings[] = {
    // Right pairings: all 21 files.
    {"stories260K.p1.f16.fa0", "stories260K.gguf", true},
    {"stories260K.p2.f16.fa0", "stories260K.gguf", true},
    {"stories260K.p2.f16.fa1", "stories260K.gguf", true},
    {"stories260K-Q8_0.p2.f16.fa0", "stories260K-Q8_0.gguf", true},
    {"stories260K-kjv-top.p2.f16.fa0", "stories260K-kjv-top.gguf", true},
    {"llama-gqa-s5005.F32.f16.fa0", "synthetic/llama-gqa-s5005.F32.gguf", true},
    {"llama-gqa-s5005.F32.f16.fa1", "synthetic/llama-gqa-s5005.F32.gguf", true},
    {"llama-gqa-s5005.F32.q8_0.fa1", "synthetic/llama-gqa-s5005.F32.gguf", true},
    {"llama-gqa-s5005.F32.q4_0.fa1", "synthetic/llama-gqa-s5005.F32.gguf", true},
    {"llama-gqa-s5005.Q6_K.f16.fa0", "synthetic/llama-gqa-s5005.Q6_K.gguf", true},
    {"llama-gqa-s5005.Q6_K.f16.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", true},
    {"llama-gqa-s5005.Q6_K.q8_0.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", true},
    {"llama-gqa-s5005.Q6_K.q4_0.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", true},
    {"qwen2-bias-s5006.F32.f16.fa0", "synthetic/qwen2-bias-s5006.F32.gguf", true},
    {"qwen2-bias-s5006.F32.q8_0.fa1", "synthetic/qwen2-bias-s5006.F32.gguf", true},
    {"qwen2-bias-s5006.F32.q8_0k.fa0", "synthetic/qwen2-bias-s5006.F32.gguf", true},
    {"qwen2-bias-s5006.F32.q4_0.fa1", "synthetic/qwen2-bias-s5006.F32.gguf", true},
    {"qwen2-bias-s5006.Q8_0.f16.fa0", "synthetic/qwen2-bias-s5006.Q8_0.gguf", true},
    {"qwen2-bias-s5006.Q8_0.q8_0.fa1", "synthetic/qwen2-bias-s5006.Q8_0.gguf", true},
    {"qwen2-bias-s5006.Q8_0.q8_0k.fa0", "synthetic/qwen2-bias-s5006.Q8_0.gguf", true},
    {"qwen2-bias-s5006.Q8_0.q4_0.fa1", "synthetic/qwen2-bias-s5006.Q8_0.gguf", true},
    // Wrong pairings: every other GGUF of the file's geometry.
    STORIES_WRONG("stories260K.p1.f16.fa0"),
    STORIES_WRONG("stories260K.p2.f16.fa0"),
    STORIES_WRONG("stories260K.p2.f16.fa1"),
    {"stories260K-Q8_0.p2.f16.fa0", "stories260K.gguf", false},
    {"stories260K-Q8_0.p2.f16.fa0", "stories260K-kjv-top-Q8_0.gguf", false},
    {"stories260K-Q8_0.p2.f16.fa0", "stories260K-F16.gguf", false},
    {"stories260K-kjv-top.p2.f16.fa0", "stories260K.gguf", false},
    {"stories260K-kjv-top.p2.f16.fa0", "stories260K-kjv-top-Q8_0.gguf", false},
    {"llama-gqa-s5005.F32.f16.fa0", "synthetic/llama-gqa-s5005.Q6_K.gguf", false},
    {"llama-gqa-s5005.F32.f16.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", false},
    {"llama-gqa-s5005.F32.q8_0.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", false},
    {"llama-gqa-s5005.F32.q4_0.fa1", "synthetic/llama-gqa-s5005.Q6_K.gguf", false},
    {"llama-gqa-s5005.F32.f16.fa0", "synthetic/llama-gqa-s5005.Q5_K_M.gguf", false},
    {"llama-gqa-s5005.F32.q4_0.fa1", "synthetic/llama-gqa-s5005.Q4_K_M.gguf", false},
    {"llama-gqa-s5005.Q6_K.f16.fa0", "synthetic/llama-gqa-s5005.F32.gguf", false},
    {"llama-gqa-s5005.Q6_K.f16.fa1", "synthetic/llama-gqa-s5005.F32.gguf", false},
    {"llama-gqa-s5005.Q6_K.q8_0.fa1", "synthetic/llama-gqa-s5005.F32.gguf", false},
    {"llama-gqa-s5005.Q6_K.q4_0.fa1", "synthetic/llama-gqa-s5005.F32.gguf", false},
    {"llama-gqa-s5005.Q6_K.q4_0.fa1", "synthetic/llama-gqa-s5005.Q5_K_M.gguf", false},
    {"qwen2-bias-s5006.F32.f16.fa0", "synthetic/qwen2-bias-s5006.Q8_0.gguf", false},
    {"qwen2-bias-s5006.F32.q8_0.fa1", "synthetic/qwen2-bias-s5006.Q8_0.gguf", false},
    {"qwen2-bias-s5006.F32.q8_0k.fa0", "synthetic/qwen2-bias-s5006.Q8_0.gguf", false},
    {"qwen2-bias-s5006.F32.q4_0.fa1", "synthetic/qwen2-bias-s5006.Q8_0.gguf", false},
    {"qwen2-bias-s5006.F32.q4_0.fa1", "synthetic/qwen2-bias-s5006.Q4_K_M.gguf", false},
    {"qwen2-bias-s5006.Q8_0.f16.fa0", "synthetic/qwen2-bias-s5006.F32.gguf", false},
    {"qwen2-bias-s5006.Q8_0.q8_0.fa1", "synthetic/qwen2-bias-s5006.F32.gguf", false},
    {"qwen2-bias-s5006.Q8_0.q8_0k.fa0", "synthetic/qwen2-bias-s5006.F32.gguf", false},
    {"qwen2-bias-s5006.Q8_0.q4_0.fa1", "synthetic/qwen2-bias-s5006.F32.gguf", false},
    {"qwen2-bias-s5006.Q8_0.q4_0.fa1", "synthetic/qwen2-bias-s5006.Q4_K_M.gguf", false},
};

#undef STORIES_WRONG

}  // namespace ember::kv::foreign_pairings
