#!/usr/bin/env python3
"""Generate kiln's PyTorch reference fixtures (tests/fixtures/*.txt).

Usage:  python3 scripts/make_fixtures.py [--keep] [SET ...]      (default: every set)
        sets: unary binary compare reduce matmul index sort bitwise

--keep keeps the recorded block of every case already in the file and writes only the new
cases from this run: PyTorch's transcendentals differ by an ulp between CPUs (vector ISAs), so
regenerating a set on another machine would otherwise rewrite unrelated reference values.

Needs PyTorch (CPU is enough); CI does not run this script: the generated files are
committed and read by the Rust integration tests (tests/common/mod.rs is the reader).
The output is deterministic: running the script twice writes identical files.

Fixture format, version 1
=========================
A UTF-8 text file of cases. Blank lines and lines starting with `#` are ignored. A case is
a block of lines, each line a keyword and whitespace-separated tokens:

    case NAME                 starts a case; NAME is unique in the file (e.g. `add/f32+i64/bcast`)
    op OP                     what to run (PyTorch's name; the Rust test maps it to kiln)
    attr KEY VALUE...         optional keyword attributes (`attr dim 1`, `attr dims 0 2`);
                              the value is the rest of the line, parsed by whoever reads it
                              (flags are 0/1; `attr dims` with no value is the empty list)
    arg NAME tensor DTYPE SHAPE DATA
                              a tensor operand, in call order. DTYPE is one of
                              f32 f64 f16 bf16 i64 i32 u8 bool; SHAPE is `[2,3]`, `[]` (0-dim)
                              or `[0,3]` (zero-size), without spaces. DATA is either
                                = V V V ...          the row-major values of a contiguous tensor
                              or
                                ramp MUL MOD OFF DIV value i = ((i*MUL) % MOD + OFF) / DIV,
                                                     computed in integers then divided in f64,
                                                     always exact in DTYPE (used for inputs
                                                     large enough to take the parallel path)
    view NAME STEP INT...     applies a view to tensor arg NAME (in order, after building it
                              contiguous): `t`, `transpose D0 D1`, `permute D...`,
                              `narrow DIM START LEN`, `select DIM INDEX`, `expand SIZE...`,
                              `unsqueeze DIM`, `squeeze DIM`, `view SIZE...`
    arg NAME scalar KIND V    a Python-number operand; KIND is int, float or bool
                              (it takes part in type promotion as a "wrapped number")
    out NAME DTYPE SHAPE = V ...
                              an expected output, row-major (several for tuple results,
                              trajectories, ...: each has its own NAME)
    out NAME DTYPE SHAPE every K = V ...
                              only the elements at flat indices 0, K, 2K, ... (large outputs)
    error MESSAGE             instead of `out`: PyTorch raised; kiln must fail too
    tol exact | tol RTOL ATOL optional: exact comparison, or |got - exp| <= ATOL + RTOL*|exp|,
                              instead of the reader's per-dtype default
    end                       ends the case

Attributes the sets use (the Rust test of each set maps them to kiln's arguments):
    binary   dtype (full: the dtype of `torch.full((2,), value, dtype=...)`)
    reduce   dims (a list; absent: every element), dim, keepdim, correction, values_only
             (max/min along a dim with tied extremes: only the values output is recorded),
             dtype (softmax/log_softmax's `dtype=`: the input is cast first)
    bitwise  none (in-place forms are ops ending in `_`; errors include every float case)
    matmul   none
    index    dim, num_classes, entries (advanced indexing: `t` an index tensor argument, `-` a
             whole dim, so `x[i, :, j]` is `t - t`), accumulate
    sort     dim, descending, stable, k, largest, sorted, values_only (ties: PyTorch's order of
             equal values is unspecified); topk with `sorted 0` records its outputs in input
             order (by increasing index)

Values: integers in decimal; bool as 0/1; floats as Python's repr of the value (exact for
f64, f16 and bf16; for f32 the shortest decimal that gives the value back when parsed as
f64 and rounded to f32), with `nan`, `inf`, `-inf`, and `-0.0` for negative zero.
Values of a tensor always are the exact values of its dtype (inputs were rounded by PyTorch
when the case was made).
"""

import itertools
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures")

DTYPES = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i32": torch.int32,
    "u8": torch.uint8,
    "bool": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}
FLOATS = ["f32", "f64", "f16", "bf16"]
INTS = ["i64", "i32", "u8"]
ALL = FLOATS + INTS + ["bool"]

# Every large case uses this shape (> 100k elements) and samples its output every SAMPLE.
LARGE = [300, 401]
SAMPLE = 997


# ---------------------------------------------------------------- value formatting


def fmt_float(x, dtype):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if dtype == "f32":
        for p in range(1, 10):
            s = "%.*g" % (p, x)
            try:
                if struct.unpack("f", struct.pack("f", float(s)))[0] == x:
                    return s if (x != 0 or not math.copysign(1, x) < 0) else "-0.0"
            except OverflowError:  # a short decimal past the largest f32
                continue
    return repr(float(x))


def fmt_values(values, dtype):
    if dtype in FLOATS:
        return " ".join(fmt_float(v, dtype) for v in values)
    return " ".join(str(int(v)) for v in values)


def fmt_attr(v):
    """An attribute value: a list space-separated, a bool as 0/1."""
    if isinstance(v, (list, tuple)):
        return " ".join(fmt_attr(x) for x in v)
    return str(int(v)) if isinstance(v, bool) else str(v)


def fmt_shape(shape):
    return "[" + ",".join(str(s) for s in shape) + "]"


# ---------------------------------------------------------------- case description


class T:
    """A tensor operand: contiguous base values (or a ramp) of a dtype and shape, then views."""

    def __init__(self, dtype, shape, values=None, ramp=None, views=()):
        self.dtype, self.shape, self.values, self.ramp, self.views = dtype, list(shape), values, ramp, list(views)

    def base(self):
        dt = DTYPES[self.dtype]
        n = math.prod(self.shape)
        if self.ramp is not None:
            mul, mod, off, div = self.ramp
            k = (torch.arange(n, dtype=torch.int64) * mul) % mod + off
            return (k.double() / div).to(dt).reshape(self.shape)
        assert len(self.values) == n, (self.shape, len(self.values))
        return torch.tensor(self.values, dtype=torch.float64 if self.dtype in FLOATS else torch.int64).to(dt).reshape(self.shape)

    def torch(self):
        t = self.base()
        for step in self.views:
            t = apply_view(t, step)
        return t

    def lines(self, name):
        if self.ramp is not None:
            data = "ramp " + " ".join(str(v) for v in self.ramp)
        else:
            data = "= " + fmt_values(self.base().reshape(-1).tolist(), self.dtype)
        out = [f"arg {name} tensor {self.dtype} {fmt_shape(self.shape)} {data}".rstrip()]
        out += [f"view {name} " + " ".join(str(s) for s in step) for step in self.views]
        return out


class S:
    """A Python-number operand."""

    def __init__(self, value):
        self.value = value

    def torch(self):
        return self.value

    def lines(self, name):
        v = self.value
        if isinstance(v, bool):
            return [f"arg {name} scalar bool {int(v)}"]
        if isinstance(v, int):
            return [f"arg {name} scalar int {v}"]
        return [f"arg {name} scalar float {fmt_float(v, 'f64')}"]


def apply_view(t, step):
    name, *a = step
    return {
        "t": lambda: t.t(),
        "transpose": lambda: t.transpose(*a),
        "permute": lambda: t.permute(*a),
        "narrow": lambda: t.narrow(*a),
        "select": lambda: t.select(*a),
        "expand": lambda: t.expand(*a),
        "unsqueeze": lambda: t.unsqueeze(*a),
        "squeeze": lambda: t.squeeze(*a),
        "view": lambda: t.view(*a),
    }[name]()


def is_unsupported(err):
    """PyTorch errors that only say a dtype has no CPU kernel: kiln may support the case."""
    msg = str(err)
    return "not implemented for" in msg or "not supported for" in msg


class Writer:
    def __init__(self, name, title):
        self.name, self.lines, self.names, self.skipped = name, [], set(), 0
        self.lines += [
            f"# kiln fixtures v1: {title}",
            f"# Generated by scripts/make_fixtures.py with torch {torch.__version__}; do not edit by hand.",
            "",
        ]

    def case(self, name, op, fn, args, tol=None, sample=None, attrs=None, names=None, keep_unsupported=False):
        """Runs `fn(*torch args)` and records the case; `sample` = every-K output sampling,
        `attrs` = `attr` lines (a dict; lists become space-separated, bools 0/1), `names` = the
        argument names, `keep_unsupported` = record an unsupported-dtype error as an error case
        (for ops kiln rejects on that dtype too) instead of skipping it."""
        assert name not in self.names, f"duplicate case {name}"
        self.names.add(name)
        if names is None:
            names = ["x", "other", "third"] if len(args) <= 3 else [f"a{i}" for i in range(len(args))]
            names = {"where": ["condition", "x", "other"], "clamp": ["x", "min", "max"],
                     "masked_fill": ["x", "mask", "value"], "masked_fill_": ["x", "mask", "value"]}.get(op, names)
        body = [f"case {name}", f"op {op}"]
        body += [f"attr {k} {fmt_attr(v)}".rstrip() for k, v in (attrs or {}).items()]
        for n, a in zip(names, args):
            body += a.lines(n)
        try:
            result = fn(*[a.torch() for a in args])
        except (RuntimeError, TypeError, ValueError, ZeroDivisionError, IndexError) as e:
            if is_unsupported(e) and not keep_unsupported:
                self.skipped += 1
                return
            body.append("error " + str(e).splitlines()[0])
        else:
            outs = result if isinstance(result, tuple) else (result,)
            for i, r in enumerate(outs):
                dt = NAMES[r.dtype]
                flat = r.contiguous().reshape(-1)
                every = ""
                if sample:
                    flat, every = flat[::sample], f" every {sample}"
                vals = fmt_values(flat.tolist(), dt)
                body.append(f"out {'out' if len(outs) == 1 else f'out{i}'} {dt} {fmt_shape(r.shape)}{every} = {vals}".rstrip())
            if tol:
                body.append(f"tol {tol}")
        self.lines += body + ["end", ""]

    def write(self, keep=False):
        os.makedirs(OUT_DIR, exist_ok=True)
        path = os.path.join(OUT_DIR, self.name + ".txt")
        text = "\n".join(self.lines)
        if keep and os.path.exists(path):
            with open(path) as f:
                text = keep_recorded(f.read(), text)
        with open(path, "w") as f:
            f.write(text)
        print(f"{path}: {len(self.names) - self.skipped} cases ({self.skipped} skipped as unsupported by PyTorch CPU), {os.path.getsize(path)} bytes")


def case_blocks(text):
    """{name: block text} of a fixture file's cases (from `case` to `end`)."""
    blocks, name, cur = {}, None, []
    for line in text.split("\n"):
        if line.startswith("case "):
            name, cur = line[5:], [line]
        elif name is not None:
            cur.append(line)
            if line == "end":
                blocks[name] = "\n".join(cur)
                name = None
    return blocks


def keep_recorded(old, new):
    """`new` with the block of every case that `old` has replaced by the recorded one."""
    recorded = case_blocks(old)
    fresh = case_blocks(new)
    out = new
    for name, block in fresh.items():
        if name in recorded and recorded[name] != block:
            out = out.replace(block, recorded[name], 1)
    return out


# ---------------------------------------------------------------- input values

BIG = {"f16": 60000.0, "bf16": 1e30, "f32": 1e30, "f64": 1e300}
TINY = {"f16": 6e-8, "bf16": 1e-39, "f32": 1e-40, "f64": 1e-310}  # subnormal in each format
NAN, INF = float("nan"), float("inf")


def specials(dtype):
    """24 values covering zeros, signs, halves (rounding), tiny, large, nan and infinities."""
    if dtype in FLOATS:
        return [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.7, -1.3, 3.0,
                1e-6, -1e-6, 20.5, -20.5, 100.0, -100.0, BIG[dtype], -BIG[dtype], NAN, INF, -INF, TINY[dtype]]
    if dtype == "i64":
        # 2**62 + 2**38 + 1 rounds differently to f32 directly than through f64.
        return [0, 1, -1, 2, -2, 7, -7, 100, -100, 3037000500, -(2**62), 2**63 - 1,
                -(2**63), 2**62 + 2**38 + 1, 13, -13, 255, 256, -256, 1000, 65535, 3, -3, 5]
    if dtype == "i32":
        return [0, 1, -1, 2, -2, 7, -7, 100, -100, 46341, -(2**31), 2**31 - 1,
                13, -13, 255, 256, -256, 1000, 65535, 3, -3, 5, 16777217, -16777217]
    if dtype == "u8":
        return [0, 1, 2, 3, 7, 15, 100, 127, 128, 200, 254, 255,
                5, 9, 13, 16, 31, 32, 64, 99, 101, 150, 250, 253]
    return [0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0]


def mild(dtype, n, shift=0):
    """n ordinary values (no specials), exact in every dtype of the category."""
    if dtype in FLOATS:
        return [((i * 7 + shift) % 17 - 8) / 4 for i in range(n)]
    if dtype == "u8":
        return [(i * 7 + shift) % 17 for i in range(n)]
    if dtype == "bool":
        return [(i * 7 + shift) % 3 == 0 for i in range(n)]
    return [(i * 7 + shift) % 17 - 8 for i in range(n)]


def ramp(dtype, shift=0):
    """A LARGE ramp: floats in [-7.8, 7.8] by 1/16, ints in a small range, bools alternating."""
    if dtype in FLOATS:
        return (7919, 251, -125 + shift, 16)
    if dtype == "u8":
        return (7919, 251, shift, 1)
    if dtype == "bool":
        return (7919, 2, 0, 1)
    return (7919, 251, -125 + shift, 1)


