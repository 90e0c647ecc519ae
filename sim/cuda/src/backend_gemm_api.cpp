// rpsim_cuda_gemm (backend.h): the model parsed and checked as the CPU's
// gemm() checks it, then one kernel per kind of arithmetic
// (backend_launch.hpp): the sequential sums, the block-FMA schedule with its
// plan, the block-scaled chain, and torch._scaled_mm's scales.
#include <cuda_runtime.h>

#include <cstring>
#include <functional>
#include <variant>
#include <vector>

#include "backend_host.hpp"
#include "backend_launch.hpp"
#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/schedule_plan.hpp"
#include "rpsim/accumulation/tensor_core.hpp"

namespace rpsim::cuda::backend {
namespace {

constexpr const char* kFn = "rpsim_cuda_gemm";

// The scales copied to the host (they are small: one per block or per row)
// to be checked by the CPU's own rules (gemm.hpp check_gemm_scales).
sim::Matrix to_host(const rpsim_cuda_matrix& m) {
  std::int64_t span = 1;
  if (m.rows > 0 && m.cols > 0) span += (m.rows - 1) * m.row_stride + (m.cols - 1) * m.col_stride;
  if (m.row_stride < 0 || m.col_stride < 0) bad_argument(kFn, "scales with negative strides");
  const std::size_t bytes = std::size_t(span) * (m.dtype == RPSIM_CUDA_F64 ? 8 : 4);
  std::vector<unsigned char> raw(bytes);
  check_cuda(cudaMemcpy(raw.data(), m.data, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (scales)");
  sim::Matrix h(m.rows, m.cols);
  for (std::int64_t i = 0; i < m.rows; ++i)
    for (std::int64_t j = 0; j < m.cols; ++j) {
      const std::int64_t o = i * m.row_stride + j * m.col_stride;
      h(i, j) = m.dtype == RPSIM_CUDA_F64 ? reinterpret_cast<const double*>(raw.data())[o]
                                          : double(reinterpret_cast<const float*>(raw.data())[o]);
    }
  return h;
}

struct Call {
  GemmShape g;
  DMat a, b, c, d;
  const rpsim_cuda_gemm_scales* scales = nullptr;
  void* stream = nullptr;

  bool has(const rpsim_cuda_matrix rpsim_cuda_gemm_scales::*field) const {
    return scales && (scales->*field).data;
  }
  bool epilogue() const {
    return has(&rpsim_cuda_gemm_scales::scale_a) || has(&rpsim_cuda_gemm_scales::scale_b);
  }
  TensorScaleView tensor_scales() const {
    TensorScaleView v;
    if (has(&rpsim_cuda_gemm_scales::scale_a)) {
      v.a = view(scales->scale_a);
      v.a_one = scales->scale_a.rows * scales->scale_a.cols == 1;
    }
    if (has(&rpsim_cuda_gemm_scales::scale_b)) {
      v.b = view(scales->scale_b);
      v.b_one = scales->scale_b.rows * scales->scale_b.cols == 1;
    }
    return v;
  }
};

void require_output(const Call& x, const Format& out) {
  if (x.d.dtype == RPSIM_CUDA_F32 && !fits_binary32(out))
    bad_argument(kFn, "D is f32 but the model's output format " + out.name + " needs f64");
}

// The stream-ordered device copy of a schedule's plan, freed after the kernel.
class PlanOnDevice {
 public:
  PlanOnDevice(const sim::SchedulePlan& p, const std::vector<int>& tile_step, TcGemmArgs& x, void* stream)
      : stream_(static_cast<cudaStream_t>(stream)) {
    std::vector<int> ints;
    auto put = [&](const std::vector<int>& v) {
      const std::size_t at = ints.size();
      ints.insert(ints.end(), v.begin(), v.end());
      return at;
    };
    const std::size_t o = put(p.order), b = put(p.begin), cs = put(p.chunk_step), cl = put(p.chunk_slice),
                      ts = put(tile_step);
    const std::size_t flags_at = ints.size() * sizeof(int), bytes = flags_at + 2 * p.first.size() + 1;
    std::vector<unsigned char> host(bytes);
    std::memcpy(host.data(), ints.data(), ints.size() * sizeof(int));
    std::memcpy(host.data() + flags_at, p.first.data(), p.first.size());
    std::memcpy(host.data() + flags_at + p.first.size(), p.last.data(), p.last.size());
    check_cuda(cudaMallocAsync(&buffer_, bytes, stream_), "cudaMallocAsync (plan)");
    check_cuda(cudaMemcpyAsync(buffer_, host.data(), bytes, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync (plan)");
    const auto* dev = static_cast<const int*>(buffer_);
    const auto* flags = static_cast<const std::uint8_t*>(buffer_) + flags_at;
    x.order = dev + o;
    x.begin = dev + b;
    x.chunk_step = dev + cs;
    x.chunk_slice = dev + cl;
    x.tile_step = dev + ts;
    x.first = flags;
    x.last = flags + p.first.size();
    x.chunks = p.chunks();
    x.tiles = static_cast<int>(tile_step.size()) - 1;
  }
  ~PlanOnDevice() { cudaFreeAsync(buffer_, stream_); }
  PlanOnDevice(const PlanOnDevice&) = delete;
  PlanOnDevice& operator=(const PlanOnDevice&) = delete;

 private:
  cudaStream_t stream_;
  void* buffer_ = nullptr;
};

// Whole steps per shared-memory tile, at most kTcPositions products each.
std::vector<int> tile_steps(const sim::SchedulePlan& p) {
  std::vector<int> ts{0};
  for (int s = 0; s < p.steps(); ++s)
    if (p.begin[std::size_t(s) + 1] - p.begin[std::size_t(ts.back())] > kTcPositions) ts.push_back(s);
  if (ts.back() != p.steps()) ts.push_back(p.steps());
  return ts;
}

// What a call will queue once the device is found: every check that needs
// no device is done before (so a bad or unsupported call says so on any
// machine); the scales are read back from the device inside.
using Launch = std::function<void()>;

Launch run_schedule(const sim::KernelSchedule& s, const Call& x, bool scaled) {
  const sim::TensorCoreModel& m = s.instruction;
  if (m.terms_per_step > kTcPositions)
    unsupported(
        kFn, "terms_per_step " + std::to_string(m.terms_per_step) + " above " + std::to_string(kTcPositions));
  TcGemmArgs t;
  t.p = sim::tc_step_of(m);
  t.fold = sim::fold_desc_of(s);
  const auto plan = sim::schedule_plan(s, int(x.g.k));
  t.slices = plan.chunk_slice.empty() ? 1 : plan.chunk_slice.back() + 1;
  t.positions = static_cast<int>(plan.order.size());
  t.plain = !scaled && s.is_plain_chain() && plan.chunks() == 1;
  t.c_first = s.c_placement == sim::CPlacement::accumulator;
  if (!t.plain && s.reduction == sim::Reduction::exact) unsupported(kFn, "reduction=exact");
  if (t.slices > kTcMaxSlices) unsupported(kFn, std::to_string(t.slices) + " split-K slices");
  if (s.stored != m.input) {
    if (s.input_rounding == RoundingMode::stochastic) unsupported(kFn, "input_rounding=sr");
    t.convert = true;
    t.input = m.input;
    t.input_rounding = s.input_rounding;
  }
  t.g = x.g;
  t.a = x.a;
  t.b = x.b;
  t.c = x.c;
  t.d = x.d;
  t.scales = x.tensor_scales();
  return [t, plan, stream = x.stream]() mutable {
    const PlanOnDevice on_device(plan, tile_steps(plan), t, stream);
    launch_tc_gemm(t, stream);
  };
}

}  // namespace
}  // namespace rpsim::cuda::backend

namespace rpsim::cuda::backend {
namespace {

Launch run_sequential(const sim::Sequential& m, const Call& x) {
  require_output(x, m.acc.format);
  const sim::AccumulatorOps ops = sim::accumulator_ops(m.acc);
  if (m.fused) {
    // fma with binary32 operands (f32 arrays) or binary64 is one fma per
    // term; every other fused accumulator needs the CPU's exact accumulator.
    if (ops.path == sim::AccumulatorPath::f64)
      return [x] { launch_fma_chain(true, x.g, x.a, x.b, x.c, x.d, x.stream); };
    if (ops.path == sim::AccumulatorPath::f32 && x.a.dtype == RPSIM_CUDA_F32)
      return [x] { launch_fma_chain(false, x.g, x.a, x.b, x.c, x.d, x.stream); };
    unsupported(
        kFn,
        "fma:" + m.acc.format.name + ":" + std::string(rounding_name(m.acc.rounding)) +
            " (fused sums run on the device for binary64, and binary32 with f32 operands, to nearest even)");
  }
  const bool native = (ops.path == sim::AccumulatorPath::f32 && x.a.dtype == RPSIM_CUDA_F32) ||
                      (ops.path == sim::AccumulatorPath::f64 && x.a.dtype == RPSIM_CUDA_F64);
  if (native) return [x] { launch_native(x.g, x.a, x.b, x.c, x.d, x.stream); };
  return [x, ops] { launch_sequential(ops, x.g, x.a, x.b, x.c, x.d, x.stream); };
}

Launch run_instruction_schedule(const sim::KernelSchedule& s, const Call& x) {
  const sim::TensorCoreModel& m = s.instruction;
  require_output(x, s.output);
  if (m.scale_block > 0) {
    if (!x.has(&rpsim_cuda_gemm_scales::sfa) || !x.has(&rpsim_cuda_gemm_scales::sfb))
      bad_argument(kFn, "'" + m.name + "' takes block scales: give SFA and SFB");
    if (m.instruction_terms() > 64) unsupported(kFn, "block-scaled instructions of more than 64 products");
    return [x, p = sim::tc_step_of(m)] {
      launch_block_scaled(p, x.g, x.a, x.b, x.c, x.d, view(x.scales->sfa), view(x.scales->sfb), x.stream);
    };
  }
  if (m.datapath == sim::Datapath::fma_chain) {
    if (!s.is_plain_chain() || s.k_order == sim::KOrder::decreasing)
      bad_argument(kFn, "the '" + m.name +
                            "' datapath runs as a plain chain over k only, not under a kernel schedule");
    return [x, binary64 = m.output.bits == 64] {
      launch_fma_chain(binary64, x.g, x.a, x.b, x.c, x.d, x.stream);
    };
  }
  if (m.datapath != sim::Datapath::block_fma)
    unsupported(kFn, "the AMD mfma datapath of '" + m.name + "' (pairwise or round-down fused sums)");
  return run_schedule(s, x, false);
}

sim::KernelSchedule schedule_of(const sim::AccumulationModel& model, const Call& x, bool row_scales) {
  if (const auto* ks = std::get_if<sim::KernelSchedule>(&model.variant())) return *ks;
  sim::KernelPreset p = std::get<sim::KernelPreset>(model.variant());
  // A preset given per-row / per-column scales takes torch's per-row path
  // (gemm_scaled.cpp), as torch picks the kernel from the scales' shape.
  p.row_scales = p.row_scales || row_scales;
  return p.for_shape(x.g.m, x.g.n, x.g.k);
}

Launch run_unscaled(const sim::AccumulationModel& model, const Call& x) {
  const auto& v = model.variant();
  if (const auto* seq = std::get_if<sim::Sequential>(&v)) return run_sequential(*seq, x);
  if (std::holds_alternative<sim::KernelSchedule>(v) || std::holds_alternative<sim::KernelPreset>(v))
    return run_instruction_schedule(schedule_of(model, x, false), x);
  unsupported(kFn,
              "the model '" + model.spec() +
                  "' (the device runs sequential, fma:binary32|binary64:rne, tc, kernel and cublas models)");
}

void check_scales(const sim::AccumulationModel& model, const Call& x) {
  sim::GemmScales gs;
  if (x.has(&rpsim_cuda_gemm_scales::sfa)) gs.sfa = to_host(x.scales->sfa);
  if (x.has(&rpsim_cuda_gemm_scales::sfb)) gs.sfb = to_host(x.scales->sfb);
  if (x.has(&rpsim_cuda_gemm_scales::scale_a)) gs.scale_a = to_host(x.scales->scale_a);
  if (x.has(&rpsim_cuda_gemm_scales::scale_b)) gs.scale_b = to_host(x.scales->scale_b);
  sim::check_gemm_scales(model, x.g.m, x.g.k, x.g.n, gs);
}

// gemm.hpp's gemm(model, a, b, c, scales): a schedule applies _scaled_mm's
// scales in its own epilogue; any other model gets them after its product
// from C = 0 (gemm_scaled.cpp).
Launch dispatch(const sim::AccumulationModel& model, const Call& x) {
  const auto& v = model.variant();
  const sim::TensorCoreModel* bare = model.bare_instruction();
  const bool block = bare && bare->scale_block > 0;
  const bool any = x.scales && (x.scales->sfa.data || x.scales->sfb.data || x.epilogue());
  Launch launch;
  if (!x.epilogue()) {
    launch = run_unscaled(model, x);
  } else if (!block && !bare &&
             (std::holds_alternative<sim::KernelSchedule>(v) ||
              std::holds_alternative<sim::KernelPreset>(v))) {
    const TensorScaleView ts = x.tensor_scales();
    const sim::KernelSchedule s = schedule_of(model, x, (ts.a.data && !ts.a_one) || (ts.b.data && !ts.b_one));
    require_output(x, s.output);
    if (s.c_placement != sim::CPlacement::epilogue)
      bad_argument(kFn, "scale_a/scale_b need c_placement=epilogue (_scaled_mm scales A*B, never C)");
    if (s.instruction.datapath != sim::Datapath::block_fma || s.instruction.scale_block > 0)
      bad_argument(kFn, "scale_a/scale_b under a kernel schedule need a block-FMA instruction, not '" +
                            s.instruction.name + "'");
    launch = run_schedule(s, x, true);
  } else {
    Call zero_c = x;
    zero_c.c = DMat{};
    const Launch product = run_unscaled(model, zero_c);
    launch = [product, x, out = FormatDesc(model.output_format())] {
      product();
      launch_scaled_after(x.g, x.d, x.c, x.tensor_scales(), out, x.stream);
    };
  }
  if (!any && !block) return launch;
  return [launch, model, x] {
    check_scales(model, x);
    launch();
  };
}

}  // namespace
}  // namespace rpsim::cuda::backend

using namespace rpsim;
using namespace rpsim::cuda::backend;

extern "C" int rpsim_cuda_gemm(const char* model, const rpsim_cuda_matrix* a, const rpsim_cuda_matrix* b,
                               const rpsim_cuda_matrix* c, const rpsim_cuda_matrix* d,
                               const rpsim_cuda_gemm_scales* scales, void* stream, rpsim_cuda_error* err) {
  return guarded(err, [&] {
    if (!model) bad_argument(kFn, "model is NULL");
    if (!a || !b || !d) bad_argument(kFn, "A, B or D is NULL");
    const auto parsed = sim::AccumulationModel::parse(model);
    Call x;
    x.g = {a->rows, b->cols, a->cols};
    if (x.g.m < 0 || x.g.n < 0 || x.g.k < 0) bad_argument(kFn, "negative sizes");
    if (b->rows != a->cols)
      bad_argument(kFn, "A is " + std::to_string(a->rows) + "x" + std::to_string(a->cols) + " but B is " +
                            std::to_string(b->rows) + "x" + std::to_string(b->cols) +
                            " (A's columns must equal B's rows)");
    check_matrix(kFn, "A", *a, x.g.m, x.g.k);
    check_matrix(kFn, "B", *b, x.g.k, x.g.n);
    check_matrix(kFn, "D", *d, x.g.m, x.g.n);
    if (present(c)) check_matrix(kFn, "C", *c, x.g.m, x.g.n);
    if (a->dtype != b->dtype) bad_argument(kFn, "A and B must have one dtype (f32 or f64)");
    x.a = view(*a);
    x.b = view(*b);
    x.d = view(*d);
    if (present(c)) x.c = view(*c);
    x.scales = scales;
    x.stream = stream;
    const Launch launch = dispatch(parsed, x);
    require_device(kFn);
    if (x.g.m * x.g.n > 0) launch();
  });
}
