"""rpsim.torch.GemmConfig: how one emulated GEMM op runs -- its op-core GEMM op (rpsim._core._GemmOp,
the C++ op `rpsim train`'s layers run), resolved once, with the keys of its stochastic roundings and
its telemetry hooks -- read by the ops of _ops."""
from .. import _core
from . import _blockscale

DEFAULT_MODEL = "tc:h100:fp16:fp32"


class GemmConfig:
    """How one GEMM op runs: `model` (an accumulation spec or dict); compute: the format operands
    are rounded to first (None: only the model's own cast to its input format); backward: the
    format of the incoming gradient before the two backward GEMMs (None: compute); output: the
    format results are rounded to after the model's output format (None: none); seed/stream key
    stochastic models (forward stream, then stream + 1 and + 2 for the backward GEMMs). recipe: a
    block-scaled policy (mxfp8 ... nvfp4, or its object) whose block quantisation the operands take
    (compute, backward: its linear rule's by default); the model may then be a block-scaled
    instruction (tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0), checked against it (recipe_state).
    layer: (name, step) of a `rpsim train` layer whose keys the op's stochastic roundings take, as
    the trainer keys that layer's GEMMs at that step (emulate sets it per layer); None: seed and
    stream key them (stream + 3 and + 4 for dy's two casts). seed also keys the recipe's random
    Hadamard signs, as the run's seed does in rpsim train."""

    def __init__(self, model=DEFAULT_MODEL, compute=None, backward=None, output=None, seed=0, stream=0,
                 recipe=None, layer=None, *, op=None):
        self.model, self.compute, self.backward, self.output = model, compute, backward, output
        self.seed, self.stream = seed, stream
        if layer is not None and not (isinstance(layer, tuple) and len(layer) == 2 and isinstance(layer[0], str)
                                      and isinstance(layer[1], int) and layer[1] >= 0):
            raise TypeError(f"layer: {layer!r} is not a (name, step) pair (a layer name and a step >= 0)")
        self.layer = layer
        # Telemetry (rpsim.torch.Trainer, _flushes): called with the masks of the entries roundings
        # flushed to zero: on_param_grad_flush(parameter, mask) for a weight's or bias's gradient,
        # on_output_grad_flush(mask) for the output gradient's cast; None: not counted.
        self.on_param_grad_flush = None
        self.on_output_grad_flush = None
        if op is None:
            if recipe is not None:
                self.compute, self.backward = _blockscale.recipe_state(recipe, model, compute, backward)
            # A bad spec: ValueError naming it here.
            op = _core._GemmOp.of_model(model, self.compute, self.backward, self.output, recipe)
        # The op core's GEMM op, resolved once (emulate passes its rule's: _GemmOp.of_policy).
        self.op = op
        self.input_format, self.accumulation_format = op.input_format, op.accumulation_format
        self.scale_block = op.scale_block  # a block-scaled instruction's block along K (0: none)
        # The format of A's values where the caller knows it (emulate: its rule may follow its inputs).
        self.a_format = None
        # Telemetry: called with the mask of input-gradient entries the output rounding flushed
        # (linear), or with the raw input gradient's flushes through col2im (conv2d).
        self.on_input_grad_flush = None
        self.on_col2im_flush = None
        # conv: the format col2im rounds the input gradient to (None: its dtype's).
        self.x_format = None

    @property
    def scaled(self):
        """Whether the op quantises its operands under an FP8 recipe (per tensor or in blocks)."""
        return self.op.scaled
