"""A scripted stand-in for the JAX workload: MaxText step lines in milliseconds.

Speed comes from XLA_FLAGS so tests know the true answer:
  --xla_fake_tgs=N       steady Tokens/s/device (default 1000)
  --xla_fake_fail=KIND   oom | crash | sigterm_after_last | rccl_hang | coord_timeout
Passthrough args: fake_step_sleep=S (seconds per step), fake_penalize=FLAG (TGS × fake_penalty, default 0.8, when FLAG is set).
Any flag containing "obsolete" aborts like XLA does with an unknown flag.
"""

from __future__ import annotations

import os
import signal
import time
import sys


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
    step_sleep = float(args.get("fake_step_sleep", "0"))
    fail = flags.get("--xla_fake_fail", "")
    print(f"Num_devices: 8\nMemstats: After params initialized:", flush=True)
    if fail == "rccl_hang":
        for _ in range(3):
            print("node01:1234:1234 [0] init.cc:1234 NCCL WARN Bootstrap : no socket interface found", flush=True)
        time.sleep(3600)
    if fail == "coord_timeout_hang":  # the line, then the process keeps hanging
        print("jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
              "jax_distributed/global_devices and duration: 5m", flush=True)
        time.sleep(3600)
    if fail == "coord_timeout":
        print("jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
              "jax_distributed/global_devices and duration: 5m", flush=True)
        return 1
    if fail == "oom":
        print("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.", flush=True)
        return 1
    steps = int(args.get("steps", "15"))
    for step in range(steps):
        if fail == "crash" and step == 3:
            print("Traceback (most recent call last):\nRuntimeError: boom", flush=True)
            return 1
        time.sleep(step_sleep)
        value = tgs * (0.5 if step == 0 else 1.0) * (1 + 0.001 * ((step % 3) - 1))
        print(f"completed step: {step}, seconds: {1024 / value:.3f}, TFLOP/s/device: 1.000, "
              f"Tokens/s/device: {value:.3f}, total_weights: 1024, loss: {5 - step * 0.1:.3f}", flush=True)
    if fail == "sigterm_after_last":
        os.kill(os.getpid(), signal.SIGTERM)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
