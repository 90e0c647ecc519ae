// A captured region's GEMMs checked against their models (gemm_manifest.hpp).
#include "rpsim/validation/gemm_manifest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "gemm_manifest_record.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/io/json_keys.hpp"

namespace rpsim::sim {

namespace {

// torch dtype -> the rpsim format of its values and the name kernel presets
// give it (none: no GPU preset takes it).
struct DtypeRow {
  const char* dtype;
  const char* format;
  const char* preset;
};
constexpr DtypeRow kDtypes[] = {{"float16", "binary16", "fp16"},     {"bfloat16", "bfloat16", "bf16"},
                                {"float32", "binary32", "fp32"},     {"float64", "binary64", nullptr},
                                {"float8_e4m3fn", "e4m3", "e4m3"},   {"float8_e5m2", "e5m2", "e5m2"},
                                {"float4_e2m1fn_x2", "e2m1", "e2m1"}};

// GPUs with fitted cuBLAS presets: the device name (torch.cuda.get_device_name)
// contains `name`. The H100 is measured by shared/cublas-h100. The H200 is the
// same SM90 chip (132 SMs, the same Tensor Cores; only HBM3e differs) and
// cuBLAS 13 runs the same kernels on it: its real training steps and shape
// grids (captured on an "NVIDIA H200", torch 2.11 + cuBLAS 13; README,
// "Measured on an H200" and "Held out") fitted the same preset; its misses
// (tf32 at unmeasured shapes) are listed there. An A100 or other GPU gets the
// error that asks for --model or --infer.
struct GpuRow {
  const char* name;
  const char* preset;
};
constexpr GpuRow kGpus[] = {{"H100", "cublas:h100"}, {"H200", "cublas:h100"}};

const DtypeRow& dtype_row(const std::string& dtype, const std::string& where) {
  for (const auto& r : kDtypes)
    if (dtype == r.dtype) return r;
  std::string known;
  for (const auto& r : kDtypes) known += std::string(known.empty() ? "" : ", ") + r.dtype;
  throw GemmDumpError(fmt::format("{}: dtype '{}' is not one rpsim reads ({})", where, dtype, known));
}

template <class T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw GemmDumpError(fmt::format("{}: no field \"{}\"", where, key));
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw GemmDumpError(
        fmt::format("{}: field \"{}\" = {} has the wrong type", where, key, j.at(key).dump()));
  }
}

std::optional<long> optional_long(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<long>();
}

ManifestGemm read_entry(const nlohmann::json& e, const std::string& where) {
  ManifestGemm g;
  g.file = field<std::string>(e, "file", where);
  g.op = field<std::string>(e, "op", where);
  g.device = field<std::string>(e, "device", where);
  g.a_dtype = field<std::string>(e, "a_dtype", where);
  g.d_dtype = field<std::string>(e, "d_dtype", where);
  g.b_dtype_recorded = e.contains("b_dtype");
  g.b_dtype = g.b_dtype_recorded ? field<std::string>(e, "b_dtype", where) : g.a_dtype;
  if (e.contains("use_fast_accum")) g.use_fast_accum = field<bool>(e, "use_fast_accum", where);
  dtype_row(g.a_dtype, where + " a_dtype");
  dtype_row(g.b_dtype, where + " b_dtype");
  dtype_row(g.d_dtype, where + " d_dtype");
  g.call = field<std::size_t>(e, "call", where);
  g.m = field<long>(e, "m", where);
  g.n = field<long>(e, "n", where);
  g.k = field<long>(e, "k", where);
  g.alpha = field<double>(e, "alpha", where);
  g.beta = field<double>(e, "beta", where);
  try {
    g.batch = optional_long(e, "batch");
    g.batch_index = optional_long(e, "batch_index");
  } catch (const nlohmann::json::exception&) {
    throw GemmDumpError(fmt::format("{}: \"batch\" and \"batch_index\" must be integers or null", where));
  }
  if (e.contains("flags") && e.at("flags").is_object()) {
    const auto& f = e.at("flags");
    g.allow_tf32 = f.value("allow_tf32", false);
    const char* rpr = g.a_dtype == "bfloat16" ? "allow_bf16_reduced_precision_reduction"
                                              : "allow_fp16_reduced_precision_reduction";
    if (f.contains(rpr) && f.at(rpr).is_boolean()) g.rpr = f.at(rpr).get<bool>();
  }
  read_cublas_record(e, where, g);
  if (e.contains("scales") && e.at("scales").is_object())
    for (const auto& [key, v] : e.at("scales").items()) {
      if (key != "scale_a" && key != "scale_b") continue;
      for (const auto& x : v.is_array() ? v : nlohmann::json::array({v})) {
        if (!x.is_number())
          throw GemmDumpError(fmt::format("{}: scales.{} holds {}, not a number", where, key, x.dump()));
        (key == "scale_a" ? g.scale_a : g.scale_b).push_back(x.get<double>());
      }
    }
  return g;
}

