#!/usr/bin/env python3
"""Writes tests/fixtures/optim_half.txt: PyTorch's optimizer trajectories on bf16 and f16
parameters, read by tests/optim_half.rs, which replays them through kiln's one-pass kernel, its
op-by-op path and `kiln::compile` and compares the parameters' bits.

Run from the repository root:  python3 scripts/fixtures_optim_half.py

The PyTorch path recorded is the single-tensor one (`foreach=False`, PyTorch's default on the
CPU), one thread. Every op of it computes in f32 ("opmath") and rounds its result to the half
type once; kiln reproduces that arithmetic (see src/optim/rule.rs). PyTorch's CPU loops have a
vectorized body and a scalar tail that round `add(..., alpha=)` differently (the tail rounds
`alpha * other` to the half type before adding), so PyTorch's own result depends on where an
element sits: the tensors here have 32 elements, a multiple of the vector widths (32 half
numbers with AVX-512, 16 with AVX2), so that all of them take the vectorized body. The script
checks that: each case is also run on the parameters and gradients repeated 64 times (2048
elements, one tensor each) and every copy
must end equal to the small run, bit for bit.

Format: the format of tests/fixtures/optim.txt (the header of scripts/fixtures_optim.py; read
by tests/common/optim_fixture.rs), with these lines in each `case opt <name>` … `end`:

    opt <Kind>                          SGD Adam AdamW Adadelta Adagrad RMSprop
    dtype <bf16|f16>                    the parameters' (and gradients') dtype
    group params=0,1 key=value ...      one line per parameter group (PyTorch's names; betas=b1,b2;
                                        bools True/False)
    param <i> <shape> = v v v           the initial value of parameter i (shape like 2x16)
    grad <k> <i> = v v v                parameter i's gradient at step k (1-based); no line: its
                                        .grad is None at that step (the optimizer skips it)
    after <k> <i> = v v v               parameter i after step k

Values are Python reprs of the half values (exact in f64, so they parse back to the same half).
"""

import os

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "optim_half.txt")
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
SHAPES = [(2, 16), (32,)]
STEPS = 5
TILES = 64
OPTS = {
    "SGD": torch.optim.SGD,
    "Adam": torch.optim.Adam,
    "AdamW": torch.optim.AdamW,
    "Adadelta": torch.optim.Adadelta,
    "Adagrad": torch.optim.Adagrad,
    "RMSprop": torch.optim.RMSprop,
}
lines = []


def vals(t):
    return " ".join(repr(float(x)) for x in t.detach().float().reshape(-1).tolist())


def shape(t):
    return "x".join(str(d) for d in t.shape)


def fmt(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (tuple, list)):
        return ",".join(fmt(x) for x in v)
    return repr(v)


def problem(dtype, seed, skips):
    """Initial parameters and each step's gradients (None where skipped), of `dtype`."""
    g = torch.Generator().manual_seed(seed)
    params = [(torch.rand(s, generator=g) * 2 - 1).to(dtype) for s in SHAPES]
    grads = []
    for k in range(1, STEPS + 1):
        step = []
        for i, s in enumerate(SHAPES):
            # Gradients of mixed sizes, so that updates are both near and far below an ulp.
            scale = torch.rand(s, generator=g) * 1.5 + 0.05
            v = (torch.randn(s, generator=g) * scale).to(dtype)
            step.append(None if (k, i) in skips else v)
        grads.append(step)
    return params, grads


def trajectory(kind, groups, params, grads, tiles):
    """The parameters after each step, from `params` repeated `tiles` times (flattened)."""
    ps = [p.reshape(-1).repeat(tiles).clone().requires_grad_(True) for p in params]
    if len(groups) == 1:
        opt = OPTS[kind](ps, foreach=False, **groups[0][1])
    else:
        opt = OPTS[kind]([{"params": [ps[i] for i in idx], **kw} for idx, kw in groups], foreach=False)
    out = []
    for step in grads:
        for p, gr in zip(ps, step):
            p.grad = None if gr is None else gr.reshape(-1).repeat(tiles).clone()
        opt.step()
        out.append([p.detach().clone() for p in ps])
    return out


