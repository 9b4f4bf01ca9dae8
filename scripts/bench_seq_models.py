#!/usr/bin/env python3
"""Time benches/seq_models.rs's training steps in PyTorch on the CPU, eager and torch.compile,
with as many threads as kiln uses (KILN_NUM_THREADS, else every core), interleaved round by
round as the Rust bench does.

Usage:  python3 scripts/bench_seq_models.py [transformer|lstm]   (needs torch; torch.compile
        also needs a C++ compiler)

Prints a Markdown table: the median step time of each mode over 11 rounds, after warm-up.
"""
import os
import sys
import time

import torch
from torch import nn


def step_fn(net, x, target):
    opt = torch.optim.AdamW(net.parameters())

    def step():
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), target)
        loss.backward()
        opt.step()
        return loss

    return step


def median_interleaved(fns, reps=11, warm=2):
    times = [[] for _ in fns]
    for r in range(reps + warm):
        for f, t in zip(fns, times):
            s = time.perf_counter()
            f()
            if r >= warm:
                t.append(time.perf_counter() - s)
    return [sorted(t)[len(t) // 2] for t in times]


class LstmOut(nn.Module):
    """nn.LSTM returning its output sequence only (kiln's LSTM::forward)."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.lstm = nn.LSTM(*args, **kwargs)

    def forward(self, x):
        return self.lstm(x)[0]


def cases():
    yield (
        "transformer",
        "TransformerEncoderLayer d256 h4 ff1024, 16×128",
        lambda: nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, batch_first=True),
        (16, 128, 256),
        (16, 128, 256),
    )
    yield (
        "lstm",
        "LSTM 256→256 ×2 layers, 64 steps × batch 32",
        lambda: LstmOut(256, 256, num_layers=2),
        (64, 32, 256),
        (64, 32, 256),
    )


def main():
    threads = int(os.environ.get("KILN_NUM_THREADS", os.cpu_count()))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    wanted = [a for a in sys.argv[1:] if not a.startswith("-")]
    print(f"torch {torch.__version__}, threads: {threads}\n")
    print("| training step (AdamW, MSE) | PyTorch eager | torch.compile | first torch.compile call |")
    print("|---|---|---|---|")
    for name, label, make, x_shape, t_shape in cases():
        if wanted and not any(w in name for w in wanted):
            continue
        x, target = torch.randn(x_shape), torch.randn(t_shape)
        eager_net, compiled_net = make(), make()
        compiled_net.load_state_dict(eager_net.state_dict())
        eager = step_fn(eager_net, x, target)
        compiled = torch.compile(step_fn(compiled_net, x, target))
        cold = time.perf_counter()
        compiled()
        cold = time.perf_counter() - cold
        for _ in range(5):
            compiled()
        t_eager, t_compiled = median_interleaved([eager, compiled])
        print(f"| {label} | {t_eager * 1e3:.1f} ms | {t_compiled * 1e3:.1f} ms | {cold:.1f} s |")


if __name__ == "__main__":
    main()
