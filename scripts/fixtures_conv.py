#!/usr/bin/env python3
"""Generate tests/fixtures/conv.txt: PyTorch references for kiln's convolutions and pooling.

Usage:  python3 scripts/fixtures_conv.py

Same format (version 1) and writer as scripts/make_fixtures.py (see its docstring). Every case
runs the op forward and backward in PyTorch: its arguments are the op's inputs followed by `gy`,
the gradient of the output, and its outputs are, in order,

    conv1d / conv2d        out0 = y, out1 = grad input, out2 = grad weight[, out3 = grad bias]
    max_pool2d             out0 = values, out1 = indices (int64), out2 = grad input
    avg_pool2d             out0 = y, out1 = grad input
    adaptive_avg_pool2d    out0 = y, out1 = grad input

(error cases have no gradient: PyTorch raised in the forward). Attributes:

    conv      stride, padding (integers, or `same` / `valid`), dilation, groups
    pools     kernel, stride (absent: the kernel), padding, dilation, ceil_mode,
              count_include_pad, divisor_override (absent: none), output_size (adaptive)
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import T, Writer  # noqa: E402

GEN = torch.Generator().manual_seed(20261130)

# Float results of sums of products: not bit-exact against PyTorch's summation order.
TOL = {"f64": "1e-10 1e-10", "f32": "2e-5 2e-5", "f16": "1e-2 1e-2", "bf16": "5e-2 5e-2"}


def rnd(dtype, shape, views=()):
    """A tensor of standard normal values (rounded to `dtype` by the fixture writer)."""
    n = 1
    for s in shape:
        n *= s
    return T(dtype, shape, torch.randn(n, generator=GEN, dtype=torch.float64).tolist(), views=views)


def with_grad(fn, nin):
    """fn(*inputs) run forward and backward: (outputs..., grads of the inputs...)."""
    def run(*args):
        ins = [a.detach().requires_grad_(True) for a in args[:nin]]
        gy = args[nin]
        out = fn(*ins)
        vals = out if isinstance(out, tuple) else (out,)
        vals[0].backward(gy)
        return tuple(v.detach() for v in vals) + tuple(i.grad for i in ins)
    return run


def out_shape(fn, args):
    """The output shape of fn on the PyTorch values of `args` (for the gradient argument)."""
    out = fn(*[a.torch() for a in args])
    return list((out[0] if isinstance(out, tuple) else out).shape)


def conv_case(w, name, op, dt, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, sample=None, gy_ramp=None):
    f = F.conv1d if op == "conv1d" else F.conv2d
    fn = lambda *a: f(*a, stride=stride, padding=padding, dilation=dilation, groups=groups)
    ins = [x, weight] + ([bias] if bias is not None else [])
    names = ["x", "weight"] + (["bias"] if bias is not None else []) + ["gy"]
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    try:
        shape = out_shape(fn, ins)
    except (RuntimeError, ValueError):
        shape = None
    if shape is None:  # PyTorch raises: record the error (no gradient argument needed)
        w.case(name, op, fn, ins, attrs=attrs, names=names, keep_unsupported=True)
        return
    gy = T(dt, shape, ramp=gy_ramp) if gy_ramp else rnd(dt, shape)
    w.case(name, op, with_grad(fn, len(ins)), ins + [gy], tol=TOL[dt], attrs=attrs, names=names, sample=sample)


def make_conv(w):
    for dt in ("f32", "f64"):
        c = lambda n, *a, **k: conv_case(w, f"conv2d/{dt}/{n}", "conv2d", dt, *a, **k)
        c("basic_bias", rnd(dt, [2, 3, 6, 5]), rnd(dt, [4, 3, 3, 3]), rnd(dt, [4]))
        c("no_bias", rnd(dt, [2, 3, 6, 5]), rnd(dt, [4, 3, 3, 3]))
        c("stride_pad", rnd(dt, [2, 2, 7, 8]), rnd(dt, [3, 2, 3, 2]), rnd(dt, [3]), stride=(2, 3), padding=(1, 2))
        c("dilation", rnd(dt, [1, 2, 9, 8]), rnd(dt, [2, 2, 3, 3]), None, dilation=(2, 3), padding=1)
        c("groups", rnd(dt, [2, 4, 5, 5]), rnd(dt, [6, 2, 3, 3]), rnd(dt, [6]), groups=2, padding=1)
        c("depthwise", rnd(dt, [1, 3, 5, 6]), rnd(dt, [3, 1, 2, 2]), None, groups=3, stride=2)
        c("same_odd", rnd(dt, [1, 2, 5, 6]), rnd(dt, [2, 2, 2, 4]), rnd(dt, [2]), padding="same")
        c("same_dilated", rnd(dt, [1, 2, 6, 6]), rnd(dt, [3, 2, 3, 3]), None, padding="same", dilation=2)
        c("valid", rnd(dt, [2, 1, 5, 5]), rnd(dt, [2, 1, 3, 3]), rnd(dt, [2]), padding="valid")
        c("unbatched", rnd(dt, [3, 5, 5]), rnd(dt, [2, 3, 3, 3]), rnd(dt, [2]), padding=1)
        c("kernel_1x1", rnd(dt, [2, 4, 3, 3]), rnd(dt, [5, 4, 1, 1]), rnd(dt, [5]))
        c("noncontig", rnd(dt, [2, 6, 5, 3], views=[("permute", 0, 3, 1, 2)]), rnd(dt, [2, 3, 2, 2]), rnd(dt, [2]), stride=2, padding=1)
        c("kernel_eq_input", rnd(dt, [2, 2, 3, 3]), rnd(dt, [3, 2, 3, 3]), rnd(dt, [3]))
        c1 = lambda n, *a, **k: conv_case(w, f"conv1d/{dt}/{n}", "conv1d", dt, *a, **k)
        c1("basic_bias", rnd(dt, [2, 3, 9]), rnd(dt, [4, 3, 3]), rnd(dt, [4]))
        c1("stride_pad_dil", rnd(dt, [2, 2, 11]), rnd(dt, [3, 2, 3]), None, stride=2, padding=2, dilation=2)
        c1("groups_same", rnd(dt, [1, 4, 7]), rnd(dt, [2, 2, 4]), rnd(dt, [2]), groups=2, padding="same")
        c1("unbatched", rnd(dt, [2, 6]), rnd(dt, [3, 2, 2]), rnd(dt, [3]))
    # Large enough for the parallel paths (over the batch, and inside one image's gemm).
    big = lambda shape, off: T("f32", shape, ramp=(7919, 251, -125 + off, 64))
    conv_case(w, "conv2d/f32/large_batch", "conv2d", "f32", big([8, 8, 20, 20], 0), big([16, 8, 3, 3], 3), big([16], 5),
              padding=1, sample=97, gy_ramp=(7919, 251, -120, 64))
    conv_case(w, "conv2d/f32/large_single", "conv2d", "f32", big([1, 16, 30, 30], 1), big([32, 16, 3, 3], 2), None,
              sample=97, gy_ramp=(7919, 251, -121, 64))
    for dt in ("f16", "bf16"):
        conv_case(w, f"conv2d/{dt}/basic", "conv2d", dt, rnd(dt, [1, 2, 5, 5]), rnd(dt, [2, 2, 3, 3]), rnd(dt, [2]), padding=1)
    # Errors PyTorch raises (kiln must fail too, naming the op).
    e = lambda n, *a, **k: conv_case(w, f"conv2d/error/{n}", "conv2d", "f32", *a, **k)
    e("channels", rnd("f32", [1, 3, 5, 5]), rnd("f32", [2, 2, 3, 3]))
    e("groups_channels", rnd("f32", [1, 4, 5, 5]), rnd("f32", [3, 2, 3, 3]), groups=2)
    e("kernel_too_big", rnd("f32", [1, 1, 2, 2]), rnd("f32", [1, 1, 3, 3]))
    e("weight_rank", rnd("f32", [1, 1, 4, 4]), rnd("f32", [1, 1, 3]))
    e("input_rank", rnd("f32", [4, 4]), rnd("f32", [1, 1, 3, 3]))
    e("bias_shape", rnd("f32", [1, 1, 4, 4]), rnd("f32", [2, 1, 3, 3]), rnd("f32", [3]))
    e("same_strided", rnd("f32", [1, 1, 4, 4]), rnd("f32", [1, 1, 3, 3]), stride=2, padding="same")
    conv_case(w, "conv1d/error/channels", "conv1d", "f32", rnd("f32", [1, 3, 5]), rnd("f32", [2, 2, 3]))


def pool_case(w, name, op, dt, x, sample=None, **kw):
    if op == "max_pool2d":
        fn = lambda t: F.max_pool2d(t, kw["kernel"], kw.get("stride"), kw.get("padding", 0), kw.get("dilation", 1),
                                    ceil_mode=kw.get("ceil_mode", False), return_indices=True)
    elif op == "avg_pool2d":
        fn = lambda t: F.avg_pool2d(t, kw["kernel"], kw.get("stride"), kw.get("padding", 0), kw.get("ceil_mode", False),
                                    kw.get("count_include_pad", True), kw.get("divisor_override"))
    else:
        fn = lambda t: F.adaptive_avg_pool2d(t, kw["output_size"])
    attrs = {k: v for k, v in kw.items() if v is not None}
    try:
        shape = out_shape(fn, [x])
    except (RuntimeError, ValueError):
        w.case(name, op, fn, [x], attrs=attrs, names=["x"], keep_unsupported=True)
        return
    ramped = x.ramp is not None
    gy = T(dt, shape, ramp=(7919, 251, -124, 64)) if ramped else rnd(dt, shape)
    w.case(name, op, with_grad(fn, 1), [x, gy], tol=TOL[dt], attrs=attrs, names=["x", "gy"], sample=sample)


def make_pool(w):
    for dt in ("f32", "f64"):
        m = lambda n, x, **k: pool_case(w, f"max_pool2d/{dt}/{n}", "max_pool2d", dt, x, **k)
        m("k2", rnd(dt, [2, 3, 6, 6]), kernel=2)
        m("k3_s2_pad1", rnd(dt, [1, 2, 7, 6]), kernel=3, stride=2, padding=1)
        m("rect_ceil", rnd(dt, [2, 2, 7, 5]), kernel=(2, 3), stride=(2, 2), ceil_mode=True)
        m("ceil_pad", rnd(dt, [1, 1, 4, 4]), kernel=2, stride=2, padding=1, ceil_mode=True)
        m("dilation", rnd(dt, [1, 2, 8, 9]), kernel=3, stride=1, dilation=2, padding=1)
        m("overlap", rnd(dt, [1, 2, 5, 5]), kernel=3, stride=1)
        m("unbatched", rnd(dt, [3, 6, 4]), kernel=2)
        m("noncontig", rnd(dt, [2, 6, 5, 3], views=[("permute", 0, 3, 1, 2)]), kernel=2, stride=1)
        a = lambda n, x, **k: pool_case(w, f"avg_pool2d/{dt}/{n}", "avg_pool2d", dt, x, **k)
        a("k2", rnd(dt, [2, 3, 6, 6]), kernel=2)
        a("pad_include", rnd(dt, [1, 2, 5, 5]), kernel=3, stride=2, padding=1)
        a("pad_exclude", rnd(dt, [1, 2, 5, 5]), kernel=3, stride=2, padding=1, count_include_pad=False)
        a("ceil_include", rnd(dt, [1, 1, 5, 7]), kernel=(2, 3), stride=2, padding=1, ceil_mode=True)
        a("ceil_exclude", rnd(dt, [1, 1, 5, 7]), kernel=(2, 3), stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        a("divisor", rnd(dt, [1, 2, 4, 4]), kernel=2, stride=1, divisor_override=3)
        a("unbatched", rnd(dt, [2, 4, 6]), kernel=2)
        a("noncontig", rnd(dt, [1, 5, 4, 2], views=[("permute", 0, 3, 1, 2)]), kernel=2, stride=1)
        ad = lambda n, x, **k: pool_case(w, f"adaptive_avg_pool2d/{dt}/{n}", "adaptive_avg_pool2d", dt, x, **k)
        ad("divisible", rnd(dt, [2, 2, 6, 4]), output_size=(3, 2))
        ad("non_divisible", rnd(dt, [1, 3, 7, 5]), output_size=(3, 4))
        ad("upsample", rnd(dt, [1, 1, 2, 3]), output_size=(5, 4))
        ad("global", rnd(dt, [2, 3, 5, 5]), output_size=(1, 1))
        ad("unbatched", rnd(dt, [2, 5, 6]), output_size=(2, 4))
    big = T("f32", [8, 32, 24, 24], ramp=(7919, 251, -125, 64))
    pool_case(w, "max_pool2d/f32/large", "max_pool2d", "f32", big, kernel=2, sample=97)
    pool_case(w, "avg_pool2d/f32/large", "avg_pool2d", "f32", big, kernel=2, sample=97)
    pool_case(w, "adaptive_avg_pool2d/f32/large", "adaptive_avg_pool2d", "f32", big, output_size=(5, 7), sample=97)
    for dt in ("f16", "bf16"):
        pool_case(w, f"max_pool2d/{dt}/k2", "max_pool2d", dt, rnd(dt, [1, 2, 4, 4]), kernel=2)
        pool_case(w, f"avg_pool2d/{dt}/k2", "avg_pool2d", dt, rnd(dt, [1, 2, 4, 4]), kernel=2)
    pool_case(w, "max_pool2d/error/pad_too_big", "max_pool2d", "f32", rnd("f32", [1, 1, 4, 4]), kernel=2, padding=2)
    pool_case(w, "max_pool2d/error/output_too_small", "max_pool2d", "f32", rnd("f32", [1, 1, 2, 2]), kernel=3)
    pool_case(w, "max_pool2d/error/rank", "max_pool2d", "f32", rnd("f32", [4, 4]), kernel=2)
    pool_case(w, "avg_pool2d/error/pad_too_big", "avg_pool2d", "f32", rnd("f32", [1, 1, 4, 4]), kernel=3, padding=2)
    pool_case(w, "avg_pool2d/error/divisor_zero", "avg_pool2d", "f32", rnd("f32", [1, 1, 4, 4]), kernel=2, divisor_override=0)
    pool_case(w, "adaptive_avg_pool2d/error/rank", "adaptive_avg_pool2d", "f32", rnd("f32", [5]), output_size=(2, 2))
    pool_case(w, "adaptive_avg_pool2d/error/empty_plane", "adaptive_avg_pool2d", "f32", rnd("f32", [1, 0, 4]), output_size=(2, 2))


def main():
    w = Writer("conv", "conv1d, conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d (forward and gradients)")
    w.lines[1] = f"# Generated by scripts/fixtures_conv.py with torch {torch.__version__}; do not edit by hand."
    make_conv(w)
    make_pool(w)
    w.write()


if __name__ == "__main__":
    main()
