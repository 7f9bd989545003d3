#!/usr/bin/env bash
# Build the docs site into site/ (mkdocs build --strict: a broken link or anchor fails), after
# regenerating the reference tables from the code (scripts/gen_reference.py). Extra args go to
# mkdocs build (e.g. --site-dir /tmp/site).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/venv.sh"
cd "$repo"
python scripts/gen_reference.py
mkdocs build --strict --quiet "$@"
echo "docs: built site/ (open site/index.html)"
