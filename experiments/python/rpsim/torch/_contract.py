"""torch.einsum and torch.tensordot as the ops PyTorch itself lowers them to, for rpsim.torch.emulate:
PyTorch runs each as one C++ function whose GEMM (a bmm, an mm) the emulation would not see, so it
runs these in their place, under its mode: every permute and reshape a layout op, the GEMM the op
table's bmm or mm row (its formats and accumulation model), a sum of a dimension only one operand
holds a sum, a contraction over no dimension the elementwise product. einsum, multi_dot and
chain_matmul are on autocast's list: their inputs are cast once at the call and their inner ops run
on those values uncast (a sum stays in the low format), as autocast runs them whole on a GPU.

The steps are ATen's (aten/src/ATen/native/Linear.cpp, einsum, sumproduct_pair and tensordot):
  einsum  the operands aligned to one order of dimensions: the output's subscripts, then the
          contracted ones in subscript order (A-Z, then a-z); a repeated subscript's diagonal
          taken; then, left to right (or along opt_einsum's path where torch would take one), each
          pair's contracted dimensions found by counting the operands that still hold them, a
          dimension one operand alone holds summed first, and the pair multiplied as
          bmm(left (lro, lo, sum), right (lro, sum, ro)): dimensions in both operands and the
          output (lro) the batch, the contracted ones flattened in order into K.
  tensordot  both operands permuted (kept dimensions, then the contracted ones in the order given)
          and multiplied by one mm.
  inner   a product when either is a scalar, else tensordot over the last dimensions
          (LinearAlgebra.cpp).
  kron    no GEMM: one broadcast product of the operands reshaped to interleave their dimensions.
  addr    no GEMM: (alpha * vec1) times vec2 broadcast, plus beta * input, each an op (CUDA's kernel).
  matrix_power  matmuls by repeated squaring over n's bits (LinearAlgebra.cpp).
  multi_dot  (chain_matmul too) mm in the order of least scalar products: for three operands the
          cheaper of (AB)C and A(BC) ((AB)C on a tie), for more the matrix-chain order ATen's dynamic programme picks
          (the first split of least cost); a 1-D first or last operand as a row or a column.
  bilinear  ATen's _trilinear unrolled over the output features: per feature k, x1 W_k as one bmm,
          then its row-wise dot with x2 as another, added into a zero float tensor of x1's dtype
          (so under autocast the result is binary32 holding the low format's values), then + bias.
So each output element is the dot product over K in index order that the GEMM row models; only
the shapes that torch's GEMM sees are those of that lowering."""
import collections
import string

import torch
from torch import overrides

_SUBSCRIPTS = string.ascii_uppercase + string.ascii_lowercase  # ATen's subscript order
_ELLIPSIS = len(_SUBSCRIPTS)


def _meta_check(call, *args):
    """torch's own errors (and nothing else) for arguments its function would refuse: the call on
    meta tensors of the same shapes, outside every TorchFunctionMode."""
    no_mode = getattr(overrides, "_no_torch_function_mode", None)
    if no_mode is None:
        return
    with no_mode():  # (the meta tensors too: no op of the model's counted in its summary)
        call(*[torch.empty(t.shape, dtype=t.dtype, device="meta") if isinstance(t, torch.Tensor) else t
               for t in args])


def _parse(equation, count):
    lhs, arrow, rhs = equation.partition("->")
    terms = [t.replace(" ", "").replace("...", ".") for t in lhs.split(",")]
    labels = [[_ELLIPSIS if c == "." else _SUBSCRIPTS.index(c) for c in t] for t in terms]
    assert len(labels) == count
    return labels, (rhs.replace(" ", "").replace("...", ".") if arrow else None)


def _opt_einsum_path(equation, operands):
    """The contraction path torch.einsum takes: opt_einsum's for three or more operands where it is
    installed and enabled (torch/functional.py), else None (left to right)."""
    opt = getattr(torch.backends, "opt_einsum", None)
    if len(operands) <= 2 or opt is None or not opt.enabled or not opt.is_available():
        return None
    path = opt.get_opt_einsum().contract_path(equation, *operands, optimize=opt.strategy)[0]
    return [i for pair in path for i in pair]


