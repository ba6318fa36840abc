// Internal helpers shared by the family generators (families_*.cpp); not a public API.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "data/families.h"

namespace kernelrl::families {

// Replaces every `$KEY$` in `tpl` by its value; throws std::logic_error on a key left over.
std::string fill(std::string tpl, const std::vector<std::pair<std::string, std::string>>& kv);

// "name=value, ..." for instructions and ids.
std::string param_list(const std::vector<std::pair<std::string, int64_t>>& p, const char* sep);

// Short shortest-round-trip text of a double, valid as a C++ float literal with an `f` suffix
// ("0.01f", "1e-05f", "2.0f").
std::string float_literal(double x);

// The HGEMM contract sentence for instructions (layout nn|tn, acc f32|f16).
std::string hgemm_contract(const std::string& layout, const std::string& acc);

// hgemm_wgmma's variants (families_hgemm_wgmma.cpp), both layouts, fp32 accumulation.
std::vector<KernelVariant> hgemm_wgmma_variants();
// hgemm_cutlass's variants (families_hgemm_cutlass.cpp), both layouts, fp32 accumulation.
std::vector<KernelVariant> hgemm_cutlass_variants();

}  // namespace kernelrl::families
