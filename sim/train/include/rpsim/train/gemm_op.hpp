// The op core's GEMM op: the arithmetic of one GEMM-class op of a training
// step -- linear, conv2d on its im2col columns, matmul/bmm, lm_head,
// attention's two products -- written once, and called by rpsim train's
// layers and by rpsim.torch's autograd functions alike.
//
// forward: the operands cast to the op's compute format (or quantised under
// the policy's FP8 recipe: per-tensor delayed/current scaling, or MX/NVFP4
// blocks along K), the GEMM under the op's accumulation model, then the
// GEMM library's epilogue (dequantisation, bias, output rounding).
// backward: the output gradient cast to the backward compute format (or
// quantised), the two GEMMs dA = dY B^T and dB = A^T dY on what forward
// saved, their results in the op's output format, and the bias gradient
// (column sums of the cast gradient in the accumulation format).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rpsim/accumulation/gemm_epilogue.hpp"
#include "rpsim/train/layers/layer.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::sim::train {

// How one GEMM op runs, resolved once per call site (no spec parsing or
// preset search per call).
struct GemmSpec {
  sim::AccumulationModel model;
  // Compute, output and backward in the first operand's format (an op rule
  // that follows its inputs).
  bool follow_inputs = false;
  const Format* compute = nullptr;   // null: only the model's own cast to its input format
  const Format* output = nullptr;    // null: results left in the model's output format
  const Format* backward = nullptr;  // dY's format in backward (null: compute)
  // The policy's FP8 recipe when the op scales its inputs (scaling none:
  // plain casts).
  Fp8Recipe recipe;
  // A block-scaled op kept in bfloat16 (the recipe's high_precision_last):
  // bf16 inputs, no block scales, the GPU's unscaled instruction.
  bool high_precision = false;
  // The spec of `rule` under `policy`.
  static GemmSpec of(const OpRule& rule, const PrecisionPolicy& policy, bool high_precision = false);
  bool per_tensor_fp8() const;
  bool block_scaled() const;
};

// Where the op's stochastic roundings draw: GEMM `which` (0 forward, 1 dB,
// 2 dA; 3 and 4 dY's casts for dB and dA under the recipe's gradient_sr)
// takes {base.seed, base.stream + which}; unkeyed, the model is used as
// given. hadamard_seed: the random Hadamard transform's signs (the run's seed).
struct GemmKeys {
  RandomStream base;
  bool keyed = false;
  std::uint64_t hadamard_seed = 0;
  RandomStream stream(std::uint64_t which) const {
    return keyed ? RandomStream{base.seed, base.stream + which} : RandomStream{};
  }
  // rpsim train's keys of layer `name` at the step of `ctx` (matmul_stream).
  static GemmKeys of_layer(const std::string& name, const StepContext& ctx);
};

struct GemmGrads {
  Matrix da, db, dbias;  // in the op's output format (empty where not asked)
  // Before that rounding (underflow telemetry): dA, and dB (under per-tensor
  // FP8, before the dequantisation, as rpsim train counts it).
  Matrix da_raw, db_raw, dbias_raw;
  // Entries of dY that the cast (or quantisation) to the backward format
  // flushed to zero, in dY's layout (empty: none cast).
  Mask dy_cast_flushed;
};

// What one forward call saves for its backward (autograd's saved tensors):
// a call's own, so an op called several times per step (a shared layer, an
// RNN's time steps) backs each call with its own.
struct GemmSaved {
  Matrix a, b;    // the operands as given (FP8 paths: backward quantises them again)
  Matrix ac, bc;  // the operands cast to the compute format (plain path)
  Eigen::Index a_size = 0;
  const Format* a_format = nullptr;
  const Format* saved_format = nullptr;
  double a_scale = 1, b_scale = 1;  // per-tensor FP8 scales
};

// One call site's GEMM op: its resolved spec, and what persists across
// calls (per-tensor delayed-scaling histories, the step's FP8 statistics).
class GemmOp {
 public:
  GemmOp() = default;
  explicit GemmOp(GemmSpec spec) : spec_(std::move(spec)) {}
  const GemmSpec& spec() const { return spec_; }
  void set_high_precision(bool on) { spec_.high_precision = on; }
  // The format of the op's results for inputs of `input`: the rule's output
  // format (the input's, for a rule that follows its inputs), else the
  // model's output format.
  const Format& output_format(const Format& input) const {
    const Formats f = formats(input);
    return f.output ? *f.output : *f.accumulation;
  }

