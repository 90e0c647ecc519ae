// Checking every GEMM of a manifest and the table of results (gemm_manifest.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/validation/gemm_infer.hpp"
#include "rpsim/validation/gemm_manifest.hpp"

namespace rpsim::sim {

namespace {

// The model's D for one dump: its own D = A*B + C where alpha = 1 and beta is
// 0 or 1 (how PyTorch's linear and matmul call cuBLAS), otherwise the
// epilogue alpha * (A*B) + beta * C rounded once to the output format.
Matrix model_result(const AccumulationModel& model, const GemmDump& dump, const ManifestGemm& g,
                    int threads) {
  const GemmOptions opt{threads};
  const bool plain_c = g.alpha == 1.0 && g.beta == 1.0 && dump.c;
  const Matrix zero = Matrix::Zero(dump.a.rows(), dump.b.cols());
  if (g.alpha == 1.0 && (g.beta == 0.0 || plain_c))
    return gemm(model, dump.a, dump.b, plain_c ? *dump.c : zero, dump.scales, opt);
  const Matrix ab = gemm(model, dump.a, dump.b, zero, dump.scales, opt);
  Matrix exact = g.alpha * ab;
  if (dump.c && g.beta != 0.0) exact += g.beta * *dump.c;
  return round_to_format(exact, model.output_format());
}

// _scaled_mm's scales of the manifest entry as the dump's GemmScales: one
// value per tensor (1x1), else one per row of A (Mx1) / column of B (1xN).
void set_tensor_scales(const ManifestGemm& g, GemmDump& dump) {
  const auto as_matrix = [](const std::vector<double>& v, bool column) {
    Matrix m = column ? Matrix(Eigen::Index(v.size()), 1) : Matrix(1, Eigen::Index(v.size()));
    for (std::size_t i = 0; i < v.size(); ++i) m.data()[i] = v[i];
    return m;
  };
  if (!g.scale_a.empty()) dump.scales.scale_a = as_matrix(g.scale_a, true);
  if (!g.scale_b.empty()) dump.scales.scale_b = as_matrix(g.scale_b, false);
}

// The epilogues the captures measured (kernel_presets.cpp, which cites them):
// per-tensor scales by product, with or without a bias (fused: the same
// arithmetic without C; H200 and H100 captures), per-row scales by b_then_a
// with or without a bias (H100 captures). Any other pairing is an assumption,
// said as such.
std::string scale_note(const AccumulationModel& model, const ManifestGemm& g) {
  const auto& v = model.variant();
  const bool row = g.scale_a.size() > 1 || g.scale_b.size() > 1;
  std::string how = "binary32 epilogue fl(fl(sa*sb)*AB)+C";
  if (const auto* p = std::get_if<KernelPreset>(&v)) {
    KernelPreset q = *p;
    q.row_scales = q.row_scales || row;  // as gemm() applies it (gemm_scaled.cpp)
    how = find_schedule_field("scale_epilogue")->get(q.for_shape(64, 64, 256));
  } else if (const auto* s = std::get_if<KernelSchedule>(&v)) {
    how = find_schedule_field("scale_epilogue")->get(*s);
  }
  // torch's per-row form is M values for A and N for B; a mix of the forms is unmeasured.
  const bool row_form = g.scale_a.size() == std::size_t(g.m) && g.scale_b.size() == std::size_t(g.n);
  const bool settled =
      row ? row_form && how == "b_then_a" : how == "product" || (how == "fused" && g.beta == 0.0);
  return fmt::format("scales != 1 by {}{}: {}", how.starts_with("binary32") ? "" : "scale_epilogue=", how,
                     settled ? fmt::format("measured ({})", row ? "per row" : "per tensor") : "unmeasured");
}

struct Compared {
  std::size_t passed = 0, total = 0;
  double max_ulps = 0;
};

Compared compare(const Matrix& want, const Matrix& got, const Format& out, const std::string& file,
                 std::size_t show, std::vector<std::string>& mismatches) {
  Compared c;
  for (Eigen::Index i = 0; i < want.rows(); ++i)
    for (Eigen::Index j = 0; j < want.cols(); ++j) {
      const double u = std::fabs(ulp_difference(got(i, j), want(i, j), out));
      ++c.total;
      c.max_ulps = std::max(c.max_ulps, u);
      if (same_encoding(got(i, j), want(i, j), out)) {
        ++c.passed;
      } else if (mismatches.size() < show) {
        mismatches.push_back(fmt::format("{}: D[{}, {}] = {} but the model gives {} ({} ulps of {})", file, i,
                                         j, want(i, j), got(i, j), u, out.name));
      }
    }
  return c;
}

std::string shape_of(const ManifestGemm& g, std::size_t kept) {
  const std::string mnk = fmt::format("{}x{}x{}", g.m, g.n, g.k);
  if (!g.batch) return mnk;
  return kept ? fmt::format("{}x[{}] ({} kept)", *g.batch, mnk, kept) : fmt::format("{}x[{}]", *g.batch, mnk);
}

std::string ulps_text(double u) {
  return std::isfinite(u) ? fmt::format("{:.4g}", u) : "inf";
}

}  // namespace

ManifestReport check_gemm_manifest(const GemmManifest& manifest, const std::vector<std::string>& models,
                                   std::size_t show, int threads, const std::function<bool()>& stop) {
  for (const auto& spec : models) AccumulationModel::parse(spec);  // a bad --model fails before any work
  ManifestReport r;
  r.skipped = manifest.skipped;
  r.skip_reasons = manifest.skip_reasons;
  r.gemms = manifest.gemms.size();
  std::map<std::size_t, std::size_t> row_of;  // call -> row
  for (std::size_t index = 0; index < manifest.gemms.size(); ++index) {
    if (stop && stop()) {
      r.interrupted = true;
      break;
    }
    const ManifestGemm& g = manifest.gemms[index];
    const ManifestModel chosen = resolve_gemm_model(g, select_gemm_model(g, manifest, models));
    const AccumulationModel& model = chosen.model;
    GemmDump dump = load_gemm_dump({manifest.dir / g.file}, DumpFormat::numpy);
    check_manifest_file(dump, g, index);
    if (g.beta == 0.0) dump.c.reset();  // beta = 0: PyTorch ignores C, even a NaN in it
    if (g.scaled()) set_tensor_scales(g, dump);
    check_dump_formats(dump, model);
    if (!row_of.count(g.call)) {
      row_of[g.call] = r.rows.size();
      r.rows.push_back(
          {g.call, g.op, "",
           fmt::format("{}{}->{}", g.a_dtype, g.b_dtype == g.a_dtype ? "" : "x" + g.b_dtype, g.d_dtype),
           chosen.spec, "", chosen.schedule});
      if (g.alpha != 1.0 || (g.beta != 0.0 && g.beta != 1.0))
        r.rows.back().note = fmt::format("alpha={:g} beta={:g}", g.alpha, g.beta);
      // Other than 1, the scales' rounding steps are the schedule's
      // scale_epilogue, an assumption (kernel_presets.cpp): said beside the
      // count.
      if (g.scaled()) r.rows.back().note = scale_note(model, g);
    }
    ManifestRow& row = r.rows[row_of[g.call]];
    const Compared c = compare(dump.d, model_result(model, dump, g, threads), model.output_format(), g.file,
                               show, r.mismatches);
    ++row.gemms;
    ++r.checked;
    row.shape = shape_of(g, row.gemms);
    row.passed += c.passed;
    row.total += c.total;
    row.max_ulps = std::max(row.max_ulps, c.max_ulps);
  }
  for (const auto& row : r.rows) (row.passed == row.total ? r.passed : r.failed) += 1;
  return r;
}

std::string ManifestReport::table() const {
  std::size_t wop = 2, wshape = 5, wdtype = 5, wmodel = 5;
  for (const auto& row : rows) {
    wop = std::max(wop, row.op.size());
    wshape = std::max(wshape, row.shape.size());
    wdtype = std::max(wdtype, row.dtype.size());
    wmodel = std::max(wmodel, row.model.size());
  }
  std::string out =
      fmt::format("{:>5}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>17}  {:>8}\n", "call", "op", wop, "shape",
                  wshape, "dtype", wdtype, "preset/model", wmodel, "bit-exact/total", "max ulps");
  for (const auto& row : rows)
    out += fmt::format("{:>5}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>17}  {:>8}{}{}\n", row.call, row.op, wop,
                       row.shape, wshape, row.dtype, wdtype, row.model, wmodel,
                       fmt::format("{}/{}", row.passed, row.total), ulps_text(row.max_ulps),
                       row.note.empty() ? "" : "  (" + row.note + ")",
                       row.schedule.empty() ? "" : "  schedule " + row.schedule);
  for (const auto& m : mismatches) out += "  mismatch " + m + "\n";
  if (skipped) {
    out += fmt::format("not checked: {} GEMMs\n", skipped);
    for (const auto& s : skip_reasons) out += "  " + s + "\n";
  }
  if (interrupted) out += fmt::format("interrupted: {} of {} GEMMs checked\n", checked, gemms);
  out += fmt::format("{} passed, {} failed\n", passed, failed);
  return out;
}

}  // namespace rpsim::sim