def case(name, kind, groups, dtypes=("bf16", "f16"), skips=()):
    """groups: list of (parameter indices, kwargs); skips: (step, parameter) pairs."""
    for dt in dtypes:
        dtype = DTYPES[dt]
        params, grads = problem(dtype, 17 + len(lines), set(skips))
        small = trajectory(kind, groups, params, grads, 1)
        tiled = trajectory(kind, groups, params, grads, TILES)
        for k, (a, b) in enumerate(zip(small, tiled), 1):
            for i, (x, y) in enumerate(zip(a, b)):
                same = torch.equal(y.view(TILES, -1).view(torch.int16), x.view(1, -1).view(torch.int16).expand(TILES, -1))
                assert same, f"{name} {dt}: step {k} param {i} depends on the element's position"
        lines.append(f"case opt {name}_{dt}")
        lines.append(f"opt {kind}")
        lines.append(f"dtype {dt}")
        for idx, kw in groups:
            lines.append("group params=" + ",".join(map(str, idx)) + "".join(f" {k}={fmt(v)}" for k, v in kw.items()))
        for i, p in enumerate(params):
            lines.append(f"param {i} {shape(p)} = {vals(p)}")
        for k, step in enumerate(grads, 1):
            for i, gr in enumerate(step):
                if gr is not None:
                    lines.append(f"grad {k} {i} = {vals(gr)}")
        for k, after in enumerate(small, 1):
            for i, p in enumerate(after):
                lines.append(f"after {k} {i} = {vals(p)}")
        lines.append("end")


def one(kw):
    return [([0, 1], kw)]


torch.set_num_threads(1)
case("sgd_plain", "SGD", one({"lr": 0.1}))
case("sgd_momentum", "SGD", one({"lr": 0.1, "momentum": 0.9}))
case("sgd_dampening", "SGD", one({"lr": 0.1, "momentum": 0.9, "dampening": 0.5}))
case("sgd_nesterov", "SGD", one({"lr": 0.1, "momentum": 0.9, "nesterov": True}))
case("sgd_weight_decay", "SGD", one({"lr": 0.1, "momentum": 0.5, "weight_decay": 0.1}))
case("sgd_maximize", "SGD", one({"lr": 0.05, "momentum": 0.9, "maximize": True}))
case("sgd_skip", "SGD", one({"lr": 0.1, "momentum": 0.9}), skips=[(2, 1), (3, 1), (4, 0)])
case("sgd_groups", "SGD", [([0], {"lr": 0.1, "momentum": 0.9}), ([1], {"lr": 0.01, "weight_decay": 0.01})])
case("adam_default", "Adam", one({}))
case("adam_lr", "Adam", one({"lr": 0.1, "betas": (0.8, 0.9)}))
case("adam_weight_decay", "Adam", one({"lr": 0.1, "weight_decay": 0.1}))
case("adam_amsgrad", "Adam", one({"lr": 0.1, "amsgrad": True}))
case("adam_maximize", "Adam", one({"lr": 0.05, "maximize": True, "eps": 1e-3}), skips=[(3, 0)])
case("adamw_default", "AdamW", one({}))
case("adamw_amsgrad", "AdamW", one({"lr": 0.1, "weight_decay": 0.1, "amsgrad": True}))
case("adadelta_default", "Adadelta", one({}))
case("adadelta_options", "Adadelta", one({"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1}))
case("adadelta_maximize", "Adadelta", one({"maximize": True}))
case("adagrad_default", "Adagrad", one({"lr": 0.1}))
case("adagrad_lr_decay", "Adagrad", one({"lr": 0.1, "lr_decay": 0.1}))
case("adagrad_options", "Adagrad", one({"lr": 0.1, "weight_decay": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-3}))
case("adagrad_maximize_skip", "Adagrad", one({"lr": 0.1, "maximize": True}), skips=[(2, 0)])
case("rmsprop_default", "RMSprop", one({}))
case("rmsprop_momentum", "RMSprop", one({"lr": 0.01, "momentum": 0.9, "alpha": 0.9}))
case("rmsprop_centered", "RMSprop", one({"lr": 0.01, "centered": True}))
case("rmsprop_all", "RMSprop", one({"lr": 0.01, "centered": True, "momentum": 0.5, "weight_decay": 0.1, "eps": 1e-4}))
case("rmsprop_maximize", "RMSprop", one({"lr": 0.01, "maximize": True}))

with open(OUT, "w") as f:
    f.write("# Generated by scripts/fixtures_optim_half.py with PyTorch " + torch.__version__.split("+")[0] + "; the format is described there.\n")
    f.write("\n".join(lines) + "\n")
print(f"wrote {len(lines)} lines to {os.path.normpath(OUT)}")
