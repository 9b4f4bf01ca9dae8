#!/usr/bin/env python3
"""Writes tests/fixtures/optim.txt: PyTorch reference values for kiln's optimizers, learning-rate
schedulers and gradient clipping (read by tests/optim.rs, tests/lr_scheduler.rs, tests/clip_grad.rs).

Run from the repository root:  python3 scripts/fixtures_optim.py

Format: a text file of cases; blank lines and lines starting with `#` are ignored. Floats are
Python reprs (they parse back to the same f64). Each case is

    case <kind> <name>          kind: opt | sched | clip
    ...lines...
    end

opt cases (an optimizer trajectory, f64, foreach=False):
    opt <Kind>                          SGD Adam AdamW Adadelta Adagrad RMSprop
    group params=0,1 key=value ...      one line per parameter group (hyperparameters as in
                                        PyTorch; betas=b1,b2; bools True/False)
    param <i> <shape> = v v v           initial value of parameter i (shape like 2x3)
    coef <i> = v v v                    the coefficients c_i of the loss
    skip <k> <i>                        at step k (1-based) parameter i gets no gradient
    after <k> <i> = v v v               parameter i after step k
  The loss at every step is  sum_i [ sum(c_i * p_i * p_i) + 0.1 * sum(p_i * p_i * p_i) ],
  gradients by autograd; a skipped parameter's .grad is set to None before opt.step().

sched cases (a learning-rate schedule over an optimizer with two parameter groups):
    opt <Kind>                          the optimizer (SGD momentum=0.9, or Adam)
    group params=0 lr=...               as above (the parameters get no gradients)
    sched <Kind> key=value ...          StepLR MultiStepLR ExponentialLR CosineAnnealingLR
                                        LinearLR OneCycleLR ReduceLROnPlateau (lists: a,b,c)
    metric <k> = v                      ReduceLROnPlateau: the metric given at step k
    lr <k> = v v                        get_last_lr() after k scheduler steps (k = 0: after
                                        construction)
    momentum <k> = v v                  the groups' momentum (SGD) or betas[0] (Adam) then

clip cases (gradient clipping):
    grad <i> <dtype> <shape> = v v v    gradient of parameter i (`none` instead of `= ...`:
                                        the parameter has no gradient)
    clip norm max_norm=<f> norm_type=<f>   or   clip value clip_value=<f>
    total = v                           the returned total norm (norm clipping)
    clipped <i> = v v v                 the gradient after clipping
"""

import math
import os

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "optim.txt")
lines = []


def vals(t):
    return " ".join(repr(float(x)) for x in t.detach().reshape(-1).tolist())


def shape(t):
    return "x".join(str(d) for d in t.shape) if t.dim() else "scalar"


def fmt(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, (tuple, list)):
        return ",".join(fmt(x) for x in v)
    return repr(v)


OPTS = {
    "SGD": torch.optim.SGD,
    "Adam": torch.optim.Adam,
    "AdamW": torch.optim.AdamW,
    "Adadelta": torch.optim.Adadelta,
    "Adagrad": torch.optim.Adagrad,
    "RMSprop": torch.optim.RMSprop,
}


def initial_params():
    g = torch.Generator().manual_seed(7)
    p0 = torch.rand(2, 3, generator=g, dtype=torch.float64) * 2 - 1
    p1 = torch.rand(4, generator=g, dtype=torch.float64) * 2 - 1
    c0 = torch.rand(2, 3, generator=g, dtype=torch.float64) + 0.5
    c1 = torch.rand(4, generator=g, dtype=torch.float64) + 0.5
    return [p0, p1], [c0, c1]


def opt_case(name, kind, groups, skips=(), steps=5):
    """groups: list of (param indices, kwargs)."""
    params, coefs = initial_params()
    params = [p.clone().requires_grad_(True) for p in params]
    if len(groups) == 1:
        # Options as constructor arguments (Adagrad reads initial_accumulator_value from there).
        opt = OPTS[kind]([params[i] for i in groups[0][0]], foreach=False, **groups[0][1])
    else:
        opt = OPTS[kind]([{"params": [params[i] for i in idx], **kw} for idx, kw in groups], foreach=False)
    lines.append(f"case opt {name}")
    lines.append(f"opt {kind}")
    for idx, kw in groups:
        lines.append("group params=" + ",".join(map(str, idx)) + "".join(f" {k}={fmt(v)}" for k, v in kw.items()))
    for i, (p, c) in enumerate(zip(params, coefs)):
        lines.append(f"param {i} {shape(p)} = {vals(p)}")
        lines.append(f"coef {i} = {vals(c)}")
    for k, i in skips:
        lines.append(f"skip {k} {i}")
    for k in range(1, steps + 1):
        opt.zero_grad()
        loss = sum((c * p * p).sum() + 0.1 * (p * p * p).sum() for p, c in zip(params, coefs))
        loss.backward()
        for kk, i in skips:
            if kk == k:
                params[i].grad = None
        opt.step()
        for i, p in enumerate(params):
            lines.append(f"after {k} {i} = {vals(p)}")
    lines.append("end")


