#!/usr/bin/env python3
"""Generate kiln's PyTorch reference fixtures (tests/fixtures/*.txt).

Usage:  python3 scripts/make_fixtures.py [SET ...]      (default: every set)
        sets: unary binary compare

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

Values: integers in decimal; bool as 0/1; floats as Python's repr of the value (exact for
f64, f16 and bf16; for f32 the shortest decimal that gives the value back when parsed as
f64 and rounded to f32), with `nan`, `inf`, `-inf`, and `-0.0` for negative zero.
Values of a tensor always are the exact values of its dtype (inputs were rounded by PyTorch
when the case was made).
"""

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

    def case(self, name, op, fn, args, tol=None, sample=None):
        """Runs `fn(*torch args)` and records the case; `sample` = every-K output sampling."""
        assert name not in self.names, f"duplicate case {name}"
        self.names.add(name)
        names = ["x", "other", "third"] if len(args) <= 3 else [f"a{i}" for i in range(len(args))]
        names = {"where": ["condition", "x", "other"], "clamp": ["x", "min", "max"],
                 "masked_fill": ["x", "mask", "value"], "masked_fill_": ["x", "mask", "value"]}.get(op, names)
        body = [f"case {name}", f"op {op}"]
        for n, a in zip(names, args):
            body += a.lines(n)
        try:
            result = fn(*[a.torch() for a in args])
        except (RuntimeError, TypeError, ValueError, ZeroDivisionError) as e:
            if is_unsupported(e):
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

    def write(self):
        os.makedirs(OUT_DIR, exist_ok=True)
        path = os.path.join(OUT_DIR, self.name + ".txt")
        with open(path, "w") as f:
            f.write("\n".join(self.lines))
        print(f"{path}: {len(self.names) - self.skipped} cases ({self.skipped} skipped as unsupported by PyTorch CPU), {os.path.getsize(path)} bytes")


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
    "sigmoid": torch.sigmoid, "relu": torch.relu,
    # PyTorch's vectorized f32/f16/bf16 gelu gives nan at +inf (its scalar path gives inf):
    # the reference is the f64 result rounded to the dtype.
    "gelu": lambda x: F.gelu(x.double()).to(x.dtype) if x.dtype in (torch.float32, torch.float16, torch.bfloat16) else F.gelu(x),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "softplus": F.softplus,
    "erf": torch.erf, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
    "trunc": torch.trunc, "sign": torch.sign, "reciprocal": torch.reciprocal, "square": torch.square,
}
# Correctly rounded in IEEE arithmetic (or exact), so kiln must match PyTorch bit for bit.
# (Not sqrt: PyTorch's f64 sqrt is not correctly rounded, sqrt(0.5) is 1 ulp low.)
EXACT_UNARY = {"neg", "abs", "relu", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "square"}


KEEPS_INT = {"neg", "abs", "relu", "floor", "ceil", "round", "trunc", "sign", "square"}


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
    return w


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


# ---------------------------------------------------------------- main

SETS = {"unary": make_unary, "binary": make_binary, "compare": make_compare}


def main():
    torch.set_num_threads(1)
    wanted = sys.argv[1:] or list(SETS)
    for name in wanted:
        SETS[name]().write()


if __name__ == "__main__":
    main()
