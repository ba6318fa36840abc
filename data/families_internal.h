// Internal helpers shared by the family generators (families_*.cpp); not a public API.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "data/families.h"

namespace kernelrl::families {

// A Config's knobs in order: name and C++ value ("64", "true").
using ConfigArgs = std::vector<std::pair<std::string, std::string>>;

// The instance block a variant's source ends with (after its kernels/ body):
//   // ---- instance: <what>
//   <decls>                                                  (when not empty)
//   using Cfg = <config></*KNOB=*/value, ...>;               (when config is not empty)
//   extern "C" int kernelrl_launch(const kernelrl_args* args, void* stream) {
//     return <call>;
//   }
// The host backend's entry point leaves the stream unnamed (it is null there).
std::string instance_block(const std::string& what, const std::string& decls,
                           const std::string& config, const ConfigArgs& knobs,
                           const std::string& call, bool cuda);

// The text of a kernels/ body (`body`, with its local includes inlined) that a variant with this
// instance block carries: without comments and include guards, with the `if` / `if constexpr`
// branches its `using Cfg = ...<args>` decides resolved, and without the namespace-scope
// declarations that neither the rest nor the instance uses (families_source.cpp says how; the
// kernels compile to the same code). variant_source is that text followed by the instance.
std::string variant_body(const std::string& body, const std::string& instance);
std::string variant_source(const std::string& body, const std::string& instance);

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
// hgemm_small's variants (families_hgemm_small.cpp), both layouts, fp32 accumulation.
std::vector<KernelVariant> hgemm_small_variants();

}  // namespace kernelrl::families