ALL = [([0, 1], {})]


def one(kw):
    return [([0, 1], kw)]


opt_case("sgd_plain", "SGD", one({"lr": 0.1}))
opt_case("sgd_momentum", "SGD", one({"lr": 0.1, "momentum": 0.9}))
opt_case("sgd_dampening", "SGD", one({"lr": 0.1, "momentum": 0.9, "dampening": 0.5}))
opt_case("sgd_nesterov", "SGD", one({"lr": 0.1, "momentum": 0.9, "nesterov": True}))
opt_case("sgd_weight_decay", "SGD", one({"lr": 0.1, "momentum": 0.5, "weight_decay": 0.1}))
opt_case("sgd_maximize", "SGD", one({"lr": 0.05, "momentum": 0.9, "maximize": True}))
opt_case("sgd_skip", "SGD", one({"lr": 0.1, "momentum": 0.9}), skips=[(2, 1), (3, 1), (4, 0)])
opt_case("sgd_groups", "SGD", [([0], {"lr": 0.1, "momentum": 0.9}), ([1], {"lr": 0.01})])
opt_case("adam_default", "Adam", one({}))
opt_case("adam_lr", "Adam", one({"lr": 0.1, "betas": (0.8, 0.9)}))
opt_case("adam_weight_decay", "Adam", one({"lr": 0.1, "weight_decay": 0.1}))
opt_case("adam_amsgrad", "Adam", one({"lr": 0.1, "amsgrad": True}))
opt_case("adam_maximize", "Adam", one({"lr": 0.05, "maximize": True, "eps": 1e-3}))
opt_case("adam_skip", "Adam", one({"lr": 0.1}), skips=[(1, 1), (3, 0), (3, 1)])
opt_case("adam_groups", "Adam", [([1], {"lr": 0.1, "amsgrad": True}), ([0], {"lr": 0.02, "weight_decay": 0.5})])
opt_case("adamw_default", "AdamW", one({}))
opt_case("adamw_amsgrad", "AdamW", one({"lr": 0.1, "weight_decay": 0.1, "amsgrad": True}))
opt_case("adadelta_default", "Adadelta", one({}))
opt_case("adadelta_options", "Adadelta", one({"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1}))
opt_case("adadelta_maximize", "Adadelta", one({"maximize": True}))
opt_case("adagrad_default", "Adagrad", one({"lr": 0.1}))
opt_case("adagrad_lr_decay", "Adagrad", one({"lr": 0.1, "lr_decay": 0.1}))
opt_case("adagrad_options", "Adagrad", one({"lr": 0.1, "weight_decay": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-3}))
opt_case("adagrad_maximize_skip", "Adagrad", one({"lr": 0.1, "maximize": True}), skips=[(2, 0)])
opt_case("rmsprop_default", "RMSprop", one({}))
opt_case("rmsprop_momentum", "RMSprop", one({"lr": 0.01, "momentum": 0.9, "alpha": 0.9}))
opt_case("rmsprop_centered", "RMSprop", one({"lr": 0.01, "centered": True}))
opt_case("rmsprop_all", "RMSprop", one({"lr": 0.01, "centered": True, "momentum": 0.5, "weight_decay": 0.1, "eps": 1e-4}))
opt_case("rmsprop_maximize", "RMSprop", one({"lr": 0.01, "maximize": True}))

# ---------------------------------------------------------------- schedulers
S = torch.optim.lr_scheduler


def sched_case(name, kind, kwargs, opt_kind="SGD", steps=30, metrics=None):
    params = [torch.zeros(2, dtype=torch.float64, requires_grad=True), torch.zeros(3, dtype=torch.float64, requires_grad=True)]
    extra = {"momentum": 0.9} if opt_kind == "SGD" else {}
    groups = [([0], {"lr": 0.1, **extra}), ([1], {"lr": 0.05, **extra})]
    opt = OPTS[opt_kind]([{"params": [params[i] for i in idx], **kw} for idx, kw in groups])
    sched = getattr(S, kind)(opt, **kwargs)
    lines.append(f"case sched {name}")
    lines.append(f"opt {opt_kind}")
    for idx, kw in groups:
        lines.append("group params=" + ",".join(map(str, idx)) + "".join(f" {k}={fmt(v)}" for k, v in kw.items()))
    lines.append(f"sched {kind}" + "".join(f" {k}={fmt(v)}" for k, v in kwargs.items()))

    def record(k):
        lrs = [g["lr"] for g in opt.param_groups] if kind == "ReduceLROnPlateau" and k == 0 else sched.get_last_lr()
        lines.append(f"lr {k} = " + " ".join(repr(float(x)) for x in lrs))
        moms = [g["momentum"] if "momentum" in g else g["betas"][0] for g in opt.param_groups]
        lines.append(f"momentum {k} = " + " ".join(repr(float(x)) for x in moms))

    record(0)
    for k in range(1, steps + 1):
        opt.step()
        if metrics is not None:
            lines.append(f"metric {k} = {metrics[k - 1]!r}")
            sched.step(metrics[k - 1])
        else:
            sched.step()
        record(k)
    lines.append("end")


sched_case("step", "StepLR", {"step_size": 7, "gamma": 0.5})
sched_case("multistep", "MultiStepLR", {"milestones": [5, 12, 12, 20], "gamma": 0.3})
sched_case("exponential", "ExponentialLR", {"gamma": 0.9})
sched_case("cosine", "CosineAnnealingLR", {"T_max": 10, "eta_min": 0.001})
sched_case("cosine_long", "CosineAnnealingLR", {"T_max": 30})
sched_case("linear_warmup", "LinearLR", {"start_factor": 0.25, "end_factor": 1.0, "total_iters": 8})
sched_case("linear_decay", "LinearLR", {"start_factor": 1.0, "end_factor": 0.1, "total_iters": 10})
sched_case("onecycle_cos", "OneCycleLR", {"max_lr": [1.0, 0.5], "total_steps": 30})
sched_case("onecycle_linear_3phase", "OneCycleLR", {"max_lr": 0.8, "total_steps": 30, "pct_start": 0.4, "anneal_strategy": "linear", "div_factor": 10.0, "final_div_factor": 100.0, "three_phase": True}, opt_kind="Adam")
sched_case("onecycle_no_momentum", "OneCycleLR", {"max_lr": 0.3, "total_steps": 40, "cycle_momentum": False, "pct_start": 0.25}, steps=40)
m1 = [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.8, 0.8, 0.8, 0.8, 0.8, 0.79999, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
sched_case("plateau_min", "ReduceLROnPlateau", {"mode": "min", "factor": 0.5, "patience": 2, "cooldown": 1, "min_lr": 0.01}, steps=len(m1), metrics=m1)
m2 = [0.1, 0.2, 0.25, 0.26, 0.261, 0.262, 0.3, 0.3, 0.3, 0.35, 0.35, 0.35, 0.35, 0.35, 0.35]
sched_case("plateau_max_abs", "ReduceLROnPlateau", {"mode": "max", "factor": 0.3, "patience": 1, "threshold": 0.01, "threshold_mode": "abs", "min_lr": [0.001, 0.02]}, steps=len(m2), metrics=m2)

# ---------------------------------------------------------------- clipping


def clip_case(name, how, dtype=torch.float64, none_at=None, scale=1.0):
    g = torch.Generator().manual_seed(11)
    shapes = [(3, 4), (5,), (2, 2)]
    params = [torch.zeros(s, dtype=dtype, requires_grad=True) for s in shapes]
    for i, p in enumerate(params):
        if i != none_at:
            p.grad = ((torch.rand(p.shape, generator=g, dtype=torch.float64) * 2 - 1) * scale).to(dtype)
    lines.append(f"case clip {name}")
    dt = {torch.float64: "f64", torch.float32: "f32"}[dtype]
    for i, p in enumerate(params):
        lines.append(f"grad {i} {dt} {shape(p)} " + ("none" if p.grad is None else f"= {vals(p.grad)}"))
    kind, kw = how
    lines.append(f"clip {kind}" + "".join(f" {k}={fmt(v)}" for k, v in kw.items()))
    if kind == "norm":
        total = torch.nn.utils.clip_grad_norm_(params, foreach=False, **kw)
        lines.append(f"total = {float(total)!r}")
    else:
        torch.nn.utils.clip_grad_value_(params, foreach=False, **kw)
    for i, p in enumerate(params):
        if p.grad is not None:
            lines.append(f"clipped {i} = {vals(p.grad)}")
    lines.append("end")


clip_case("norm2", ("norm", {"max_norm": 1.0, "norm_type": 2.0}))
clip_case("norm2_noclip", ("norm", {"max_norm": 100.0, "norm_type": 2.0}))
clip_case("norm1", ("norm", {"max_norm": 2.0, "norm_type": 1.0}))
clip_case("norm3", ("norm", {"max_norm": 0.5, "norm_type": 3.0}))
clip_case("norm_half", ("norm", {"max_norm": 5.0, "norm_type": 0.5}))
clip_case("norm_inf", ("norm", {"max_norm": 0.25, "norm_type": math.inf}))
clip_case("norm_neg_inf", ("norm", {"max_norm": 0.01, "norm_type": -math.inf}))
clip_case("norm2_none", ("norm", {"max_norm": 1.0, "norm_type": 2.0}), none_at=1)
clip_case("norm2_f32", ("norm", {"max_norm": 1.0, "norm_type": 2.0}), dtype=torch.float32, scale=3.0)
clip_case("value", ("value", {"clip_value": 0.3}))
clip_case("value_f32_none", ("value", {"clip_value": 0.5}), dtype=torch.float32, none_at=0)

with open(OUT, "w") as f:
    f.write("# Generated by scripts/fixtures_optim.py with PyTorch " + torch.__version__.split("+")[0] + "; the format is described there.\n")
    f.write("\n".join(lines) + "\n")
print(f"wrote {len(lines)} lines to {os.path.normpath(OUT)}")
