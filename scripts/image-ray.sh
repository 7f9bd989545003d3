#!/usr/bin/env bash
# Ray for the fake container image's python only (tests/fake_container; the conformance test in
# which upstream maxtext-slurm's Ray cluster starts): ray and py-spy, pinned, installed with
# `pip install --target` into a cache dir outside the venv, because the image's python3 IS the
# venv's python and the Ray-fallback test needs an image without Ray. The fake docker puts the
# dir on the image's PYTHONPATH (and `ray`, `py-spy` on its PATH) only when XLATUNE_FAKE_IMAGE_RAY
# names it. Idempotent: a finished install leaves a stamp and is reused. Prints the dir.
# Usage: scripts/image-ray.sh [PYTHON]   (default: the python on PATH, i.e. the sourced venv's)
set -euo pipefail
python=${1:-python}
RAY_VERSION=2.60.0
PYSPY_VERSION=0.4.3
tag=$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
dir=${XLATUNE_IMAGE_RAY_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xlatune-ray/ray-$RAY_VERSION-py-spy-$PYSPY_VERSION-$tag}
stamp="$dir/.installed"
if [[ ! -f "$stamp" ]]; then
    rm -rf "$dir.tmp"
    "$python" -m pip install --quiet --disable-pip-version-check --target "$dir.tmp" \
        "ray==$RAY_VERSION" "py-spy==$PYSPY_VERSION" >&2
    [[ -x "$dir.tmp/bin/py-spy" ]] || { echo "scripts/image-ray.sh: no bin/py-spy in $dir.tmp" >&2; exit 1; }
    rm -rf "$dir" && mv "$dir.tmp" "$dir" && touch "$stamp"
fi
echo "$dir"
