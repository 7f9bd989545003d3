"""The gate's repair, pure parts: which candidates it measures (plan/repair.py), the exit code
that tells "passed", "repair proposed" and "no repair found" apart, and its report section."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_xlatune.engine.repair_outputs import exit_code
from pytest_xlatune.plan.repair import candidates, removed_flags
from pytest_xlatune.report.repair import Figure, Repair, RepairVerdict, render_html, render_section
from pytest_xlatune.results import JobResult, Verdict
from pytest_xlatune.verdict.lock import Lock, LockedRecipe

LOCK = Lock(
    model_tag="m",
    parallelism="FSDP=8",
    image="",
    nodelist="localhost",
    date="2026-12-03",
    recipes=(
        LockedRecipe(
            config_tag="default",
            profile="fast",
            xla_flags=("--xla_a=1", "--xla_b=2"),
            env=(),
            overrides=(),
            tgs=1100.0,
            ci_low_pct=8.0,
            ci_high_pct=12.0,
            baseline_tgs=1000.0,
            delta_pct=10.0,
            job_ids=("7",),
        ),
    ),
)


def run(
    profile: str,
    flags: Sequence[str],
    tgs: float,
    job: int,
    *,
    kind: str = "profile",
    wave: str = "wave2",
    image: str = "",
    verdict: Verdict = Verdict.SUCCESS,
    reason: str = "",
) -> JobResult:
    return JobResult(
        key=f"{profile}-{job}",
        item=f"{wave}::{profile}[default]",
        wave=wave,
        profile=profile,
        config_tag="default",
        kind=kind,
        job_id=str(job),
        verdict=verdict,
        tgs=tgs,
        xla_flags=tuple(flags),
        image=image,
        reason=reason,
    )


def test_the_previous_sweeps_top_k_by_mean_tgs_without_the_locked_recipe() -> None:
    previous = [
        run("fast", ["--xla_a=1", "--xla_b=2"], 1100.0, 1),
        run("alt", ["--xla_c=1"], 1060.0, 2),
        run("alt-confirm", ["--xla_c=1"], 1040.0, 3),
        run("mid", ["--xla_d=1"], 1055.0, 4),
        run("slow", ["--xla_e=1"], 900.0, 5),
        run("worst", ["--xla_f=1"], 800.0, 6),
        run("other-image", ["--xla_g=1"], 2000.0, 7, image="/new/bin/python"),
        run("gated", ["--xla_h=1"], 3000.0, 8, wave="gate"),
    ]
    found = candidates(previous, LOCK, "default", k=3)
    assert [c.profile for c in found] == ["mid", "alt", "slow"]  # alt's mean is 1050.0
    assert found[1].why == "previous sweep: 1050.0 TGS on (default)"


def test_a_removed_or_inert_flag_suggests_the_locked_recipe_without_it() -> None:
    gone = run(
        "fast",
        ["--xla_a=1", "--xla_b=2"],
        0.0,
        9,
        kind="gate_recipe",
        wave="gate",
        image="/new",
        verdict=Verdict.UNKNOWN_FLAG,
        reason="E1130 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: --xla_b=2",
    )
    assert removed_flags([gone], "/new") == ("--xla_b",) and removed_flags([gone], "/other") == ()
    unread = replace(gone, reason="XLA rejected flag --xla_b: Couldn't interpret value 2 for flag xla_b.")
    assert removed_flags([unread], "/new") == ("--xla_b",)
    (pruned,) = candidates([], LOCK, "default", dropped=["--xla_b"])
    assert (pruned.profile, pruned.xla_flags) == ("fast-pruned", ("--xla_a=1",))
    assert "without --xla_b" in pruned.why
    assert candidates([], LOCK, "default", dropped=["--xla_zzz"]) == []  # not a locked flag


def _repair(verdict: RepairVerdict) -> Repair:
    proposed = Figure("alt", ("--xla_c=1",), 1200.0, 20.0, 18.5, 21.5, ("26", "28"))
    return Repair(
        "cells/m.yml",
        "gate item(s) failed: gate::fast[default]",
        verdict,
        Figure("fast", ("--xla_a=1",), 1100.0, 10.0, 8.0, 12.0, ("7",)),
        Figure("fast", ("--xla_a=1",), 1030.0, 3.0, 2.0, 4.0, ("21",)),
        proposed if verdict is RepairVerdict.PROPOSED else None,
        "cells/m.lock.proposed.json" if verdict is RepairVerdict.PROPOSED else "",
        "" if verdict is RepairVerdict.PROPOSED else "no candidate beat the baseline",
        (("alt", "repair candidate", "1200.0 TGS"),),
        ("all-reduce: 2 ops → 1 op",),
        "",
        0.125,
        "at most 3 candidates",
    )


def test_the_exit_code_tells_the_three_outcomes_apart() -> None:
    proposed, none = _repair(RepairVerdict.PROPOSED), _repair(RepairVerdict.NONE_FOUND)
    assert exit_code([None], 0) == 0  # passed: nothing repaired
    assert exit_code([proposed], 1) == 6
    assert exit_code([proposed, none], 1) == 1  # one cell has no repair: the gate stays red
    assert exit_code([none], 1) == 1
    assert exit_code([proposed], 2) == 2  # interrupted stays interrupted


def test_the_report_section_shows_old_and_new_with_intervals_diff_and_cost() -> None:
    text = render_section(_repair(RepairVerdict.PROPOSED))
    assert "**regressed, repair proposed** (exit code 6)" in text
    assert (
        "| locked: fast | --xla_a=1 | 1030.0 TGS +3.00 % [+2.00, +4.00] vs the baseline (jobs 21) (at lock time "
        "1100.0 TGS +10.00 % [+8.00, +12.00] vs the baseline (jobs 7)) |" in text
    )
    assert "| proposed: alt | --xla_c=1 | 1200.0 TGS +20.00 % [+18.50, +21.50] vs the baseline (jobs 26, 28) |" in text
    assert "- all-reduce: 2 ops → 1 op" in text and "spent 0.125 node-hours" in text
    assert "Proposed lock: `cells/m.lock.proposed.json`" in text
    none = render_section(_repair(RepairVerdict.NONE_FOUND))
    assert "(exit code 1)" in none and "No proposed lock: no candidate beat the baseline." in none
    assert "&lt;" in render_html(Repair(**{**_repair(RepairVerdict.NONE_FOUND).__dict__, "reason": "<x>"}))
