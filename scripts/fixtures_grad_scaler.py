#!/usr/bin/env python3
"""Writes tests/fixtures/grad_scaler.txt: PyTorch's `torch.amp.GradScaler("cpu")` driving SGD,
step by step, read by tests/grad_scaler.rs.

Run from the repository root:  python3 scripts/fixtures_grad_scaler.py   (needs torch)

Format: a text file of cases; blank lines and lines starting with `#` are ignored. Floats are
Python reprs (they parse back to the same f64; `inf`, `-inf`, `nan` spelled out), and every
value of a tensor is exactly representable in the tensor's dtype. Each case is

    case scaler <name>
    ...lines, in the order the test replays them...
    end

Lines that set the case up:
    scaler init_scale=<f> growth_factor=<f> backoff_factor=<f> growth_interval=<n>
    param <i> <dtype> <shape> = v v v     parameter i (dtype f32, f64 or bf16; shape like 2x3)
    coef <i> = v v v                      the loss coefficients of parameter i (in its dtype)
    optim <j> params=0,1 lr=<f> momentum=<f>   optimizer j: torch.optim.SGD(foreach=False)

Lines that act (each optimizer-changing action names the optimizer j):
    zero_grad                             every optimizer's zero_grad() (grads set to None)
    scale_value <x> = v                   scaler.scale(torch.tensor(x)) (f32, 0-dim) is v (the
                                          first scale() starts the scaler's scale)
    backward = v                          loss = sum_i [sum(c_i * p_i * p_i) + 0.1 * sum(p_i * p_i * p_i)];
                                          scaler.scale(loss).backward(); v is the scaled loss
    set_grad <i> = v v v                  parameter i's .grad set to these values (already scaled)
    inject <i> <k> = v                    element k (flat) of parameter i's .grad set to v (inf/nan)
    unscale <j>                           scaler.unscale_(optimizer j)
    step <j> = 1|0                        scaler.step(optimizer j); 1 when optimizer.step() ran,
                                          0 when it was skipped (found inf/nan)
    update                                scaler.update()
    update_with = v                       scaler.update(new_scale=v)

Lines that check (what PyTorch had at that point):
    scale = v                             scaler.get_scale()
    tracker = n                           the growth tracker (scaler._get_growth_tracker())
    grad <i> = v v v                      parameter i's .grad
    param <i> = v v v                     parameter i
    state key=value ...                   scaler.state_dict() (every key, PyTorch's names)
"""

import os

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "grad_scaler.txt")
lines = []
DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16"}


def vals(t):
    return " ".join(repr(float(x)) for x in t.detach().double().reshape(-1).tolist())


def shape(t):
    return "x".join(str(d) for d in t.shape)


class Case:
    def __init__(self, name, params, coefs=None, **scaler_kw):
        self.params = [p.clone().requires_grad_(True) for p in params]
        self.coefs = coefs
        self.scaler = torch.amp.GradScaler("cpu", **scaler_kw)
        self.opts = []
        lines.append(f"case scaler {name}")
        lines.append("scaler " + " ".join(f"{k}={v!r}" for k, v in scaler_kw.items()))
        for i, p in enumerate(self.params):
            lines.append(f"param {i} {DTYPES[p.dtype]} {shape(p)} = {vals(p)}")
            if coefs is not None:
                lines.append(f"coef {i} = {vals(coefs[i])}")

    def optim(self, idx, lr, momentum=0.0):
        opt = torch.optim.SGD([self.params[i] for i in idx], lr=lr, momentum=momentum, foreach=False)
        lines.append(f"optim {len(self.opts)} params={','.join(map(str, idx))} lr={lr!r} momentum={momentum!r}")
        self.opts.append(opt)

    def zero_grad(self):
        for opt in self.opts:
            opt.zero_grad()
        lines.append("zero_grad")

    def scale_value(self, x):
        v = self.scaler.scale(torch.tensor(x, dtype=torch.float32))
        lines.append(f"scale_value {x!r} = {v.item()!r}")

    def backward(self):
        loss = sum((c * p * p).sum() + 0.1 * (p * p * p).sum() for p, c in zip(self.params, self.coefs))
        scaled = self.scaler.scale(loss)
        scaled.backward()
        lines.append(f"backward = {scaled.item()!r}")

    def set_grad(self, i, values):
        p = self.params[i]
        p.grad = torch.tensor(values, dtype=torch.float64).to(p.dtype).reshape(p.shape)
        lines.append(f"set_grad {i} = {vals(p.grad)}")

    def inject(self, i, k, v):
        self.params[i].grad.view(-1)[k] = v
        lines.append(f"inject {i} {k} = {v!r}")

    def unscale(self, j):
        self.scaler.unscale_(self.opts[j])
        lines.append(f"unscale {j}")

    def step(self, j):
        ran = []
        original = self.opts[j].step

        def spy(*a, **kw):
            ran.append(True)
            return original(*a, **kw)

        self.opts[j].step = spy
        self.scaler.step(self.opts[j])
        self.opts[j].step = original
        lines.append(f"step {j} = {1 if ran else 0}")

    def update(self, new_scale=None):
        if new_scale is None:
            self.scaler.update()
            lines.append("update")
        else:
            self.scaler.update(new_scale)
            lines.append(f"update_with = {new_scale!r}")

    def check(self):
        lines.append(f"scale = {self.scaler.get_scale()!r}")
        lines.append(f"tracker = {self.scaler._get_growth_tracker()}")
        for i, p in enumerate(self.params):
            if p.grad is not None:
                lines.append(f"grad {i} = {vals(p.grad)}")
            lines.append(f"param {i} = {vals(p)}")

    def end(self):
        sd = self.scaler.state_dict()
        lines.append("state " + " ".join(f"{k}={v!r}" for k, v in sd.items()))
        lines.append("end")


