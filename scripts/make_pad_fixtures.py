#!/usr/bin/env python3
"""Write PyTorch's values for F.pad, F.interpolate, F.pixel_shuffle and F.pixel_unshuffle.

Usage:  python3 scripts/make_pad_fixtures.py      (needs torch and safetensors)

Writes tests/fixtures/pad_interpolate.safetensors. For each case NAME it holds `NAME.x` (the
input), `NAME.out` (PyTorch's output), `NAME.w` (random weights) and `NAME.grad` (the input's
gradient of `(out * w).sum()`); the file's metadata maps NAME to the case's arguments as
space-separated `key=value` words:

    op=pad mode=reflect pad=1,1,2,0 [value=1.5]
    op=interpolate mode=bilinear size=7,9 | scale=2.0,1.5 align=true|false|none recompute=true|none
    op=pixel_shuffle r=2          op=pixel_unshuffle r=2

tests/nn_pad.rs and tests/nn_interpolate.rs run every case through kiln.
"""
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

tensors = {}
meta = {}


def record(name, x, fn, args):
    x = x.clone().requires_grad_(True)
    out = fn(x)
    w = torch.randn(out.shape, dtype=x.dtype)
    (out * w).sum().backward()
    tensors[name + ".x"] = x.detach().contiguous()
    tensors[name + ".out"] = out.detach().contiguous()
    tensors[name + ".w"] = w.contiguous()
    tensors[name + ".grad"] = x.grad.contiguous()
    meta[name] = args


def ints(v):
    return ",".join(str(i) for i in v)


def pad_case(name, shape, pad, mode, value=None, dtype=torch.float64):
    x = torch.randn(shape, dtype=dtype)
    args = f"op=pad mode={mode} pad={ints(pad)}"
    if value is not None:
        args += f" value={value!r}"
        record(name, x, lambda t: F.pad(t, pad, mode, value), args)
    else:
        record(name, x, lambda t: F.pad(t, pad, mode), args)


def interp_case(name, shape, mode, size=None, scale=None, align=None, recompute=None, dtype=torch.float64):
    x = torch.randn(shape, dtype=dtype)
    args = f"op=interpolate mode={mode}"
    if size is not None:
        args += f" size={ints(size if isinstance(size, (tuple, list)) else [size])}"
    else:
        sc = scale if isinstance(scale, (tuple, list)) else [scale]
        args += " scale=" + ",".join(repr(float(s)) for s in sc)
    args += f" align={'none' if align is None else str(align).lower()}"
    args += f" recompute={'none' if recompute is None else str(recompute).lower()}"
    record(
        name,
        x,
        lambda t: F.interpolate(
            t, size=size, scale_factor=scale, mode=mode, align_corners=align, recompute_scale_factor=recompute
        ),
        args,
    )


