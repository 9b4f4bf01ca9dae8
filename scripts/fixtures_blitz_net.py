#!/usr/bin/env python3
"""Write the blitz `Net`'s weights and one input/output pair as safetensors fixtures.

Usage:  python3 scripts/fixtures_blitz_net.py      (needs torch and safetensors)

Writes tests/fixtures/blitz_net.safetensors (the state dict PyTorch's `Net` from the 60-minute
blitz, part 4 "Training a classifier", saves with safetensors) and
tests/fixtures/blitz_net_io.safetensors (`input` [2, 3, 32, 32] and PyTorch's `output` [2, 10]).
tests/nn_checkpoint.rs loads both and checks kiln reproduces the output to 1e-5.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main():
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        y = net(x)
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, os.path.join(out, "blitz_net.safetensors"))
    save_file({"input": x, "output": y}, os.path.join(out, "blitz_net_io.safetensors"))
    print(net)


if __name__ == "__main__":
    main()
