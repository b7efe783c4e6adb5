#include "util/simd.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>

#include "util/error.h"

namespace ember {
namespace {
std::atomic<int> g_override{-1};

// clang 14's __builtin_cpu_supports does not know "f16c": read CPUID leaf 1, ECX bit 29.
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

SimdLevel parse_simd_named(const std::string& name, std::string_view where, std::string_view field) {
  if (name == "scalar") return SimdLevel::scalar;
  if (name == "avx2") return SimdLevel::avx2;
  if (name == "avx512") return SimdLevel::avx512;
  if (name == "avx512vnni") return SimdLevel::avx512vnni;
  fail_field(where, field, "scalar, avx2, avx512 or avx512vnni", "'" + name + "'");
}
}  // namespace

const char* simd_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar: return "scalar";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avx512: return "avx512";
    case SimdLevel::avx512vnni: return "avx512vnni";
  }
  return "?";
}

SimdLevel detect_simd() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return __builtin_cpu_supports("avx512vnni") ? SimdLevel::avx512vnni : SimdLevel::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      cpu_has_f16c())
    return SimdLevel::avx2;
  return SimdLevel::scalar;
}

SimdLevel parse_simd(const std::string& name) { return parse_simd_named(name, "EMBER_SIMD", "value"); }

SimdLevel parse_supported_simd(const std::string& name, std::string_view where, std::string_view field) {
  const SimdLevel want = parse_simd_named(name, where, field);
  if (int(want) > int(detect_simd()))
    fail_field(where, field, "a path this CPU supports (at most " + std::string(simd_name(detect_simd())) + ")",
               name);
  return want;
}

std::vector<SimdLevel> supported_simd_levels() {
  std::vector<SimdLevel> out;
  for (int l = 0; l <= int(detect_simd()); ++l) out.push_back(SimdLevel(l));
  return out;
}

void set_simd_override(SimdLevel level) {
  if (int(level) > int(detect_simd()))
    fail_field("SIMD path", simd_name(level), "a path this CPU supports (at most " +
               std::string(simd_name(detect_simd())) + ")", "unsupported");
  g_override.store(int(level));
}

SimdLevel active_simd() {
  const int o = g_override.load();
  if (o >= 0) return SimdLevel(o);
  static const SimdLevel from_env = [] {
    const char* env = std::getenv("EMBER_SIMD");
    if (!env || !*env) return detect_simd();
    return parse_supported_simd(env, "EMBER_SIMD", "value");
  }();
  return from_env;
}

}  // namespace ember
