#!/usr/bin/env python3
"""Write PyTorch's results for the cumulative, search, quantile and window ops, einsum with an
ellipsis and repeat_interleave with a tensor of repeats as a safetensors fixture for
tests/scan_ops.rs (repeat_interleave too), tests/search_ops.rs and tests/einsum.rs.

Usage:  python3 scripts/fixtures_scan.py      (needs torch and safetensors)

Writes tests/fixtures/scan.safetensors. Per op `{op}/…`: the inputs, the results (`values` and
`indices` for the ops returning both) and, for the differentiable ops, `{op}/w` (fixed loss
weights) and `{op}/grad…`: the gradient of sum(result * w) for each input. Float tensors are
f64 unless a key ends in `_f32`; indices, counts and positions are int64, masks bool.
"""
import os

import torch
from safetensors.torch import save_file

NAN, INF = float("nan"), float("inf")


def grad_of(f, *inputs):
    """The result of f(inputs), fixed loss weights w, and d sum(result * w) / d inputs."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = f(*leaves)
    w = torch.randn(out.shape, dtype=out.dtype)
    (out * w).sum().backward()
    return out.detach(), w, [t.grad for t in leaves]


def cumulative(out):
    # Zeros (one and two in a row), negatives and ties.
    x = torch.tensor([[2.0, 0.0, -3.0, 0.0, 4.0], [1.5, -1.0, 0.0, 2.0, 0.5], [0.5, 2.0, -1.5, 3.0, -0.5]])
    out["cumprod/x"] = x
    for d in (0, 1):
        y, w, (g,) = grad_of(lambda t: torch.cumprod(t, d), x)
        out[f"cumprod/dim{d}"], out[f"cumprod/w{d}"], out[f"cumprod/grad{d}"] = y, w, g
    out["cumprod/int"] = torch.cumprod(torch.tensor([[3, -2, 5], [0, 7, 1]]), 1)

    # Ties (cummax takes the last index) and NaN (from the first NaN on).
    e = torch.tensor([[1.0, 3.0, 3.0, 2.0, 5.0, 5.0], [4.0, NAN, 6.0, NAN, 0.0, 9.0], [-1.0, -1.0, -2.0, -2.0, 0.0, -3.0]])
    out["cummax/x"] = e
    for op in ("cummax", "cummin"):
        for d in (0, 1):
            v, i = getattr(torch, op)(e, d)
            out[f"{op}/values{d}"], out[f"{op}/indices{d}"] = v, i
        ties = e[[0, 2]]
        y, w, (g,) = grad_of(lambda t: getattr(torch, op)(t, 1).values, ties)
        out[f"{op}/w"], out[f"{op}/grad"] = w, g
        v, i = getattr(torch, op)(torch.tensor([[3, 1, 3, 0], [2, 2, 5, 1]]), 1)
        out[f"{op}/int_values"], out[f"{op}/int_indices"] = v, i

    # -inf, +inf, values far apart (no underflow of the small ones), NaN.
    l = torch.tensor([[-INF, -INF, 1.0, INF, 2.0], [-1000.0, 0.0, -1000.0, 3.0, -2.0], [1.0, NAN, 2.0, 0.5, 1.0]])
    out["logcumsumexp/x"] = l
    out["logcumsumexp/dim1"] = torch.logcumsumexp(l, 1)
    out["logcumsumexp/dim0"] = torch.logcumsumexp(l, 0)
    finite = torch.tensor([[-3.0, 0.5, 2.0, -1.0], [40.0, -40.0, 1.0, 0.0]])
    y, w, (g,) = grad_of(lambda t: torch.logcumsumexp(t, 1), finite)
    out["logcumsumexp/finite"], out["logcumsumexp/w"], out["logcumsumexp/grad"] = finite, w, g


def searches(out):
    s = torch.tensor([1.0, 3.0, 3.0, 5.0, NAN])
    v = torch.tensor([[0.0, 3.0, 4.0], [6.0, NAN, 1.0]])
    out["searchsorted/seq"], out["searchsorted/values"] = s, v
    out["searchsorted/left"] = torch.searchsorted(s, v)
    out["searchsorted/right"] = torch.searchsorted(s, v, right=True)
    s2 = torch.tensor([[1, 3, 5, 5], [2, 4, 6, 8]])
    v2 = torch.tensor([[3, 6, 5], [1, 4, 9]])
    out["searchsorted/seq_nd"], out["searchsorted/values_nd"] = s2, v2
    out["searchsorted/left_nd"] = torch.searchsorted(s2, v2)
    out["searchsorted/right_nd"] = torch.searchsorted(s2, v2, right=True)
    # Mixed dtypes: compared in the promoted dtype.
    out["searchsorted/mixed"] = torch.searchsorted(torch.tensor([1, 2, 3]), torch.tensor([1.5, 2.0, -1.0]))
    b = torch.tensor([1.0, 3.0, 5.0, 7.0])
    x = torch.tensor([[1.0, 5.0, 0.0], [3.0, 9.0, 6.5]])
    out["bucketize/boundaries"], out["bucketize/x"] = b, x
    out["bucketize/left"] = torch.bucketize(x, b)
    out["bucketize/right"] = torch.bucketize(x, b, right=True)

    u = torch.tensor([[2.0, 3.0, 1.0], [3.0, NAN, 2.0], [NAN, -0.0, 0.0]])
    values, inverse, counts = torch.unique(u, return_inverse=True, return_counts=True)
    out["unique/x"], out["unique/values"], out["unique/inverse"], out["unique/counts"] = u, values, inverse, counts
    ints = torch.tensor([5, 1, 5, 5, -2, 1])
    values, inverse, counts = torch.unique(ints, return_inverse=True, return_counts=True)
    out["unique/int_x"], out["unique/int_values"] = ints, values
    out["unique/int_inverse"], out["unique/int_counts"] = inverse, counts


def order_stats(out):
    m = torch.tensor([[3.0, 1.0, 3.0, 1.0, 2.0], [5.0, 5.0, 4.0, 4.0, 4.0], [NAN, 1.0, NAN, 2.0, 2.0], [7.0, 8.0, 9.0, 6.0, 5.0]])
    out["mode/x"] = m
    v, i = torch.mode(m, 1)
    out["mode/values1"], out["mode/indices1"] = v, i
    v, i = torch.mode(m, 0, keepdim=True)
    out["mode/values0"], out["mode/indices0"] = v, i
    y, w, (g,) = grad_of(lambda t: torch.mode(t, 1).values, m[[0, 1, 3]])
    out["mode/w"], out["mode/grad"] = w, g

    q = torch.tensor([[3.0, 1.0, 4.0, 1.0, 5.0], [9.0, 2.0, 6.0, 5.0, 3.0], [2.0, NAN, 7.0, 1.0, 8.0]])
    out["quantile/x"] = q
    for interp in ("linear", "lower", "higher", "midpoint", "nearest"):
        for k, qq in enumerate((0.0, 0.375, 0.4, 0.625, 1.0)):
            out[f"quantile/{interp}/dim1/{k}"] = torch.quantile(q, qq, dim=1, interpolation=interp)
            out[f"quantile/{interp}/dim0/{k}"] = torch.quantile(q, qq, dim=0, keepdim=True, interpolation=interp)
            out[f"quantile/{interp}/all/{k}"] = torch.quantile(q[:2], qq, interpolation=interp)
    q32 = q[:2].float()
    out["quantile/x_f32"] = q32
    out["quantile/linear_f32"] = torch.quantile(q32, 0.3, dim=1)
    out["quantile/nearest_f32"] = torch.quantile(q32, 1 / 8, dim=1, interpolation="nearest")
    y, w, (g,) = grad_of(lambda t: torch.quantile(t, 0.3, dim=1), q[:2])
    out["quantile/w"], out["quantile/grad"] = w, g


def windows(out):
    x = torch.randn(3, 4)
    mask = torch.tensor([[True, False, True, True], [False, False, True, False], [True, True, False, False]])
    src = torch.randn(2, 5)
    y, w, (gx, gs) = grad_of(lambda a, b: a.masked_scatter(mask, b), x, src)
    out["masked_scatter/x"], out["masked_scatter/mask"], out["masked_scatter/source"] = x, mask, src
    out["masked_scatter/out"], out["masked_scatter/w"] = y, w
    out["masked_scatter/grad_x"], out["masked_scatter/grad_source"] = gx, gs
    row = torch.tensor([True, False, True, False])
    out["masked_scatter/row_mask"] = row
    out["masked_scatter/row_out"] = x.masked_scatter(row, src)

    u = torch.randn(2, 7)
    y, w, (g,) = grad_of(lambda t: t.unfold(1, 3, 2), u)
    out["unfold/x"], out["unfold/out"], out["unfold/w"], out["unfold/grad"] = u, y, w, g
    y, w, (g,) = grad_of(lambda t: t.unfold(0, 2, 1), u)
    out["unfold/out0"], out["unfold/w0"], out["unfold/grad0"] = y, w, g


# einsum equations with an ellipsis: (name, equation, operand shapes).
EINSUM = [
    ("batch_matmul", "...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 4)]),
    ("trailing", "bi...,bi...->b...", [(2, 3, 4, 5), (2, 3, 1, 5)]),
    ("implicit", "...ji", [(2, 3, 4)]),
    ("implicit_broadcast", "...i,...i", [(1, 3), (4, 3)]),
    ("summed", "...ij->ij", [(2, 3, 4)]),
    ("diagonal", "i...i", [(3, 2, 3)]),
    ("middle", "a...b,b...c->...ac", [(2, 5, 3), (3, 5, 4)]),
    ("three", "...i,...ij,...j->...", [(4, 3), (4, 3, 2), (1, 2)]),
    ("empty_ellipsis", "ij->...ji", [(2, 3)]),
]


def einsums(out):
    for name, eq, shapes in EINSUM:
        ops = [torch.randn(s) for s in shapes]
        for k, t in enumerate(ops):
            out[f"einsum/{name}/x{k}"] = t
        out[f"einsum/{name}/out"] = torch.einsum(eq, *ops)


def repeats(out):
    x = torch.randn(2, 3)
    out["repeat_interleave/x"] = x
    out["repeat_interleave/dim1"] = x.repeat_interleave(torch.tensor([1, 0, 2]), dim=1)
    out["repeat_interleave/dim0_one"] = x.repeat_interleave(torch.tensor([2]), dim=0)
    out["repeat_interleave/flat"] = x.repeat_interleave(torch.tensor([1, 2, 0, 3, 1, 1]))
    out["repeat_interleave/flat_scalar"] = x.repeat_interleave(torch.tensor(2))
    out["repeat_interleave/int32"] = x.repeat_interleave(torch.tensor([3, 1], dtype=torch.int32), dim=-2)
    y, w, (g,) = grad_of(lambda t: t.repeat_interleave(torch.tensor([2, 0, 3]), dim=1), x)
    out["repeat_interleave/w"], out["repeat_interleave/grad"] = w, g
    out["repeat_interleave/indices"] = torch.repeat_interleave(torch.tensor([2, 0, 1, 3]))


def main():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    out = {}
    cumulative(out)
    searches(out)
    order_stats(out)
    windows(out)
    einsums(out)
    repeats(out)
    out = {k: v.detach().contiguous() for k, v in out.items()}
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "scan.safetensors")
    save_file(out, path)
    print(f"wrote {len(out)} tensors to {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
