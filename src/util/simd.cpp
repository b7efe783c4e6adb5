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
// AVX-VNNI (the VEX encoding of vpdpbusd / vpdpwssd): CPUID leaf 7 subleaf 1, EAX bit 4. Read
// directly: GCC 12 and clang 14 differ on the name __builtin_cpu_supports knows it by. The
// YMM state the OS must save is the one AVX2 needs, which cpu_avx2() already asks for.
bool cpu_has_avx_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
}

bool cpu_scalar() { return true; }
bool cpu_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}
bool cpu_avxvnni() { return cpu_avx2() && cpu_has_avx_vnni(); }
// The EVEX twin runs code compiled with -mavx512vl -mavx512vnni (CMakeLists.txt).
bool cpu_avxvnni_evex() {
  return cpu_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512vnni");
}
bool cpu_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && cpu_avx2();
}
bool cpu_avx512vnni() { return cpu_avx512() && __builtin_cpu_supports("avx512vnni"); }

// The one table of levels, in enum order. auto_rank: detect_simd() picks the supported level
// with the highest rank; 0 = never picked automatically.
struct LevelInfo {
  SimdLevel level;
  const char* name;
  SimdLevel base;
  int auto_rank;
  bool (*supported)();
};
constexpr LevelInfo kLevels[] = {
    {SimdLevel::scalar, "scalar", SimdLevel::scalar, 1, cpu_scalar},
    {SimdLevel::avx2, "avx2", SimdLevel::avx2, 2, cpu_avx2},
    {SimdLevel::avxvnni, "avxvnni", SimdLevel::avx2, 3, cpu_avxvnni},
    {SimdLevel::avxvnni_evex, "avxvnni-evex", SimdLevel::avx2, 0, cpu_avxvnni_evex},
    {SimdLevel::avx512, "avx512", SimdLevel::avx512, 4, cpu_avx512},
    {SimdLevel::avx512vnni, "avx512vnni", SimdLevel::avx512, 5, cpu_avx512vnni},
};

const LevelInfo& info(SimdLevel level) {
  for (const LevelInfo& l : kLevels)
    if (l.level == level) return l;
  return kLevels[0];
}

std::string level_names() {
  std::string s;
  const size_t n = std::size(kLevels);
  for (size_t i = 0; i < n; ++i) s += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") + kLevels[i].name;
  return s;
}

std::string supported_names() {
  std::string s;
  for (SimdLevel l : supported_simd_levels()) s += std::string(s.empty() ? "" : ", ") + simd_name(l);
  return s;
}

SimdLevel parse_simd_named(const std::string& name, std::string_view where, std::string_view field) {
  for (const LevelInfo& l : kLevels)
    if (name == l.name) return l.level;
  fail_field(where, field, level_names(), "'" + name + "'");
}
}  // namespace

const char* simd_name(SimdLevel level) { return info(level).name; }

std::vector<SimdLevel> all_simd_levels() {
  std::vector<SimdLevel> out;
  for (const LevelInfo& l : kLevels) out.push_back(l.level);
  return out;
}

SimdLevel simd_base(SimdLevel level) { return info(level).base; }

bool simd_supported(SimdLevel level) {
  static const std::vector<SimdLevel> supported = [] {
    std::vector<SimdLevel> v;
    for (const LevelInfo& l : kLevels)
      if (l.supported()) v.push_back(l.level);
    return v;
  }();
  for (SimdLevel l : supported)
    if (l == level) return true;
  return false;
}

SimdLevel detect_simd() {
  const LevelInfo* best = &kLevels[0];
  for (const LevelInfo& l : kLevels)
    if (l.auto_rank > best->auto_rank && simd_supported(l.level)) best = &l;
  return best->level;
}

SimdLevel parse_simd(const std::string& name) { return parse_simd_named(name, "EMBER_SIMD", "value"); }

SimdLevel parse_supported_simd(const std::string& name, std::string_view where, std::string_view field) {
  const SimdLevel want = parse_simd_named(name, where, field);
  if (!simd_supported(want))
    fail_field(where, field, "a path this CPU supports (" + supported_names() + ")", name);
  return want;
}

std::vector<SimdLevel> supported_simd_levels() {
  std::vector<SimdLevel> out;
  for (const LevelInfo& l : kLevels)
    if (simd_supported(l.level)) out.push_back(l.level);
  return out;
}

void set_simd_override(SimdLevel level) {
  if (!simd_supported(level))
    fail_field("SIMD path", simd_name(level), "a path this CPU supports (" + supported_names() + ")",
               "unsupported");
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
