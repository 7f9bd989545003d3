"""Entry point: ``python -m pytest_xlatune.workload key=value ...``."""

from __future__ import annotations

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
