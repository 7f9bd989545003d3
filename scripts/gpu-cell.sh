#!/usr/bin/env bash
# Run the GPU cell (cells/demo_gpu.yml) end to end on this machine's NVIDIA GPU and keep what it
# shows: the tuning report (recipe, leaderboard, evidence), junit, the results export, the
# evidence runs' train-step HLO dumps and profiles, the job logs and a summary (TGS per profile,
# the recipe, job times, the kernels and profile the evidence code read).
#
#   scripts/gpu-cell.sh [OUTDIR]        # OUTDIR: default $OUT, else ./gpu-cell-out
#   scripts/gpu-cell.sh --wheels [DIR]  # here, with an index: fetch the wheels a machine without
#                                       # one needs (default DIR .whl; carried, installed from there)
#
# Without a GPU it stops with one line (exit 3). Python: $XLATUNE_PYTHON or python3, with jax
# and CUDA (jax[cuda12] is installed when jax finds no GPU and an index is reachable); missing
# pure-Python dependencies come from .whl/ when it exists, else from the index. The sweep runs
# the fixed protocol (every item once: 11 jobs, about 6 min on an H200). Knobs:
# XLATUNE_GPU_ADAPTIVE=1 (the adaptive sweep instead: repeats, controls, compilation cache),
# XLATUNE_GPU_TIMEOUT (hard stop for pytest in seconds, default 500), XLATUNE_GPU_CELL (another
# cell, default cells/demo_gpu.yml), XLATUNE_GPU_ANY=1 (skip the GPU check: try the script on
# CPU with a jax_platform=auto cell).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${XLATUNE_PYTHON:-python3}"
wheels=(paramiko bcrypt cryptography invoke pynacl cffi pycparser pytest-html pytest-metadata)

if [[ "${1:-}" == "--wheels" ]]; then
    dir="${2:-$repo/.whl}"
    mkdir -p "$dir"
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d "$dir" "${wheels[@]}"
    echo "gpu-cell: wheels for a Python 3.12 x86-64 machine in $dir ($(ls "$dir" | wc -l) files)"
    exit 0
fi

if [[ "${XLATUNE_GPU_ANY:-}" != 1 ]] && ! compgen -G "/dev/nvidia[0-9]*" >/dev/null \
        && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-cell: no NVIDIA GPU on this machine (no /dev/nvidia[0-9]*, nvidia-smi finds none): nothing run"
    exit 3
fi

out="${1:-${OUT:-$repo/gpu-cell-out}}"
mkdir -p "$out"
work="$(mktemp -d "${TMPDIR:-/tmp}/xlatune-gpu.XXXXXX")"
t0=$(date +%s)
say() { echo "gpu-cell: [$(( $(date +%s) - t0 ))s] $*"; }

# 1. Python packages: carried wheels first (no index needed), then what is still missing.
if compgen -G "$repo/.whl/*.whl" >/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$work/site" "$repo"/.whl/*.whl
    export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi
missing=$("$py" - <<'EOF'
import importlib.util
need = {"yaml": "pyyaml", "jinja2": "jinja2", "pandas": "pandas", "scipy": "scipy",
        "paramiko": "paramiko", "pytest_html": "pytest-html", "xdist": "pytest-xdist", "pytest": "pytest"}
print(" ".join(pip for module, pip in need.items() if importlib.util.find_spec(module) is None))
EOF
)
if [[ -n "$missing" ]]; then
    say "installing $missing"
    "$py" -m pip install -q $missing >"$work/pip.log" 2>&1 || {
        echo "gpu-cell: missing Python packages ($missing) and no index to install them from: run" \
             "'scripts/gpu-cell.sh --wheels' where pip works and bring .whl/ along"; exit 4; }
fi
if [[ "${XLATUNE_GPU_ANY:-}" != 1 ]] \
        && ! "$py" -c 'import jax, sys; sys.exit(0 if jax.devices("gpu") else 1)' >/dev/null 2>&1; then
    say "jax finds no GPU: installing jax[cuda12]"
    "$py" -m pip install -q -U "jax[cuda12]" >>"$work/pip.log" 2>&1 || {
        echo "gpu-cell: jax with CUDA is not installed and pip cannot install jax[cuda12] (see $work/pip.log)"; exit 4; }
fi
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
plugin=()
"$py" -c 'import sys; from importlib.metadata import entry_points as e
sys.exit(0 if any(p.name == "xlatune" for p in e(group="pytest11")) else 1)' || plugin=(-p pytest_xlatune.plugin)
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
    "$py" -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, jax.devices())'
} >"$work/gpu.txt" 2>&1
say "$(tr '\n' ' ' <"$work/gpu.txt")"

# 2. The sweep: the cell copied into the work dir as demo_gpu.yml (its lock and report land there).
cp "${XLATUNE_GPU_CELL:-$repo/cells/demo_gpu.yml}" "$work/demo_gpu.yml"
html=(--html "$work/report.html" --self-contained-html)
"$py" -c 'import pytest_html' 2>/dev/null || html=()
protocol=(--xlatune-fixed-protocol)
[[ "${XLATUNE_GPU_ADAPTIVE:-}" == 1 ]] && protocol=(--xlatune-budget none)
say "sweep: pytest demo_gpu.yml ${protocol[*]} (hard stop ${XLATUNE_GPU_TIMEOUT:-500}s)"
rc=0
(cd "$work" && timeout -s INT -k 60 "${XLATUNE_GPU_TIMEOUT:-500}" "$py" -m pytest "${plugin[@]}" demo_gpu.yml \
    -v -p no:cacheprovider --rootdir "$work" --xlatune-store "$work/store" --xlatune-report-dir "$work" \
    --xlatune-export "$work/export" "${protocol[@]}" --junitxml "$work/junit.xml" "${html[@]}") \
    >"$work/pytest.log" 2>&1 || rc=$?
tail -n 25 "$work/pytest.log"
say "pytest exit $rc"

# 3. What to keep: at most 8 files (the device tool's limit), none nested.
"$py" "$repo/scripts/gpu_cell_summary.py" "$work" >"$out/summary.md" 2>"$work/summary.err" || \
    { echo "gpu-cell: the summary failed:"; tail -n 5 "$work/summary.err"; }
cp "$work/pytest.log" "$out/"
for f in "$work"/*-tuning.md "$work/junit.xml" "$work/report.html" "$work"/export/*.json; do
    [[ -f "$f" ]] && cp "$f" "$out/"
done
(cd "$work" && find gpu.txt demo_gpu.* store \( -name '*jit_train_step*after_optimizations.txt' -o -name '*.log' \
    -o -name '*.jsonl' -o -name gpu.txt -o -name 'demo_gpu.*' \) -type f | tar -czf "$out/dumps-logs.tar.gz" -T -) || true
traces() { (cd "$work" && find store \( -name '*.trace.json.gz' -o -name 'perfetto_trace.json.gz' "$@" \) -type f \
    | tar -czf "$out/traces.tar.gz" -T -) || true; }
traces -o -name '*.xplane.pb'  # the raw profiles too, unless that is over the 16 MiB a file may have
[[ $(stat -c %s "$out/traces.tar.gz" 2>/dev/null || echo 0) -lt 16000000 ]] || traces
say "kept in $out: $(cd "$out" && ls | tr '\n' ' ')"
cat "$out/summary.md"
exit "$rc"