def rand(g, *shape, dtype=torch.float32, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def trajectory():
    """f32 parameters, SGD with momentum, gradients by autograd through scaler.scale(loss):
    growth every 3 clean steps, an inf and a NaN that skip a step and back the scale off,
    explicit unscale_ on some steps, and update(new_scale) once."""
    g = torch.Generator().manual_seed(3)
    params = [rand(g, 2, 3), rand(g, 4)]
    coefs = [rand(g, 2, 3, lo=0.5, hi=1.5), rand(g, 4, lo=0.5, hi=1.5)]
    c = Case("sgd_momentum_f32", params, coefs, init_scale=1024.0, growth_interval=3)
    c.optim([0, 1], lr=0.1, momentum=0.9)
    inject = {4: (1, 2, float("inf")), 8: (0, 5, float("nan")), 9: (1, 0, float("-inf"))}
    for k in range(1, 13):
        c.zero_grad()
        c.backward()
        if k in inject:
            c.inject(*inject[k])
        if k % 2 == 0:
            c.unscale(0)
        c.step(0)
        c.update(512.0 if k == 11 else None)
        c.check()
    c.end()


def dtypes():
    """f64, bf16 and f32 parameters with gradients set directly; a scale and factors that are
    not powers of two, so that 1/scale rounds (to f32, as PyTorch computes it) and the scale
    updates round from f64 products to f32."""
    g = torch.Generator().manual_seed(5)
    params = [rand(g, 3, dtype=torch.float64), rand(g, 4, dtype=torch.bfloat16), rand(g, 2)]
    c = Case("dtypes_odd_scale", params, init_scale=3.0, growth_factor=1.5, backoff_factor=0.3, growth_interval=2)
    # lr a power of two: lr * grad is exact in bf16, so SGD's bf16 update rounds once in kiln as
    # in PyTorch (which computes it in f32) and the parameters compare exactly.
    c.optim([0, 1, 2], lr=0.125)
    c.scale_value(0.75)
    for k in range(1, 9):
        c.zero_grad()
        for i, p in enumerate(c.params):
            grad = rand(g, *p.shape, dtype=torch.float64, lo=-2.0, hi=2.0) * c.scaler.get_scale()
            c.set_grad(i, grad.tolist())
        if k == 3:
            c.inject(1, 1, float("inf"))
        if k == 6:
            c.inject(0, 2, float("nan"))
        c.step(0)
        c.update()
        c.check()
    c.end()


def two_optimizers():
    """Two SGD optimizers sharing one scaler: an inf in one optimizer's gradients skips only
    that optimizer's step; update() backs off once."""
    g = torch.Generator().manual_seed(11)
    params = [rand(g, 3), rand(g, 2)]
    c = Case("two_optimizers", params, init_scale=8.0, growth_interval=2)
    c.optim([0], lr=0.5)
    c.optim([1], lr=0.25, momentum=0.5)
    c.scale_value(-1.5)
    for k in range(1, 7):
        c.zero_grad()
        for i, p in enumerate(c.params):
            c.set_grad(i, (rand(g, *p.shape, dtype=torch.float64) * c.scaler.get_scale()).tolist())
        if k == 3:
            c.inject(1, 0, float("inf"))
        if k == 5:
            c.inject(0, 1, float("nan"))
        if k % 2 == 1:
            c.unscale(1)
        c.step(0)
        c.step(1)
        c.update()
        c.check()
    c.end()


def saturates():
    """A scale that would grow past f32's largest value stays where it is (the tracker still
    resets); a backoff from there works as usual."""
    c = Case("growth_saturates", [torch.tensor([0.5, -0.25])], init_scale=2.0**127, growth_interval=1)
    c.optim([0], lr=1.0)
    c.scale_value(0.5)
    for k in range(1, 4):
        c.zero_grad()
        c.set_grad(0, [2.0**126, -(2.0**125)])
        if k == 2:
            c.inject(0, 0, float("inf"))
        c.step(0)
        c.update()
        c.check()
    c.end()


trajectory()
dtypes()
two_optimizers()
saturates()

with open(OUT, "w") as f:
    f.write("# Written by scripts/fixtures_grad_scaler.py (torch %s); see its header for the format.\n" % torch.__version__)
    f.write("\n".join(lines) + "\n")
print(f"wrote {OUT}: {sum(1 for l in lines if l.startswith('case '))} cases")
