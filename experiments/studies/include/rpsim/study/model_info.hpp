// What the studies need to know about an accumulation model to plot it beside
// the rounding-error bounds: its input format and the rounding of its sums.
#pragma once

#include <type_traits>
#include <variant>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/accumulation/accumulation.hpp"

namespace rpsim::sim::study {

// The rounding of the model's additions (a tensor core's final
// normalisation): it decides which unit roundoff the bounds use (2^-p for
// round to nearest, 2^(1-p) otherwise).
inline RoundingMode model_rounding(const AccumulationModel& model) {
  return std::visit(
      [](const auto& m) -> RoundingMode {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, TensorCoreModel>)
          return m.final_rounding;
        else if constexpr (std::is_same_v<T, Exact>)
          return m.rounding;
        else if constexpr (std::is_same_v<T, EigenGemm>)
          return RoundingMode::nearest_even;
        else
          return m.acc.rounding;
      },
      model.variant());
}

// A tensor core reads its input format; every other model reads values of
// its accumulator format.
inline const Format& model_input_format(const AccumulationModel& model) {
  if (const auto* tc = std::get_if<TensorCoreModel>(&model.variant())) return tc->input;
  return model.output_format();
}

}  // namespace rpsim::sim::study
