"""One builder for the small cells the plugin tests write (instead of a YAML copy per test).

    cell_yaml("dmg", ("a", "--xla_fake_tgs=1100"), step_sleep=0.01)

is the cell `model_tag: dmg` on one node with one wave-2 profile `a`. A cell that needs more
(config tags, an env_file, waves 3 and later, a policy) is still written out in its test, where
the reader sees it whole.
"""

from __future__ import annotations


def cell_yaml(
    model_tag: str,
    *profiles: tuple[str, str],
    nodes: int = 1,
    parallelism: str = "FSDP=8",
    baseline_repeats: int | None = 1,
    step_sleep: float | None = None,
) -> str:
    """A cell's YAML: wave-2 profiles as (name, one XLA flag) pairs, the fake trainer's step sleep."""
    lines = [f"model_tag: {model_tag}", f"nodes: {nodes}", f"parallelism: {parallelism}"]
    if baseline_repeats is not None:
        lines.append(f"baseline_repeats: {baseline_repeats}")
    if step_sleep is not None:
        lines.append(f"overrides: {{fake_step_sleep: {step_sleep}}}")
    if profiles:
        lines += ["waves:", "  2:", *(f"    - {{name: {name}, xla_flags: [{flag}]}}" for name, flag in profiles)]
    return "\n".join(lines) + "\n"