def main():
    torch.manual_seed(0)
    # ---- pad ----
    pad_case("constant_3d", [2, 3, 5], (1, 2), "constant")
    pad_case("constant_4d_value", [1, 2, 3, 4], (1, 1, 2, 0), "constant", 1.5)
    pad_case("constant_4d_negative", [1, 2, 3, 4], (-1, 2, 0, -1), "constant", -2.0)
    pad_case("constant_5d", [1, 2, 2, 3, 3], (1, 0, 0, 1, 1, 1), "constant")
    pad_case("constant_all_dims", [2, 3, 4], (1, 1, 0, 2, 1, 0), "constant", 0.5)
    pad_case("constant_crop_to_empty", [2, 5], (-5, 0), "constant")
    pad_case("constant_1d", [5], (2, -1), "constant", 3.0)
    pad_case("reflect_2d", [3, 5], (2, 1), "reflect")
    pad_case("reflect_3d", [2, 3, 5], (2, 1), "reflect")
    pad_case("reflect_3d_negative", [2, 3, 5], (-1, 2), "reflect")
    pad_case("reflect_4d", [1, 2, 3, 4], (1, 1, 2, 0), "reflect")
    pad_case("reflect_4d_mixed", [2, 2, 3, 4], (3, 0, -1, 2), "reflect")
    pad_case("reflect_3d_unbatched_2d", [2, 3, 4], (1, 2, 2, 1), "reflect")
    pad_case("reflect_5d", [1, 2, 3, 3, 4], (1, 2, 2, 1, 1, 0), "reflect")
    pad_case("replicate_3d", [2, 3, 5], (3, 2), "replicate")
    pad_case("replicate_3d_negative", [2, 3, 5], (-2, 1), "replicate")
    pad_case("replicate_4d", [1, 2, 3, 4], (2, 3, -1, 0), "replicate")
    pad_case("replicate_5d", [1, 2, 2, 3, 3], (1, 1, 1, 1, 1, 1), "replicate")
    pad_case("circular_2d", [3, 5], (1, 2), "circular")
    pad_case("circular_3d", [2, 3, 5], (2, 1), "circular")
    pad_case("circular_3d_negative", [2, 3, 5], (-2, 3), "circular")
    pad_case("circular_4d", [1, 2, 3, 4], (1, 2, 0, 1), "circular")
    pad_case("circular_4d_full_wrap", [1, 2, 3, 4], (3, -1, 3, 3), "circular")
    pad_case("circular_5d", [1, 2, 2, 3, 3], (1, 0, 1, 1, 0, 2), "circular")
    pad_case("reflect_4d_f32", [1, 2, 3, 4], (2, 1, 1, 2), "reflect", dtype=torch.float32)

    # ---- interpolate ----
    for mode in ["nearest", "nearest-exact"]:
        tag = mode.replace("-", "_")
        interp_case(f"{tag}_1d_up", [2, 3, 5], mode, size=8)
        interp_case(f"{tag}_1d_down", [2, 3, 5], mode, size=3)
        interp_case(f"{tag}_1d_scale2", [2, 3, 5], mode, scale=2.0)
        interp_case(f"{tag}_1d_scale_half", [2, 3, 6], mode, scale=0.5)
        interp_case(f"{tag}_1d_scale_1_7", [1, 2, 5], mode, scale=1.7)
        interp_case(f"{tag}_1d_scale_1_7_recompute", [1, 2, 5], mode, scale=1.7, recompute=True)
        interp_case(f"{tag}_2d_size", [1, 2, 3, 4], mode, size=(5, 7))
        interp_case(f"{tag}_2d_scale", [1, 2, 3, 4], mode, scale=(2.0, 1.5))
        interp_case(f"{tag}_2d_down_f32", [1, 2, 5, 7], mode, scale=0.6, dtype=torch.float32)
        interp_case(f"{tag}_3d_size", [1, 2, 2, 3, 4], mode, size=(3, 4, 6))
        interp_case(f"{tag}_3d_scale", [1, 1, 2, 3, 2], mode, scale=2.0)
    for align in [False, True]:
        a = "align" if align else "noalign"
        interp_case(f"linear_up_{a}", [2, 3, 5], "linear", size=8, align=align)
        interp_case(f"linear_down_{a}", [2, 3, 5], "linear", size=3, align=align)
        interp_case(f"linear_to_one_{a}", [1, 2, 5], "linear", size=1, align=align)
        interp_case(f"linear_scale_0_7_{a}", [1, 2, 6], "linear", scale=0.7, align=align)
        interp_case(f"linear_scale_2_5_{a}_f32", [1, 2, 4], "linear", scale=2.5, align=align, dtype=torch.float32)
        interp_case(f"bilinear_up_{a}", [2, 3, 4, 5], "bilinear", size=(7, 9), align=align)
        interp_case(f"bilinear_down_{a}", [1, 2, 4, 5], "bilinear", size=(3, 2), align=align)
        interp_case(f"bilinear_scale_{a}", [1, 2, 3, 4], "bilinear", scale=(1.5, 0.5), align=align)
        interp_case(f"bilinear_up_{a}_f32", [1, 2, 4, 5], "bilinear", size=(7, 9), align=align, dtype=torch.float32)
        interp_case(f"trilinear_{a}", [1, 2, 3, 4, 5], "trilinear", size=(5, 3, 7), align=align)
    interp_case("linear_scale_unset_align", [1, 2, 5], "linear", scale=2.0)
    interp_case("bilinear_scale2_recompute", [1, 1, 3, 5], "bilinear", scale=2.3, recompute=True)
    interp_case("bilinear_scale2_3", [1, 1, 3, 5], "bilinear", scale=2.3)
    interp_case("bilinear_scale_f32", [1, 2, 3, 5], "bilinear", scale=(1.5, 0.5), dtype=torch.float32)
    interp_case("trilinear_scale2", [1, 1, 2, 3, 2], "trilinear", scale=2.0)

    # ---- pixel shuffle ----
    for name, shape, r in [
        ("pixel_shuffle_4d", [2, 8, 2, 3], 2),
        ("pixel_shuffle_3d", [9, 2, 2], 3),
        ("pixel_shuffle_5d", [2, 1, 8, 2, 2], 2),
    ]:
        x = torch.randn(shape, dtype=torch.float64)
        record(name, x, lambda t, r=r: F.pixel_shuffle(t, r), f"op=pixel_shuffle r={r}")
    for name, shape, r in [("pixel_unshuffle_4d", [2, 2, 4, 6], 2), ("pixel_unshuffle_3d", [3, 6, 3], 3)]:
        x = torch.randn(shape, dtype=torch.float64)
        record(name, x, lambda t, r=r: F.pixel_unshuffle(t, r), f"op=pixel_unshuffle r={r}")

    out = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "pad_interpolate.safetensors")
    save_file(tensors, out, metadata=meta)
    print(f"wrote {len(meta)} cases to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
