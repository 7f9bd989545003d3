"""The public real-log corpus (tests/data/logs/real/): step parsing and failure classes, table-driven.

Each case file is a YAML header (source URL, date, transformation note, expected values typed by
hand from the text), a line `---`, then the excerpt as published. See tests/data/logs/real/README.md.
"""

from __future__ import annotations

import collections
import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_xlatune.triage.diagnosis import Evidence, FailureClass, diagnose
from pytest_xlatune.triage.logs import OOM_NEEDLES, StepLog
from pytest_xlatune.triage.signatures import EVIDENCE_NEEDLES, is_evidence
from pytest_xlatune.verdict.steady import last_loss, steady_state

REAL = Path(__file__).resolve().parents[2] / "data" / "logs" / "real"
HEADER_KEYS = {
    "source",
    "date",
    "transformation",
    "synthetic",
    "expect",
    "evidence",
    "origin",
    "found_via",
    "source_note",
}
# Lines that no signature matches and no noise filter drops: a long tail after the root cause.
FILLER = "I1201 12:00:{:02d}.000000 4242 profiler_session.cc:121] Profiler session collecting data.\n"


@dataclass(frozen=True)
class Case:
    name: str
    header: dict[str, Any]
    text: str

    @property
    def expect(self) -> dict[str, Any]:
        return self.header["expect"]


def load(path: Path) -> Case:
    raw = path.read_text(encoding="utf-8")
    head, sep, body = raw.partition("\n---\n")
    assert sep, f"{path.name}: no '---' line between the header and the excerpt"
    header = yaml.safe_load(head)
    assert isinstance(header, dict), f"{path.name}: the header is not a mapping"
    assert set(header) <= HEADER_KEYS, f"{path.name}: unknown header keys {set(header) - HEADER_KEYS}"
    for key in ("source", "date", "transformation", "expect"):
        assert header.get(key) not in (None, ""), f"{path.name}: header key {key!r} is missing"
    return Case(path.stem, header, body)


CASES = [load(p) for p in sorted(REAL.glob("*.txt"))]
STEP_CASES = [c for c in CASES if "steps" in c.expect]
FAIL_CASES = [c for c in CASES if "class" in c.expect]


def feed(text: str, seed: int | None) -> StepLog:
    """The excerpt through a StepLog: in one piece, or in random chunk sizes like a watcher reads."""
    data, log = text.encode(), StepLog()
    if seed is None:
        log.feed(data)
    else:
        rng, at = random.Random(seed), 0
        while at < len(data):
            size = rng.randint(1, 300)
            log.feed(data[at : at + size])
            at += size
    log.flush()
    return log


def test_the_corpus_is_large_and_covers_every_logged_class() -> None:
    real = [c for c in CASES if not c.header.get("synthetic")]
    assert len(real) >= 40
    classes = collections.Counter(c.expect["class"] for c in FAIL_CASES if not c.header.get("synthetic"))
    logged = set(FailureClass) - {
        FailureClass.SUCCESS,
        FailureClass.SOFT_SUCCESS,
        FailureClass.NODE_DOWN,
        FailureClass.CONTROLLER_UNREACHABLE,
        FailureClass.UNKNOWN,
    }
    lacking: set[str] = set()  # classes the public record has too few real lines of (README.md there)
    every = collections.Counter(c.expect["class"] for c in FAIL_CASES)
    for failure in logged:
        if failure.value in lacking:
            assert every[failure.value] >= 1, f"{failure.value}: not even a synthetic case"
        else:
            assert classes[failure.value] >= 2, f"{failure.value}: {classes[failure.value]} real cases"


