#!/usr/bin/env python3
"""Write PyTorch's results for the transposed and 3-d convolutions, the 1-d/3-d and adaptive max
poolings (with their indices, ties, NaN and empty outputs) and the bilinear layer as a
safetensors fixture for tests/nn_layers_nd.rs, and LayerNorm without a bias for
tests/nn_norm.rs.

Usage:  python3 scripts/fixtures_layers.py      (needs torch and safetensors)

Writes tests/fixtures/layers.safetensors, in f64. Per case `{case}`:

  {case}/{input}            the op's tensor arguments (x or x1/x2, weight, bias)
  {case}/out                its output; {case}/indices the int64 argmax indices, when returned
  {case}/gy                 a fixed random gradient of the output
  {case}/grad/{input}       the gradient of sum(out * gy) with respect to each input

and in the file's metadata `case:{case}` = `op=...;key=v1,v2;...` (the op and its options) and,
per module `{m}`, `repr:{m}` = PyTorch's `repr(module)` and `keys:{m}` = its state dict's keys
with their shapes (`weight:3x2x3x3,bias:2`).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file


def conf(op, **kw):
    def value(v):
        if isinstance(v, bool):
            return str(int(v))
        if isinstance(v, (tuple, list)):
            return ",".join(str(x) for x in v)
        return str(v)

    return ";".join([f"op={op}"] + [f"{k}={value(v)}" for k, v in kw.items()])


def case(out, meta, name, op, fn, inputs, **options):
    """Runs fn(**inputs) forward and backward, storing the inputs, results and gradients."""
    leaves = {k: v.clone().requires_grad_(True) for k, v in inputs.items()}
    result = fn(**leaves)
    y, indices = result if isinstance(result, tuple) else (result, None)
    gy = torch.randn(y.shape)
    (y * gy).sum().backward()
    for k, v in leaves.items():
        out[f"{name}/{k}"] = v.detach()
        out[f"{name}/grad/{k}"] = v.grad
    out[f"{name}/out"] = y.detach()
    out[f"{name}/gy"] = gy
    if indices is not None:
        out[f"{name}/indices"] = indices
    meta[f"case:{name}"] = conf(op, **options)


def conv_transpose_cases(out, meta):
    # (name, x shape, weight shape, bias, stride, padding, output_padding, groups, dilation)
    two = [
        ("ct2_basic", (2, 3, 4, 4), (3, 2, 3, 3), True, (1, 1), (0, 0), (0, 0), 1, (1, 1)),
        ("ct2_stride_pad_outpad", (1, 2, 3, 4), (2, 3, 3, 2), True, (2, 2), (1, 0), (1, 1), 1, (1, 1)),
        ("ct2_groups_dilation", (2, 4, 3, 3), (4, 3, 2, 2), True, (1, 2), (1, 1), (0, 1), 2, (2, 1)),
        ("ct2_outpad_below_dilation", (1, 2, 3, 3), (2, 2, 2, 2), False, (1, 1), (0, 0), (1, 1), 1, (2, 2)),
        ("ct2_unbatched", (2, 3, 3), (2, 2, 2, 2), False, (2, 2), (0, 0), (0, 0), 1, (1, 1)),
    ]
    one = [
        ("ct1_stride_pad_outpad", (2, 3, 5), (3, 2, 3), True, (2,), (1,), (1,), 1, (1,)),
        ("ct1_groups_dilation", (1, 4, 4), (4, 1, 3), False, (1,), (0,), (0,), 2, (2,)),
        ("ct1_unbatched", (2, 4), (2, 3, 2), True, (3,), (1,), (2,), 1, (1,)),
    ]
    for op, f, cases in (("conv_transpose2d", F.conv_transpose2d, two), ("conv_transpose1d", F.conv_transpose1d, one)):
        for name, xs, ws, bias, s, p, op_, g, d in cases:
            inputs = {"x": torch.randn(xs), "weight": torch.randn(ws)}
            if bias:
                inputs["bias"] = torch.randn(ws[1] * g)
            fn = lambda x, weight, bias=None, f=f, s=s, p=p, op_=op_, g=g, d=d: f(x, weight, bias, s, p, op_, g, d)
            case(out, meta, name, op, fn, inputs, stride=s, padding=p, output_padding=op_, groups=g, dilation=d)


def conv3d_cases(out, meta):
    # (name, x shape, weight shape, bias, stride, padding, dilation, groups)
    cases = [
        ("c3_basic", (2, 2, 4, 5, 4), (3, 2, 2, 3, 2), True, (1, 1, 1), (0, 0, 0), (1, 1, 1), 1),
        ("c3_stride_pad_dilation", (1, 2, 5, 6, 5), (2, 2, 3, 2, 2), False, (2, 1, 2), (1, 1, 0), (1, 2, 1), 1),
        ("c3_groups", (1, 4, 3, 4, 4), (4, 2, 2, 2, 2), True, (2, 2, 1), (1, 1, 1), (1, 1, 1), 2),
        ("c3_same", (1, 2, 4, 4, 5), (2, 2, 2, 3, 3), True, (1, 1, 1), "same", (2, 1, 1), 1),
        ("c3_unbatched", (2, 3, 4, 3), (2, 2, 2, 2, 2), True, (1, 2, 1), (0, 1, 0), (1, 1, 1), 1),
    ]
    for name, xs, ws, bias, s, p, d, g in cases:
        inputs = {"x": torch.randn(xs), "weight": torch.randn(ws)}
        if bias:
            inputs["bias"] = torch.randn(ws[0])
        fn = lambda x, weight, bias=None, s=s, p=p, d=d, g=g: F.conv3d(x, weight, bias, s, p, d, g)
        case(out, meta, name, "conv3d", fn, inputs, stride=s, padding=p, dilation=d, groups=g)


def pool_cases(out, meta):
    for name, xs, k, s, p, d, ceil in [
        ("mp1_k3_s2_p1", (2, 3, 9), 3, 2, 1, 1, False),
        ("mp1_dilation_ceil", (1, 2, 10), 2, 3, 1, 2, True),
        ("mp1_unbatched", (3, 6), 2, None, 0, 1, False),
    ]:
        fn = lambda x, k=k, s=s, p=p, d=d, ceil=ceil: F.max_pool1d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
        case(out, meta, name, "max_pool1d", fn, {"x": torch.randn(xs)},
             kernel=k, stride=s or k, padding=p, dilation=d, ceil_mode=ceil)
    for name, xs, k, s, p, ceil, include in [
        ("ap1_k3_s2_p1", (2, 3, 9), 3, 2, 1, False, True),
        ("ap1_exclude_ceil", (1, 2, 8), 3, 2, 1, True, False),
        ("ap1_unbatched", (3, 6), 2, None, 0, False, True),
    ]:
        fn = lambda x, k=k, s=s, p=p, ceil=ceil, include=include: F.avg_pool1d(x, k, s, p, ceil, include)
        case(out, meta, name, "avg_pool1d", fn, {"x": torch.randn(xs)},
             kernel=k, stride=s or k, padding=p, ceil_mode=ceil, count_include_pad=include)
    for name, xs, k, s, p, d, ceil in [
        ("mp3_k2", (1, 2, 4, 6, 4), (2, 2, 2), None, (0, 0, 0), (1, 1, 1), False),
        ("mp3_k3_s2_p1", (2, 1, 5, 5, 6), (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), False),
        ("mp3_dilation_ceil", (1, 2, 7, 5, 6), (2, 3, 2), (2, 1, 2), (1, 1, 0), (2, 1, 1), True),
        ("mp3_unbatched", (2, 4, 4, 3), (2, 2, 1), (1, 2, 1), (0, 1, 0), (1, 1, 1), False),
    ]:
        fn = lambda x, k=k, s=s, p=p, d=d, ceil=ceil: F.max_pool3d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
        case(out, meta, name, "max_pool3d", fn, {"x": torch.randn(xs)},
             kernel=k, stride=s or k, padding=p, dilation=d, ceil_mode=ceil)
    for name, xs, size in [
        ("amp_non_divisible", (2, 2, 7, 5), (3, 4)),
        ("amp_upsample", (1, 1, 3, 4), (5, 6)),
        ("amp_global", (2, 3, 4, 4), (1, 1)),
        ("amp_unbatched", (3, 5, 6), (2, 4)),
    ]:
        fn = lambda x, size=size: F.adaptive_max_pool2d(x, size, return_indices=True)
        case(out, meta, name, "adaptive_max_pool2d", fn, {"x": torch.randn(xs)}, output_size=size)


def bilinear_cases(out, meta):
    for name, x1s, x2s, ws, bias in [
        ("bl_batch", (4, 3), (4, 5), (2, 3, 5), True),
        ("bl_leading_dims", (2, 3, 3), (2, 3, 2), (4, 3, 2), True),
        ("bl_no_bias", (5, 2), (5, 3), (3, 2, 3), False),
        ("bl_unbatched", (3,), (2,), (2, 3, 2), True),
    ]:
        inputs = {"x1": torch.randn(x1s), "x2": torch.randn(x2s), "weight": torch.randn(ws)}
        if bias:
            inputs["bias"] = torch.randn(ws[0])
        fn = lambda x1, x2, weight, bias=None: F.bilinear(x1, x2, weight, bias)
        case(out, meta, name, "bilinear", fn, inputs)


def edge_pool_cases(out, meta):
    """Ties and NaN in max_pool3d's windows (PyTorch takes the first maximum of a row-major scan,
    the latest NaN), and adaptive max pooling to an output size of 0 (an empty result, its
    indices empty too)."""
    x = ((torch.arange(2 * 2 * 5 * 4 * 4) * 7) % 5).double().reshape(2, 2, 5, 4, 4) - 2
    for at in [(0, 0, 1, 1, 1), (0, 0, 2, 0, 1), (0, 0, 2, 1, 0), (1, 1, 3, 2, 2)]:
        x[at] = float("nan")
    k, s, p, d = (3, 2, 2), (2, 2, 2), (1, 1, 0), (1, 1, 1)
    fn = lambda x: F.max_pool3d(x, k, s, p, d, return_indices=True)
    case(out, meta, "mp3_ties_nan", "max_pool3d", fn, {"x": x},
         kernel=k, stride=s, padding=p, dilation=d, ceil_mode=False)
    # Forward only: a window that reads padding alone (dilation steps over the input) is -inf at
    # an index past the channel, whose gradient PyTorch would write out of bounds.
    k, s, p, d = (2, 1, 1), (1, 1, 1), (1, 0, 0), (3, 1, 1)
    x = torch.randn(1, 2, 2, 3, 3)
    out["mp3_padding_only/x"] = x
    out["mp3_padding_only/out"], out["mp3_padding_only/indices"] = F.max_pool3d(x, k, s, p, d, return_indices=True)
    meta["case:mp3_padding_only"] = conf("max_pool3d_forward", kernel=k, stride=s, padding=p, dilation=d, ceil_mode=False)
    # Forward only: PyTorch's backward refuses an empty output gradient.
    for name, xs, size in [("amp_empty_rows", (2, 2, 4, 4), (0, 3)), ("amp_empty_unbatched", (3, 2, 5), (2, 0))]:
        x = torch.randn(xs)
        out[f"{name}/x"] = x
        out[f"{name}/out"], out[f"{name}/indices"] = F.adaptive_max_pool2d(x, size, return_indices=True)
        meta[f"case:{name}"] = conf("adaptive_max_pool2d_empty", output_size=size)


def layer_norm_without_bias(out, meta):
    """nn.LayerNorm(normalized_shape, bias=False) (PyTorch 2.1+), for tests/nn_norm.rs: the case
    `ln_no_bias` (its weight, no bias) and, under `layer_norm_no_bias:repr` and
    `layer_norm_no_bias:keys`, the module's repr and state-dict keys."""
    m = nn.LayerNorm((3, 4), bias=False)
    with torch.no_grad():
        m.weight.copy_(torch.randn(3, 4))
    fn = lambda x, weight: F.layer_norm(x, (3, 4), weight, None, m.eps)
    case(out, meta, "ln_no_bias", "layer_norm", fn, {"x": torch.randn(2, 3, 4), "weight": m.weight.detach()},
         normalized_shape=(3, 4))
    meta["layer_norm_no_bias:repr"] = repr(nn.LayerNorm(4, bias=False))
    meta["layer_norm_no_bias:keys"] = ",".join(nn.LayerNorm(4, bias=False).state_dict())


