// Internal to the config layer: the built-in rows of the vocabulary table
// (framework_config.hpp), each defined beside the code that reads its
// vocabulary, and put in table order by framework_config.cpp.
#pragma once

#include "rpsim/config/framework_config.hpp"

namespace rpsim::sim::config {

const FrameworkVocabulary& deepspeed_vocabulary();    // deepspeed_config.cpp
const FrameworkVocabulary& keras_vocabulary();        // framework_names.cpp
const FrameworkVocabulary& grad_scaler_vocabulary();  // framework_names.cpp
const FrameworkVocabulary& fp8_recipe_vocabulary();   // framework_names.cpp

}  // namespace rpsim::sim::config