@pytest.mark.parametrize("case", STEP_CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_step_lines(case: Case, seed: int | None) -> None:
    want = case.expect
    log = feed(case.text, seed)
    steps = log.steps
    assert len(steps) == want["steps"]
    assert log.last_step == want["last_step"]
    for step, fields in (want.get("fields") or {}).items():
        rec = steps[step]
        for name, value in fields.items():
            got = (
                dict(rec.extra).get(name)
                if name not in {"seconds", "tflops", "tokens_per_s", "loss", "mfu_pct"}
                else getattr(rec, name)
            )
            # MaxText prints `loss: nan` when training diverged: a NaN is a value, kept as it was printed.
            assert got == pytest.approx(value, nan_ok=True) if value is not None else got is None, (step, name)
    assert (
        last_loss(steps) == pytest.approx(want.get("last_loss"), nan_ok=True)
        if want.get("last_loss") is not None
        else last_loss(steps) is None
    )
    if "steady" in want:
        lo, hi = want["steady"]["window"]
        ss = steady_state(
            steps, profiler_on=False, first=lo, last=hi, tokens_per_step=want["steady"].get("tokens_per_step")
        )
        assert ss is not None
        for key in ("tgs", "step_seconds"):
            expected = want["steady"].get(key)
            assert (
                (ss.__getattribute__(key) is None)
                if expected is None
                else ss.__getattribute__(key) == pytest.approx(expected, rel=1e-3)
            ), key
        assert ss.derived is bool(want["steady"].get("derived", False))


def _diagnose(case: Case, text: str, seed: int | None, **override: Any) -> Any:
    log = feed(text, seed)
    ev = dict(case.header.get("evidence") or {})
    ev.update(override)
    # A case's last_step stands for a job well short of its end (the excerpt is mid-training).
    expected_steps = ev.pop("expected_steps", 15 if "last_step" not in ev else ev["last_step"] + 1000)
    ev.setdefault("scheduler_state", "FAILED")
    ev.setdefault("exit_code", 1)
    # A case may say the job had completed steps the excerpt does not show (the issue says so).
    last_step = ev.pop("last_step", log.last_step)
    return diagnose(dataclasses.replace(Evidence.from_log(log, expected_steps, **ev), last_step=last_step))


def _check(case: Case, got: Any) -> None:
    want = case.expect
    assert got.failure.value == want["class"], got.reason
    for quoted in [want["reason"]] if isinstance(want.get("reason"), str) else want.get("reason") or []:
        assert quoted in got.reason, got.reason


@pytest.mark.parametrize("case", FAIL_CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("seed", [None, 3])
def test_failure_class_and_quoted_line(case: Case, seed: int | None) -> None:
    _check(case, _diagnose(case, case.text, seed))


@pytest.mark.parametrize("case", FAIL_CASES, ids=lambda c: c.name)
def test_root_cause_far_above_the_end_still_found(case: Case) -> None:
    """200 unremarkable lines after the excerpt: the tail no longer holds the root cause."""
    text = case.text + "".join(FILLER.format(i % 60) for i in range(200))
    _check(case, _diagnose(case, text, None))


@pytest.mark.parametrize("case", FAIL_CASES, ids=lambda c: c.name)
def test_nul_bytes_before_lines_hide_nothing(case: Case) -> None:
    """A log file's hole (a node crashed mid-write, a preallocated file) leaves NUL bytes before
    the next line's text: every other line starting with them changes no class or reason."""
    text = "".join("\x00" * 5 + line if i % 2 == 0 else line for i, line in enumerate(case.text.splitlines(True)))
    _check(case, _diagnose(case, text, None))


@pytest.mark.parametrize(
    "case",
    [c for c in FAIL_CASES if c.expect.get("root_cause", True) and c.expect["class"] not in ("hang", "cancelled")],
    ids=lambda c: c.name,
)
def test_the_log_wins_over_a_time_limit(case: Case) -> None:
    """Slurm says TIMEOUT: a root cause in the log still names the class (playbook: earliest wins;
    hangs and cancels are left out: there the scheduler's word is the evidence)."""
    _check(case, _diagnose(case, case.text, None, scheduler_state="TIMEOUT", exit_code=0))


def test_every_streamed_signature_line_holds_a_needle() -> None:
    """StepLog only decodes lines holding a needle (an evidence or an OOM needle): each corpus line a
    streamed signature matches must hold one, or the whole-log evidence would miss it."""
    for case in FAIL_CASES:
        for line in case.text.splitlines():
            if is_evidence(line) is not None:
                assert any(n.decode() in line + "\n" for n in EVIDENCE_NEEDLES + OOM_NEEDLES), (case.name, line)
