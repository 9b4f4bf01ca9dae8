"""PyTorch eager on the workloads of issue 31, for the side-by-side figures in docs/perf.md:
the MLP, CIFAR-net and MNIST-example training steps, cross-entropy forward+backward, layer
norm forward, the 11-op GELU chain, and one Adam step in PyTorch's three forms (the
single-tensor loop, its CPU default; `foreach=True`; `fused=True`), with the thread count
kiln's benches use.

    KILN_NUM_THREADS=2 python3 scripts/bench_torch.py [--out FILE]

Prints a Markdown table of medians over 11 rounds, the workloads interleaved round by round,
after two warm-up calls each. With `--out FILE` it also writes them as `key<TAB>milliseconds`
lines, which kiln's dashboard bench reads (`KILN_TORCH_TIMES=FILE cargo bench --all-features
--bench compile`) to check eager kiln against PyTorch eager in its table."""

import argparse
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(int(os.environ.get("KILN_NUM_THREADS", "2")))
torch.manual_seed(0)


def training_step(net, x, y, lr):
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)

    def step():
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()

    return step


mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
cifar = nn.Sequential(
    nn.Conv2d(3, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
)


class MnistNet(nn.Module):
    """PyTorch's MNIST example network (examples/mnist/main.py)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def mnist_step():
    net = MnistNet()
    opt = torch.optim.Adadelta(net.parameters(), lr=1.0)
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))

    def step():
        opt.zero_grad()
        F.nll_loss(net(x), y).backward()
        opt.step()

    return step


logits = torch.randn(8192, 1000, requires_grad=True)
targets = torch.randint(0, 1000, (8192,))
norm = nn.LayerNorm(1024)
rows = torch.randn(8192, 1024)
gx, ga, gb = torch.randn(4096, 4096), torch.randn(4096, 4096), torch.randn(4096)


def cross_entropy():
    logits.grad = None
    F.cross_entropy(logits, targets).backward()


def layer_norm():
    with torch.no_grad():
        norm(rows)


def gelu_chain():
    z = gx * ga + gb
    inner = (z + z * z * z * 0.044715) * 0.7978845608
    return z * 0.5 * (inner.tanh() + 1.0)


def adam(**options):
    p = torch.randn(1 << 24, requires_grad=True)
    p.grad = torch.randn(1 << 24)
    opt = torch.optim.Adam([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, **options)
    return opt.step


# key (as the dashboard bench reads it): (label, workload)
workloads = {
    "mlp": ("MLP 784-512-512-10 step, batch 128", training_step(mlp, torch.randn(128, 784), torch.randint(0, 10, (128,)), 0.01)),
    "cifar": ("CIFAR net step, batch 64", training_step(cifar, torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,)), 0.001)),
    "mnist": ("MNIST example step, batch 64, Adadelta", mnist_step()),
    "cross_entropy": ("cross-entropy fwd+bwd [8192, 1000]", cross_entropy),
    "layer_norm": ("LayerNorm(1024) fwd [8192, 1024]", layer_norm),
    "gelu": ("GELU chain (11 ops) [4096²]", gelu_chain),
    "adam_single": ("Adam 16M f32, single-tensor (CPU default)", adam(foreach=False)),
    "adam_foreach": ("Adam 16M f32, foreach=True", adam(foreach=True)),
    "adam_fused": ("Adam 16M f32, fused=True", adam(fused=True)),
}
parser = argparse.ArgumentParser()
parser.add_argument("--out", help="also write `key<TAB>milliseconds` lines to this file")
args = parser.parse_args()
for _, f in workloads.values():
    f()
    f()
times = {key: [] for key in workloads}
for _ in range(11):
    for name, (_, f) in workloads.items():
        start = time.perf_counter()
        f()
        times[name].append(time.perf_counter() - start)

print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
print("| workload | PyTorch eager |")
print("|---|---|")
for key, t in times.items():
    print(f"| {workloads[key][0]} | {statistics.median(t) * 1e3:.2f} ms |")
if args.out:
    with open(args.out, "w") as out:
        for key, t in times.items():
            out.write(f"{key}\t{statistics.median(t) * 1e3:.4f}\n")
