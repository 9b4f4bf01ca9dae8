"""Writes tests/fixtures/autocast.txt: the dtype each op returns under
`torch.autocast("cpu", dtype)` (bf16 and f16) for the inputs given.

Line format: `<autocast dtype> <op> <input dtypes joined by ','> -> <result dtype or error>`,
dtypes as kiln spells them (f32, f64, bf16, f16). Inputs are small random tensors; only the
result's dtype is recorded. Run: python3 scripts/fixtures_autocast.py (torch 2.x).
"""
import os
import torch
import torch.nn.functional as F

torch.manual_seed(0)
NAMES = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16", torch.float16: "f16"}
DT = {v: k for k, v in NAMES.items()}


def r(*shape, dt="f32"):
    return torch.randn(*shape, dtype=DT[dt])


def cases():
    """(op name, input dtypes, fn(*dtypes) -> tensor)."""
    out = []

    def add(name, dts, fn):
        for d in dts:
            out.append((name, d, fn))

    two = [("f32", "f32"), ("bf16", "f32"), ("f64", "f64"), ("f16", "f32")]
    add("matmul", two, lambda a, b: r(3, 4, dt=a) @ r(4, 5, dt=b))
    add("mm", two, lambda a, b: torch.mm(r(3, 4, dt=a), r(4, 5, dt=b)))
    add("bmm", two, lambda a, b: torch.bmm(r(2, 3, 4, dt=a), r(2, 4, 5, dt=b)))
    add("linear", [("f32", "f32", "f32"), ("bf16", "f32", "f32"), ("f64", "f64", "f64")],
        lambda x, w, b: F.linear(r(3, 4, dt=x), r(5, 4, dt=w), r(5, dt=b)))
    add("addmm", [("f32", "f32", "f32")], lambda c, a, b: torch.addmm(r(3, 5, dt=c), r(3, 4, dt=a), r(4, 5, dt=b)))
    add("baddbmm", [("f32", "f32", "f32")],
        lambda c, a, b: torch.baddbmm(r(2, 3, 5, dt=c), r(2, 3, 4, dt=a), r(2, 4, 5, dt=b)))
    add("einsum", [("f32", "f32")], lambda a, b: torch.einsum("ij,jk->ik", r(3, 4, dt=a), r(4, 5, dt=b)))
    add("conv1d", [("f32", "f32", "f32")], lambda x, w, b: F.conv1d(r(1, 2, 8, dt=x), r(3, 2, 3, dt=w), r(3, dt=b)))
    add("conv2d", [("f32", "f32", "f32"), ("f64", "f64", "f64")],
        lambda x, w, b: F.conv2d(r(1, 2, 6, 6, dt=x), r(3, 2, 3, 3, dt=w), r(3, dt=b)))
    add("conv3d", [("f32", "f32", "f32")],
        lambda x, w, b: F.conv3d(r(1, 2, 4, 4, 4, dt=x), r(3, 2, 3, 3, 3, dt=w), r(3, dt=b)))
    add("conv_transpose1d", [("f32", "f32", "f32")],
        lambda x, w, b: F.conv_transpose1d(r(1, 2, 5, dt=x), r(2, 3, 3, dt=w), r(3, dt=b)))
    add("conv_transpose2d", [("f32", "f32", "f32")],
        lambda x, w, b: F.conv_transpose2d(r(1, 2, 4, 4, dt=x), r(2, 3, 3, 3, dt=w), r(3, dt=b)))
    add("scaled_dot_product_attention", [("f32", "f32", "f32")],
        lambda q, k, v: F.scaled_dot_product_attention(r(1, 2, 4, 8, dt=q), r(1, 2, 4, 8, dt=k), r(1, 2, 4, 8, dt=v)))
    add("prelu", [("f32", "f32")], lambda x, w: F.prelu(r(2, 3, dt=x), r(3, dt=w).abs()))
    lossy = [("f32", "f32"), ("bf16", "f32"), ("bf16", "bf16")]
    add("mse_loss", lossy, lambda a, b: F.mse_loss(r(4, 3, dt=a), r(4, 3, dt=b)))
    add("l1_loss", lossy, lambda a, b: F.l1_loss(r(4, 3, dt=a), r(4, 3, dt=b)))
    add("smooth_l1_loss", lossy, lambda a, b: F.smooth_l1_loss(r(4, 3, dt=a), r(4, 3, dt=b)))
    add("huber_loss", lossy, lambda a, b: F.huber_loss(r(4, 3, dt=a), r(4, 3, dt=b)))
    add("cross_entropy", [("f32",), ("bf16",)], lambda a: F.cross_entropy(r(4, 5, dt=a), torch.tensor([0, 4, 2, 1])))
    add("nll_loss", [("f32",), ("bf16",)], lambda a: F.nll_loss(r(4, 5, dt=a).log_softmax(1), torch.tensor([0, 4, 2, 1])))
    add("binary_cross_entropy_with_logits", lossy,
        lambda a, b: F.binary_cross_entropy_with_logits(r(4, 3, dt=a), r(4, 3, dt=b).sigmoid()))
    add("binary_cross_entropy", [("f32", "f32"), ("bf16", "bf16")],
        lambda a, b: F.binary_cross_entropy(r(4, 3, dt=a).sigmoid(), r(4, 3, dt=b).sigmoid()))
    add("kl_div", lossy, lambda a, b: F.kl_div(r(4, 3, dt=a).log_softmax(1), r(4, 3, dt=b).softmax(1), reduction="batchmean"))
    add("softmax", [("f32",), ("bf16",)], lambda a: F.softmax(r(4, 5, dt=a), dim=1))
    add("log_softmax", [("f32",), ("bf16",)], lambda a: F.log_softmax(r(4, 5, dt=a), dim=1))
    add("sum", [("f32",), ("bf16",)], lambda a: r(4, 5, dt=a).sum())
    add("prod", [("f32",), ("bf16",)], lambda a: r(4, 5, dt=a).prod())
    add("cumsum", [("f32",), ("bf16",)], lambda a: r(4, 5, dt=a).cumsum(1))
    add("exp", [("f32",), ("bf16",)], lambda a: r(4, 5, dt=a).exp())
    add("layer_norm", [("f32",), ("bf16",)], lambda a: F.layer_norm(r(4, 5, dt=a), (5,)))
    add("relu", [("f32",), ("bf16",)], lambda a: F.relu(r(4, 5, dt=a)))
    add("add", [("f32", "f32"), ("bf16", "f32"), ("bf16", "bf16")], lambda a, b: r(4, 5, dt=a) + r(4, 5, dt=b))
    add("cat", [("f32", "f32"), ("bf16", "f32"), ("bf16", "bf16")], lambda a, b: torch.cat([r(2, 5, dt=a), r(3, 5, dt=b)]))
    add("stack", [("f32", "f32"), ("bf16", "f32"), ("bf16", "bf16")], lambda a, b: torch.stack([r(2, 5, dt=a), r(2, 5, dt=b)]))
    add("quantile", [("f32",), ("bf16",)], lambda a: torch.quantile(r(4, 5, dt=a).float() if a != "f32" else r(4, 5, dt=a), 0.3))
    add("cdist", [("f32", "f32"), ("bf16", "bf16")], lambda a, b: torch.cdist(r(3, 4, dt=a), r(2, 4, dt=b)))
    add("trace", [("f32",), ("bf16",)], lambda a: torch.trace(r(4, 4, dt=a)))
    add("max_pool3d", [("f32",), ("bf16",)], lambda a: F.max_pool3d(r(1, 1, 4, 4, 4, dt=a), 2))
    add("avg_pool3d", [("f32",), ("bf16",)], lambda a: F.avg_pool3d(r(1, 1, 4, 4, 4, dt=a), 2))
    add("pad_reflect", [("f32",), ("bf16",)], lambda a: F.pad(r(1, 2, 5, dt=a), (2, 2), mode="reflect"))
    add("pad_replicate", [("f32",), ("bf16",)], lambda a: F.pad(r(1, 2, 5, dt=a), (2, 2), mode="replicate"))
    add("pad_constant", [("f32",), ("bf16",)], lambda a: F.pad(r(1, 2, 5, dt=a), (2, 2)))
    add("addcmul", [("f32", "bf16", "f32")], lambda a, b, c: torch.addcmul(r(3, dt=a), r(3, dt=b), r(3, dt=c)))
    add("dot", [("f32", "f32")], lambda a, b: torch.dot(r(3, dt=a), r(3, dt=b)))
    return out


lines = []
for ac in ["bf16", "f16"]:
    for name, dts, fn in cases():
        try:
            with torch.autocast("cpu", dtype=DT[ac]):
                got = NAMES[fn(*dts).dtype]
        except RuntimeError:
            got = "error"  # e.g. cat of bf16 and f32 under f16 autocast ("prioritize")
        lines.append(f"{ac} {name} {','.join(dts)} -> {got}")
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "autocast.txt")
with open(OUT, "w") as f:
    f.write("# written by scripts/fixtures_autocast.py with torch " + torch.__version__.split("+")[0] + "\n")
    f.write("\n".join(lines) + "\n")
print(f"wrote {OUT}: {len(lines)} lines")