def layouts(dtype, views=True, full=False):
    """(label, T) inputs of one dtype: contiguous specials, 0-dim and zero-size; `views` adds
    transposed, narrowed and expanded ones, `full` select, permute, unsqueeze+expand and a
    large input."""
    sp = specials(dtype)
    yield "contig", T(dtype, [4, 6], sp)
    yield "0dim", T(dtype, [], [sp[9]])
    yield "empty", T(dtype, [0, 3], [])
    if views:
        yield "t", T(dtype, [4, 3], sp[8:20], views=[("t",)])
        yield "narrow", T(dtype, [3, 5], mild(dtype, 15), views=[("narrow", 1, 1, 3)])
        yield "expand", T(dtype, [3, 1], mild(dtype, 3, 1), views=[("expand", 3, 4)])
    if full:
        yield "select", T(dtype, [3, 4], mild(dtype, 12, 2), views=[("select", 1, 2)])
        yield "permute", T(dtype, [2, 3, 4], mild(dtype, 24, 3), views=[("permute", 2, 0, 1)])
        yield "unsq_expand", T(dtype, [5], mild(dtype, 5, 4), views=[("unsqueeze", 0), ("expand", 2, 5)])
        yield "large", T(dtype, LARGE, ramp=ramp(dtype))


# ---------------------------------------------------------------- unary

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "exp2": torch.exp2, "log": torch.log,
    "log2": torch.log2, "log1p": torch.log1p, "expm1": torch.expm1, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "tanh": torch.tanh,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh,
    "cosh": torch.cosh, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh,
    "sigmoid": torch.sigmoid, "relu": torch.relu,
    # PyTorch's vectorized f32/f16/bf16 gelu gives nan at +inf (its scalar path gives inf):
    # the reference is the f64 result rounded to the dtype.
    "gelu": lambda x: F.gelu(x.double()).to(x.dtype) if x.dtype in (torch.float32, torch.float16, torch.bfloat16) else F.gelu(x),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "softplus": F.softplus,
    "erf": torch.erf, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
    "trunc": torch.trunc, "sign": torch.sign, "reciprocal": torch.reciprocal, "square": torch.square,
    # Composite ops (src/ops/composite.rs), at PyTorch's default parameters:
    "mish": F.mish, "softsign": F.softsign, "tanhshrink": F.tanhshrink, "logsigmoid": F.logsigmoid,
    "relu6": F.relu6, "hardtanh": F.hardtanh, "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish,
    "leaky_relu": F.leaky_relu, "elu": F.elu, "celu": F.celu, "selu": F.selu,
    "isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite,
}
# Correctly rounded in IEEE arithmetic (or exact), so kiln must match PyTorch bit for bit.
# (Not sqrt: PyTorch's f64 sqrt is not correctly rounded, sqrt(0.5) is 1 ulp low.)
EXACT_UNARY = {"neg", "abs", "relu", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "square", "relu6", "hardtanh"}


KEEPS_INT = {"neg", "abs", "relu", "floor", "ceil", "round", "trunc", "sign", "square", "relu6", "hardtanh"}


def make_unary():
    w = Writer("unary", "unary elementwise ops")
    for op, fn in UNARY.items():
        tol = "exact" if op in EXACT_UNARY else None
        for dt in ALL:
            # Views are dtype-independent: they are covered for f32 (all), bf16, and the
            # integer dtypes of the ops that keep them (the others go through a float cast).
            views = dt in ("f32", "bf16") or (dt in INTS + ["bool"] and op in KEEPS_INT)
            for label, t in layouts(dt, views=views, full=dt == "f32"):
                w.case(f"{op}/{dt}/{label}", op, fn, [t], tol=tol, sample=SAMPLE if label == "large" else None)
    # The gradient of every differentiable op at its kinks and special points, in f64 (op `NAME_grad`:
    # x.grad after F(x).sum().backward()). The tolerance allows PyTorch's f32 constants in f64
    # kernels (hardsigmoid's 1/6).
    for op, fn in UNARY.items():
        if not fn(torch.tensor([0.5])).dtype.is_floating_point:
            continue  # a predicate (isnan, …): no gradient
        w.case(f"{op}/grad", f"{op}_grad", grad_of(fn), [T("f64", [len(GRAD_POINTS)], GRAD_POINTS)], tol="1e-7 1e-12")
    return w


GRAD_POINTS = [-7.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 25.0]


def grad_of(fn):
    def g(x):
        x = x.detach().requires_grad_(True)
        fn(x).sum().backward()
        return x.grad
    return g


# ---------------------------------------------------------------- binary

def scalar_tensor(x, y, to_float=False):
    """The Python number y as a 0-dim tensor of the dtype it promotes to with tensor x (the
    float dtype for ops computing in floats), converted as a tensor cast does (ints wrap)."""
    dt = torch.result_type(x, y)
    if to_float and not dt.is_floating_point:
        dt = torch.get_default_dtype()
    src = torch.bool if isinstance(y, bool) else torch.int64 if isinstance(y, int) else torch.float64
    return torch.tensor(y, dtype=src).to(dt)


def with_scalar(fn, to_float=False):
    """A PyTorch function taking tensors only, applied to (tensor, Python number) with the
    number taking part in promotion as a wrapped number (kiln's rule for every binary op)."""
    def g(x, y):
        if isinstance(y, torch.Tensor):
            return fn(x, y)
        s = scalar_tensor(x, y, to_float)
        return fn(x.to(s.dtype), s)
    return g


BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "remainder": torch.remainder, "pow": torch.pow, "maximum": with_scalar(torch.maximum),
    "minimum": with_scalar(torch.minimum), "atan2": with_scalar(torch.atan2, to_float=True),
}
EXACT_BINARY = {"add", "sub", "mul", "div", "maximum", "minimum"}

# Operator forms with the number on the left (`2.0 - &x` in Rust).
RBINARY = {
    "add": lambda s, x: s + x, "sub": lambda s, x: s - x, "mul": lambda s, x: s * x,
    # Not `s / x`: PyTorch's __rtruediv__ is reciprocal(x) * s, rounded twice.
    "div": lambda s, x: torch.div(scalar_tensor(x, s).expand(x.shape), x), "remainder": lambda s, x: s % x,
}


def grid_values(dtype, op, side):
    """12 values whose all-pairs grid (a as a column, b as a row) covers the special cases."""
    if dtype in FLOATS:
        return [0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.0, 7.0, BIG[dtype], NAN, INF, -INF]
    if dtype == "bool":
        return [0, 1]
    vals = specials(dtype)[:12]
    if side == "b" and op == "remainder":
        vals = [v for v in vals if v != 0]  # an integer remainder by zero is an error
    if side == "b" and op == "pow":
        vals = [0, 1, 2, 3, 7, 13, 31, 62, 63, 64, 100, 255] if dtype != "u8" else specials("u8")[:12]
    return vals


def safe_rhs(op, dtype, values):
    """Integer right operands PyTorch accepts: no zero divisor, no negative exponent."""
    if dtype not in INTS or op not in ("remainder", "pow"):
        return values
    return [abs(v) % 5 for v in values] if op == "pow" else [v if v != 0 else 3 for v in values]


# Binary-op layouts (transposed, narrowed, expanded, 0-dim, zero-size) are exercised on these
# dtypes: one of each kind (the strided kernels are generic over the element type).
VIEW_DTYPES = ["f32", "bf16", "i64", "bool"]

PROMOTIONS = [
    ("i64", "f32"), ("f32", "i32"), ("u8", "f64"), ("i32", "f16"), ("bf16", "i64"),
    ("f16", "f32"), ("bf16", "f16"), ("f64", "bf16"), ("u8", "i64"), ("i32", "i64"),
    ("u8", "i32"), ("bool", "i32"), ("u8", "bool"), ("bool", "f16"),
]


def binary_cases(w, op, fn, tol):
    for dt in ALL:
        a = grid_values(dt, op, "a")
        b = grid_values(dt, op, "b")
        w.case(f"{op}/{dt}/grid", op, fn, [T(dt, [len(a), 1], a), T(dt, [len(b)], b)], tol=tol)
        m = safe_rhs(op, dt, mild(dt, 12, 5))
        if dt not in VIEW_DTYPES:
            continue
        w.case(f"{op}/{dt}/t+contig", op, fn, [T(dt, [4, 3], mild(dt, 12), views=[("t",)]), T(dt, [3, 4], m)], tol=tol)
        w.case(f"{op}/{dt}/narrow+expand", op, fn,
               [T(dt, [3, 6], mild(dt, 18, 1), views=[("narrow", 1, 2, 4)]),
                T(dt, [1, 4], m[:4], views=[("expand", 3, 4)])], tol=tol)
        w.case(f"{op}/{dt}/0dim", op, fn, [T(dt, [2, 3], mild(dt, 6, 2)), T(dt, [], [m[1]])], tol=tol)
        w.case(f"{op}/{dt}/empty", op, fn, [T(dt, [0, 3], []), T(dt, [3], m[:3])], tol=tol)
    for dt in ALL:
        m = safe_rhs(op, dt, mild(dt, 12, 5))
        for kind, s in (("int", 3), ("float", 0.1), ("bool", True)):
            w.case(f"{op}/{dt}/scalar_{kind}", op, fn, [T(dt, [2, 3], mild(dt, 6, 3)), S(s)], tol=tol)
        if op in RBINARY:
            for kind, s in (("int", 3), ("float", 2.5)):
                w.case(f"{op}/{dt}/lhs_scalar_{kind}", op, RBINARY[op], [S(s), T(dt, [2, 3], m[6:])], tol=tol)
    for da, db in PROMOTIONS:
        w.case(f"{op}/{da}+{db}/promote", op, fn, [T(da, [2, 3], mild(da, 6, 1)), T(db, [3], [2, 3, 1] if db != "bool" else [1, 0, 1])], tol=tol)
    for da, db in (("i64", "f64"), ("f32", "f64"), ("u8", "i64"), ("bool", "f64"), ("f16", "i64")):
        w.case(f"{op}/{da}+0dim_{db}/promote", op, fn, [T(da, [2, 3], mild(da, 6, 1)), T(db, [], [2])], tol=tol)
    w.case(f"{op}/0dim_f64+0dim_i32/promote", op, fn, [T("f64", [], [2.5]), T("i32", [], [3])], tol=tol)
    w.case(f"{op}/u8/scalar_int_wraps", op, fn, [T("u8", [4], [0, 1, 200, 255]), S(300)], tol=tol)
    w.case(f"{op}/f16/scalar_float_precise", op, fn, [T("f16", [4], [1.0, 0.1, 1000.0, -3.0]), S(0.1001)], tol=tol)
    for dt in ("f32", "i64"):
        w.case(f"{op}/{dt}/large_bcast", op, fn, [T(dt, LARGE, ramp=ramp(dt)), T(dt, [LARGE[1]], ramp=(7, 5, 1, 1) if op in ("remainder", "pow") and dt in INTS else ramp(dt, 6))],
               tol=tol, sample=SAMPLE)
        w.case(f"{op}/{dt}/large_t", op, fn, [T(dt, LARGE[::-1], ramp=ramp(dt, 3), views=[("t",)]), S(2)], tol=tol, sample=SAMPLE)


def make_binary():
    w = Writer("binary", "binary elementwise ops and clamp")
    for op, fn in BINARY.items():
        binary_cases(w, op, fn, "exact" if op in EXACT_BINARY else None)
    # PyTorch errors that kiln must also raise.
    w.case("remainder/i64/by_zero", "remainder", torch.remainder, [T("i64", [3], [1, 2, 3]), T("i64", [3], [1, 0, 1])])
    w.case("remainder/i32/scalar_zero", "remainder", torch.remainder, [T("i32", [3], [1, 2, 3]), S(0)])
    # A negative integer tensor exponent is not an error in PyTorch (only a scalar one is).
    w.case("pow/i64/negative_tensor_exponent", "pow", torch.pow, [T("i64", [5], [1, 2, 3, -1, -1]), T("i64", [5], [1, -1, 1, -1, -2])])
    w.case("pow/i32/scalar_negative", "pow", torch.pow, [T("i32", [2], [2, 3]), S(-2)])
    w.case("sub/bool/bool", "sub", torch.sub, [T("bool", [2], [1, 0]), T("bool", [2], [1, 1])])
    w.case("add/shapes/no_bcast", "add", torch.add, [T("f32", [2, 3], mild("f32", 6)), T("f32", [4], mild("f32", 4))])
    make_clamp(w)
    make_scalar_conversions(w)
    return w


