"""nn.MultiheadAttention as the ops it is made of, for rpsim.torch.emulate: the emulation runs this
function in place of F.multi_head_attention_forward (which it reaches whole), with the module's own
parameters, under its mode, so the projections are emulated GEMMs, the scores and the weighted sum
emulated matmuls, the softmax rpsim's kernel, and autograd takes the gradients through the same
rules. The steps are PyTorch 1.13's (torch/nn/functional.py), with the mask applied after the
scores' GEMM rather than as its C (a -inf in a GEMM's C is not an accumulation rpsim models):

  q, k, v = F.linear(query, in_proj_weight, in_proj_bias).chunk(3, -1)   (self-attention; otherwise
            F.linear of query, key and value with the weight's and bias's thirds)
  per head (batch * heads, length, head_dim): scores = (q / sqrt(head_dim)) @ k^T; a boolean mask
  (attn_mask, key_padding_mask) -> masked_fill(-inf), a float one added; p = softmax(scores, -1);
  dropout in training; y = p @ v; out = F.linear(y (length * batch, embed), out_proj weight, bias)

The module's options as PyTorch 1.13 adds them: bias_k / bias_v (add_bias_kv=True) one more key and
value per sequence, concatenated after the projections; static_k / static_v in place of the
projected keys and values (batch * heads, source, head_dim); add_zero_attn a zero key and value
after those; each extra key a column of False (or 0.0) in the masks."""
import math

import torch
import torch.nn.functional as F


def _project(query, key, value, w, b, separate):
    """q, k, v: the input projections (PyTorch's _in_projection_packed / _in_projection)."""
    if separate is None and query is key and key is value:
        return F.linear(query, w, b).chunk(3, -1)
    ws = separate if separate is not None else w.chunk(3)
    bs = b.chunk(3) if b is not None else (None, None, None)
    return tuple(F.linear(t, wi, bi) for t, wi, bi in zip((query, key, value), ws, bs))


def _one_more_key(mask):
    """A mask with a column for one more key, not masked (F.pad's False or 0.0), as PyTorch pads it."""
    return None if mask is None else F.pad(mask, (0, 1))


def _mask(attn_mask, key_padding_mask, bsz, heads, tgt, src):
    """The masks as one (boolean, additive) pair over (batch * heads, tgt, src), or (None, None)."""
    masks = []
    if attn_mask is not None:
        m = attn_mask.to(torch.bool) if attn_mask.dtype == torch.uint8 else attn_mask
        masks.append(m.unsqueeze(0) if m.dim() == 2 else m)
    if key_padding_mask is not None:
        m = key_padding_mask.to(torch.bool) if key_padding_mask.dtype == torch.uint8 else key_padding_mask
        masks.append(m.view(bsz, 1, 1, src).expand(-1, heads, -1, -1).reshape(bsz * heads, 1, src))
    keep = [m for m in masks if m.dtype == torch.bool]
    add = [m for m in masks if m.dtype != torch.bool]
    boolean = None
    for m in keep:
        boolean = m if boolean is None else boolean | m
    additive = None
    for m in add:
        additive = m if additive is None else additive + m
    return boolean, additive


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True):
    batched = query.dim() == 3
    if not batched:  # (length, embed): one sequence
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt, bsz, embed = query.shape
    head = embed // num_heads
    separate = (q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight else None
    q, k, v = _project(query, key, value, in_proj_weight, in_proj_bias, separate)
    if bias_k is not None and bias_v is not None:
        k, v = torch.cat([k, bias_k.repeat(1, bsz, 1)]), torch.cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(key_padding_mask)
    q = q.contiguous().view(tgt, bsz * num_heads, head).transpose(0, 1)
    k = static_k if static_k is not None else k.contiguous().view(k.shape[0], bsz * num_heads, head).transpose(0, 1)
    v = static_v if static_v is not None else v.contiguous().view(v.shape[0], bsz * num_heads, head).transpose(0, 1)
    if add_zero_attn:
        k = torch.cat([k, k.new_zeros(bsz * num_heads, 1, head)], dim=1)
        v = torch.cat([v, v.new_zeros(bsz * num_heads, 1, head)], dim=1)
        attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(key_padding_mask)
    src = k.shape[1]
    scores = (q / math.sqrt(head)) @ k.transpose(-2, -1)
    boolean, additive = _mask(attn_mask, key_padding_mask, bsz, num_heads, tgt, src)
    if boolean is not None:
        scores = scores.masked_fill(boolean, float("-inf"))
    if additive is not None:
        scores = scores + additive
    p = F.softmax(scores, dim=-1)
    if training and dropout_p > 0:
        p = F.dropout(p, dropout_p, training=True)
    y = (p @ v).transpose(0, 1).contiguous().view(tgt * bsz, embed)
    out = F.linear(y, out_proj_weight, out_proj_bias).view(tgt, bsz, embed)
    weights = None
    if need_weights:
        weights = p.view(bsz, num_heads, tgt, src)
        if average_attn_weights:
            weights = weights.sum(dim=1) / num_heads
        if not batched:
            weights = weights.squeeze(0)
    return (out if batched else out.squeeze(1)), weights
