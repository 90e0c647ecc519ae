// Every GEMM of a captured PyTorch region checked at once: the manifest.json
// and g*.npz files rpsim.torch.capture_gemms writes, each GEMM checked (as
// gemm_check.hpp checks one dump) under the model its device, dtypes and
// flags select, or one the user names. `rpsim gemm-check DIR` and
// rpsim.gemm_check(DIR) print the table this builds.
//
// The manifest (version 1): {"model": spec or null, "gemms": [{"file",
// "call", "op", "batch", "batch_index", "m", "n", "k", "a_dtype", "b_dtype"
// (optional, default a_dtype), "d_dtype", "c_dtype", "alpha", "beta",
// "device", "use_fast_accum" (_scaled_mm), "flags": {"allow_tf32",
// "allow_fp16_reduced_precision_reduction",
// "allow_bf16_reduced_precision_reduction", ...}, "cublas" (optional, a GPU
// capture): {"heuristic": {"algo_id", "tile_id", "stages_id", "splitk_num",
// "reduction_scheme", "custom_option", ...} (cuBLASLt's top algorithm for the
// call) or {"error": why}, "kernels": [{"name", "grid": [x, y, z]}...]}}...],
// "skipped": [{"call", "op", "shape", "reason", "gemms"}...]}. Batched ops are
// one file per kept batch element (same "call"); A is M x K and B K x N as
// the kernel multiplied them, whatever their layout in memory ("transposed"
// says it).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rpsim/accumulation/cublas_record.hpp"
#include "rpsim/validation/gemm_check.hpp"
#include "rpsim/validation/gemm_infer.hpp"

