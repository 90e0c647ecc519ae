// A manifest entry's cuBLAS record, the model each GEMM runs under, and each
// file checked against its entry (gemm_manifest.hpp).
#include "gemm_manifest_record.hpp"

#include <fmt/format.h>

#include <regex>

#include "rpsim/accumulation/kernel_schedule.hpp"

namespace rpsim::sim {

namespace {

std::optional<int> optional_int(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  if (!j.at(key).is_number_integer())
    throw GemmDumpError(
        fmt::format("{}: cublas.heuristic.{} = {} is not an integer", where, key, j.at(key).dump()));
  return j.at(key).get<int>();
}

}  // namespace

void read_cublas_record(const nlohmann::json& e, const std::string& where, ManifestGemm& g) {
  if (!e.contains("cublas") || e.at("cublas").is_null()) return;
  const auto& c = e.at("cublas");
  if (!c.is_object())
    throw GemmDumpError(fmt::format("{}: \"cublas\" = {} is not an object", where, c.dump()));
  if (c.contains("heuristic") && c.at("heuristic").is_object()) {
    const auto& h = c.at("heuristic");
    if (h.contains("error"))
      g.cublas_error = h.at("error").is_string() ? h.at("error").get<std::string>() : h.at("error").dump();
    CublasRecord& r = g.cublas;
    r.algo_id = optional_int(h, "algo_id", where);
    r.tile_id = optional_int(h, "tile_id", where);
    r.stages_id = optional_int(h, "stages_id", where);
    r.splitk_num = optional_int(h, "splitk_num", where);
    r.reduction_scheme = optional_int(h, "reduction_scheme", where);
    r.custom_option = optional_int(h, "custom_option", where);
  }
  if (!c.contains("kernels") || c.at("kernels").is_null()) return;
  if (!c.at("kernels").is_array())
    throw GemmDumpError(fmt::format("{}: cublas.kernels is not a list", where));
  for (const auto& k : c.at("kernels")) {
    if (!k.is_object() || !k.contains("name") || !k.at("name").is_string())
      throw GemmDumpError(fmt::format(
          "{}: cublas.kernels holds {}, not {{\"name\": ..., \"grid\": [x, y, z]}}", where, k.dump()));
    CublasKernel kernel{k.at("name").get<std::string>(), {0, 0, 0}};
    if (k.contains("grid") && k.at("grid").is_array())
      for (std::size_t i = 0; i < 3 && i < k.at("grid").size(); ++i)
        if (k.at("grid")[i].is_number_integer()) kernel.grid[i] = k.at("grid")[i].get<long>();
    g.cublas.kernels.push_back(std::move(kernel));
  }
}

void read_cublas_record_text(const std::string& entry_json, const std::string& where, ManifestGemm& g) {
  const auto e = nlohmann::json::parse(entry_json, nullptr, false);
  if (e.is_discarded() || !e.is_object())
    throw GemmDumpError(fmt::format("{}: not a JSON object: {}", where, entry_json.substr(0, 80)));
  read_cublas_record(e, where, g);
}

ManifestModel resolve_gemm_model(const ManifestGemm& g, const std::string& spec) {
  ManifestModel r{spec, AccumulationModel::parse(spec), "model"};
  const auto* preset = std::get_if<KernelPreset>(&r.model.variant());
  if (!preset) return r;
  if (g.cublas.empty()) {
    r.schedule = fmt::format("guessed: {}{}", preset->source(g.m, g.n, g.k),
                             g.cublas_error.empty() ? "" : "; the capture's query failed: " + g.cublas_error);
    return r;
  }
  const RecordedSchedule rec =
      schedule_from_record(preset->base_for_shape(g.m, g.n, g.k), g.k, g.cublas, g.m, g.n);
  if (!rec.schedule) {
    r.schedule = fmt::format("guessed: the recorded {} is not modelled ({}); {}", rec.family, rec.why,
                             preset->source(g.m, g.n, g.k));
    return r;
  }
  r.model = AccumulationModel(*rec.schedule);
  r.schedule = "recorded: " + rec.family;
  return r;
}

namespace {

// How capture_gemms stores a dtype's values (its _STORED table).
const char* stored_dtype(const std::string& dtype) {
  if (dtype == "float16") return "float16";
  if (dtype == "float64") return "float64";
  return "float32";
}

std::string dims(const Matrix& m) {
  return fmt::format("{}x{}", m.rows(), m.cols());
}

}  // namespace

void check_manifest_file(const GemmDump& dump, const ManifestGemm& g, std::size_t index) {
  const std::string entry = fmt::format(
      "manifest entry gemms[{}] ({} {}x{}x{}{}, {} -> {}, beta {:g})", index, g.op, g.m, g.n, g.k,
      g.batch_index ? fmt::format(" batch element {}", *g.batch_index) : "", g.a_dtype, g.d_dtype, g.beta);
  std::vector<std::string> wrong;
  if (dump.a.rows() != g.m || dump.a.cols() != g.k)
    wrong.push_back(fmt::format("A is {}, not {}x{}", dims(dump.a), g.m, g.k));
  if (dump.b.rows() != g.k || dump.b.cols() != g.n)
    wrong.push_back(fmt::format("B is {}, not {}x{}", dims(dump.b), g.k, g.n));
  if (dump.d.rows() != g.m || dump.d.cols() != g.n)
    wrong.push_back(fmt::format("D is {}, not {}x{}", dims(dump.d), g.m, g.n));
  if (!dump.d_dtype.empty() && dump.d_dtype != stored_dtype(g.d_dtype))
    wrong.push_back(fmt::format("D is stored as {}, where {} is stored as {}", dump.d_dtype, g.d_dtype,
                                stored_dtype(g.d_dtype)));
  if (bool(dump.c) != (g.beta != 0.0))
    wrong.push_back(dump.c ? "it holds C, but the entry's beta is 0"
                           : "it holds no C, but the entry's beta is not 0");
  // capture_gemms names its files gNNNNN_OP[_bI].npz.
  static const std::regex name(R"(g\d{5}_(.+?)(?:_b(\d+))?\.npz$)");
  std::smatch m;
  const std::string file = std::filesystem::path(g.file).filename().string();
  if (std::regex_search(file, m, name)) {
    if (m[1].str() != g.op) wrong.push_back(fmt::format("its name says op {}", m[1].str()));
    const bool batched = m[2].matched;
    if (batched != bool(g.batch_index) || (batched && std::stol(m[2].str()) != *g.batch_index))
      wrong.push_back(batched ? fmt::format("its name says batch element {}", m[2].str())
                              : "its name has no batch element");
  }
  if (wrong.empty()) return;
  std::string why;
  for (const auto& w : wrong) why += (why.empty() ? "" : "; ") + w;
  throw GemmDumpError(
      fmt::format("{} is not the GEMM of {}: {} (was the file replaced?)", dump.source, entry, why));
}

}  // namespace rpsim::sim
