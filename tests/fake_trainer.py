"""A scripted stand-in for the JAX workload: MaxText step lines in milliseconds.

Speed comes from XLA_FLAGS so tests know the true answer:
  --xla_fake_tgs=N       steady Tokens/s/device (default 1000)
  --xla_fake_loss_drift=D  the printed loss drifts by D per step (numerics changed)
  --xla_fake_fail=KIND   oom | crash | sigterm_after_last | rccl_hang | coord_timeout
                         | coord_timeout_hang | hang_before_memstats | hang_before_step0
                         | hang_after_step0 | disk_full (XLA's HLO-dump line on a full disk)
  --xla_fake_hold=PATH   hold before step 0 until the file PATH exists (at most an hour): a test
                         keeps this run in flight until it lets it go, whatever the machine's load
Passthrough args: fake_step_sleep=S (seconds per step), fake_penalize=FLAG (TGS × fake_penalty, default 0.8, when FLAG is set),
fake_noise=SIGMA (a run's level × (1 + N(0, SIGMA)): run-to-run noise, seeded by the job's
output directory and fake_seed=N, so a sequence of jobs is reproducible),
fake_load=JOB:FACTOR[:STEP],... (the job numbered JOB, as its output directory's name starts, runs
at FACTOR × its speed from step STEP on, 0 by default: a co-tenant's load on that job alone),
fake_format=no_tokens|no_seconds (step lines of MaxText eras without those fields; a step is 1024 tokens),
fake_log_bytes=N (N bytes of junk lines after the last step, e.g. to fill a disk; before the
first step with fake_junk_at=start), fake_long_line=N (one N-byte line before the first step),
fake_teardown_sleep=S (S seconds between the last step and the exit: a real trainer's teardown).
With --xla_fake_fail=crash, the environment variable FAKE_TRAINER_SAY is appended to the error line.
FAKE_NCCL_TRACE=NAME (environment) prints the recorded public NCCL debug lines of
tests/data/nccl/NAME.txt before the first step, when NCCL_DEBUG=INFO (as a real library would).
Any flag containing "obsolete" aborts like XLA does with an unknown flag.

Before a fault acts, a `fake_trainer: fault KIND at EPOCH` line records when it did, so tests
can measure the time from the fault to the sweep's verdict (no signature matches that line).

FAKE_TRAINER_PROGRAM=1 (environment): when XLA_FLAGS has --xla_dump_to=DIR, "compile" the train
step into DIR as XLA would (an optimized HLO file and a kernel's IR) from the flags that change
the program: all but the dump flags and --xla_fake_noop*; then print the workload's compile
line (evidence/inert.COMPILED_LINE) and sleep S seconds before step 0 with
--xla_fake_noop_compile_sleep=S (a flag that leaves the program as it is).
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from collections.abc import Generator, Mapping

# What the script yields: a str is output (whole lines), a float a pause in seconds; what it
# returns is the exit code, negative for the signal the process dies of (as Popen reports it).
# The process below prints and sleeps it; tests/fake_launcher.py plays it in memory.
Script = Generator["str | float", None, int]
HANG_S = 3600.0


def _fault(kind: str) -> str:
    return f"fake_trainer: fault {kind} at {time.time():.3f}\n"


def _hang(kind: str) -> Script:
    """Stop making progress (no more output) until cancelled."""
    yield _fault(kind)
    yield HANG_S
    return 0


def _held(path: str) -> Script:
    """Wait, polling, until the file `path` exists (a test lets the run go on), at most HANG_S."""
    waited = 0.0
    while not os.path.exists(path) and waited < HANG_S:
        yield 0.05
        waited += 0.05
    return 0


def _junk(size: int) -> Script:
    line = "junk " * 199 + "\n"  # 1000 bytes
    lines = size // len(line)
    for start in range(0, lines, 1024):  # in writes of at most 1 MiB
        yield line * min(1024, lines - start)
    return 0


def _compile(environ: Mapping[str, str]) -> Script:
    """Dump a program made of the flags that change it, then say the train step is compiled."""
    flags = environ.get("XLA_FLAGS", "").split()
    dump = next((f.split("=", 1)[1] for f in reversed(flags) if f.startswith("--xla_dump_to=")), "")
    if dump:
        program = " ".join(sorted(f for f in flags if not f.startswith(("--xla_dump", "--xla_fake_noop"))))
        os.makedirs(dump, exist_ok=True)
        with open(os.path.join(dump, "module_0001.jit_train_step.cpu_after_optimizations.txt"), "w") as out:
            out.write(f"HloModule jit_train_step\nENTRY %main {{ %p = f32[] parameter(0) }} // {program}\n")
        with open(os.path.join(dump, "module_0001.jit_train_step.k.ir-with-opt.ll"), "w") as out:
            out.write(f"; {program}\ndefine void @k()\n")
    from pytest_xlatune.evidence.inert import COMPILED_LINE

    yield f"{COMPILED_LINE} (0.001 s)\n"
    sleep = [f.split("=", 1)[1] for f in flags if f.startswith("--xla_fake_noop_compile_sleep=")]
    yield float(sleep[-1]) if sleep else 0.0
    return 0


def script(argv: list[str], environ: Mapping[str, str]) -> Script:
    """The run's output and pauses, from its passthrough args and environment."""
    args = dict(a.split("=", 1) for a in argv)
    flags = dict(f.split("=", 1) for f in environ.get("XLA_FLAGS", "").split() if "=" in f)
    for name, value in flags.items():
        if "obsolete" in name:
            yield f"E1130 00:00:00.000000 1 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: {name}={value}\n"
            return 1
    tgs = float(flags.get("--xla_fake_tgs", "1000"))
    penalized = args.get("fake_penalize")
    if penalized and penalized in flags:
        tgs *= float(args.get("fake_penalty", "0.8"))  # this config tag dislikes that flag
    noise = float(args.get("fake_noise", "0"))
    if noise:
        seed = f"{os.path.basename(args.get('base_output_directory', ''))}/{args.get('fake_seed', '0')}"
        tgs *= 1 + random.Random(seed).gauss(0.0, noise)
    job = os.path.basename(args.get("base_output_directory", "")).split("-", 1)[0]
    loads = [spec.split(":") for spec in args.get("fake_load", "").split(",") if spec]
    load = {int(step): float(factor) for name, factor, *at in loads if name == job for step in at or ["0"]}
    drift = float(flags.get("--xla_fake_loss_drift", "0"))
    step_sleep = float(args.get("fake_step_sleep", "0"))
    fail = flags.get("--xla_fake_fail", "")
    fake_format = args.get("fake_format", "")  # no_tokens | no_seconds: other MaxText eras
    yield "Num_devices: 8\n"
    if fail == "hang_before_memstats":  # RCCL/IB init never finishes, silently
        yield from _hang(fail)
    yield "Memstats: After params initialized:\n"
    if fail == "hang_before_step0":  # XLA compile never returns: a silent OOM
        yield from _hang(fail)
    if fail == "rccl_hang":
        yield _fault(fail)
        for _ in range(3):
            yield "node01:1234:1234 [0] init.cc:1234 NCCL WARN Bootstrap : no socket interface found\n"
        yield HANG_S
    if fail == "coord_timeout_hang":  # the line, then the process keeps hanging
        yield _fault(fail)
        yield (
            "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
            "jax_distributed/global_devices and duration: 5m\n"
        )
        yield HANG_S
    if fail == "coord_timeout":
        yield _fault(fail)
        yield (
            "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
            "jax_distributed/global_devices and duration: 5m\n"
        )
        return 1
    if fail == "oom":
        yield _fault(fail)
        yield "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.\n"
        yield "Total memory: 64.00GiB\n"
        yield "Temp: 9.50GiB\n"
        # The other ranks wait in a collective for the one that died, as on a real cluster:
        # the job ends only when the sweep cancels it (or after 60 s).
        yield 60.0
        return 1
    if fail == "disk_full":  # recorded from jax 0.10.2 dumping HLO into a full tmpfs
        yield _fault(fail)
        where = os.path.join(args.get("base_output_directory", "/tmp"), "xla_dump", "module_0004.jit_train_step.txt")
        yield (
            f"E1201 20:28:36.542262   26098 dump.cc:266] Could not write XLA debug data to {where}: "
            f"RESOURCE_EXHAUSTED: {where}; No space left on device\n"
        )
        yield 60.0
        return 1
    trace = environ.get("FAKE_NCCL_TRACE", "")
    if trace and environ.get("NCCL_DEBUG") == "INFO":
        recorded = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "nccl", f"{trace}.txt")
        with open(recorded, encoding="utf-8") as handle:
            yield handle.read().partition("\n---\n")[2] + "\n"
    if environ.get("FAKE_TRAINER_PROGRAM") == "1":
        yield from _compile(environ)
    if flags.get("--xla_fake_hold"):
        yield from _held(flags["--xla_fake_hold"])
    steps = int(args.get("steps", "15"))
    if int(args.get("fake_long_line", "0")):  # one huge line (a dumped tensor, a progress bar)
        yield "x" * int(args["fake_long_line"]) + "\n"
    if args.get("fake_junk_at") == "start":
        yield from _junk(int(args.get("fake_log_bytes", "0")))
    for step in range(steps):
        if fail == "crash" and step == 3:
            # FAKE_TRAINER_SAY: hostile text a crashing job prints (escape codes, markup, tokens).
            say = environ.get("FAKE_TRAINER_SAY", "")
            yield f"Traceback (most recent call last):\nRuntimeError: boom{' ' + say if say else ''}\n"
            return 1
        yield step_sleep
        value = tgs * (0.5 if step == 0 else 1.0) * (1 + 0.001 * ((step % 3) - 1))
        value *= next((factor for start, factor in sorted(load.items(), reverse=True) if step >= start), 1.0)
        line = (
            f"completed step: {step}, seconds: {1024 / value:.3f}, TFLOP/s/device: 1.000, "
            f"Tokens/s/device: {value:.3f}, total_weights: 1024, loss: {5 - step * 0.1 + drift * step:.3f}"
        )
        if fake_format == "no_tokens":  # MaxText before Tokens/s/device (2024-07)
            line = line.replace(f", Tokens/s/device: {value:.3f}", "")
        elif fake_format == "no_seconds":
            line = line.replace(f", seconds: {1024 / value:.3f}", "").replace(f", Tokens/s/device: {value:.3f}", "")
        yield line + "\n"
        if fail == "hang_after_step0" and step == 2:  # a collective stuck mid-training
            yield from _hang(fail)
    if args.get("fake_junk_at") != "start":
        yield from _junk(int(args.get("fake_log_bytes", "0")))
    teardown = float(args.get("fake_teardown_sleep", "0"))
    if teardown:
        yield teardown
    if fail == "sigterm_after_last":
        yield _fault(fail)
        return -signal.SIGTERM
    return 0


def main(argv: list[str]) -> int:
    run = script(argv, os.environ)
    while True:
        try:
            event = next(run)
        except StopIteration as end:
            code: int = end.value
            break
        if isinstance(event, str):
            sys.stdout.write(event)
            sys.stdout.flush()
        else:
            time.sleep(event)
    if code < 0:
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
