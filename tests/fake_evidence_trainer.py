"""The scripted fake trainer, plus recorded real artifacts for evidence runs.

Everything of tests/fake_trainer.py, and where the workload would write them:
  --xla_dump_to=DIR   tests/data/profile/fsdp.hlo.txt as DIR/module_0042.jit_train_step.cpu_after_optimizations.txt
  profiler=xplane     tests/data/profile/fsdp.trace.json.gz under
                      <base_output_directory>/<run_name>/tensorboard/plugins/profile/<ts>/
With --xla_disable_hlo_passes=cpu-all-reduce-combiner, the fsdp_no_cpu_ar_combiner recordings
(the real workload's FSDP=8 all-reduce goes from 2 to 11 ops with that flag); both recorded
from the same runs by tests/data/profile/record.py.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import fake_trainer

DATA = Path(__file__).parent / "data"


def write_evidence(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    flags = dict(f.split("=", 1) for f in os.environ.get("XLA_FLAGS", "").split() if "=" in f)
    combiner_off = flags.get("--xla_disable_hlo_passes") == "cpu-all-reduce-combiner"
    name = "fsdp_no_cpu_ar_combiner" if combiner_off else "fsdp"
    if "--xla_dump_to" in flags:
        dump = Path(flags["--xla_dump_to"])
        dump.mkdir(parents=True, exist_ok=True)
        shutil.copy(
            DATA / "profile" / f"{name}.hlo.txt", dump / "module_0042.jit_train_step.cpu_after_optimizations.txt"
        )
    if args.get("profiler") == "xplane":
        profile = (
            Path(args.get("base_output_directory", "."))
            / args.get("run_name", "fake")
            / "tensorboard"
            / "plugins"
            / "profile"
            / "2026_05_01_00_00_00"
        )
        profile.mkdir(parents=True, exist_ok=True)
        shutil.copy(DATA / "profile" / f"{name}.trace.json.gz", profile / "fake.trace.json.gz")


if __name__ == "__main__":
    write_evidence(sys.argv[1:])
    sys.exit(fake_trainer.main(sys.argv[1:]))