namespace rpsim::sim {

ManifestInferReport infer_gemm_manifest(const GemmManifest& manifest, const InferOptions& options,
                                        const std::function<void(const std::string&)>& on_line,
                                        const std::function<bool()>& stop) {
  ManifestInferReport r;
  const auto say = [&](const std::string& line) {
    r.text += line;
    if (on_line) on_line(line);
  };
  std::map<std::size_t, bool> seen;  // call -> searched (the first kept batch element stands for the call)
  for (const ManifestGemm& g : manifest.gemms) seen[g.call] = false;
  r.calls = seen.size();
  for (std::size_t index = 0; index < manifest.gemms.size(); ++index) {
    const ManifestGemm& g = manifest.gemms[index];
    if (seen[g.call]) continue;
    if (stop && stop()) {
      r.interrupted = true;
      break;
    }
    seen[g.call] = true;
    ++r.searched;
    GemmDump dump = load_gemm_dump({manifest.dir / g.file}, DumpFormat::numpy);
    check_manifest_file(dump, g, index);
    if (g.beta == 0.0) dump.c.reset();
    const std::string head =
        fmt::format("{:>5}  {}  {}  {}->{}  {}", g.call, g.op, shape_of(g, 0), g.a_dtype, g.d_dtype, g.file);
    if (g.alpha != 1.0 || (g.beta != 0.0 && g.beta != 1.0)) {
      say(head + ": not searched (an alpha/beta epilogue is outside the schedule space)\n");
      ++r.skipped;
      continue;
    }
    const InferResult found = infer_schedule(dump, options);
    if (!found.exact.empty()) {
      ++r.passed;
      say(fmt::format("{}: {} schedule(s) reproduce it, first {}{}{}\n", head, found.exact.size(),
                      found.exact.front().spec,
                      found.exact.front().family.empty() ? "" : " [" + found.exact.front().family + "]",
                      found.presets.empty() ? "" : " (preset " + found.presets.front() + ")"));
    } else {
      ++r.failed;
      say(found.best.empty()
              ? head + ": no schedule found\n"
              : fmt::format("{}: none reproduces it; best {}/{} {}\n", head, found.best.front().passed,
                            found.best.front().total, found.best.front().spec));
    }
  }
  if (r.skipped) say(fmt::format("not searched: {} calls\n", r.skipped));
  if (r.interrupted) say(fmt::format("interrupted: {} of {} calls searched\n", r.searched, r.calls));
  say(fmt::format("{} passed, {} failed\n", r.passed, r.failed));
  return r;
}

}  // namespace rpsim::sim
