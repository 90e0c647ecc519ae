// The "cublas" record of a manifest entry (gemm_manifest.hpp). Internal to
// sim/validation.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "rpsim/validation/gemm_manifest.hpp"

namespace rpsim::sim {

// Reads entry e's "cublas" object, when present, into g.cublas /
// g.cublas_error; throws GemmDumpError naming `where` and the field.
void read_cublas_record(const nlohmann::json& e, const std::string& where, ManifestGemm& g);

}  // namespace rpsim::sim