def modules(meta):
    """PyTorch's repr and state-dict keys of each module tests/nn_layers_nd.rs builds."""
    made = {
        "conv_transpose2d": nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
        "conv_transpose2d_plain": nn.ConvTranspose2d(2, 3, (2, 3), bias=False),
        "conv_transpose1d": nn.ConvTranspose1d(2, 3, 3, dilation=2),
        "conv3d": nn.Conv3d(2, 4, (2, 3, 3), stride=(1, 2, 1), padding=1),
        "conv3d_groups": nn.Conv3d(4, 2, 3, groups=2, bias=False),
        "max_pool1d": nn.MaxPool1d(2),
        "avg_pool1d": nn.AvgPool1d(3, 2),
        "max_pool3d": nn.MaxPool3d((2, 1, 2)),
        "max_pool3d_padded": nn.MaxPool3d(3, stride=2, padding=1, ceil_mode=True),
        "adaptive_max_pool2d": nn.AdaptiveMaxPool2d((2, 3)),
        "adaptive_max_pool2d_empty": nn.AdaptiveMaxPool2d((0, 2)),
        "bilinear": nn.Bilinear(3, 4, 5),
        "bilinear_no_bias": nn.Bilinear(2, 2, 1, bias=False),
        "identity": nn.Identity(),
    }
    for name, m in made.items():
        meta[f"repr:{name}"] = repr(m)
        meta[f"keys:{name}"] = ",".join(f"{k}:{'x'.join(map(str, v.shape))}" for k, v in m.state_dict().items())


def main():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    out, meta = {}, {}
    conv_transpose_cases(out, meta)
    conv3d_cases(out, meta)
    pool_cases(out, meta)
    bilinear_cases(out, meta)
    edge_pool_cases(out, meta)
    layer_norm_without_bias(out, meta)
    modules(meta)
    out = {k: v.detach().contiguous() for k, v in out.items()}
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "layers.safetensors")
    save_file(out, path, metadata=meta)
    cases = sum(1 for k in meta if k.startswith("case:"))
    print(f"wrote {len(out)} tensors of {cases} cases to {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
