"""Writes tests/fixtures/summary.txt for tests/nn_summary.rs with torchinfo (pip install torch
torchinfo): `torchinfo.summary` of the 60-minute blitz's CIFAR-10 Net on a [1, 3, 32, 32] input,
and of a small model with a module of the user's own, a frozen layer and a nested Sequential on
a [3, 4] input, each table between `== name ==` lines (columns: output size, parameters,
trainable)."""

import os
import torch
from torch import nn
from torchinfo import summary

from fixtures_blitz_net import Net

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "summary.txt")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.BatchNorm1d(8)

    def forward(self, x):
        return torch.relu(self.norm(self.fc(x)))


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.block = Block()
        self.head = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
        self.embed.weight.requires_grad_(False)

    def forward(self, x):
        return self.head(self.block(self.embed(x)))


def main():
    cols = ("output_size", "num_params", "trainable")
    parts = []
    for name, model, size in [("blitz", Net(), (1, 3, 32, 32)), ("deep", Deep(), (3, 4))]:
        s = summary(model, input_size=size, col_names=cols, depth=10, verbose=0)
        parts.append(f"== {name} ==\n{s}\n")
    with open(OUT, "w") as f:
        f.write("".join(parts))
    print("".join(parts))


if __name__ == "__main__":
    main()