def make_clamp(w):
    fn = torch.clamp
    for dt in ALL:
        sp = specials(dt)
        lo, hi = ((-1.5, 2.5) if dt in FLOATS else (False, True) if dt == "bool" else (2, 100))
        w.case(f"clamp/{dt}/contig", "clamp", fn, [T(dt, [4, 6], sp), S(lo), S(hi)], tol="exact")
        w.case(f"clamp/{dt}/t", "clamp", fn, [T(dt, [6, 4], sp, views=[("t",)]), S(lo), S(hi)], tol="exact")
        w.case(f"clamp/{dt}/expand", "clamp", fn, [T(dt, [3, 1], mild(dt, 3), views=[("expand", 3, 4)]), S(lo), S(hi)], tol="exact")
        w.case(f"clamp/{dt}/0dim", "clamp", fn, [T(dt, [], [sp[5]]), S(lo), S(hi)], tol="exact")
        w.case(f"clamp/{dt}/empty", "clamp", fn, [T(dt, [0, 2], []), S(lo), S(hi)], tol="exact")
    w.case("clamp/i64/float_bounds", "clamp", fn, [T("i64", [5], [-3, 0, 1, 2, 9]), S(-0.5), S(1.5)], tol="exact")
    w.case("clamp/f32/min_above_max", "clamp", fn, [T("f32", [3], [0.0, 5.0, NAN]), S(2.0), S(1.0)], tol="exact")
    w.case("clamp/u8/int_bounds", "clamp", fn, [T("u8", [4], [0, 3, 100, 255]), S(2), S(200)], tol="exact")
    w.case("clamp/f32/large", "clamp", fn, [T("f32", LARGE, ramp=ramp("f32")), S(-2.0), S(3.25)], tol="exact", sample=SAMPLE)
    # One-bound forms, NaN bounds (NaN everywhere), signed zeros (a value equal to a bound is
    # kept), bounds rounded to f16 first, infinite bounds.
    for op, f in (("clamp_min", torch.clamp_min), ("clamp_max", torch.clamp_max)):
        for dt in ALL:
            sp = specials(dt)
            b = -1.5 if dt in FLOATS else True if dt == "bool" else 7
            w.case(f"{op}/{dt}/contig", op, f, [T(dt, [4, 6], sp), S(b)], tol="exact", names=["x", "bound"])
        w.case(f"{op}/f32/t", op, f, [T("f32", [6, 4], specials("f32"), views=[("t",)]), S(0.5)], tol="exact", names=["x", "bound"])
        w.case(f"{op}/bf16/expand", op, f, [T("bf16", [3, 1], mild("bf16", 3), views=[("expand", 3, 4)]), S(-0.5)], tol="exact", names=["x", "bound"])
        w.case(f"{op}/f32/nan_bound", op, f, [T("f32", [4], [1.0, NAN, -INF, 0.0]), S(NAN)], tol="exact", names=["x", "bound"])
        w.case(f"{op}/i64/float_bound", op, f, [T("i64", [4], [-3, 0, 1, 9]), S(0.5)], tol="exact", names=["x", "bound"])
        w.case(f"{op}/f32/0dim", op, f, [T("f32", [], [2.5]), S(1.0)], tol="exact", names=["x", "bound"])
        w.case(f"{op}/f32/empty", op, f, [T("f32", [0, 2], []), S(1.0)], tol="exact", names=["x", "bound"])
    zs = [-2.0, -0.0, 0.0, 0.5, NAN, 9.0]
    w.case("clamp/f32/nan_min", "clamp", fn, [T("f32", [6], zs), S(NAN), S(1.0)], tol="exact")
    w.case("clamp/f32/nan_max", "clamp", fn, [T("f32", [6], zs), S(0.0), S(NAN)], tol="exact")
    w.case("clamp/f32/zero_bounds", "clamp", fn, [T("f32", [6], zs), S(0.0), S(0.0)], tol="exact")
    w.case("clamp/f32/neg_zero_bounds", "clamp", fn, [T("f32", [6], zs), S(-0.0), S(-0.0)], tol="exact")
    w.case("clamp/f32/inf_bounds", "clamp", fn, [T("f32", [6], zs), S(-INF), S(INF)], tol="exact")
    w.case("clamp/f16/bounds_rounded", "clamp", fn, [T("f16", [3], [0.0999, 0.1, 0.5]), S(0.1), S(1.0)], tol="exact")
    w.case("clamp/f64/min_above_max", "clamp", fn, [T("f64", [4], [-1.0, 0.5, 3.0, NAN]), S(2.0), S(1.0)], tol="exact")
    # Bounds a float dtype cannot hold are errors; so are integer bounds that no value of the
    # dtype could satisfy, while integer bounds past the other side are saturated.
    w.case("clamp/f32/bound_overflow", "clamp", fn, [T("f32", [2], [0.0, 1.0]), S(-1e300), S(1e300)])
    w.case("clamp_min/f16/bound_overflow", "clamp_min", torch.clamp_min, [T("f16", [2], [0.0, 1.0]), S(1e10)], names=["x", "bound"])
    w.case("clamp_max/bf16/bound_overflow", "clamp_max", torch.clamp_max, [T("bf16", [2], [0.0, 1.0]), S(1e300)], names=["x", "bound"])
    big = 2**40
    ints = T("i32", [3], [-3, 0, 9])
    u8s = T("u8", [3], [0, 5, 200])
    for name, op, f, x, bounds in (
        ("clamp/i32/bounds_past_range", "clamp", fn, ints, (-big, big)),
        ("clamp/i32/min_above_range", "clamp", fn, ints, (big, 2 * big)),
        ("clamp/i32/max_below_range", "clamp", fn, ints, (-2 * big, -big)),
        ("clamp/i32/max_past_range", "clamp", fn, ints, (0, big)),
        ("clamp/u8/negative_min", "clamp", fn, u8s, (-1, 3)),
        ("clamp/u8/max_past_range", "clamp", fn, u8s, (0, 300)),
        ("clamp/u8/both_below_range", "clamp", fn, u8s, (-5, -1)),
        ("clamp/i64/max_bound", "clamp", fn, T("i64", [2], [0, 5]), (2**62, 2**63 - 1)),
        ("clamp/i32/bool_bound", "clamp", fn, T("i32", [5], [-3, 0, 1, 2, 9]), (True, 5)),
        ("clamp/bool/int_bounds", "clamp", fn, T("bool", [2], [0, 1]), (0, 1)),
        ("clamp_min/i32/above_range", "clamp_min", torch.clamp_min, ints, (2**31,)),
        ("clamp_min/i32/at_max", "clamp_min", torch.clamp_min, ints, (2**31 - 1,)),
        ("clamp_min/i32/below_range", "clamp_min", torch.clamp_min, ints, (-big,)),
        ("clamp_min/u8/negative", "clamp_min", torch.clamp_min, u8s, (-1,)),
        ("clamp_min/u8/above_range", "clamp_min", torch.clamp_min, u8s, (300,)),
        ("clamp_max/i32/below_range", "clamp_max", torch.clamp_max, ints, (-2**31 - 1,)),
        ("clamp_max/i32/at_min", "clamp_max", torch.clamp_max, ints, (-2**31,)),
        ("clamp_max/u8/negative", "clamp_max", torch.clamp_max, u8s, (-1,)),
        ("clamp_min/bool/float_bound", "clamp_min", torch.clamp_min, T("bool", [2], [0, 1]), (0.5,)),
    ):
        names = ["x", "min", "max"] if op == "clamp" else ["x", "bound"]
        w.case(name, op, f, [x] + [S(b) for b in bounds], tol="exact", names=names)
    # In place: the promoted dtype must be the tensor's own.
    inplace = {"clamp_": lambda x, lo, hi: x.clamp_(lo, hi), "clamp_min_": lambda x, b: x.clamp_min_(b),
               "clamp_max_": lambda x, b: x.clamp_max_(b)}
    w.case("clamp_/f32/t", "clamp_", inplace["clamp_"], [T("f32", [6, 4], specials("f32"), views=[("t",)]), S(-1.5), S(2.5)], tol="exact")
    w.case("clamp_/i32/float_bounds", "clamp_", inplace["clamp_"], [T("i32", [5], [-3, 0, 1, 2, 9]), S(0.5), S(3)])
    w.case("clamp_/i64/narrow", "clamp_", inplace["clamp_"], [T("i64", [3, 5], mild("i64", 15), views=[("narrow", 1, 1, 3)]), S(-2), S(3)], tol="exact")
    w.case("clamp_min_/f64/contig", "clamp_min_", inplace["clamp_min_"], [T("f64", [4, 6], specials("f64")), S(0.5)], tol="exact", names=["x", "bound"])
    w.case("clamp_max_/u8/contig", "clamp_max_", inplace["clamp_max_"], [T("u8", [4, 6], specials("u8")), S(100)], tol="exact", names=["x", "bound"])
    w.case("clamp_max_/i32/max_below_range", "clamp_max_", inplace["clamp_max_"], [ints, S(-big)], names=["x", "bound"])
    make_clamp_tensor_grad(w)


def make_clamp_tensor_grad(w):
    """`torch.clamp` with tensor bounds, forward and the gradients of all three operands, over
    every combination of values below, at and above each other, infinities and NaN: the tie
    rules (a tie splits the gradient in half) are only visible there."""
    vals = [-INF, -1.0, 0.0, 0.5, 1.0, 2.0, INF, NAN]
    grid = [list(c) for c in zip(*itertools.product(vals, repeat=3))]
    pair = [list(c) for c in zip(*itertools.product(vals, repeat=2))]

    def grads(bounds):
        """The clamp with operand 1 (and 2) as the bounds `bounds` names: its result and the
        gradient of every operand for an all-ones output gradient."""
        def run(*ts):
            ts = [t.detach().requires_grad_(True) for t in ts]
            given = iter(ts[1:])
            y = torch.clamp(ts[0], *[next(given) if b in bounds else None for b in ("min", "max")])
            y.backward(torch.ones_like(y))
            return (y.detach(),) + tuple(t.grad for t in ts)
        return run

    w.case("clamp_tensor_grad/f64/grid", "clamp_tensor_grad", grads("min max"), [T("f64", [len(grid[0])], g) for g in grid], tol="exact",
           names=["x", "min", "max"])
    w.case("clamp_tensor_min_grad/f64/grid", "clamp_tensor_min_grad", grads("min"), [T("f64", [len(pair[0])], g) for g in pair],
           tol="exact", names=["x", "min"])
    w.case("clamp_tensor_max_grad/f64/grid", "clamp_tensor_max_grad", grads("max"), [T("f64", [len(pair[0])], g) for g in pair],
           tol="exact", names=["x", "max"])


# Python numbers written into a tensor of each dtype (fill_, full): PyTorch checks that the
# value converts without overflow (c10::checked_convert), where arithmetic operands wrap.
FILL_VALUES = [1e20, -1e20, NAN, INF, 3.7, -0.5, -1.0, -0.0, 255.9, 256.0, 2147483647.5, 2147483648.0,
               -2147483648.5, 256, -1, -255, -256, 2**31, -2**31 - 1, 2**40, 2**63 - 1, True, 70000.0, 65519.0,
               3.5e38, 1e300]


def make_scalar_conversions(w):
    for dt in ALL:
        for i, v in enumerate(FILL_VALUES):
            w.case(f"fill_/{dt}/v{i}", "fill_", lambda x, v: x.fill_(v), [T(dt, [2], [0, 0]), S(v)], tol="exact", names=["x", "value"])
        for i, v in enumerate(FILL_VALUES):
            w.case(f"full/{dt}/v{i}", "full", lambda v, dt=dt: torch.full((2,), v, dtype=DTYPES[dt]), [S(v)],
                   tol="exact", attrs={"dtype": dt}, names=["value"])
    w.case("fill_/f32/t", "fill_", lambda x, v: x.fill_(v), [T("f32", [3, 2], mild("f32", 6), views=[("t",)]), S(2.5)], tol="exact", names=["x", "value"])
    w.case("fill_/i64/0dim", "fill_", lambda x, v: x.fill_(v), [T("i64", [], [4]), S(-7)], tol="exact", names=["x", "value"])
    w.case("fill_/f32/empty", "fill_", lambda x, v: x.fill_(v), [T("f32", [0, 2], []), S(1.0)], tol="exact", names=["x", "value"])


# ---------------------------------------------------------------- comparisons, logical, where

COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
LOGICAL = {"logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor}
# torch.logical_* take tensors only; a number operand is compared by its truth.
LOGICAL_S = {k: with_scalar(f) for k, f in LOGICAL.items()}


def make_compare():
    w = Writer("compare", "comparisons, logical ops, where, masked_fill, equal, allclose")
    for op, fn in list(COMPARE.items()) + list(LOGICAL_S.items()):
        for dt in ALL:
            a, b = grid_values(dt, op, "a"), grid_values(dt, op, "b")
            w.case(f"{op}/{dt}/grid", op, fn, [T(dt, [len(a), 1], a), T(dt, [len(b)], b)])
            for kind, v in (("int", 1), ("float", -0.5), ("bool", True)):
                w.case(f"{op}/{dt}/scalar_{kind}", op, fn, [T(dt, [2, 3], mild(dt, 6, 3)), S(v)])
            if dt not in VIEW_DTYPES:
                continue
            w.case(f"{op}/{dt}/t+contig", op, fn, [T(dt, [4, 3], mild(dt, 12), views=[("t",)]), T(dt, [3, 4], mild(dt, 12, 5))])
            w.case(f"{op}/{dt}/narrow+expand", op, fn,
                   [T(dt, [3, 6], mild(dt, 18, 1), views=[("narrow", 1, 2, 4)]), T(dt, [1, 4], mild(dt, 4, 3), views=[("expand", 3, 4)])])
            w.case(f"{op}/{dt}/0dim", op, fn, [T(dt, [2, 3], mild(dt, 6, 2)), T(dt, [], [mild(dt, 2)[1]])])
            w.case(f"{op}/{dt}/empty", op, fn, [T(dt, [0, 3], []), T(dt, [3], mild(dt, 3))])
        for da, db in PROMOTIONS:
            w.case(f"{op}/{da}+{db}/promote", op, fn, [T(da, [2, 3], mild(da, 6, 1)), T(db, [3], [1, 0, 1] if db == "bool" else [0.5, -1, 2] if db in FLOATS else [1, 0, 2])])
        w.case(f"{op}/i64/scalar_float_between", op, fn, [T("i64", [4], [1, 2, 3, -2]), S(2.5)])
        w.case(f"{op}/u8/scalar_int_out_of_range", op, fn, [T("u8", [3], [0, 44, 255]), S(300)])
        w.case(f"{op}/f32/large_bcast", op, fn, [T("f32", LARGE, ramp=ramp("f32")), T("f32", [LARGE[1]], ramp=ramp("f32", 6))], sample=SAMPLE)
    w.case("eq/shapes/no_bcast", "eq", torch.eq, [T("f32", [2, 3], mild("f32", 6)), T("f32", [4], mild("f32", 4))])
    for dt in ALL:
        for label, t in layouts(dt, full=dt == "f32"):
            w.case(f"logical_not/{dt}/{label}", "logical_not", torch.logical_not, [t], sample=SAMPLE if label == "large" else None)
    make_where(w)
    make_masked_fill(w)
    make_equal(w)
    return w


def cond(shape, shift=0):
    return T("bool", shape, [(i * 5 + shift) % 3 != 0 for i in range(math.prod(shape))])


def make_where(w):
    fn = torch.where
    for dt in ALL:
        w.case(f"where/{dt}/contig", "where", fn, [cond([4, 6]), T(dt, [4, 6], specials(dt)), T(dt, [4, 6], mild(dt, 24))])
        w.case(f"where/{dt}/bcast", "where", fn, [cond([3, 1]), T(dt, [4], mild(dt, 4, 1)), T(dt, [2, 1, 1], mild(dt, 2, 2))])
        w.case(f"where/{dt}/views", "where", fn,
               [T("bool", [4, 3], [(i * 5) % 3 != 0 for i in range(12)], views=[("t",)]),
                T(dt, [3, 6], mild(dt, 18, 3), views=[("narrow", 1, 1, 4)]),
                T(dt, [3, 1], mild(dt, 3, 4), views=[("expand", 3, 4)])])
        w.case(f"where/{dt}/0dim", "where", fn, [T("bool", [], [1]), T(dt, [], [mild(dt, 2)[1]]), T(dt, [], [mild(dt, 3)[2]])])
        w.case(f"where/{dt}/empty", "where", fn, [cond([0, 3]), T(dt, [3], mild(dt, 3)), T(dt, [1], mild(dt, 1))])
        w.case(f"where/{dt}/scalar_y", "where", fn, [cond([2, 3]), T(dt, [2, 3], mild(dt, 6)), S(2.5)])
        w.case(f"where/{dt}/scalar_x_int", "where", fn, [cond([2, 3]), S(7), T(dt, [2, 3], mild(dt, 6))])
    for da, db in PROMOTIONS:
        w.case(f"where/{da}+{db}/promote", "where", fn, [cond([2, 3]), T(da, [2, 3], mild(da, 6, 1)), T(db, [3], mild(db, 3, 2))])
    w.case("where/i64+0dim_f64/promote", "where", fn, [cond([3]), T("i64", [3], [1, 2, 3]), T("f64", [], [0.5])])
    w.case("where/scalars/float_int", "where", fn, [cond([2, 2]), S(1.5), S(0)])
    w.case("where/scalars/int_int", "where", fn, [cond([2, 2]), S(1), S(-4)])
    w.case("where/scalars/bool_bool", "where", fn, [cond([2, 2]), S(True), S(False)])
    # Not recorded: a u8 condition (deprecated in PyTorch, which still accepts it; kiln rejects it).
    w.case("where/shapes/no_bcast", "where", fn, [cond([2, 3]), T("f32", [4], mild("f32", 4)), T("f32", [2, 3], mild("f32", 6))])
    w.case("where/f32/large", "where", fn, [T("bool", LARGE, ramp=(7919, 3, -1, 1)), T("f32", LARGE, ramp=ramp("f32")), S(-1.0)], sample=SAMPLE)
    # A number must fit an integer result dtype; into a float dtype it is rounded (f16: inf).
    c = T("bool", [2], [1, 0])
    w.case("where/i32/scalar_overflow", "where", fn, [c, T("i32", [2], [0, 0]), S(2**40)])
    w.case("where/u8/scalar_wraps", "where", fn, [c, T("u8", [2], [0, 0]), S(-1)])
    w.case("where/u8/scalar_overflow", "where", fn, [c, T("u8", [2], [0, 0]), S(300)])
    w.case("where/f16/scalar_rounds_to_inf", "where", fn, [c, T("f16", [2], [0, 0]), S(1e10)])
    w.case("where/scalars/big_int", "where", fn, [c, S(2**40), S(1)])


def make_masked_fill(w):
    fn = lambda x, m, v: x.masked_fill(m, v)
    fn_ = lambda x, m, v: x.masked_fill_(m, v)
    for dt in ALL:
        vals = (("float", 2.5), ("int", 3), ("bool", True))
        for kind, v in vals:
            w.case(f"masked_fill/{dt}/bcast_{kind}", "masked_fill", fn, [T(dt, [3, 4], mild(dt, 12)), cond([3, 1]), S(v)])
        w.case(f"masked_fill/{dt}/contig_nan", "masked_fill", fn, [T(dt, [4, 6], specials(dt)), cond([4, 6], 1), S(NAN)])
        w.case(f"masked_fill/{dt}/views", "masked_fill", fn,
               [T(dt, [4, 3], mild(dt, 12, 1), views=[("t",)]), T("bool", [6, 4], [(i % 4) == 1 for i in range(24)], views=[("narrow", 0, 2, 3)]), S(-1)])
        w.case(f"masked_fill/{dt}/expanded_x", "masked_fill", fn, [T(dt, [3, 1], mild(dt, 3, 2), views=[("expand", 3, 4)]), cond([4]), S(1)])
        w.case(f"masked_fill/{dt}/0dim", "masked_fill", fn, [T(dt, [], [mild(dt, 2)[1]]), T("bool", [], [1]), S(5)])
        w.case(f"masked_fill/{dt}/empty", "masked_fill", fn, [T(dt, [0, 3], []), cond([3]), S(5)])
        w.case(f"masked_fill_/{dt}/views", "masked_fill_", fn_,
               [T(dt, [4, 3], mild(dt, 12, 1), views=[("t",)]), cond([4], 2), S(7)])
    # Not recorded: masked_fill_ on an expanded tensor (deprecated in PyTorch, an error in kiln).
    w.case("masked_fill/f32/mask_u8", "masked_fill", fn, [T("f32", [3], [1, 2, 3]), T("u8", [3], [1, 0, 1]), S(0.0)])
    w.case("masked_fill/f32/mask_too_big", "masked_fill", fn, [T("f32", [3], [1, 2, 3]), cond([2, 3]), S(0.0)])
    w.case("masked_fill/f32/large", "masked_fill", fn, [T("f32", LARGE, ramp=ramp("f32")), T("bool", [LARGE[1]], ramp=(7919, 2, 0, 1)), S(9.0)], sample=SAMPLE)
    # The value must convert to the dtype without overflow (-1 wraps into u8; 256 does not).
    m = T("bool", [2], [1, 0])
    for dt in ("i64", "i32", "u8", "bool", "f16", "bf16", "f32"):
        for i, v in enumerate((1e20, 2**40, -256, 256, -1, INF, 70000.0, 3.5e38, 3.7)):
            w.case(f"masked_fill/{dt}/value_v{i}", "masked_fill", fn, [T(dt, [2], [0, 0]), m, S(v)])
        w.case(f"masked_fill_/{dt}/value_overflow", "masked_fill_", fn_, [T(dt, [2], [0, 0]), m, S(1e300)])


def make_equal(w):
    eq = lambda a, b: torch.tensor(torch.equal(a, b))
    close = lambda a, b: torch.tensor(torch.allclose(a, b, rtol=1e-3, atol=1e-5))
    pairs = [
        ("same", T("f32", [2, 3], mild("f32", 6)), T("f32", [2, 3], mild("f32", 6))),
        ("diff", T("f32", [2, 3], mild("f32", 6)), T("f32", [2, 3], mild("f32", 6, 1))),
        ("t_vs_contig", T("f32", [3, 2], [1, 2, 3, 4, 5, 6], views=[("t",)]), T("f32", [2, 3], [1, 3, 5, 2, 4, 6])),
        ("nan", T("f32", [2], [1, NAN]), T("f32", [2], [1, NAN])),
        ("inf", T("f64", [3], [1, INF, -INF]), T("f64", [3], [1, INF, -INF])),
        ("inf_sign", T("f64", [2], [1, INF]), T("f64", [2], [1, -INF])),
        ("shapes", T("f32", [2, 3], mild("f32", 6)), T("f32", [3], mild("f32", 3))),
        ("near", T("f32", [3], [1.0, 100.0, 0.0]), T("f32", [3], [1.0005, 100.05, 5e-6])),
        ("far", T("f32", [3], [1.0, 100.0, 0.0]), T("f32", [3], [1.002, 100.0, 0.0])),
        ("i64", T("i64", [3], [1, 2, 3]), T("i64", [3], [1, 2, 3])),
        ("bool", T("bool", [2], [1, 0]), T("bool", [2], [1, 1])),
        ("empty", T("f32", [0, 2], []), T("f32", [0, 2], [])),
        ("0dim", T("f64", [], [2.0]), T("f64", [], [2.0])),
    ]
    for label, a, b in pairs:
        w.case(f"equal/{label}", "equal", eq, [a, b])
        if label != "shapes" and a.dtype != "bool":
            w.case(f"allclose/{label}", "allclose", close, [a, b])
    w.case("allclose/bcast", "allclose", close, [T("f32", [2, 3], [1] * 6), T("f32", [3], [1, 1, 1])])


# ---------------------------------------------------------------- reductions, cumsum, softmax


def with_attrs(fn, attrs):
    """`fn` called with the case's attributes as keyword arguments."""
    return lambda *a: fn(*a, **attrs)


def as_exact(x):
    """x as f64 (floats) or i64 (ints and bools): exact, for comparing elements."""
    return x.double() if x.is_floating_point() else x.long()


def unique_extreme(x, dim, largest):
    """True when each slice along `dim` (all elements for None) has one largest (smallest)
    element, so that the index of argmax/max(dim) is unique (NaN is the extreme; two NaNs tie)."""
    if x.numel() == 0:
        return True
    v = as_exact(x).reshape(-1) if dim is None else as_exact(x)
    d = 0 if dim is None else dim
    if v.dim() == 0:
        return True
    try:
        ext = v.amax(d, keepdim=True) if largest else v.amin(d, keepdim=True)
    except (IndexError, RuntimeError):  # a bad or empty dim: an error case
        return True
    hits = torch.where(torch.isnan(ext), torch.isnan(v), v == ext) if v.is_floating_point() else v == ext
    return bool((hits.sum(d) == 1).all())


def distinct_along(x, dim):
    """True when the elements of each slice along `dim` are distinct (0.0 and -0.0 tie, as do
    two NaNs), so that sort and topk orders are unique."""
    if x.dim() == 0 or x.numel() == 0:
        return True
    s = as_exact(x).sort(dim).values.movedim(dim, -1)
    a, b = s[..., 1:], s[..., :-1]
    same = (a == b) | (torch.isnan(a) & torch.isnan(b)) if s.is_floating_point() else a == b
    return not bool(same.any())


def first(result):
    """The first output of an op returning a tensor or a tuple of tensors."""
    return result[0] if isinstance(result, tuple) else result


def maybe_dims(fn):
    """fn(x) without `dims`, fn(x, dim=dims, keepdim=keepdim) with it."""
    return lambda x, dims=None, keepdim=False: fn(x) if dims is None else fn(x, dim=dims, keepdim=keepdim)


def maybe_dim(fn):
    """fn(x) without `dim`, fn(x, dim, keepdim) with it."""
    return lambda x, dim=None, keepdim=False: fn(x) if dim is None else fn(x, dim, keepdim)


def var_like(fn):
    """var/std over every element, or over `dims`, with `correction`."""
    return lambda x, correction, dims=None, keepdim=False: (
        fn(x, correction=correction) if dims is None else fn(x, dim=dims, correction=correction, keepdim=keepdim))


def max_like(fn):
    """max/min over every element, or along `dim` as (values, indices) (values alone for
    `values_only`)."""
    def g(x, dim=None, keepdim=False, values_only=False):
        if dim is None:
            return fn(x)
        r = fn(x, dim, keepdim)
        return r.values if values_only else (r.values, r.indices)
    return g


REDUCE = {
    # op: (torch function of (x, **attrs), what it reduces over: "dims" a list or every element,
    # "amax" a list, "dim" one dim or every element, "1dim" one dim)
    "sum": (maybe_dims(torch.sum), "dims"),
    "mean": (maybe_dims(torch.mean), "dims"),
    "prod": (maybe_dim(torch.prod), "dim"),
    "amax": (lambda x, dims, keepdim=False: torch.amax(x, dims, keepdim), "amax"),
    "amin": (lambda x, dims, keepdim=False: torch.amin(x, dims, keepdim), "amax"),
    "max": (max_like(torch.max), "dim"),
    "min": (max_like(torch.min), "dim"),
    "argmax": (maybe_dim(torch.argmax), "dim"),
    "argmin": (maybe_dim(torch.argmin), "dim"),
    "all": (maybe_dims(torch.all), "dims"),
    "any": (maybe_dims(torch.any), "dims"),
    "var": (var_like(torch.var), "dims"),
    "std": (var_like(torch.std), "dims"),
    "logsumexp": (lambda x, dims, keepdim=False: torch.logsumexp(x, dims, keepdim), "amax"),
    "cumsum": (lambda x, dim: torch.cumsum(x, dim), "1dim"),
    "softmax": (lambda x, dim, dtype=None: torch.softmax(x, dim, dtype=DTYPES[dtype] if dtype else None), "1dim"),
    "log_softmax": (lambda x, dim, dtype=None: torch.log_softmax(x, dim, dtype=DTYPES[dtype] if dtype else None), "1dim"),
}
# Ops whose result is exact in IEEE arithmetic (or integer): compared exactly.
EXACT_REDUCE = {"amax", "amin", "max", "min", "argmax", "argmin", "all", "any"}
FLOAT_ONLY = {"mean", "var", "std", "softmax", "log_softmax"}


def reduce_inputs(dtype, full):
    """(label, T) inputs of a reduction: specials (NaN, infinities, signed zeros in a [4,6]), a
    transposed one, 0-dim and zero-size; `full` adds narrowed, expanded and permuted (3-D) ones."""
    sp = specials(dtype)
    yield "specials", T(dtype, [4, 6], sp)
    yield "t", T(dtype, [4, 3], mild(dtype, 12), views=[("t",)])
    yield "0dim", T(dtype, [], [sp[9]])
    yield "empty", T(dtype, [0, 3], [])
    if full:
        yield "narrow", T(dtype, [3, 5], mild(dtype, 15, 1), views=[("narrow", 1, 1, 3)])
        yield "expand", T(dtype, [3, 1], mild(dtype, 3, 2), views=[("expand", 3, 4)])
        yield "permute", T(dtype, [2, 3, 4], mild(dtype, 24, 3), views=[("permute", 2, 0, 1)])


def dim_variants(kind, rank, full):
    """The attribute sets of an op of `kind` on an input of `rank` dims."""
    one = [{"dim": 0}, {"dim": -1, "keepdim": True}]
    if kind == "1dim":
        return [{"dim": 0}, {"dim": -1}]
    if kind == "dim":
        return [{}] + one
    lists = [{"dims": [0]}, {"dims": [-1], "keepdim": True}]
    if rank == 3 and full:
        lists += [{"dims": [0, 2]}, {"dims": [2, 0], "keepdim": True}]
    return ([] if kind == "amax" else [{}]) + lists


def label_of(attrs):
    """A short case-name suffix for attributes: `all`, `d0`, `d-1k`, `d0,2`, ..."""
    if not attrs or list(attrs) == ["correction"]:
        return "all"
    d = attrs.get("dims", attrs.get("dim"))
    s = "d" + (",".join(str(x) for x in d) if isinstance(d, list) else str(d))
    return s + ("k" if attrs.get("keepdim") else "")


# Reference precision. kiln accumulates float sums, means, products and cumulative sums in f64
# and rounds once; PyTorch's f32 sums add f32 partial sums (so cancellation leaves a residue:
# 1e-6 - 1e-6 + 20.5 - 20.5 + 100 - 100 gives -1.9e-6) and its f16 products round every step (so
# they underflow). Their references are PyTorch's f64 results rounded to the dtype. f16/bf16
# logsumexp and (log_)softmax: PyTorch rounds intermediates to the dtype (a few ulp off); kiln
# computes in f32 and rounds once, and the reference is PyTorch's f32 result rounded.
WIDE_F64 = {"sum", "mean", "prod", "cumsum"}
WIDE_F32 = {"logsumexp", "softmax", "log_softmax"}


def reference(op, fn):
    """`fn` computed in f64 (or f32) for the ops above, rounded back to the input's dtype."""
    def g(x, **attrs):
        if "dtype" in attrs:  # (log_)softmax with dtype: the cast is the op's own
            return fn(x, **attrs)
        wide = torch.float64 if op in WIDE_F64 and x.dtype in (torch.float32, torch.float16, torch.bfloat16) else \
            torch.float32 if op in WIDE_F32 and x.dtype in (torch.float16, torch.bfloat16) else None
        return fn(x, **attrs) if wide is None else fn(x.to(wide), **attrs).to(x.dtype)
    return g


def reduce_case(w, name, op, t, attrs, **kw):
    fn = reference(op, REDUCE[op][0])
    attrs = dict(attrs)
    x = t.torch()
    # Indices are only recorded where PyTorch's answer is unique.
    if op in ("argmax", "argmin", "max", "min") and "dim" in attrs:
        if not unique_extreme(x, attrs["dim"], op in ("argmax", "max")):
            if op in ("argmax", "argmin"):
                return
            attrs["values_only"] = True
    if op in ("argmax", "argmin") and "dim" not in attrs and not unique_extreme(x, None, op == "argmax"):
        return
    tol = kw.pop("tol", "exact" if op in EXACT_REDUCE else None)
    if kw.get("sample") == "auto":
        kw["sample"] = SAMPLE if first(fn(x, **attrs)).numel() > 1000 else None
    w.case(name, op, with_attrs(fn, attrs), [t], attrs=attrs, tol=tol, **kw)


def make_reduce():
    w = Writer("reduce", "reductions, cumsum, softmax and log_softmax")
    for op, (fn, kind) in REDUCE.items():
        dtypes = FLOATS if op in FLOAT_ONLY else ALL
        for dt in dtypes:
            full = dt in ("f32", "bf16", "i64")
            for label, t in reduce_inputs(dt, full):
                rank = len(t.torch().shape)
                for attrs in dim_variants(kind, rank, full):
                    for corr in ((0, 1) if op in ("var", "std") else (None,)):
                        a = dict(attrs) if corr is None else {**attrs, "correction": corr}
                        suffix = label_of(attrs) + ("" if corr is None else f"/c{corr}")
                        reduce_case(w, f"{op}/{dt}/{label}/{suffix}", op, t, a)
        # Every dim listed (dims=[] means every dim too, as in PyTorch).
        if kind == "dims" or op in ("amax", "amin"):
            t = T("f32", [2, 3], mild("f32", 6))
            extra = {"correction": 1} if op in ("var", "std") else {}
            # For all/any PyTorch reduces no dim there (each element's truth); for the others
            # every dim.
            reduce_case(w, f"{op}/f32/dims_empty_list", op, t, {"dims": [], **extra})
            if op in ("all", "any"):
                reduce_case(w, f"{op}/f32/dims_empty_list_keepdim", op, T("f32", [2, 3], [1.0, 0.0, NAN, -0.0, 2.0, INF]), {"dims": [], "keepdim": True})
                reduce_case(w, f"{op}/u8/dims_empty_list", op, T("u8", [4], [0, 1, 255, 7]), {"dims": []})
                reduce_case(w, f"{op}/bool/dims_empty_list", op, T("bool", [2, 2], [1, 0, 0, 1], views=[("t",)]), {"dims": []})
                reduce_case(w, f"{op}/i64/0dim/dims_empty_list", op, T("i64", [], [3]), {"dims": []})
                reduce_case(w, f"{op}/f32/empty/dims_empty_list", op, T("f32", [0, 3], []), {"dims": []})
            reduce_case(w, f"{op}/f32/dims_every", op, t, {"dims": [1, 0], **extra})
        t = T("f32", [2, 3], mild("f32", 6))
        dims = [2] if kind in ("dims", "amax") else 2
        key = "dims" if kind in ("dims", "amax") else "dim"
        extra = {"correction": 1} if op in ("var", "std") else {}
        reduce_case(w, f"{op}/f32/dim_out_of_range", op, t, {key: dims, **extra})
        if kind in ("dims", "amax"):
            reduce_case(w, f"{op}/f32/dim_repeated", op, t, {"dims": [0, -2], **extra})
        if op in FLOAT_ONLY:
            for dt in INTS + ["bool"]:
                a = {"dim": 0} if kind == "1dim" else {"correction": 1} if op in ("var", "std") else {}
                reduce_case(w, f"{op}/{dt}/rejected", op, T(dt, [3], mild(dt, 3)), a, keep_unsupported=True)
        if op in ("argmax", "argmin"):
            reduce_case(w, f"{op}/bool/rejected", op, T("bool", [3], [0, 1, 0]), {}, keep_unsupported=True)
    # NaN picks and infinities (each slice has one NaN: indices are unique).
    nans = T("f32", [3, 4], [1.0, NAN, 3.0, -2.0, NAN, 0.0, 5.0, 7.0, -1.0, 2.0, -3.0, NAN])
    for op in ("max", "min", "argmax", "argmin"):
        for attrs in ({"dim": 1}, {"dim": 0, "keepdim": True}):
            reduce_case(w, f"{op}/f32/nan/{label_of(attrs)}", op, nans, attrs)
    reduce_case(w, "argmax/f64/nan_all", "argmax", T("f64", [2, 3], [1.0, 2.0, NAN, 9.0, -INF, INF]), {})
    infs = T("f32", [4, 3], [-INF, -INF, -INF, INF, 1.0, 2.0, -INF, 0.0, 1.0, INF, INF, -1.0])
    for op in ("logsumexp", "softmax", "log_softmax", "sum", "amax", "mean"):
        _, kind = REDUCE[op]
        key = "dim" if kind == "1dim" else "dims"
        reduce_case(w, f"{op}/f32/infinities", op, infs, {key: 1 if key == "dim" else [1]})
        reduce_case(w, f"{op}/f64/large_values", op, T("f64", [2, 3], [1000.0, 999.0, -1000.0, 1e300, 1e300, -5.0]),
                    {key: -1 if key == "dim" else [-1]})
    # var/std: corrections above 1, and n <= correction (inf, or nan for one element).
    for op in ("var", "std"):
        for corr in (2, 3, 5):
            reduce_case(w, f"{op}/f64/c{corr}", op, T("f64", [2, 3], [1.0, 2.0, 4.0, 0.5, 0.5, 0.5]), {"dims": [1], "correction": corr})
        reduce_case(w, f"{op}/f32/one_element", op, T("f32", [1], [3.0]), {"correction": 1})
    # Integer overflow wraps (i64 sums and products; u8/i32 promote to i64 first).
    wrap = T("i64", [2, 3], [2**62, 2**62, 3, 2**63 - 1, 1, 5])
    for op in ("sum", "prod", "cumsum"):
        _, kind = REDUCE[op]
        reduce_case(w, f"{op}/i64/wraps", op, wrap, {"dim": 1} if kind != "dims" else {"dims": [1]})
    reduce_case(w, "sum/u8/no_wrap", "sum", T("u8", [4], [200, 200, 255, 1]), {})
    reduce_case(w, "prod/i32/no_wrap", "prod", T("i32", [3], [65536, 65536, 3]), {})
    # f16 sums whose f16 running sum would overflow or lose precision (PyTorch accumulates in f32).
    reduce_case(w, "sum/f16/accumulates_wide", "sum", T("f16", [3], [60000.0, 60000.0, -60000.0]), {})
    reduce_case(w, "cumsum/f16/accumulates_wide", "cumsum", T("f16", [4], [2048.0, 1.0, 1.0, 1.0]), {"dim": 0})
    reduce_case(w, "mean/bf16/accumulates_wide", "mean", T("bf16", [4], [256.0, 1.0, 1.0, 1.0]), {})
    # Zero-size reductions PyTorch defines, and the ones it rejects.
    e = T("f32", [2, 0], [])
    for op in ("sum", "prod", "mean", "all", "any", "logsumexp", "var", "amax", "max", "argmax"):
        fn, kind = REDUCE[op]
        attrs = {"dims": [1]} if kind in ("dims", "amax") else {"dim": 1}
        if op == "var":
            attrs["correction"] = 1
        reduce_case(w, f"{op}/f32/over_empty_dim", op, e, attrs)
        reduce_case(w, f"{op}/f32/along_nonempty_dim", op, e, {**attrs, **({"dims": [0]} if "dims" in attrs else {"dim": 0})})
    for op in ("max", "min", "argmax", "argmin"):
        reduce_case(w, f"{op}/f32/all_of_empty", op, T("f32", [0], []), {})
    # Large inputs (parallel paths): every output value of a row reduction, sampled.
    big = T("f32", LARGE, ramp=ramp("f32"))
    for op, attrs in (("sum", {}), ("sum", {"dims": [1]}), ("sum", {"dims": [0]}), ("mean", {"dims": [0]}),
                      ("amax", {"dims": [1]}), ("var", {"dims": [1], "correction": 1}), ("logsumexp", {"dims": [0]}),
                      ("max", {"dim": 1}), ("any", {"dims": [1]}), ("cumsum", {"dim": 1}), ("cumsum", {"dim": 0}),
                      ("softmax", {"dim": 1}), ("log_softmax", {"dim": 0})):
        reduce_case(w, f"{op}/f32/large/{label_of(attrs)}", op, big, attrs, sample="auto")
    # softmax/log_softmax with `dtype`: the input is cast first (integers and f16 normalized
    # in f32/f64); a non-float dtype is an error.
    for op in ("softmax", "log_softmax"):
        for dt, to, t in (("f32", "f64", T("f32", [2, 3], [1.0, 2.0, 3.0, 0.5, -1.0, 2.0])),
                          ("f32", "f64", T("f32", [4, 6], specials("f32"))),
                          ("f16", "f32", T("f16", [4, 3], mild("f16", 12), views=[("t",)])),
                          ("f64", "f32", T("f64", [2, 3], [1.0, 2.0, 3.0, 0.5, -1.0, 2.0])),
                          ("i64", "f32", T("i64", [3, 4], mild("i64", 12))),
                          ("i32", "f64", T("i32", [3], [1, 2, 3])),
                          ("bool", "f32", T("bool", [2], [1, 0])),
                          ("f32", "f32", T("f32", [0, 3], []))):
            label = "empty" if 0 in t.shape else "t" if t.views else "v"
            label = "specials" if t.values is not None and len(t.values) == 24 else label
            reduce_case(w, f"{op}/{dt}/dtype_{to}/{label}", op, t, {"dim": -1 if label != "t" else 0, "dtype": to})
        reduce_case(w, f"{op}/f32/dtype_i64", op, T("f32", [3], [1.0, 2.0, 3.0]), {"dim": 0, "dtype": "i64"}, keep_unsupported=True)
        reduce_case(w, f"{op}/i64/no_dtype", op, T("i64", [3], [1, 2, 3]), {"dim": 0}, keep_unsupported=True)
    big_t = T("f64", LARGE[::-1], ramp=ramp("f64", 3), views=[("t",)])
    for op, attrs in (("sum", {"dims": [1]}), ("amin", {"dims": [0]}), ("std", {"dims": [1], "correction": 0})):
        reduce_case(w, f"{op}/f64/large_t/{label_of(attrs)}", op, big_t, attrs)
    return w


# ---------------------------------------------------------------- matrix products


def wide(dtype, n, shift=0):
    """n values that are not short binary fractions (floats: k/37 for k in [-50, 50], rounded
    to the dtype), so products and sums round; small integers for integer dtypes."""
    if dtype in FLOATS:
        return [((i * 37 + shift) % 101 - 50) / 37 for i in range(n)]
    if dtype == "u8":
        return [(i * 5 + shift) % 11 for i in range(n)]
    return [(i * 5 + shift) % 11 - 5 for i in range(n)]


def mat(dtype, shape, shift=0, views=()):
    return T(dtype, shape, wide(dtype, math.prod(shape), shift), views=views)


MATMUL = {"matmul": torch.matmul, "mm": torch.mm, "bmm": torch.bmm, "mv": torch.mv, "dot": torch.dot, "outer": torch.outer}
# Per-dtype tolerances: kiln and PyTorch sum in different orders (f32, f64), and f16/bf16 round
# an f32 sum once, so a result within a few units of the last place of the format is right.
MATMUL_TOL = {"f32": "1e-5 1e-5", "f64": "1e-12 1e-12", "f16": "2e-3 2e-3", "bf16": "1.6e-2 1.6e-2"}

# (label, lhs shape, rhs shape): torch.matmul's rules.
MATMUL_SHAPES = [
    ("1d.1d", [5], [5]),
    ("2d.1d", [3, 5], [5]),
    ("1d.2d", [5], [5, 4]),
    ("2d.2d", [3, 5], [5, 4]),
    ("3d.1d", [2, 3, 5], [5]),
    ("1d.3d", [5], [2, 5, 4]),
    ("3d.2d", [2, 3, 5], [5, 4]),
    ("2d.3d", [3, 5], [2, 5, 4]),
    ("bcast", [2, 1, 3, 4], [5, 4, 2]),
    ("4d.4d", [2, 2, 3, 4], [2, 2, 4, 3]),
    ("k1", [3, 1], [1, 4]),
    ("empty_m", [0, 3], [3, 4]),
    ("empty_k", [2, 0], [0, 4]),
    ("empty_batch", [0, 2, 3], [3, 2]),
]


def make_matmul():
    w = Writer("matmul", "matmul, mm, bmm, mv, dot, outer")
    for dt in FLOATS + INTS:
        tol = MATMUL_TOL.get(dt)
        for label, sa, sb in MATMUL_SHAPES:
            if dt not in ("f32", "f64") and label not in ("1d.1d", "2d.1d", "2d.2d", "bcast", "empty_k"):
                continue
            w.case(f"matmul/{dt}/{label}", "matmul", torch.matmul, [mat(dt, sa), mat(dt, sb, 7)], tol=tol)
        # Non-contiguous operands: transposed, narrowed, expanded (stride-0 batch and rows).
        w.case(f"matmul/{dt}/t.t", "matmul", torch.matmul,
               [mat(dt, [5, 3], 1, [("t",)]), mat(dt, [4, 5], 2, [("t",)])], tol=tol)
        w.case(f"matmul/{dt}/narrow", "matmul", torch.matmul,
               [mat(dt, [3, 8], 3, [("narrow", 1, 2, 5)]), mat(dt, [7, 4], 4, [("narrow", 0, 1, 5)])], tol=tol)
        w.case(f"matmul/{dt}/expand_batch", "matmul", torch.matmul,
               [mat(dt, [1, 3, 4], 5, [("expand", 3, 3, 4)]), mat(dt, [3, 4, 2], 6)], tol=tol)
        w.case(f"matmul/{dt}/expand_rows", "matmul", torch.matmul,
               [mat(dt, [1, 4], 5, [("expand", 3, 4)]), mat(dt, [4, 1], 6, [("expand", 4, 3)])], tol=tol)
        w.case(f"matmul/{dt}/permute", "matmul", torch.matmul,
               [mat(dt, [3, 2, 4], 8, [("permute", 1, 0, 2)]), mat(dt, [2, 3, 4], 9, [("transpose", 1, 2)])], tol=tol)
        w.case(f"mm/{dt}/t", "mm", torch.mm, [mat(dt, [3, 2], 1), mat(dt, [4, 2], 2, [("t",)])], tol=tol)
        w.case(f"bmm/{dt}/contig", "bmm", torch.bmm, [mat(dt, [2, 3, 4], 1), mat(dt, [2, 4, 2], 2)], tol=tol)
        w.case(f"bmm/{dt}/t", "bmm", torch.bmm, [mat(dt, [2, 4, 3], 3, [("transpose", 1, 2)]), mat(dt, [2, 4, 2], 4)], tol=tol)
        w.case(f"mv/{dt}/contig", "mv", torch.mv, [mat(dt, [3, 4], 1), mat(dt, [4], 2)], tol=tol)
        w.case(f"mv/{dt}/t_narrow", "mv", torch.mv, [mat(dt, [4, 3], 1, [("t",)]), mat(dt, [8], 2, [("narrow", 0, 3, 4)])], tol=tol)
        w.case(f"dot/{dt}/contig", "dot", torch.dot, [mat(dt, [6], 1), mat(dt, [6], 2)], tol=tol)
        w.case(f"dot/{dt}/strided", "dot", torch.dot, [mat(dt, [2, 6], 1, [("select", 0, 1)]), mat(dt, [6, 2], 2, [("select", 1, 0)])], tol=tol)
        w.case(f"outer/{dt}/contig", "outer", torch.outer, [mat(dt, [3], 1), mat(dt, [4], 2)], tol=tol)
        w.case(f"outer/{dt}/expand", "outer", torch.outer, [mat(dt, [1], 1, [("expand", 3)]), mat(dt, [5], 2, [("narrow", 0, 1, 4)])], tol=tol)
    # Larger products (kiln's blocked and parallel paths), sampled.
    # Ramps of short binary fractions (exact in every float dtype, so are the f32/f64 products).
    for dt, tol in (("f32", "1e-5 1e-5"), ("f64", None), ("bf16", "1.6e-2 1.6e-2"), ("i64", None)):
        r = (lambda s: (37, 101, -50 + s, 64)) if dt in FLOATS else (lambda s: (5, 11, -5 + s, 1))
        w.case(f"matmul/{dt}/large", "matmul", torch.matmul, [T(dt, [64, 130], ramp=r(0)), T(dt, [130, 48], ramp=r(3))], tol=tol, sample=31)
        w.case(f"matmul/{dt}/large_t_batched", "matmul", torch.matmul,
               [T(dt, [3, 70, 33], ramp=r(1), views=[("transpose", 1, 2)]), T(dt, [70, 40], ramp=r(2))], tol=tol, sample=31)
    # Integer products wrap in the element type.
    w.case("matmul/u8/wraps", "matmul", torch.matmul, [T("u8", [2, 3], [200, 100, 7, 255, 255, 1]), T("u8", [3, 2], [3, 1, 2, 255, 9, 4])])
    w.case("matmul/i32/wraps", "matmul", torch.matmul, [T("i32", [1, 2], [2**30, 3]), T("i32", [2, 1], [4, 2**30])])
    w.case("matmul/i64/wraps", "matmul", torch.matmul, [T("i64", [2], [2**62, 3]), T("i64", [2], [4, 2**62])])
    # Special values: NaN and infinities propagate (0 * inf is NaN).
    w.case("matmul/f32/specials", "matmul", torch.matmul,
           [T("f32", [2, 3], [1.0, NAN, 0.0, INF, 1.0, 2.0]), T("f32", [3, 2], [1.0, 2.0, 3.0, 4.0, 0.0, -INF])])
    w.case("dot/f64/inf_times_zero", "dot", torch.dot, [T("f64", [2], [INF, 1.0]), T("f64", [2], [0.0, 1.0])])
    # outer promotes like mul (bool and mixed dtypes work).
    for da, db in (("f32", "i64"), ("bool", "bool"), ("u8", "f16"), ("i32", "bool")):
        w.case(f"outer/{da}+{db}/promote", "outer", torch.outer, [T(da, [3], mild(da, 3)), T(db, [2], mild(db, 2, 1))])
    # Errors: shapes, dims, dtypes.
    f = lambda s, sh=0: T("f32", s, wide("f32", math.prod(s), sh))
    errors = [
        ("matmul", "inner_mismatch", [f([2, 3]), f([4, 5])]),
        ("matmul", "1d_mismatch", [f([3]), f([4])]),
        ("matmul", "0dim", [f([]), f([3])]),
        ("matmul", "batch_mismatch", [f([2, 3, 4]), f([3, 4, 2])]),
        ("matmul", "dtype_mismatch", [f([2, 3]), T("f64", [3, 2], wide("f64", 6))]),
        ("mm", "1d", [f([3]), f([3, 2])]),
        ("mm", "3d", [f([2, 2, 3]), f([3, 2])]),
        ("mm", "inner_mismatch", [f([2, 3]), f([2, 3])]),
        ("bmm", "2d", [f([2, 3]), f([3, 2])]),
        ("bmm", "batch_mismatch", [f([1, 2, 3]), f([2, 3, 2])]),
        ("bmm", "inner_mismatch", [f([2, 2, 3]), f([2, 2, 2])]),
        ("mv", "2d_rhs", [f([2, 3]), f([3, 1])]),
        ("mv", "mismatch", [f([2, 3]), f([2])]),
        ("dot", "length_mismatch", [f([3]), f([4])]),
        ("dot", "2d", [f([1, 3]), f([3])]),
        ("dot", "dtype_mismatch", [f([3]), T("i64", [3], [1, 2, 3])]),
        ("outer", "2d", [f([2, 2]), f([2])]),
    ]
    for op, label, args in errors:
        w.case(f"{op}/f32/{label}", op, MATMUL[op], args)
    for op, a, b in (("matmul", [2, 2], [2, 2]), ("dot", [3], [3])):
        w.case(f"{op}/bool/rejected", op, MATMUL[op], [T("bool", a, mild("bool", math.prod(a))), T("bool", b, mild("bool", math.prod(b)))],
               keep_unsupported=True)
    return w


# ---------------------------------------------------------------- indexing


def idx(shape, values, views=()):
    """An int64 index tensor."""
    return T("i64", shape, values, views=views)


def mask(shape, shift=0, views=()):
    return T("bool", shape, [(i * 5 + shift) % 3 != 0 for i in range(math.prod(shape))], views=views)


def entries_fn(spec):
    """The `entries` attribute (`t` an index tensor, `-` a whole dim) as a list builder."""
    def build(tensors):
        it = iter(tensors)
        return [next(it) if e == "t" else None for e in spec.split()]
    return build


INDEX_NAMES = {
    "index_select": ["x", "index"], "gather": ["x", "index"], "scatter": ["x", "index", "src"],
    "scatter_add": ["x", "index", "src"], "index_fill": ["x", "index", "value"], "masked_select": ["x", "mask"],
    "nonzero": ["x"], "one_hot": ["x"],
}


def index_names(op, n):
    if op in ("index", "index_put"):
        return ["x"] + [f"i{k}" for k in range(n - 1 - (op == "index_put"))] + (["values"] if op == "index_put" else [])
    return INDEX_NAMES[op]


def icase(w, name, op, fn, args, attrs=None, **kw):
    w.case(name, op, fn, args, attrs=attrs, names=index_names(op, len(args)), tol="exact", **kw)


def aten_index(entries):
    build = entries_fn(entries)
    return lambda x, *ix: torch.ops.aten.index(x, build(ix))


def aten_index_put(entries, accumulate):
    build = entries_fn(entries)
    return lambda x, *a: torch.ops.aten.index_put(x, build(a[:-1]), a[-1], accumulate)


def make_index():
    w = Writer("index", "index_select, gather, scatter, scatter_add, index_fill, masked_select, nonzero, one_hot, index, index_put")
    for dt in ALL:
        x = T(dt, [4, 6], specials(dt))              # NaN, infinities, signed zeros move unchanged
        xt = T(dt, [6, 4], specials(dt), views=[("t",)])
        x0 = T(dt, [], [specials(dt)[9]])
        full = dt in ("f32", "i64", "bool")
        # index_select
        for d, ix in ((0, idx([3], [3, 0, 3])), (1, idx([4], [5, 0, 2, 2])), (-1, idx([0], []))):
            icase(w, f"index_select/{dt}/d{d}/n{len(ix.values)}", "index_select", lambda x, i, d=d: x.index_select(d, i), [x, ix], {"dim": d})
        if full:
            icase(w, f"index_select/{dt}/t_x/strided_index", "index_select", lambda x, i: x.index_select(1, i),
                  [xt, idx([3, 2], [1, 9, 0, 9, 3, 9], views=[("select", 1, 0)])], {"dim": 1})
            icase(w, f"index_select/{dt}/0dim", "index_select", lambda x, i: x.index_select(0, i), [x0, idx([1], [0])], {"dim": 0})
        # gather
        gi = idx([2, 3], [3, 0, 1, 2, 2, 0])
        icase(w, f"gather/{dt}/d0", "gather", lambda x, i: torch.gather(x, 0, i), [x, gi], {"dim": 0})
        icase(w, f"gather/{dt}/d1", "gather", lambda x, i: torch.gather(x, 1, i),
              [x, idx([3, 5], [5, 0, 0, 1, 4, 2, 3, 3, 3, 1, 0, 5, 4, 2, 1])], {"dim": 1})
        if full:
            icase(w, f"gather/{dt}/t_x/expanded_index", "gather", lambda x, i: torch.gather(x, -1, i),
                  [xt, idx([1, 3], [5, 1, 2], views=[("expand", 4, 3)])], {"dim": -1})
            icase(w, f"gather/{dt}/0dim", "gather", lambda x, i: torch.gather(x, 0, i), [x0, idx([], [0])], {"dim": 0})
            icase(w, f"gather/{dt}/empty_index", "gather", lambda x, i: torch.gather(x, 1, i), [x, idx([2, 0], [])], {"dim": 1})
        # scatter (no repeated target within a slice: PyTorch leaves the winner unspecified)
        src = T(dt, [3, 5], mild(dt, 15, 2))
        si = idx([2, 4], [3, 0, 1, 2, 1, 3, 2, 0])
        icase(w, f"scatter/{dt}/d0", "scatter", lambda x, i, s: torch.scatter(x, 0, i, s), [x, si, src], {"dim": 0})
        icase(w, f"scatter/{dt}/d1", "scatter", lambda x, i, s: torch.scatter(x, 1, i, s), [x, idx([3, 2], [5, 0, 1, 4, 2, 3]), src], {"dim": 1})
        for kind, v in (("float", 2.5), ("int", 3), ("bool", True)):
            icase(w, f"scatter/{dt}/value_{kind}", "scatter", lambda x, i, v: torch.scatter(x, 1, i, v), [x, idx([2, 2], [4, 0, 1, 5]), S(v)], {"dim": 1})
        if full:
            icase(w, f"scatter/{dt}/views", "scatter", lambda x, i, s: torch.scatter(x, 0, i, s),
                  [xt, idx([4, 2], [0, 1, 3, 2, 2, 0, 1, 3], views=[("t",)]), T(dt, [1, 5], mild(dt, 5, 3), views=[("expand", 3, 5)])],
                  {"dim": 0})
            icase(w, f"scatter/{dt}/0dim", "scatter", lambda x, i, s: torch.scatter(x, 0, i, s), [x0, idx([], [0]), T(dt, [], [specials(dt)[3]])], {"dim": 0})
        # scatter_add: repeated targets add up (exact values, so the order of additions does not matter)
        xm = T(dt, [3, 4], mild(dt, 12, 1))
        add_i = idx([3, 3], [0, 0, 3, 1, 1, 1, 2, 0, 2])
        icase(w, f"scatter_add/{dt}/d1_repeated", "scatter_add", lambda x, i, s: torch.scatter_add(x, 1, i, s), [xm, add_i, src], {"dim": 1})
        icase(w, f"scatter_add/{dt}/d0_repeated", "scatter_add", lambda x, i, s: torch.scatter_add(x, 0, i, s),
              [xm, idx([2, 4], [2, 2, 0, 1, 2, 0, 0, 1]), src], {"dim": 0})
        if full:
            icase(w, f"scatter_add/{dt}/views", "scatter_add", lambda x, i, s: torch.scatter_add(x, -1, i, s),
                  [T(dt, [4, 3], mild(dt, 12, 2), views=[("t",)]), idx([1, 4], [3, 3, 0, 1], views=[("expand", 3, 4)]),
                   T(dt, [3, 5], mild(dt, 15, 4), views=[("narrow", 1, 1, 4)])], {"dim": -1})
        # index_fill (negative indices count from the end)
        # Not recorded: a float value out of an integer dtype's range (-1.5 into uint8), which
        # PyTorch rejects ("value cannot be converted to type uint8_t without overflow") and kiln
        # converts. An int value wraps in both.
        for kind, v in (("float", -1.5 if dt != "u8" else 2.5), ("int", 7 if dt != "u8" else -1), ("bool", False)):
            icase(w, f"index_fill/{dt}/value_{kind}", "index_fill", lambda x, i, v: x.index_fill(1, i, v), [x, idx([3], [0, -1, 2]), S(v)], {"dim": 1})
        icase(w, f"index_fill/{dt}/d0_special", "index_fill", lambda x, i, v: x.index_fill(0, i, v), [xt, idx([2], [2, 0]), S(NAN if dt in FLOATS else -2)], {"dim": 0})
        if full:
            icase(w, f"index_fill/{dt}/0dim", "index_fill", lambda x, i, v: x.index_fill(0, i, v), [x0, idx([1], [0]), S(1)], {"dim": 0})
        # masked_select (the mask broadcasts with x, and x with the mask)
        icase(w, f"masked_select/{dt}/same_shape", "masked_select", torch.masked_select, [x, mask([4, 6])])
        icase(w, f"masked_select/{dt}/bcast", "masked_select", torch.masked_select, [xt, mask([6])])
        if full:
            icase(w, f"masked_select/{dt}/bcast_x", "masked_select", torch.masked_select,
                  [T(dt, [3], mild(dt, 3), views=[("unsqueeze", 1)]), mask([4, 3], 1, views=[("t",)])])
            icase(w, f"masked_select/{dt}/0dim", "masked_select", torch.masked_select, [x0, T("bool", [], [1])])
            icase(w, f"masked_select/{dt}/empty", "masked_select", torch.masked_select, [T(dt, [0, 3], []), mask([3])])
        # nonzero (NaN is nonzero, -0.0 is zero)
        icase(w, f"nonzero/{dt}/specials", "nonzero", torch.nonzero, [x])
        icase(w, f"nonzero/{dt}/t", "nonzero", torch.nonzero, [xt])
        if full:
            icase(w, f"nonzero/{dt}/permute", "nonzero", torch.nonzero, [T(dt, [2, 3, 4], mild(dt, 24, 1), views=[("permute", 2, 0, 1)])])
            icase(w, f"nonzero/{dt}/0dim", "nonzero", torch.nonzero, [x0])
            icase(w, f"nonzero/{dt}/0dim_zero", "nonzero", torch.nonzero, [T(dt, [], [0])])
            icase(w, f"nonzero/{dt}/empty", "nonzero", torch.nonzero, [T(dt, [0, 3], [])])
        # advanced indexing
        for entries, ixs, label in (
            ("t", [idx([3], [3, -1, 0])], "one"),
            ("t t", [idx([2, 1], [0, 3]), idx([3], [5, -6, 1])], "bcast_pair"),
            ("- t", [idx([2, 2], [1, 0, 5, 5])], "second_dim"),
            ("t", [mask([4])], "bool_rows"),
            ("t", [mask([4, 6], 1)], "bool_full"),
        ):
            icase(w, f"index/{dt}/{label}", "index", aten_index(entries), [x] + ixs, {"entries": entries})
        if full:
            x3 = T(dt, [2, 3, 4], mild(dt, 24, 2))
            for entries, ixs, label in (
                ("t - t", [idx([2], [1, 0]), idx([2, 1], [3, -4])], "separated"),
                ("- t t", [idx([2], [2, 0]), idx([2], [1, 3])], "adjacent"),
                ("- - t", [idx([], [2])], "0dim_index"),
                ("t", [T("i32", [2], [1, 0])], "i32_index"),
                ("- t", [mask([3], 2)], "bool_second"),
                ("t", [idx([0], [])], "empty_index"),
            ):
                icase(w, f"index/{dt}/3d_{label}", "index", aten_index(entries), [x3] + ixs, {"entries": entries})
            icase(w, f"index/{dt}/t_x_t_index", "index", aten_index("- t"), [xt, idx([3, 2], [0, 5, 1, 2, 3, 3], views=[("t",)])], {"entries": "- t"})
        # index_put (without accumulate only distinct targets; with it, repeats add up)
        vals = T(dt, [3], mild(dt, 3, 5))
        for acc in (False, True):
            a = {"entries": "t t", "accumulate": acc}
            icase(w, f"index_put/{dt}/pair/acc{int(acc)}", "index_put", aten_index_put("t t", acc),
                  [xm, idx([3], [0, 2, -1]), idx([3], [1, 3, 0]), vals], a)
            icase(w, f"index_put/{dt}/bcast_values/acc{int(acc)}", "index_put", aten_index_put("- t", acc),
                  [xm, idx([2], [3, 1]), T(dt, [3, 1], mild(dt, 3, 6))], {"entries": "- t", "accumulate": acc})
            icase(w, f"index_put/{dt}/bool/acc{int(acc)}", "index_put", aten_index_put("t", acc),
                  [xm, mask([3, 4], 2), T(dt, [], [mild(dt, 2, 7)[1]])], {"entries": "t", "accumulate": acc})
        icase(w, f"index_put/{dt}/repeated/acc1", "index_put", aten_index_put("t -", True),
              [xm, idx([4], [1, 0, 1, 1]), T(dt, [4, 4], mild(dt, 16, 8))], {"entries": "t -", "accumulate": True})
        if full:
            icase(w, f"index_put/{dt}/views/acc0", "index_put", aten_index_put("- t", False),
                  [T(dt, [4, 3], mild(dt, 12, 2), views=[("t",)]), idx([2], [3, 0]), T(dt, [2, 1], mild(dt, 2, 3), views=[("expand", 2, 3), ("t",)])],
                  {"entries": "- t", "accumulate": False})
    # one_hot
    oh = lambda n: (lambda x: F.one_hot(x, n))
    for n, ix, label in ((-1, idx([5], [0, 3, 1, 3, 2]), "infer"), (6, idx([2, 3], [5, 0, 1, 2, 0, 0]), "2d"),
                         (4, idx([], [2]), "0dim"), (3, idx([0], []), "empty"), (4, idx([3, 2], [0, 3, 1, 2, 3, 0], views=[("t",)]), "t"),
                         (0, idx([0], []), "empty_zero_classes")):
        icase(w, f"one_hot/i64/{label}", "one_hot", oh(n), [ix], {"num_classes": n})
    # Errors: index values out of range, negative where PyTorch rejects them, shapes, dtypes.
    x = T("f32", [3, 4], mild("f32", 12))
    errors = [
        ("index_select", lambda x, i: x.index_select(0, i), [x, idx([2], [0, 3])], {"dim": 0}, "out_of_range"),
        ("index_select", lambda x, i: x.index_select(1, i), [x, idx([1], [-1])], {"dim": 1}, "negative"),
        ("index_select", lambda x, i: x.index_select(1, i), [x, idx([1, 1], [0])], {"dim": 1}, "2d_index"),
        ("index_select", lambda x, i: x.index_select(2, i), [x, idx([1], [0])], {"dim": 2}, "dim_out_of_range"),
        ("gather", lambda x, i: torch.gather(x, 1, i), [x, idx([1, 2], [0, 4])], {"dim": 1}, "out_of_range"),
        ("gather", lambda x, i: torch.gather(x, 1, i), [x, idx([1, 1], [-1])], {"dim": 1}, "negative"),
        ("gather", lambda x, i: torch.gather(x, 0, i), [x, idx([1, 5], [0] * 5)], {"dim": 0}, "index_too_big"),
        ("gather", lambda x, i: torch.gather(x, 0, i), [x, idx([2], [0, 1])], {"dim": 0}, "ndim_mismatch"),
        # Not recorded: int32 indices for gather, scatter, scatter_add and index_select, which
        # PyTorch accepts and kiln rejects (it takes int64 only).
        ("scatter", lambda x, i, s: torch.scatter(x, 1, i, s), [x, idx([1, 1], [4]), T("f32", [1, 1], [1])], {"dim": 1}, "out_of_range"),
        ("scatter", lambda x, i, s: torch.scatter(x, 1, i, s), [x, idx([1, 1], [0]), T("f64", [1, 1], [1])], {"dim": 1}, "src_dtype"),
        ("scatter", lambda x, i, s: torch.scatter(x, 1, i, s), [x, idx([1, 2], [0, 1]), T("f32", [1, 1], [1])], {"dim": 1}, "index_bigger_than_src"),
        ("scatter", lambda x, i, v: torch.scatter(x, 1, i, v), [x, idx([1, 1], [-1]), S(1.0)], {"dim": 1}, "value_negative"),
        ("scatter_add", lambda x, i, s: torch.scatter_add(x, 0, i, s), [x, idx([1, 1], [3]), T("f32", [1, 1], [1])], {"dim": 0}, "out_of_range"),
        ("scatter_add", lambda x, i, s: torch.scatter_add(x, 0, i, s), [x, idx([2], [0, 1]), T("f32", [2], [1, 1])], {"dim": 0}, "ndim_mismatch"),
        ("index_fill", lambda x, i, v: x.index_fill(0, i, v), [x, idx([1], [-4]), S(1.0)], {"dim": 0}, "out_of_range"),
        ("index_fill", lambda x, i, v: x.index_fill(0, i, v), [x, T("i32", [1], [0]), S(1.0)], {"dim": 0}, "i32_index"),
        ("masked_select", torch.masked_select, [x, mask([3])], None, "mask_shape"),
        ("masked_select", torch.masked_select, [x, T("u8", [4], [1, 0, 1, 0])], None, "u8_mask"),
        ("index", aten_index("t"), [x, idx([2], [0, 3])], {"entries": "t"}, "out_of_range"),
        ("index", aten_index("t"), [x, idx([1], [-4])], {"entries": "t"}, "negative_out_of_range"),
        ("index", aten_index("t t t"), [x, idx([1], [0]), idx([1], [0]), idx([1], [0])], {"entries": "t t t"}, "too_many"),
        ("index", aten_index("t t"), [x, idx([2], [0, 1]), idx([3], [0, 1, 2])], {"entries": "t t"}, "no_bcast"),
        ("index", aten_index("t"), [x, mask([4])], {"entries": "t"}, "mask_shape"),
        ("index", aten_index("t"), [x, T("f32", [1], [0])], {"entries": "t"}, "float_index"),
        ("index_put", aten_index_put("t", False), [x, idx([1], [3]), T("f32", [1], [1])], {"entries": "t", "accumulate": False}, "out_of_range"),
        ("index_put", aten_index_put("- t", True), [x, idx([2], [0, 1]), T("f32", [3], [1, 2, 3])], {"entries": "- t", "accumulate": True}, "values_shape"),
        ("index_put", aten_index_put("t", False), [x, idx([1], [0]), T("f64", [1], [1])], {"entries": "t", "accumulate": False}, "values_dtype"),
        ("one_hot", oh(3), [idx([2], [1, 3])], {"num_classes": 3}, "class_too_big"),
        ("one_hot", oh(-1), [idx([2], [1, -1])], {"num_classes": -1}, "negative_class"),
        ("one_hot", oh(-1), [idx([0], [])], {"num_classes": -1}, "empty_infer"),
        ("one_hot", oh(3), [T("i32", [2], [1, 0])], {"num_classes": 3}, "i32_input"),
    ]
    for op, fn, args, attrs, label in errors:
        icase(w, f"{op}/errors/{label}", op, fn, args, attrs)
    return w


# ---------------------------------------------------------------- sort, argsort, topk


def sort_fn(dim, descending, stable, values_only):
    def f(x):
        r = torch.sort(x, dim=dim, descending=descending, stable=stable)
        return r.values if values_only else (r.values, r.indices)
    return f


def topk_fn(k, dim, largest, sorted, values_only):
    def f(x):
        v, i = torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
        if not sorted:
            # The order is unspecified: recorded by position in the input (kiln's test
            # reorders its result the same way).
            order = i.argsort(dim=dim) if i.dim() else i
            v, i = (v.gather(dim, order), i.gather(dim, order)) if i.dim() else (v, i)
        return v if values_only else (v, i)
    return f


def sort_inputs(dtype, full):
    """Inputs of sort and topk: specials (NaN, infinities, 0.0 and -0.0 tie), a transposed one
    with distinct values, 0-dim, zero-size; `full` adds expanded (all tied), narrowed and
    permuted ones."""
    sp = specials(dtype)
    yield "specials", T(dtype, [4, 6], sp)
    yield "t", T(dtype, [5, 3], mild(dtype, 15, 2), views=[("t",)])
    yield "0dim", T(dtype, [], [sp[9]])
    yield "empty", T(dtype, [0, 3], [])
    if full:
        yield "expand", T(dtype, [3, 1], mild(dtype, 3, 2), views=[("expand", 3, 4)])
        yield "narrow", T(dtype, [3, 7], mild(dtype, 21, 1), views=[("narrow", 1, 2, 5)])
        yield "permute", T(dtype, [2, 3, 4], mild(dtype, 24, 3), views=[("permute", 2, 0, 1)])


def sort_case(w, name, op, t, attrs, **kw):
    """A sort, argsort or topk case; results PyTorch leaves open (the order of ties without
    `stable`) are recorded as values only or not at all."""
    x = t.torch()
    a = dict(attrs)
    dim = a["dim"]
    try:
        unique = distinct_along(x, dim)
    except IndexError:  # a dim out of range: an error case
        unique = True
    if op in ("sort", "argsort") and not a["stable"] and not unique:
        if op == "argsort":
            return
        a["values_only"] = True
    if op == "topk" and not unique:
        if not a["sorted"]:
            return  # which of the tied elements is picked is unspecified
        a["values_only"] = True
    vo = a.get("values_only", False)
    if op == "sort":
        fn = sort_fn(dim, a["descending"], a["stable"], vo)
    elif op == "argsort":
        fn = lambda x: torch.argsort(x, dim=dim, descending=a["descending"], stable=a["stable"])
    else:
        fn = topk_fn(a["k"], dim, a["largest"], a["sorted"], vo)
    w.case(name, op, fn, [t], attrs=a, tol="exact", **kw)


def make_sort():
    w = Writer("sort", "sort, argsort, topk")
    for dt in ALL:
        full = dt in ("f32", "f16", "i64", "bool")
        for label, t in sort_inputs(dt, full):
            rank = len(t.torch().shape)
            dims = [0, -1] if rank < 3 else [0, 1, 2]
            for dim in dims:
                for desc in (False, True):
                    for stable in ((True, False) if dim == -1 or rank == 0 else (True,)):
                        sort_case(w, f"sort/{dt}/{label}/d{dim}{'/desc' if desc else ''}{'/stable' if stable else ''}",
                                  "sort", t, {"dim": dim, "descending": desc, "stable": stable})
                    sort_case(w, f"argsort/{dt}/{label}/d{dim}{'/desc' if desc else ''}", "argsort", t,
                              {"dim": dim, "descending": desc, "stable": True})
            size = lambda d: 1 if rank == 0 else t.torch().shape[d]
            if dt == "bool":
                continue  # PyTorch has no bool topk on CPU (kiln has one)
            for dim in dims[-2:] if rank else [0]:
                for k in sorted({0, 1, min(3, size(dim)), size(dim)}):
                    for largest in (True, False):
                        for srt in (True, False):
                            sort_case(w, f"topk/{dt}/{label}/d{dim}/k{k}{'/largest' if largest else '/smallest'}{'' if srt else '/unsorted'}",
                                      "topk", t, {"k": k, "dim": dim, "largest": largest, "sorted": srt})
    # Ties: stable orders (ascending and descending keep equal values in input order), NaNs.
    ties = T("f32", [2, 6], [1.0, NAN, -0.0, 1.0, 0.0, NAN, 2.0, 2.0, -INF, 2.0, INF, -INF])
    for desc in (False, True):
        sort_case(w, f"sort/f32/ties{'/desc' if desc else ''}", "sort", ties, {"dim": 1, "descending": desc, "stable": True})
        sort_case(w, f"argsort/f32/ties{'/desc' if desc else ''}", "argsort", ties, {"dim": 1, "descending": desc, "stable": True})
        sort_case(w, f"topk/f32/ties/{'largest' if not desc else 'smallest'}", "topk", ties, {"k": 3, "dim": 1, "largest": not desc, "sorted": True})
    ities = T("i32", [9], [3, -1, 3, 0, -1, 3, 7, 0, -(2**31)])
    for desc in (False, True):
        sort_case(w, f"sort/i32/ties{'/desc' if desc else ''}", "sort", ities, {"dim": 0, "descending": desc, "stable": True})
    # NaN is the largest value for topk too (distinct values otherwise).
    nan_row = T("f64", [7], [0.5, NAN, -INF, 3.0, INF, -2.0, 1e300])
    for largest in (True, False):
        for srt in (True, False):
            sort_case(w, f"topk/f64/nan/{'largest' if largest else 'smallest'}{'' if srt else '/unsorted'}", "topk", nan_row,
                      {"k": 3, "dim": 0, "largest": largest, "sorted": srt})
    # Large inputs (parallel paths), sampled; ramps repeat values, so only stable sorts and sorted topk values.
    big = T("f32", LARGE, ramp=ramp("f32"))
    for dim in (0, 1):
        for desc in (False, True):
            sort_case(w, f"sort/f32/large/d{dim}{'/desc' if desc else ''}", "sort", big, {"dim": dim, "descending": desc, "stable": True}, sample=SAMPLE)
        sort_case(w, f"topk/f32/large/d{dim}", "topk", big, {"k": 5, "dim": dim, "largest": True, "sorted": True}, sample=7)
    distinct = T("i64", [200, 257], ramp=(7919, 200 * 257, 0, 1))  # a permutation of 0..n-1
    sort_case(w, "sort/i64/large_distinct/d-1/unstable", "sort", distinct, {"dim": -1, "descending": False, "stable": False}, sample=SAMPLE)
    sort_case(w, "topk/i64/large_distinct/unsorted", "topk", distinct, {"k": 4, "dim": 0, "largest": False, "sorted": False}, sample=7)
    # Errors.
    x = T("f32", [2, 3], mild("f32", 6))
    sort_case(w, "sort/f32/dim_out_of_range", "sort", x, {"dim": 2, "descending": False, "stable": True})
    sort_case(w, "argsort/f32/dim_out_of_range", "argsort", x, {"dim": -3, "descending": False, "stable": True})
    sort_case(w, "topk/f32/dim_out_of_range", "topk", x, {"k": 1, "dim": 2, "largest": True, "sorted": True})
    sort_case(w, "topk/f32/k_too_large", "topk", x, {"k": 4, "dim": 1, "largest": True, "sorted": True})
    sort_case(w, "topk/f32/0dim_k2", "topk", T("f32", [], [1.0]), {"k": 2, "dim": 0, "largest": True, "sorted": True})
    return w


# ---------------------------------------------------------------- bitwise ops

BITWISE = {"bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
           "bitwise_left_shift": torch.bitwise_left_shift, "bitwise_right_shift": torch.bitwise_right_shift}
# Operator forms with the number on the left (`3 & &x`, `1 << &x` in Rust).
RBITWISE = {"bitwise_and": lambda s, x: s & x, "bitwise_or": lambda s, x: s | x, "bitwise_xor": lambda s, x: s ^ x,
            "bitwise_left_shift": lambda s, x: s << x, "bitwise_right_shift": lambda s, x: s >> x}
SHIFTS = ("bitwise_left_shift", "bitwise_right_shift")


def shift_amounts(dtype):
    """12 shift amounts: small, at and past the width, negative (u8: past 127 reads as negative)."""
    if dtype == "u8":
        return [0, 1, 2, 7, 8, 9, 31, 63, 64, 127, 128, 255]
    if dtype == "i32":
        return [0, 1, 2, 7, 30, 31, 32, 33, 40, 63, 64, -1]
    if dtype == "i64":
        return [0, 1, 2, 7, 31, 32, 62, 63, 64, 65, 100, -1]
    return [0, 1]


def make_bitwise():
    w = Writer("bitwise", "bitwise_and, bitwise_or, bitwise_xor, bitwise_not, bitwise_left_shift, bitwise_right_shift")
    # Every "not implemented" error here (floats; shifts of two bools) is one kiln raises too.
    case = lambda *a, **kw: w.case(*a, keep_unsupported=True, **kw)
    for op, fn in BITWISE.items():
        for dt in ALL:
            a = specials(dt)[:12] if dt != "bool" else [0, 1]
            b = shift_amounts(dt) if op in SHIFTS else a
            case(f"{op}/{dt}/grid", op, fn, [T(dt, [len(a), 1], a), T(dt, [len(b)], b)], tol="exact")
            if dt in FLOATS and dt != "f32":
                continue
            m = [abs(v) % 9 for v in mild(dt, 12, 5)] if op in SHIFTS and dt != "bool" else mild(dt, 12, 5)
            case(f"{op}/{dt}/t+contig", op, fn, [T(dt, [4, 3], mild(dt, 12), views=[("t",)]), T(dt, [3, 4], m)], tol="exact")
            case(f"{op}/{dt}/narrow+expand", op, fn,
                 [T(dt, [3, 6], mild(dt, 18, 1), views=[("narrow", 1, 2, 4)]), T(dt, [1, 4], m[:4], views=[("expand", 3, 4)])], tol="exact")
            case(f"{op}/{dt}/0dim", op, fn, [T(dt, [2, 3], mild(dt, 6, 2)), T(dt, [], [m[1]])], tol="exact")
            case(f"{op}/{dt}/empty", op, fn, [T(dt, [0, 3], []), T(dt, [3], m[:3])], tol="exact")
            for kind, v in (("int", 3), ("neg", -1), ("big", 2**40 + 5), ("bool", True), ("float", 2.5)):
                case(f"{op}/{dt}/scalar_{kind}", op, fn, [T(dt, [2, 3], mild(dt, 6, 3)), S(v)], tol="exact")
            for kind, v in (("int", 3), ("bool", True)):
                case(f"{op}/{dt}/lhs_scalar_{kind}", op, RBITWISE[op], [S(v), T(dt, [2, 3], [abs(x) % 9 for x in mild(dt, 6, 4)] if dt != "bool" else mild(dt, 6, 4))], tol="exact")
        for da, db in (("i32", "i64"), ("u8", "bool"), ("bool", "i32"), ("u8", "i64"), ("i32", "u8"), ("u8", "i32"), ("i32", "f32"), ("bool", "f64")):
            vb = [1, 0, 1] if db == "bool" else [1, 2, 3]
            case(f"{op}/{da}+{db}/promote", op, fn, [T(da, [2, 3], mild(da, 6, 1)), T(db, [3], vb)], tol="exact")
        case(f"{op}/u8+0dim_i64/promote", op, fn, [T("u8", [2, 3], mild("u8", 6, 1)), T("i64", [], [3])], tol="exact")
        case(f"{op}/i32+0dim_i64_big/promote", op, fn, [T("i32", [2], [1, 5]), T("i64", [], [40])], tol="exact")
        case(f"{op}/i64/large_bcast", op, fn, [T("i64", LARGE, ramp=ramp("i64")), T("i64", [LARGE[1]], ramp=(7, 9, 0, 1))], tol="exact", sample=SAMPLE)
        case(f"{op}/u8/large_t", op, fn, [T("u8", LARGE[::-1], ramp=ramp("u8", 3), views=[("t",)]), S(2)], tol="exact", sample=SAMPLE)
    case("bitwise_and/shapes/no_bcast", "bitwise_and", torch.bitwise_and, [T("i64", [2, 3], mild("i64", 6)), T("i64", [2], [1, 2])])
    for dt in ALL:
        for label, t in layouts(dt, views=dt in INTS + ["bool"], full=dt == "i32"):
            case(f"bitwise_not/{dt}/{label}", "bitwise_not", torch.bitwise_not, [t], tol="exact", sample=SAMPLE if label == "large" else None)
    # In place: the result keeps the tensor's dtype (an i64 result is written into i32; nothing
    # is written into Bool but a Bool result).
    ip = {op: (lambda op: lambda x, y: getattr(x, op + "_")(y))(op) for op in BITWISE}
    for op in BITWISE:
        case(f"{op}_/i32+i64", op + "_", ip[op], [T("i32", [4], [-8, 1, 5, 2**30]), T("i64", [4], [1, 3, 2**40, 1])], tol="exact")
        case(f"{op}_/i64/t", op + "_", ip[op], [T("i64", [4, 3], mild("i64", 12), views=[("t",)]), S(2)], tol="exact")
    for op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        case(f"{op}_/u8+bool", op + "_", ip[op], [T("u8", [3], [5, 6, 255]), T("bool", [3], [1, 0, 1])], tol="exact")
        case(f"{op}_/bool+bool", op + "_", ip[op], [T("bool", [4], [0, 1, 0, 1]), T("bool", [4], [0, 0, 1, 1])], tol="exact")
        case(f"{op}_/bool+i32", op + "_", ip[op], [T("bool", [2], [0, 1]), T("i32", [2], [1, 2])])
        case(f"{op}_/i32+f32", op + "_", ip[op], [T("i32", [2], [0, 1]), T("f32", [2], [1, 2])])
    case("bitwise_not_/i64/t", "bitwise_not_", lambda x: x.bitwise_not_(), [T("i64", [4, 3], mild("i64", 12), views=[("t",)])], tol="exact")
    case("bitwise_not_/bool/narrow", "bitwise_not_", lambda x: x.bitwise_not_(), [T("bool", [3, 5], mild("bool", 15), views=[("narrow", 1, 1, 3)])], tol="exact")
    return w


# ---------------------------------------------------------------- main

SETS = {"unary": make_unary, "binary": make_binary, "compare": make_compare, "reduce": make_reduce,
        "matmul": make_matmul, "index": make_index, "sort": make_sort, "bitwise": make_bitwise}


def main():
    torch.set_num_threads(1)
    args = sys.argv[1:]
    keep = "--keep" in args
    wanted = [a for a in args if a != "--keep"] or list(SETS)
    for name in wanted:
        SETS[name]().write(keep=keep)


if __name__ == "__main__":
    main()
