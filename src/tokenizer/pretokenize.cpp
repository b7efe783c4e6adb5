#include "tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <memory>

#include "util/error.h"

namespace ember::tok {

const char* split_pattern_gpt2() {
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
}
const char* split_pattern_llama_bpe() {
  return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}
const char* split_pattern_bloom() { return " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"; }
const char* split_pattern_qwen2() {
  return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

namespace {
pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

struct MatchData {
  pcre2_match_data* md;
  explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (!md) fail("tokenizer", "out of memory creating PCRE2 match data");
  }
  ~MatchData() { pcre2_match_data_free(md); }
};

// A larger JIT stack, used only when the default one (32 KiB) runs out.
struct BigJitStack {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* ctx = nullptr;
  BigJitStack() {
    stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    ctx = pcre2_match_context_create(nullptr);
    if (!stack || !ctx) fail("tokenizer", "out of memory creating a PCRE2 JIT stack");
    pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~BigJitStack() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
  }
};
}  // namespace

SplitRegex::SplitRegex(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail_field("tokenizer", "split regex", "a pattern PCRE2 compiles",
               std::string(reinterpret_cast<const char*>(msg)) + " at offset " + std::to_string(err_off));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

SplitRegex::~SplitRegex() { pcre2_code_free(as_code(code_)); }

void SplitRegex::split(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  const pcre2_code* code = as_code(code_);
  MatchData m(code);
  std::unique_ptr<BigJitStack> big;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, m.md,
                         big ? big->ctx : nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !big) {
      big = std::make_unique<BigJitStack>();
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      fail("tokenizer", std::string("pre-tokenizer regex failed at byte ") + std::to_string(pos) +
                            ": " + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
    size_t start = ov[0], end = ov[1];
    if (start > pos) out.emplace_back(pos, start - pos);  // an unmatched gap is a piece too
    if (end == start) {
      // An empty match cannot happen with the family regexes; advance one character so a
      // custom pattern can never loop forever.
      size_t n = 1;
      while (end + n < text.size() && (static_cast<uint8_t>(text[end + n]) & 0xC0) == 0x80) ++n;
      out.emplace_back(end, n);
      end += n;
    } else {
      out.emplace_back(start, end - start);
    }
    pos = end;
  }
  if (pos < text.size()) out.emplace_back(pos, text.size() - pos);
}

std::string nfc(std::string_view text) {
  bool simple = true;
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0xCC) {  // lead bytes of U+0300 and above
      simple = false;
      break;
    }
  }
  if (simple) return std::string(text);
  UErrorCode st = U_ZERO_ERROR;
  const UNormalizer2* norm = unorm2_getNFCInstance(&st);
  if (U_FAILURE(st)) fail("tokenizer", std::string("ICU NFC normalizer unavailable: ") + u_errorName(st));
  if (text.size() > size_t(1) << 28) fail("tokenizer", "text too large to normalize (> 256 MiB)");
  const auto len = static_cast<int32_t>(text.size());
  std::u16string src(text.size() + 1, u'\0');
  int32_t src_len = 0;
  u_strFromUTF8(src.data(), static_cast<int32_t>(src.size()), &src_len, text.data(), len, &st);
  if (U_FAILURE(st)) fail("tokenizer", std::string("UTF-8 to UTF-16 failed: ") + u_errorName(st));
  std::u16string dst(static_cast<size_t>(src_len) + 16, u'\0');
  int32_t dst_len = unorm2_normalize(norm, src.data(), src_len, dst.data(),
                                     static_cast<int32_t>(dst.size()), &st);
  if (st == U_BUFFER_OVERFLOW_ERROR) {  // preflighted size; retry once
    st = U_ZERO_ERROR;
    dst.assign(static_cast<size_t>(dst_len) + 1, u'\0');
    dst_len = unorm2_normalize(norm, src.data(), src_len, dst.data(),
                               static_cast<int32_t>(dst.size()), &st);
  }
  if (U_FAILURE(st)) fail("tokenizer", std::string("NFC normalization failed: ") + u_errorName(st));
  std::string out(static_cast<size_t>(dst_len) * 3 + 4, '\0');
  int32_t out_len = 0;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &out_len, dst.data(), dst_len, &st);
  if (U_FAILURE(st)) fail("tokenizer", std::string("UTF-16 to UTF-8 failed: ") + u_errorName(st));
  out.resize(static_cast<size_t>(out_len));
  return out;
}

}  // namespace ember::tok