def einsum(*args):
    """torch.einsum(equation, *operands) (or the operands as one list) as ATen lowers it."""
    equation, operands = args[0], args[1:]
    if not isinstance(equation, str):
        raise TypeError("rpsim.torch.emulate: einsum in the subscript-list form; give the equation "
                        "as a string (torch.einsum('ij,jk->ik', a, b))")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    _meta_check(lambda *ops: torch._VF.einsum(equation, list(ops)), *operands)
    labels, rhs = _parse(equation, len(operands))
    counts = collections.Counter(s for labs in labels for s in labs if s != _ELLIPSIS)
    ell_dims = max([op.dim() - len(labs) + 1 for op, labs in zip(operands, labels) if _ELLIPSIS in labs],
                   default=0)
    where, ell_at, ell_out = _aligned_order(rhs, counts, ell_dims)
    out_dims = len(where) + (ell_dims if ell_out else 0)
    if not ell_out:
        ell_at = out_dims
    total = out_dims + ell_dims * (not ell_out)
    for s in range(_ELLIPSIS):
        if counts[s] and s not in where:
            where[s] = total
            total += 1
    dim_counts = [0] * total
    ops = collections.deque(_align(op, labs, where, ell_at, ell_dims, total, dim_counts)
                            for op, labs in zip(operands, labels))
    path = _opt_einsum_path(equation, operands)
    steps = iter(path or ())
    while len(ops) > 1:
        i, j = (0, 1) if path is None else sorted((next(steps), next(steps)))
        a, b = ops[i], ops[j]
        del ops[j]
        del ops[i]
        a, b, sum_dims = _summed_now(a, b, out_dims, total, dim_counts)
        pair = _sumproduct_pair(a, b, sum_dims)
        if path is None:
            ops.appendleft(pair)
        else:
            ops.append(pair)
    result = ops[0]
    if total > out_dims:
        if len(operands) > 1:  # every contracted dimension is 1 by now
            return result.reshape(result.shape[:out_dims])
        return result.sum(list(range(out_dims, total)))
    return result


def _aligned_order(rhs, counts, ell_dims):
    """{subscript: position} of the output's subscripts, where the ellipsis starts, and whether the
    output holds it (an implicit output: the ellipsis, then the subscripts seen once, in order)."""
    where, at, ell_at, ell_out = {}, 0, 0, False
    if rhs is None:
        at, ell_out = ell_dims, True
        for s in range(_ELLIPSIS):
            if counts[s] == 1:
                where[s], at = at, at + 1
        return where, ell_at, ell_out
    for c in rhs:
        if c == ".":
            ell_at, ell_out, at = at, True, at + ell_dims
        else:
            where[_SUBSCRIPTS.index(c)], at = at, at + 1
    return where, ell_at, ell_out


def _align(op, labs, where, ell_at, ell_dims, total, dim_counts):
    """One operand with a repeated subscript's diagonal taken, a size-1 dimension for each it lacks,
    permuted to the aligned order; dim_counts counts the operands with a dimension other than 1."""
    perm = [-1] * total
    d = 0
    covered = op.dim() - (len(labs) - 1)  # the ellipsis's dimensions, counted before any diagonal
    for s in labs:
        if s == _ELLIPSIS:
            for j in range(ell_dims - covered, ell_dims):
                dim_counts[ell_at + j] += op.shape[d] != 1
                perm[ell_at + j], d = d, d + 1
        elif perm[where[s]] == -1:
            dim_counts[where[s]] += op.shape[d] != 1
            perm[where[s]], d = d, d + 1
        else:
            prev = perm[where[s]]
            op = op.diagonal(0, prev, d).movedim(-1, prev)
    for k in range(total):
        if perm[k] == -1:
            op = op.unsqueeze(d)
            perm[k], d = d, d + 1
    return op.permute(perm)


def _summed_now(a, b, out_dims, total, dim_counts):
    """The pair's contracted dimensions no later operand holds; a dimension only one of the two
    holds (and no other operand) summed in it first."""
    sum_dims, a_sum, b_sum = [], [], []
    for dim in range(out_dims, total):
        if a.shape[dim] != 1 and b.shape[dim] != 1:
            dim_counts[dim] -= 1
            if dim_counts[dim] == 1:
                sum_dims.append(dim)
                dim_counts[dim] = 0
        elif dim_counts[dim] == 1:
            if a.shape[dim] != 1:
                a_sum.append(dim)
                dim_counts[dim] = 0
            elif b.shape[dim] != 1:
                b_sum.append(dim)
                dim_counts[dim] = 0
    if a_sum:
        a = a.sum(a_sum, keepdim=True)
    if b_sum:
        b = b.sum(b_sum, keepdim=True)
    return a, b, sum_dims


