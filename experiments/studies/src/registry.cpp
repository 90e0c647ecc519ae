// The default suite, in the notebooks' reading order.
#include "rpsim/study/study.hpp"
#include "rpsim/study/summation.hpp"
#include "rpsim/study/tensor_cores.hpp"
#include "rpsim/study/training_runs.hpp"

namespace rpsim::sim::study {

const std::vector<StudyInfo>& studies() {
  static const std::vector<StudyInfo> suite = {
      {"summation",
       "How does rounding error grow with the number of terms, and what do stochastic rounding, blocking, "
       "compensation and tensor cores change?",
       run_summation},
      {"tensor-cores",
       "Which numerical features (terms per step, alignment bits, rounding, subnormals, FP8 accumulator "
       "width) do "
       "black-box probes find in each tensor-core model, and how does its GEMM error grow with K?",
       run_tensor_cores},
      {"underflow",
       "How many fp16 gradients underflow in mixed-precision training, and how many does each loss scale "
       "recover before it overflows?",
       run_underflow},
      {"loss-scale",
       "How do the frameworks' loss scalers move the scale, and how many steps do they skip, when overflows "
       "are provoked?",
       run_loss_scale},
      {"accuracy", "How close to fp32 and to an FP64 shadow does each precision policy train?", run_accuracy},
      {"transformer",
       "Does a small GPT train in fp16 without loss scaling, and how far from its FP64 shadow does each "
       "policy "
       "end?",
       run_transformer},
      // The accuracy study's runner on Gupta et al. 2015's policies (its config).
      {"fixed-point",
       "Does 16-bit fixed point train with round to nearest, and with stochastic rounding (Gupta et al. "
       "2015)?",
       run_accuracy},
      // The transformer study's runner on the block-scaled policies (its config).
      {"block-scaled",
       "How far from its FP64 shadow does the GPT train under MX (8, 6, 4 bits) and NVIDIA's NVFP4 recipe, "
       "beside bf16 and per-tensor FP8?",
       run_transformer},
  };
  return suite;
}

}  // namespace rpsim::sim::study
