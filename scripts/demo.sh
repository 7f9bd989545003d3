#!/usr/bin/env bash
# Set up and run the demo sweep on the embedded JAX workload (no cluster needed).
# Ends with demo-tuning.md and report.html in the repo root. Extra args go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/venv.sh"
cd "$repo"
exec pytest cells/demo_fsdp8.yml -v --html=report.html --self-contained-html "$@"
