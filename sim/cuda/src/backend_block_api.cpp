// rpsim_cuda_block_quantize (backend.h): a recipe row and its options parsed
// by formats' recipe table (recipe.hpp recipe_spec), the operand's groups and
// stochastic keys set as the CPU trainer sets them (block_operand.cpp), then
// one kernel (backend_block.cu).
#include <string>

#include "backend_host.hpp"
#include "backend_launch.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/recipe.hpp"

namespace rpsim::cuda::backend {
namespace {

constexpr const char* kFn = "rpsim_cuda_block_quantize";

// "name=value,name=value" (recipe-check's and rpsim.quantize's option names).
RecipeOptions parse_options(const char* text) {
  RecipeOptions o;
  const std::string s = text ? text : "";
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t end = s.find(',', at) == std::string::npos ? s.size() : s.find(',', at);
    const std::string item = s.substr(at, end - at);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      bad_argument(kFn, "option '" + item + "' is not name=value (options: \"name=value,...\")");
    o[item.substr(0, eq)] = item.substr(eq + 1);
    at = end + 1;
  }
  return o;
}

// What the device does not run, named by the recipe option that asks for it.
void check_device_spec(const QuantSpec& s) {
  if (s.tile_rows == 0 || s.tile_cols == 0)
    unsupported(kFn, "a per-tensor scale (te-fp8-current; rpsim_cuda_fp8_quantize scales by one value)");
  if (s.tile_rows != 1 && s.tile_rows != s.tile_cols)
    unsupported(kFn, "tiles of " + std::to_string(s.tile_rows) + "x" + std::to_string(s.tile_cols) +
                         " (1 x b blocks or b x b tiles)");
  if (s.columnwise) unsupported(kFn, "direction=columnwise (pass x's transposed view: rows of x^T)");
  if (s.rht) unsupported(kFn, "rht=true");
  if (s.row_scaled) unsupported(kFn, "row_scaled=true");
  if (s.four_over_six != FourOverSix::off) unsupported(kFn, "four_over_six");
}

// Nearest even or stochastic, keyed by seed and stream_id; nothing else.
bool parse_stochastic(const rpsim_cuda_rounding* r) {
  if (!r) return false;
  const RoundingDesc d = parse_rounding_arg(kFn, r);
  if (d.mode != RoundingMode::nearest_even && d.mode != RoundingMode::stochastic)
    bad_argument(kFn, std::string("rounding mode '") + r->mode +
                          "' (block quantisation rounds to nearest even "
                          "or stochastically: rne or sr)");
  if (d.overflow_set || (r->nan_policy && *r->nan_policy) || d.flush_subnormal_inputs ||
      d.flush_subnormal_outputs || r->stochastic_bits != 0 || r->first_index != 0)
    bad_argument(kFn,
                 "rounding: block quantisation takes mode, seed and stream_id only (the recipe fixes "
                 "overflow, NaN and subnormals)");
  return d.mode == RoundingMode::stochastic;
}

}  // namespace
}  // namespace rpsim::cuda::backend

using namespace rpsim;
using namespace rpsim::cuda::backend;

extern "C" int rpsim_cuda_block_quantize(const char* recipe, const char* options, const rpsim_cuda_matrix* x,
                                         float tensor_amax, const rpsim_cuda_rounding* rounding,
                                         const rpsim_cuda_matrix* values, const rpsim_cuda_matrix* scales,
                                         uint8_t* codes, double* tensor_scale_out, void* stream,
                                         rpsim_cuda_error* err) {
  return guarded(err, [&] {
    if (!recipe) bad_argument(kFn, "recipe is NULL");
    if (!x) bad_argument(kFn, "x is NULL");
    BlockQuantizeArgs a;
    a.spec = recipe_spec(recipe, parse_options(options));  // names an unknown recipe, option or value
    check_device_spec(a.spec);
    if (x->rows < 0 || x->cols < 0) bad_argument(kFn, "x has a negative size");
    check_matrix(kFn, "x", *x, x->rows, x->cols);
    const bool nv = a.spec.family == ScaleFamily::nvfp4;
    if (present(values)) {
      check_matrix(kFn, "values", *values, x->rows, x->cols);
      if (values->dtype == RPSIM_CUDA_F32 && a.spec.family == ScaleFamily::fp8)
        bad_argument(kFn, "values: f32 cannot hold every element x scale_inv of FP8 block scaling; use f64");
      a.values = view(*values);
    }
    if (present(scales)) {
      check_matrix(kFn, "scales", *scales, x->rows, x->cols);
      a.scales = view(*scales);
    }
    if (!present(values) && !present(scales) && !codes)
      bad_argument(kFn, "no output (values, scales or codes)");
    a.codes = codes;
    a.x = view(*x);
    a.groups.rows = std::size_t(x->rows);
    a.groups.cols = std::size_t(x->cols);
    a.groups.block = std::size_t(a.spec.tile_cols);
    a.groups.tiles = a.spec.tile_rows > 1;
    a.stochastic = parse_stochastic(rounding);
    if (a.stochastic) {
      if (a.spec.element == recipe::ElementKind::int8)
        bad_argument(kFn, "stochastic rounding: MXINT8 elements are rounded to nearest only");
      Rounding sr;
      sr.mode = RoundingMode::stochastic;
      a.sr.seed = rounding->seed;
      a.sr.stream = rounding->stream_id;
      a.sr.element = rpsim::format(rpsim::element_name(a.spec.element));
      a.sr.rounding = rounding_desc(sr);
    }
    // NVFP4's global scale from the tensor's amax (a NaN amax: every scale NaN).
    if (nv) a.tensor = recipe::nvfp4_tensor_scale(tensor_amax, 448.0f);
    if (tensor_scale_out) *tensor_scale_out = nv ? double(a.tensor.encode) : 1.0;
    require_device(kFn);
    launch_block_quantize(a, stream);
  });
}
