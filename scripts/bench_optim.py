"""PyTorch's Adam step on one 2^24-element f32 parameter, for the side-by-side figures in
docs/perf.md (issue 31): the single-tensor loop (PyTorch's CPU default), `foreach=True` and
`fused=True`, with the thread count kiln's bench uses.

    KILN_NUM_THREADS=2 python3 scripts/bench_optim.py

Prints a Markdown table of medians over 9 rounds (the three forms interleaved), after one
warm-up step each (which creates the state)."""

import os
import statistics
import time

import torch

torch.set_num_threads(int(os.environ.get("KILN_NUM_THREADS", "2")))
LEN = 1 << 24


def optimizer(**options):
    p = torch.randn(LEN, requires_grad=True)
    p.grad = torch.randn(LEN)
    opt = torch.optim.Adam([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, **options)
    opt.step()
    return opt


forms = {
    "foreach=False (CPU default)": optimizer(foreach=False),
    "foreach=True": optimizer(foreach=True),
    "fused=True": optimizer(fused=True),
}
times = {name: [] for name in forms}
for _ in range(9):
    for name, opt in forms.items():
        start = time.perf_counter()
        opt.step()
        times[name].append(time.perf_counter() - start)

print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
print("| PyTorch Adam step, 16M f32 | median |")
print("|---|---|")
for name, t in times.items():
    print(f"| {name} | {statistics.median(t) * 1e3:.2f} ms |")
