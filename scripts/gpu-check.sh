#!/usr/bin/env bash
# Runs the CUDA test and bench binaries built by scripts/gpu-build.sh on a GPU machine (no
# cargo needed) and prints one summary table. Exit status: nonzero if any binary failed.
# Usage: scripts/gpu-check.sh [BIN_DIR]      (default: .gpu-bin, unpacked from .gpu-bin.tar.xz
# by Python's tarfile when only the archive is there)
# Logs go to $OUT/gpu-check/ when $OUT is set, else to a temporary folder. See docs/cuda.md.
set -u
cd "$(dirname "$0")/.."
BIN_DIR=${1:-.gpu-bin}
if [ ! -d "$BIN_DIR" ] && [ -f "$BIN_DIR.tar.xz" ]; then
    echo "unpacking $BIN_DIR.tar.xz"
    python3 -c '
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    t.extractall(".", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
' "$BIN_DIR.tar.xz"
fi
LOG_DIR=${OUT:+$OUT/gpu-check}
LOG_DIR=${LOG_DIR:-$(mktemp -d /tmp/kiln-gpu-check.XXXXXX)}
mkdir -p "$LOG_DIR"
# The kernel cache stays out of $OUT (only a few files may come back from there).
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d /tmp/kiln-kernels.XXXXXX)}
START=$(date +%s)
# The NVRTC compile checks fail instead of skipping when NVRTC does not load.
export KILN_REQUIRE_NVRTC=1

# --- libraries: NVRTC, cuBLAS and NCCL from the Python (torch) environment or a CUDA toolkit --
libdirs=()
# A folder counts when it holds any of the three (ls fails when one glob matches nothing).
add_dir() { [ -d "$1" ] && ls "$1"/libnvrtc.so* "$1"/libcublas.so* "$1"/libnccl.so* 2>/dev/null | grep -q . && libdirs+=("$1"); return 0; }
for py in ${VIRTUAL_ENV:+"$VIRTUAL_ENV/bin/python"} python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    while IFS= read -r d; do add_dir "$d"; done < <(timeout 60 "$py" - <<'PY' 2>/dev/null
import os, site, sys
roots = []
try:
    roots += site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    pass
roots += sys.path
for r in roots:
    for sub in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cublas/lib", "nvidia/nccl/lib", "nvidia/cu12/lib", "torch/lib"):
        p = os.path.join(r, sub)
        if os.path.isdir(p):
            print(p)
PY
)
    break
done
for d in ${CUDA_HOME:+"$CUDA_HOME/lib64"} /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do add_dir "$d"; done
# NCCL: kiln opens libnccl.so.2 itself, by name or where a wheel put it (runtime/src/cuda/nccl/
# library.rs), so no link is needed; this only reports which file is there. Nothing is downloaded
# here (a GPU machine may have no network): without libnccl the NCCL tests print that they skip.
nccl_so=$(for d in ${libdirs[@]+"${libdirs[@]}"} /usr/lib/x86_64-linux-gnu; do ls "$d"/libnccl.so.2 2>/dev/null; done | head -1)
if [ ${#libdirs[@]} -gt 0 ]; then
    uniq_dirs=$(printf '%s\n' "${libdirs[@]}" | awk '!seen[$0]++' | paste -sd: -)
    export LD_LIBRARY_PATH="$uniq_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

echo "== kiln gpu-check $(date -u +%FT%TZ)"
gpu_line=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -1)
echo "GPU: ${gpu_line:-none (nvidia-smi not available or no device)}"
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
echo "libnccl: ${nccl_so:-not found (pip install nvidia-nccl-cu13 on the machine; the NCCL tests will skip)}"
echo "logs: $LOG_DIR"

if ! ls "$BIN_DIR"/* >/dev/null 2>&1; then
    echo "error: no binaries in $BIN_DIR (run scripts/gpu-build.sh on the build machine)" >&2
    exit 2
fi

rows=()
benches=()
failed=0
for bin in "$BIN_DIR"/*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin")
    log="$LOG_DIR/$name.log"
    t0=$(date +%s.%N)
    case "$name" in
        bench_*) timeout 180 "$bin" >"$log" 2>&1; rc=$? ;;
        # --include-ignored: the tests that need a CUDA device are ignored elsewhere; here they
        # run, and a missing device or library fails them.
        *) timeout 240 "$bin" --include-ignored --test-threads=1 --nocapture >"$log" 2>&1; rc=$? ;;
    esac
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    skips=$(grep -ciE 'skipping' "$log")
    case "$name" in
        bench_*)
            passed="-"; nfail="-"
            while IFS= read -r l; do benches+=("$l"); done < <(grep '^BENCH ' "$log" | sed 's/^BENCH //')
            ;;
        *)
            passed=$(grep -oE 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END{print s+0}')
            nfail=$(grep -oE 'test result: .*' "$log" | grep -oE '[0-9]+ failed' | awk '{s+=$1} END{print s+0}')
            ;;
    esac
    status=ok
    if [ "$rc" -ne 0 ]; then
        status="FAILED(rc=$rc)"
        [ "$rc" -eq 124 ] && status="TIMEOUT"
        failed=1
        echo "---- $name: last lines of $log"
        tail -n 30 "$log"
    fi
    rows+=("$(printf '%-24s %-14s %7s %7s %8s %8s' "$name" "$status" "$passed" "$nfail" "$skips" "$secs")")
done

{
    echo
    echo "== summary"
    printf '%-24s %-14s %7s %7s %8s %8s\n' binary status passed failed skipped seconds
    printf '%s\n' "${rows[@]}"
    if [ ${#benches[@]} -gt 0 ]; then
        echo
        echo "== bench figures"
        printf '  %s\n' "${benches[@]}"
    fi
    echo
    echo "GPU: ${gpu_line:-none}"
    echo "$(cat "$LOG_DIR"/*.log 2>/dev/null | grep -o -m1 -E 'NVRTC [0-9]+\.[0-9]+ \([^)]*\)' || echo 'NVRTC: not reported')"
    echo "$(cat "$LOG_DIR"/*.log 2>/dev/null | grep -o -m1 -E 'device: .*SMs\)' || echo 'device: not reported')"
    echo "total $(( $(date +%s) - START )) s; $([ $failed -eq 0 ] && echo 'ALL PASSED' || echo 'SOME FAILED')"
} | tee "$LOG_DIR/summary.txt"
exit $failed