def _sumproduct_pair(left, right, sum_dims):
    """(left * right).sum(sum_dims, keepdim=True) as one bmm (ATen's sumproduct_pair)."""
    if not sum_dims:
        return left * right
    lro, lo, ro = [], [], []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(left.dim()):
        sl, sr = left.shape[i] != 1, right.shape[i] != 1
        if i in sum_dims:
            if sl and sr:
                sum_size *= left.shape[i]
            elif sl:
                left = left.sum(i, keepdim=True)
            elif sr:
                right = right.sum(i, keepdim=True)
        elif sl and sr:
            lro.append(i)
            lro_size *= left.shape[i]
        elif sl:
            lo.append(i)
            lo_size *= left.shape[i]
        else:
            ro.append(i)
            ro_size *= right.shape[i]
    out_size = [left.shape[d] for d in lro + lo] + [1] * len(sum_dims) + [right.shape[d] for d in ro]
    order = lro + lo + sum_dims + ro
    back = [order.index(d) for d in range(left.dim())]
    left = left.permute(order).reshape(lro_size, lo_size, sum_size)
    right = right.permute(lro + sum_dims + ro + lo).reshape(lro_size, sum_size, ro_size)
    return torch.bmm(left, right).view(out_size).permute(back)


def _out(result, out):
    """result, or written into `out` (a function's out= argument) and out returned."""
    return result if out is None else out.resize_(result.shape).copy_(result)


def tensordot(a, b, dims=2, out=None):
    """torch.tensordot(a, b, dims) as ATen lowers it: one mm of the permuted operands."""
    if isinstance(dims, torch.Tensor):
        dims = dims.tolist() if dims.numel() > 1 else int(dims.item())
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))
    else:
        dims_a, dims_b = (list(d) for d in dims)
    _meta_check(lambda x, y: torch._VF.tensordot(x, y, dims_a, dims_b), a, b)
    dims_a, dims_b = [d % a.dim() for d in dims_a], [d % b.dim() for d in dims_b]
    t1, t2, csize = a, b, 1
    for da, db in zip(dims_a, dims_b):
        if b.shape[db] == 1:  # a broadcast dimension: summed right away
            t1 = t1.sum(da, keepdim=True)
        elif a.shape[da] == 1:
            t2 = t2.sum(db, keepdim=True)
        else:
            csize *= a.shape[da]
    keep_a = [i for i in range(a.dim()) if i not in dims_a]
    keep_b = [i for i in range(b.dim()) if i not in dims_b]
    size1 = size2 = 1
    for i in keep_a:
        size1 *= t1.shape[i]
    for i in keep_b:
        size2 *= t2.shape[i]
    sizes = [t1.shape[i] for i in keep_a] + [t2.shape[i] for i in keep_b]
    result = torch.mm(t1.permute(keep_a + dims_a).reshape(size1, csize),
                      t2.permute(dims_b + keep_b).reshape(csize, size2)).reshape(sizes)
    return _out(result, out)


def inner(a, b, *, out=None):
    """torch.inner(a, b) as ATen lowers it."""
    result = a * b if a.dim() == 0 or b.dim() == 0 else tensordot(a, b, ([-1], [-1]))
    return _out(result, out)


def kron(a, b, *, out=None):
    """torch.kron(a, b) as ATen computes it: an elementwise product, no GEMM."""
    nd = max(a.dim(), b.dim())
    sa = [1] * (nd - a.dim()) + list(a.shape)
    sb = [1] * (nd - b.dim()) + list(b.shape)
    result = (a.reshape([d for n in sa for d in (n, 1)]) * b.reshape([d for n in sb for d in (1, n)]))
    result = result.reshape([x * y for x, y in zip(sa, sb)])
    return _out(result, out)


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """torch.addr as CUDA's kernel computes it (LinearAlgebra.cu, addr_kernel_cuda): per entry
    beta * self + (alpha * vec1) * vec2 in the tensors' type, each product and the sum an op of its
    own (at half and bfloat16 each rounded to it); with beta = 0 self is not read (no NaN from it)."""
    _meta_check(torch._C._VariableFunctions.addr, input, vec1, vec2)
    product = (alpha * vec1).unsqueeze(-1) * vec2
    result = product if beta == 0 else beta * input + product
    return _out(result, out)