void read_skips(const nlohmann::json& skipped, GemmManifest& m) {
  std::map<std::string, std::size_t> reasons;
  for (const auto& s : skipped) {
    const std::size_t n = s.value("gemms", std::size_t{1});
    m.skipped += n;
    reasons[s.value("op", std::string("?")) + ": " + s.value("reason", std::string("?"))] += n;
  }
  for (const auto& [reason, n] : reasons) m.skip_reasons.push_back(fmt::format("{} x {}", n, reason));
}

}  // namespace

bool ManifestGemm::scaled() const {
  const auto one = [](double x) { return x == 1.0; };
  return !std::all_of(scale_a.begin(), scale_a.end(), one) ||
         !std::all_of(scale_b.begin(), scale_b.end(), one);
}

GemmManifest load_gemm_manifest(const std::filesystem::path& dir_or_file) {
  GemmManifest m;
  const bool is_dir = std::filesystem::is_directory(dir_or_file);
  const auto path = is_dir ? dir_or_file / "manifest.json" : dir_or_file;
  m.dir = path.parent_path();
  // Issue #36 (13): a folder of dumps (shared/cublas-h100) is not a capture.
  if (is_dir && !std::filesystem::exists(path)) {
    std::string example;
    for (const auto& f : std::filesystem::directory_iterator(dir_or_file))
      if (f.path().extension() == ".npz" && (example.empty() || f.path().string() < example))
        example = f.path().string();
    throw GemmDumpError(fmt::format(
        "{} has no manifest.json: gemm-check reads a folder only when rpsim.torch.capture_gemms wrote it; "
        "check one dump with a model instead: rpsim gemm-check {} --model MODEL (or --infer)",
        dir_or_file.string(), example.empty() ? "FILE.npz" : example));
  }
  std::ifstream in(path);
  if (!in) throw GemmDumpError(fmt::format("{}: cannot read the manifest", path.string()));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw GemmDumpError(fmt::format("{}: not valid JSON ({})", path.string(), e.what()));
  }
  if (const std::string key = io::duplicate_json_key(text); !key.empty())
    throw GemmDumpError(fmt::format("{}: {}", path.string(), io::duplicate_json_key_message(key)));
  if (!j.is_object() || !j.contains("gemms") || !j.at("gemms").is_array())
    throw GemmDumpError(fmt::format("{}: no \"gemms\" list (not a capture_gemms manifest)", path.string()));
  if (j.contains("model") && j.at("model").is_string()) m.model = j.at("model").get<std::string>();
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < j.at("gemms").size(); ++i) {
    m.gemms.push_back(read_entry(j.at("gemms")[i], fmt::format("{}: gemms[{}]", path.string(), i)));
    if (!std::filesystem::exists(m.dir / m.gemms.back().file)) missing.push_back(m.gemms.back().file);
  }
  if (!missing.empty()) {
    const std::size_t shown = std::min<std::size_t>(missing.size(), 10);
    std::string list;
    for (std::size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + missing[i];
    throw GemmDumpError(fmt::format("{}: {} of the files it lists are missing from {}: {}{}", path.string(),
                                    missing.size(), m.dir.string(), list,
                                    missing.size() > shown ? " ..." : ""));
  }
  if (j.contains("skipped") && j.at("skipped").is_array()) read_skips(j.at("skipped"), m);
  return m;
}

