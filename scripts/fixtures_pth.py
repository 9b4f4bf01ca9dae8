#!/usr/bin/env python3
"""Write small PyTorch checkpoints (`torch.save`) for tests/pth.rs, and the values they hold.

Usage:  python3 scripts/fixtures_pth.py      (needs torch and safetensors)

The archives differ byte for byte from run to run (torch.save writes a random serialization
id into each); the values they hold do not.

Writes into tests/fixtures/pth/:

  sequential.pth    the state dict of Conv2d(1, 2, 3) -> BatchNorm2d(2) -> ReLU -> Flatten ->
                    Linear(8, 3) (nn.Sequential, keys `0.weight` … `4.bias`; BatchNorm's
                    running stats after two training batches, `1.num_batches_tracked` int64)
  tensors.pth       one tensor of every dtype kiln has (f32 f64 f16 bf16 i64 i32 u8 bool) with
                    edge values (NaN, ±inf, -0.0, subnormals, extremes), a transposed
                    (non-contiguous) tensor, a strided slice, two tensors sharing one storage at
                    different offsets, the same tensor under two names (tied weights), a 0-dim
                    and an empty tensor, a stride-0 (expanded) tensor and a negative view
                    (torch's neg bit)
  tensors_legacy.pth  the same dict in the legacy format (`_use_new_zipfile_serialization=False`)
  tensors_protocol4.pth  the same dict with `pickle_protocol=4` (FRAME, MEMOIZE, STACK_GLOBAL…)
  tensors_legacy_protocol4.pth  the legacy format with `pickle_protocol=4` (framed pickles)
  checkpoint.pth    a training checkpoint: {"epoch": 3, "model": Linear's state dict,
                    "optimizer": Adam's state dict after one step, "params": {"w": nn.Parameter},
                    "note": "run 1", "best": 0.25, "none": None, "flags": [True, False]}
  int8.pth, int16.pth, uint16.pth   a tensor of a dtype kiln lacks (uint16 goes through
                    torch's `_rebuild_tensor_v3`)
  whole_module.pth  `torch.save(model)` of a module class defined here (`__main__.Net`)
  missing_storage.pth  a state dict {"a", "b"} whose archive lacks b's storage entry (data/1)
  expected.safetensors   every tensor of tensors.pth made contiguous under its own name,
                    sequential.pth's tensors under `sequential/` plus an input batch
                    (`sequential/input`) and the network's output in eval mode
                    (`sequential/output`), and checkpoint.pth's tensors under their flattened
                    names (`model.weight`, `optimizer.state.0.exp_avg`, …)
"""
import os
import zipfile

import torch
import torch.nn as nn
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "pth")


def sequential():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(8, 3))
    net.train()
    with torch.no_grad():
        for _ in range(2):
            net(torch.randn(4, 1, 4, 4))
    net.eval()
    x = torch.randn(2, 1, 4, 4)
    with torch.no_grad():
        y = net(x)
    return net, x, y


def tensors():
    f32 = torch.tensor([1.5, -0.0, float("nan"), float("inf"), -float("inf"), 1e-45, 3.4028235e38, -2.0])
    f64 = torch.tensor([[0.1, -1e-310], [1.7976931348623157e308, float("nan")]], dtype=torch.float64)
    f16 = torch.tensor([1.0, -0.0, 6e-8, 65504.0, float("inf"), float("nan")], dtype=torch.float16)
    bf16 = torch.tensor([1.0, -3.0, 1e-40, 3.0e38, -float("inf")], dtype=torch.bfloat16)
    i64 = torch.tensor([0, -1, 2**63 - 1, -(2**63), 123456789012345], dtype=torch.int64)
    i32 = torch.tensor([[0, -1], [2**31 - 1, -(2**31)]], dtype=torch.int32)
    u8 = torch.tensor([0, 1, 127, 128, 255], dtype=torch.uint8)
    boolean = torch.tensor([[True, False, True], [False, False, True]])
    base = torch.arange(12, dtype=torch.float32) * 0.5
    matrix = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    tied = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    return {
        "f32": f32,
        "f64": f64,
        "f16": f16,
        "bf16": bf16,
        "i64": i64,
        "i32": i32,
        "u8": u8,
        "bool": boolean,
        "transposed": matrix.t(),
        "strided": base[1::3],
        "shared_a": base[2:5],
        "shared_b": base[6:10].view(2, 2),
        "tied_a": tied,
        "tied_b": tied,
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3, dtype=torch.int64),
        "expanded": torch.tensor([7, 8], dtype=torch.int32).view(2, 1).expand(2, 3),
        "negative": torch._neg_view(torch.tensor([1.0, -2.0, 0.0])),
    }


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x):
        return self.fc(x)


def checkpoint():
    torch.manual_seed(1)
    model = nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(4, 3)).square().mean().backward()
    opt.step()
    w = nn.Parameter(torch.tensor([0.5, -0.5]))
    return {
        "epoch": 3,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "params": {"w": w},
        "note": "run 1",
        "best": 0.25,
        "none": None,
        "flags": [True, False],
    }


def flatten(prefix, obj, out):
    if isinstance(obj, torch.Tensor):
        out[prefix] = obj.detach().clone().contiguous()
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(obj, (list, tuple)) and any(isinstance(v, (dict, list, tuple, torch.Tensor)) for v in obj):
        for i, v in enumerate(obj):
            flatten(f"{prefix}.{i}", v, out)


def main():
    os.makedirs(OUT, exist_ok=True)
    path = lambda name: os.path.join(OUT, name)
    expected = {}

    net, x, y = sequential()
    torch.save(net.state_dict(), path("sequential.pth"))
    for k, v in net.state_dict().items():
        expected[f"sequential/{k}"] = v.clone()
    expected["sequential/input"] = x
    expected["sequential/output"] = y

    ts = tensors()
    torch.save(ts, path("tensors.pth"))
    torch.save(ts, path("tensors_legacy.pth"), _use_new_zipfile_serialization=False)
    torch.save(ts, path("tensors_protocol4.pth"), pickle_protocol=4)
    torch.save(ts, path("tensors_legacy_protocol4.pth"), _use_new_zipfile_serialization=False, pickle_protocol=4)
    for k, v in ts.items():
        # `resolve_neg` applies the neg bit; `clone` gives each tensor its own storage.
        expected[k] = v.resolve_neg().clone().contiguous()

    ck = checkpoint()
    torch.save(ck, path("checkpoint.pth"))
    flatten("", ck, expected)

    torch.save({"ok": torch.ones(2), "small": torch.tensor([1, -2], dtype=torch.int8)}, path("int8.pth"))
    torch.save({"short": torch.tensor([1, -2], dtype=torch.int16)}, path("int16.pth"))
    torch.save({"wide": torch.tensor([1, 60000], dtype=torch.uint16)}, path("uint16.pth"))

    torch.manual_seed(2)
    torch.save(Net(), path("whole_module.pth"))

    torch.save({"a": torch.ones(2), "b": torch.zeros(3)}, path("missing_storage.pth"))
    with zipfile.ZipFile(path("missing_storage.pth")) as z:
        entries = [(info, z.read(info)) for info in z.infolist() if info.filename != "missing_storage/data/1"]
    with zipfile.ZipFile(path("missing_storage.pth"), "w") as z:
        for info, data in entries:
            z.writestr(info, data)

    save_file(expected, path("expected.safetensors"))
    for name in sorted(os.listdir(OUT)):
        print(f"{name}: {os.path.getsize(path(name))} bytes")


if __name__ == "__main__":
    main()
