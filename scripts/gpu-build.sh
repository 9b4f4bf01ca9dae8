#!/usr/bin/env bash
# Builds the CUDA test and bench binaries in release, copies them into .gpu-bin/ at the repo
# root, and packs them stripped into .gpu-bin.tar.xz (~30 MB: the kiln test binaries share most
# of their code, which xz's 64 MiB window finds; the folder itself is ~350 MB, more than the
# device tool carries), for scripts/gpu-check.sh to run on a GPU machine with no Rust toolchain.
# Usage: scripts/gpu-build.sh        (CARGO_TARGET_DIR is honoured)
# See docs/cuda.md.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=.gpu-bin
rm -rf "$OUT_DIR" "$OUT_DIR.tar.xz"
mkdir -p "$OUT_DIR"
export CARGO_INCREMENTAL=0

# cargo prints one JSON message per artifact; keep the executables of the targets we asked for.
collect() {
    python3 -c '
import json, shutil, sys
out = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t = m["target"]
    if "bin" in t["kind"]:
        continue  # a program a test runs (kiln-dist-check), not a test
    name = t["name"].replace("-", "_")
    if "bench" in t["kind"]:
        name = "bench_" + name
    elif "lib" in t["kind"]:
        name = name + "_unit"
    shutil.copy2(m["executable"], out + "/" + name)
    print("  " + out + "/" + name)
' "$OUT_DIR"
}

echo "building CUDA test binaries (release)…"
cargo test --release --no-run --message-format=json \
    -p kiln-runtime --lib --test cuda_runtime \
    -p kiln-codegen --test cuda_codegen --test cuda_strided --test cuda_reduce --test cuda_index --test cuda_pool \
    --test cuda_im2col --test cuda_sort --test cuda_fused --test cuda_philox --test cuda_vector --test cuda_fused_reduce | collect
# Separately, so that `--lib` does not pull in kiln's own (CPU) unit tests.
cargo test --release --no-run --message-format=json -p kiln --test cuda_tensors --test cuda_reductions --test cuda_indexing \
    --test cuda_matmul --test cuda_cat --test cuda_pooling --test cuda_conv --test cuda_nccl --test cuda_sorting --test cuda_compile --test cuda_data_parallel \
    --test cuda_pinned | collect
echo "building CUDA bench binaries (release)…"
cargo bench --no-run --message-format=json -p kiln-codegen --bench cuda_elementwise | collect

for b in "$OUT_DIR"/*; do
    case "$(basename "$b")" in
        bench_*) "$b" >/dev/null 2>&1 || { echo "error: $b does not start" >&2; exit 1; } ;;
        *) "$b" --list >/dev/null || { echo "error: $b --list failed" >&2; exit 1; } ;;
    esac
done
echo "glibc needed: $(objdump -T "$OUT_DIR"/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -1)"
strip "$OUT_DIR"/*
du -sh "$OUT_DIR"
echo "packing $OUT_DIR.tar.xz (xz -9, one thread so the window spans the binaries; ~3 min)…"
tar cf - "$OUT_DIR" | xz -9 -T1 > "$OUT_DIR.tar.xz"
du -sh "$OUT_DIR.tar.xz"