  // epilogue(A B (+ C)): A (m x k) holding values of a_format, B (k x n);
  // bias a 1 x n row or null; C (m x n, unscaled GEMMs only) or null. What
  // backward needs goes into `saved`.
  Matrix forward(const Matrix& a, const Format& a_format, const Matrix& b, const Matrix* bias,
                 const GemmKeys& keys, GemmSaved& saved, const Matrix* c = nullptr);
  // The same on an A the caller gives up (rpsim.torch's binary64 copy of a
  // tensor): the plain path keeps its cast in A's own storage.
  Matrix forward(Matrix&& a, const Format& a_format, const Matrix& b, const Matrix* bias,
                 const GemmKeys& keys, GemmSaved& saved, const Matrix* c = nullptr);
  // The format forward's cast of A rounds to, where that cast rounds each
  // entry on its own and may change some: the unscaled path of a rule with a
  // compute format of its own, under nearest-even tensor rounding; else
  // null. An A whose entries are copies of a smaller tensor's (im2col's
  // patches: each input entry k*k times under a k x k kernel) may be made
  // from that tensor cast first (rounded(*fmt, x)) and given as values of
  // *fmt: forward then skips its cast (rounded_from), and the bits are the
  // same, since a copy of a rounded entry is the rounded copy.
  const Format* entrywise_cast(const Format& a_format) const;
  // The gradients of the operands of the forward call that filled `saved`,
  // from dY (m x n). b_grad_format: B and the bias are parameters whose
  // gradients are stored in this format (the policy's gradients; autocast's
  // fp16 gradient cast back to fp32), rounded right after the op's output
  // rounding, in rpsim train's order (dB, the bias gradient, dA: under a
  // stochastic policy each rounding draws the next stream of the step).
  // keep_raw = false: da_raw and db_raw are left empty (a caller counting no
  // underflow: the copies are the size of the gradients).
  GemmGrads backward(const GemmSaved& saved, const Matrix& dy, bool need_da, bool need_db, bool need_dbias,
                     const GemmKeys& keys, const Format* b_grad_format = nullptr, bool keep_raw = true);

  // The tensors the op quantises under its recipe ("x", "w", "dy": A, B,
  // dY) with what they saw in the last step; empty when it quantises none.
  std::vector<std::pair<std::string, const Fp8Stats*>> fp8_stats() const;
  // The three records whatever the spec (empty before the first step).
  std::vector<std::pair<std::string, const Fp8Stats*>> fp8_records() const {
    return {{"x", &a_stats_}, {"w", &b_stats_}, {"dy", &dy_stats_}};
  }

 private:
  struct Formats {
    const Format* compute;
    const Format* output;
    const Format* backward;
    const Format* accumulation;
  };
  Formats formats(const Format& input) const;
  sim::AccumulationModel unscaled_model(const Format& compute) const;
  Matrix forward_of(const Matrix& a, Matrix* owned, const Format& a_format, const Matrix& b,
                    const Matrix* bias, const GemmKeys& keys, GemmSaved& s, const Matrix* c);
  Matrix plain_forward(const Matrix& a, Matrix* owned, const Matrix& b, const Matrix* c, const Formats& f,
                       const GemmKeys& keys, GemmSaved& s);
  Matrix per_tensor_forward(const Matrix& a, const Matrix& b, const Formats& f, const GemmKeys& keys,
                            sim::GemmEpilogue& e, GemmSaved& s);
  Matrix block_forward(const Matrix& a, const Matrix& b, const Formats& f, const GemmKeys& keys,
                       sim::GemmEpilogue& e);
  void per_tensor_backward(const GemmSaved& s, const Matrix& dy, const Formats& f, bool need_da,
                           const GemmKeys& keys, GemmGrads& g);
  void block_backward(const GemmSaved& s, const Matrix& dy, const Formats& f, bool need_da,
                      const GemmKeys& keys, GemmGrads& g);

  GemmSpec spec_;
  Fp8ScaleState a_history_, b_history_, dy_history_;
  Fp8Stats a_stats_, b_stats_, dy_stats_;
};

}  // namespace rpsim::sim::train