namespace rpsim::sim {

struct ManifestGemm {
  std::string file, op, device, a_dtype, b_dtype, d_dtype;
  std::size_t call = 0;
  bool use_fast_accum = false;    // torch._scaled_mm(..., use_fast_accum=True)
  bool b_dtype_recorded = false;  // else b_dtype is a_dtype and a model's B format is not checked
  std::optional<long> batch, batch_index;
  long m = 0, n = 0, k = 0;
  double alpha = 1, beta = 0;
  bool allow_tf32 = false;
  std::optional<bool> rpr;  // the reduced-precision-reduction flag of the input dtype; none: unrecorded
  // _scaled_mm's scale_a / scale_b ("scales" in the entry): one value (per
  // tensor) or one per row of A / column of B.
  std::vector<double> scale_a, scale_b;
  // How cuBLAS computed it, as the capture recorded it ("cublas"); empty:
  // nothing recorded (a CPU capture, an older one, a failed query).
  CublasRecord cublas;
  std::string cublas_error;  // the capture's reason when the query failed
  // A scale other than 1: checked through the schedule's scale_epilogue
  // (kernel_schedule.hpp), whose rounding order is unmeasured: the row's
  // note says so.
  bool scaled() const;
};

struct GemmManifest {
  std::filesystem::path dir;
  std::optional<std::string> model;  // recorded at capture
  std::vector<ManifestGemm> gemms;
  std::size_t skipped = 0;                // GEMMs not written (size cap, batch sampling, hidden)
  std::vector<std::string> skip_reasons;  // distinct reasons with their counts
};

// Reads DIR/manifest.json (or the manifest file given). Throws GemmDumpError
// naming the field and value of a malformed entry, or naming every file the
// manifest lists that is missing.
GemmManifest load_gemm_manifest(const std::filesystem::path& dir_or_file);

// The model for one GEMM: the first of `models` whose input and output
// formats are those of the GEMM's dtypes; else the model recorded at
// capture; else the kernel preset its device and flags select
// (cublas:h100:IN:OUT[:rpr=R]). Throws GemmDumpError naming the GPU (or
// "cpu") and asking for --model or --infer where nothing applies.
std::string select_gemm_model(const ManifestGemm& g, const GemmManifest& manifest,
                              const std::vector<std::string>& models);

// The model a GEMM is checked under and how its schedule was chosen.
struct ManifestModel {
  std::string spec;         // the selected model (select_gemm_model)
  AccumulationModel model;  // what is run: the recorded schedule where there is one
  // "recorded: nvjet, split-K 3 x 64-k tiles, binary32 workspace", "guessed:
  // ..." (a preset without a usable record: the preset's source), "model" (a
  // model that is not a cuBLAS preset, used as it is).
  std::string schedule;
};
// A cuBLAS preset selected for a GEMM runs the schedule the capture recorded
// (cublas_record.hpp) where the record says one; else the preset's own guess,
// with its source. Other models are used as they are.
ManifestModel resolve_gemm_model(const ManifestGemm& g, const std::string& spec);

// An entry's "cublas" record given as the entry's JSON text ({"cublas":
// {"heuristic": ..., "kernels": ...}}), read into g.cublas / g.cublas_error
// as the manifest reader reads it (sim/accumulation/fit/cublas_fit_eval runs
// the held-out capture's records through resolve_gemm_model).
void read_cublas_record_text(const std::string& entry_json, const std::string& where, ManifestGemm& g);

// Checks that `dump` (read from g.file) is the GEMM its manifest entry
// describes: A M x K, B K x N, D M x N, D stored as the entry's d_dtype
// stores, C present exactly when beta != 0, and a capture_gemms file name
// (gNNNNN_OP[_bI].npz) naming the entry's op and batch index. Throws
// GemmDumpError naming the file, the entry and what differs (a file swapped
// for another GEMM's checked out under the wrong shape).
void check_manifest_file(const GemmDump& dump, const ManifestGemm& g, std::size_t index);

// One captured op call (its kept batch elements together).
struct ManifestRow {
  std::size_t call = 0;
  std::string op, shape, dtype, model, note;     // note: an alpha/beta epilogue
  std::string schedule;                          // ManifestModel::schedule of its first GEMM
  std::size_t gemms = 0, passed = 0, total = 0;  // elements
  double max_ulps = 0;
  bool ok() const { return passed == total; }
};

struct ManifestReport {
  std::vector<ManifestRow> rows;
  std::vector<std::string> mismatches;  // "g00003_bmm_b1.npz: D[2, 4] = ..., model ... (N ulps)"
  std::size_t passed = 0, failed = 0;   // rows
  std::size_t skipped = 0;
  std::vector<std::string> skip_reasons;
  // Stopped by `stop` (SIGINT) after `checked` of `gemms` GEMMs: the rows
  // hold those done, and the table says so.
  bool interrupted = false;
  std::size_t checked = 0, gemms = 0;
  std::string table() const;  // the table, the mismatches, the skips, "N passed, M failed"
};

// alpha = 1 with beta 0 or 1 is the model's own D = A*B [+ C]; any other
// alpha/beta is the epilogue alpha * (model's A*B) + beta * C in binary64,
// rounded once to the output format (cuBLAS's fp32 epilogue order is
// unmeasured: see the README).
// `stop`, asked before each GEMM, ends the check early (rpsim gemm-check's
// SIGINT).
ManifestReport check_gemm_manifest(const GemmManifest& manifest, const std::vector<std::string>& models,
                                   std::size_t show = 10, int threads = 1,
                                   const std::function<bool()>& stop = {});

// `rpsim gemm-check DIR --infer`: the schedule search (gemm_infer.hpp) on
// the first kept file of each captured op call, for GPUs and dtypes no
// preset covers. One line per call: the schedules reproducing it, or the
// best found; ends with "N passed, M failed" (passed: calls some schedule
// reproduces bit for bit).
// Each line goes to `on_line` as soon as it is known (the CLI prints it);
// `stop`, asked before each call, ends the search early (interrupted, with
// the lines done).
struct ManifestInferReport {
  std::string text;
  std::size_t passed = 0, failed = 0, skipped = 0;
  bool interrupted = false;
  std::size_t searched = 0, calls = 0;
};
ManifestInferReport infer_gemm_manifest(const GemmManifest& manifest, const InferOptions& options,
                                        const std::function<void(const std::string&)>& on_line = {},
                                        const std::function<bool()>& stop = {});

}  // namespace rpsim::sim
