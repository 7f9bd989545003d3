#!/usr/bin/env bash
# Create (or reuse) the project venv at .venv and install pytest-xlatune with the JAX demo extra and the
# test, docs and lint extras (hypothesis; mkdocs; mypy, ruff and the stubs tests/unit/test_lint.py needs).
# Sourced by demo.sh and test.sh; safe to run twice.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${XLATUNE_VENV:-$repo/.venv}"
if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
stamp="$venv/.xlatune-installed"
if [[ ! -f "$stamp" || "$repo/pyproject.toml" -nt "$stamp" ]]; then
    "$venv/bin/python" -m pip install --quiet --upgrade pip 2>/dev/null || true
    "$venv/bin/python" -m pip install --quiet -e "$repo[demo,test,docs,lint]"
    touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