namespace {

bool fits(const AccumulationModel& model, const ManifestGemm& g) {
  return model.input_format().name == format(dtype_row(g.a_dtype, g.file).format).name &&
         (!g.b_dtype_recorded ||
          model_b_format(model).name == format(dtype_row(g.b_dtype, g.file).format).name) &&
         model.output_format().name == format(dtype_row(g.d_dtype, g.file).format).name;
}

std::string gemm_label(const ManifestGemm& g) {
  const std::string b = g.b_dtype == g.a_dtype ? "" : " x " + g.b_dtype;
  return fmt::format("{} ({} on '{}', {}{} -> {})", g.file, g.op, g.device, g.a_dtype, b, g.d_dtype);
}

std::string gpu_names() {
  std::string names;
  for (const auto& r : kGpus) names += std::string(names.empty() ? "" : ", ") + r.name;
  return names;
}

std::string preset_for(const ManifestGemm& g) {
  const GpuRow* gpu = nullptr;
  for (const auto& r : kGpus)
    if (g.device.find(r.name) != std::string::npos) gpu = &r;
  const std::string ask = "give --model MODEL (rpsim.gemm_check(..., model=...)) or run --infer on its file";
  if (!gpu)
    throw GemmDumpError(fmt::format("{}: no kernel preset is fitted for '{}' (presets exist for: {}); {}",
                                    gemm_label(g), g.device, gpu_names(), ask));
  const char* in = dtype_row(g.a_dtype, g.file).preset;
  if (g.a_dtype == "float32") in = g.allow_tf32 ? "tf32" : nullptr;  // fp32 without TF32: SIMT, unmeasured
  const char* out = dtype_row(g.d_dtype, g.file).preset;
  std::string spec = fmt::format("{}:{}:{}", gpu->preset, in ? in : "?", out ? out : "?");
  const std::string o = out ? out : "";
  if (g.rpr && (o == "fp16" || o == "bf16")) spec += fmt::format(":rpr={}", *g.rpr ? 1 : 0);
  if (g.b_dtype != g.a_dtype) {
    const char* b = dtype_row(g.b_dtype, g.file).preset;
    spec += fmt::format(":input_b={}", b ? b : "?");
  }
  if (g.use_fast_accum) spec += ":fast_accum=1";
  // torch._scaled_mm picks its per-row path from the scales' shape (scale_a
  // M x 1, scale_b 1 x N); the manifest holds them as lists.
  if (g.scale_a.size() > 1 || g.scale_b.size() > 1) spec += ":scales=row";
  try {
    if (!in || !out) throw std::invalid_argument("no preset for these dtypes");
    AccumulationModel::parse(spec);
  } catch (const std::invalid_argument& e) {
    throw GemmDumpError(
        fmt::format("{}: no kernel preset for {} ({}); {}", gemm_label(g), spec, e.what(), ask));
  }
  return spec;
}

}  // namespace

std::string select_gemm_model(const ManifestGemm& g, const GemmManifest& manifest,
                              const std::vector<std::string>& models) {
  for (const auto& spec : models)
    if (fits(AccumulationModel::parse(spec), g)) return spec;
  if (manifest.model && fits(AccumulationModel::parse(*manifest.model), g)) return *manifest.model;
  if (g.device == "cpu" || g.device.rfind("cpu", 0) == 0) {
    std::string given;
    for (const auto& s : models) given += (given.empty() ? "" : ", ") + s;
    if (manifest.model)
      given += (given.empty() ? "recorded at capture: " : ", recorded at capture: ") + *manifest.model;
    throw GemmDumpError(
        fmt::format("{}: captured on the CPU, where no cuBLAS preset applies, and no model "
                    "reading {} and writing {} was given (given: {}); give --model MODEL",
                    gemm_label(g), dtype_row(g.a_dtype, g.file).format, dtype_row(g.d_dtype, g.file).format,
                    given.empty() ? "none" : given));
  }
  return preset_for(g);
}

}  // namespace rpsim::sim
