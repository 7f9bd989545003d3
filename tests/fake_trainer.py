"""A scripted stand-in for the JAX workload: MaxText step lines in milliseconds.

Speed comes from XLA_FLAGS so tests know the true answer:
  --xla_fake_tgs=N       steady Tokens/s/device (default 1000)
  --xla_fake_loss_drift=D  the printed loss drifts by D per step (numerics changed)
  --xla_fake_fail=KIND   oom | crash | sigterm_after_last | rccl_hang | coord_timeout
                         | coord_timeout_hang | hang_before_memstats | hang_before_step0
                         | hang_after_step0 | disk_full (XLA's HLO-dump line on a full disk)
Passthrough args: fake_step_sleep=S (seconds per step), fake_penalize=FLAG (TGS × fake_penalty, default 0.8, when FLAG is set),
fake_noise=SIGMA (a run's level × (1 + N(0, SIGMA)): run-to-run noise, seeded by the job's
output directory and fake_seed=N, so a sequence of jobs is reproducible),
fake_format=no_tokens|no_seconds (step lines of MaxText eras without those fields; a step is 1024 tokens),
fake_log_bytes=N (N bytes of junk lines after the last step, e.g. to fill a disk; before the
first step with fake_junk_at=start), fake_long_line=N (one N-byte line before the first step).
With --xla_fake_fail=crash, the environment variable FAKE_TRAINER_SAY is appended to the error line.
FAKE_NCCL_TRACE=NAME (environment) prints the recorded public NCCL debug lines of
tests/data/nccl/NAME.txt before the first step, when NCCL_DEBUG=INFO (as a real library would).
Any flag containing "obsolete" aborts like XLA does with an unknown flag.

Before a fault acts, a `fake_trainer: fault KIND at EPOCH` line records when it did, so tests
can measure the time from the fault to the sweep's verdict (no signature matches that line).
"""

from __future__ import annotations

import os
import random
import signal
import time
import sys


def _fault(kind: str) -> None:
    print(f"fake_trainer: fault {kind} at {time.time():.3f}", flush=True)


def _hang(kind: str) -> None:
    """Stop making progress (no more output) until cancelled."""
    _fault(kind)
    time.sleep(3600)


def _junk(size: int) -> None:
    line = "junk " * 199 + "\n"  # 1000 bytes
    for _ in range(size // len(line)):
        sys.stdout.write(line)
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    args = dict(a.split("=", 1) for a in argv)
    flags = dict(f.split("=", 1) for f in os.environ.get("XLA_FLAGS", "").split() if "=" in f)
    for name in flags:
        if "obsolete" in name:
            print(f"E1130 00:00:00.000000 1 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: {name}={flags[name]}", flush=True)
            return 1
    tgs = float(flags.get("--xla_fake_tgs", "1000"))
    penalized = args.get("fake_penalize")
    if penalized and penalized in flags:
        tgs *= float(args.get("fake_penalty", "0.8"))  # this config tag dislikes that flag
    noise = float(args.get("fake_noise", "0"))
    if noise:
        seed = f"{os.path.basename(args.get('base_output_directory', ''))}/{args.get('fake_seed', '0')}"
        tgs *= 1 + random.Random(seed).gauss(0.0, noise)
    drift = float(flags.get("--xla_fake_loss_drift", "0"))
    step_sleep = float(args.get("fake_step_sleep", "0"))
    fail = flags.get("--xla_fake_fail", "")
    fake_format = args.get("fake_format", "")  # no_tokens | no_seconds: other MaxText eras
    print("Num_devices: 8", flush=True)
    if fail == "hang_before_memstats":  # RCCL/IB init never finishes, silently
        _hang(fail)
    print("Memstats: After params initialized:", flush=True)
    if fail == "hang_before_step0":  # XLA compile never returns: a silent OOM
        _hang(fail)
    if fail == "rccl_hang":
        _fault(fail)
        for _ in range(3):
            print("node01:1234:1234 [0] init.cc:1234 NCCL WARN Bootstrap : no socket interface found", flush=True)
        time.sleep(3600)
    if fail == "coord_timeout_hang":  # the line, then the process keeps hanging
        _fault(fail)
        print("jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
              "jax_distributed/global_devices and duration: 5m", flush=True)
        time.sleep(3600)
    if fail == "coord_timeout":
        _fault(fail)
        print("jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
              "jax_distributed/global_devices and duration: 5m", flush=True)
        return 1
    if fail == "oom":
        _fault(fail)
        print("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.", flush=True)
        print("Total memory: 64.00GiB", flush=True)
        print("Temp: 9.50GiB", flush=True)
        # The other ranks wait in a collective for the one that died, as on a real cluster:
        # the job ends only when the sweep cancels it (or after 60 s).
        time.sleep(60)
        return 1
    if fail == "disk_full":  # recorded from jax 0.10.2 dumping HLO into a full tmpfs
        _fault(fail)
        where = os.path.join(args.get("base_output_directory", "/tmp"), "xla_dump", "module_0004.jit_train_step.txt")
        print(f"E1201 20:28:36.542262   26098 dump.cc:266] Could not write XLA debug data to {where}: "
              f"RESOURCE_EXHAUSTED: {where}; No space left on device", flush=True)
        time.sleep(60)
        return 1
    trace = os.environ.get("FAKE_NCCL_TRACE", "")
    if trace and os.environ.get("NCCL_DEBUG") == "INFO":
        recorded = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "nccl", f"{trace}.txt")
        with open(recorded, encoding="utf-8") as handle:
            print(handle.read().partition("\n---\n")[2], flush=True)
    steps = int(args.get("steps", "15"))
    if int(args.get("fake_long_line", "0")):  # one huge line (a dumped tensor, a progress bar)
        sys.stdout.write("x" * int(args["fake_long_line"]) + "\n")
        sys.stdout.flush()
    if args.get("fake_junk_at") == "start":
        _junk(int(args.get("fake_log_bytes", "0")))
    for step in range(steps):
        if fail == "crash" and step == 3:
            # FAKE_TRAINER_SAY: hostile text a crashing job prints (escape codes, markup, tokens).
            say = os.environ.get("FAKE_TRAINER_SAY", "")
            print(f"Traceback (most recent call last):\nRuntimeError: boom{' ' + say if say else ''}", flush=True)
            return 1
        time.sleep(step_sleep)
        value = tgs * (0.5 if step == 0 else 1.0) * (1 + 0.001 * ((step % 3) - 1))
        line = (f"completed step: {step}, seconds: {1024 / value:.3f}, TFLOP/s/device: 1.000, "
                f"Tokens/s/device: {value:.3f}, total_weights: 1024, loss: {5 - step * 0.1 + drift * step:.3f}")
        if fake_format == "no_tokens":  # MaxText before Tokens/s/device (2024-07)
            line = line.replace(f", Tokens/s/device: {value:.3f}", "")
        elif fake_format == "no_seconds":
            line = line.replace(f", seconds: {1024 / value:.3f}", "").replace(f", Tokens/s/device: {value:.3f}", "")
        print(line, flush=True)
        if fail == "hang_after_step0" and step == 2:  # a collective stuck mid-training
            _hang(fail)
    if args.get("fake_junk_at") != "start":
        _junk(int(args.get("fake_log_bytes", "0")))
    if fail == "sigterm_after_last":
        _fault(fail)
        os.kill(os.getpid(), signal.SIGTERM)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
