// Layers of a network with hand-written reverse-mode derivatives, one file
// each (layers/). Every op reads the rule of its op class from the precision
// policy: inputs are cast to its compute format, matmuls accumulate under its
// accumulation model, results are rounded to its output format; the gradient
// of an input is returned in that input's format (as autograd's cast
// backward does). The op table (ops.hpp) lists them.
#pragma once

#include "rpsim/train/layers/activations.hpp"
#include "rpsim/train/layers/attention.hpp"
#include "rpsim/train/layers/conv2d.hpp"
#include "rpsim/train/layers/embedding.hpp"
#include "rpsim/train/layers/fp8.hpp"
#include "rpsim/train/layers/layer.hpp"
#include "rpsim/train/layers/layer_norm.hpp"
#include "rpsim/train/layers/linear.hpp"
#include "rpsim/train/layers/lm_head.hpp"
#include "rpsim/train/layers/losses.hpp"
#include "rpsim/train/layers/max_pool2d.hpp"
#include "rpsim/train/layers/residual.hpp"