def bilinear(input1, input2, weight, bias=None):
    """F.bilinear as ATen computes it (bilinear, _trilinear with unroll_dim 1)."""
    _meta_check(torch._C._VariableFunctions.bilinear, input1, input2, weight, bias)
    out_shape = tuple(input1.shape[:-1]) + (weight.shape[0],)
    x1 = input1.reshape(-1, input1.shape[-1]).unsqueeze(1).unsqueeze(3)  # (B, 1, I, 1)
    x2 = input2.reshape(-1, input2.shape[-1]).unsqueeze(1).unsqueeze(2)  # (B, 1, 1, J)
    w = weight.unsqueeze(0)  # (1, O, I, J)
    output = torch.zeros(x1.shape[0], weight.shape[0], 1, 1, dtype=input1.dtype, device=input1.device)
    for k in range(weight.shape[0]):
        buf = _sumproduct_pair(_sumproduct_pair(x1, w.narrow(1, k, 1), [2]), x2, [3])
        output.narrow(1, k, 1).add_(buf)
    output = output.reshape(out_shape)
    return output if bias is None else output + bias


def multi_dot(tensors, *, out=None):
    """torch.linalg.multi_dot(tensors) in ATen's order of products."""
    tensors = list(tensors)
    _meta_check(lambda *ts: torch._C._linalg.linalg_multi_dot(list(ts)), *tensors)
    first_1d, last_1d = tensors[0].dim() == 1, tensors[-1].dim() == 1
    if first_1d:
        tensors[0] = tensors[0].unsqueeze(0)
    if last_1d:
        tensors[-1] = tensors[-1].unsqueeze(-1)
    if len(tensors) == 2:
        result = torch.mm(tensors[0], tensors[1])
    elif len(tensors) == 3:
        a, b, c, d = tensors[0].shape[0], tensors[1].shape[0], tensors[2].shape[0], tensors[2].shape[1]
        ab_first = a * c * (b + d) <= b * d * (a + c)  # a tie: (AB)C, as torch 1.13's multi_dot
        result = torch.mm(torch.mm(tensors[0], tensors[1]), tensors[2]) if ab_first else \
            torch.mm(tensors[0], torch.mm(tensors[1], tensors[2]))
    else:
        result = _chain(tensors, _chain_order(tensors), 0, len(tensors) - 1)
    if first_1d:
        result = result.squeeze(0)
    if last_1d:
        result = result.squeeze(-1)
    return _out(result, out)


def matrix_power(input, n, *, out=None):
    """torch.matrix_power / linalg.matrix_power as ATen computes it (LinearAlgebra.cpp,
    linalg_matrix_power_impl): n = 0 the identity, 1 a copy, a negative n on the inverse; 2 and 3 as
    a @ a and (a @ a) @ a; beyond, n's bits from the least significant, squaring z = a, a^2, a^4 ...
    and result = result @ z at each set bit; every product a matmul."""
    _meta_check(lambda x: torch._C._linalg.linalg_matrix_power(x, n), input)
    if n == 0:
        result = input.clone(memory_format=torch.contiguous_format).copy_(
            torch.eye(input.shape[-1], dtype=input.dtype).expand_as(input))
    elif n in (1, -1):
        result = input.clone(memory_format=torch.contiguous_format) if n == 1 else torch.linalg.inv(input)
    else:
        a, n = (torch.linalg.inv(input), -n) if n < 0 else (input, n)
        if n <= 3:
            result = torch.matmul(a, a) if n == 2 else torch.matmul(torch.matmul(a, a), a)
        else:
            z = result = None
            while n > 0:
                bit, n = n % 2, n // 2
                z = a if z is None else torch.matmul(z, z)
                if bit:
                    result = z if result is None else torch.matmul(result, z)
    return _out(result, out)


def chain_matmul(*matrices, out=None):
    """torch.chain_matmul: multi_dot of its matrices (one: a copy)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    result = matrices[0].clone() if len(matrices) == 1 else multi_dot(matrices)
    return _out(result, out)


def _chain_order(tensors):
    """s[i][j]: where the cheapest product of tensors i..j splits (ATen's matrix_chain_order)."""
    n = len(tensors)
    p = [t.shape[0] for t in tensors] + [tensors[-1].shape[1]]
    m = [[0] * n for _ in range(n)]
    s = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            m[i][j] = None
            for k in range(i, j):
                q = m[i][k] + m[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if m[i][j] is None or q < m[i][j]:
                    m[i][j], s[i][j] = q, k
    return s


def _chain(tensors, order, i, j):
    if i == j:
        return tensors[i]
    k = order[i][j]
    return torch.mm(_chain(tensors, order, i, k), _chain(tensors, order, k + 1, j))
