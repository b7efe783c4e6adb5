#pragma once
// The checks behind every manifest rule, one message each ("<where>: <field>: expected ...,
// found ..."): the per-field rules of the field lists (manifest_fields.cpp) and the rules that
// relate fields (manifest.cpp) share them, so one rule reads the same wherever it fails.
// Internal to those two files.
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

namespace ember::kv {

std::string quote(const std::string& s);  // 'text'
bool is_printable_ascii(const std::string& s);
void require_hex64(const std::string& where, const std::string& field, const std::string& v);
void require_one_of(const std::string& where, const std::string& field, const std::string& v,
                    std::span<const char* const> allowed);
void require_one_of(const std::string& where, const std::string& field, const std::string& v,
                    std::initializer_list<const char*> allowed);
void require_range(const std::string& where, const std::string& field, int64_t v, int64_t lo, int64_t hi);

}  // namespace ember::kv
