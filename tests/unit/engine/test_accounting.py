"""Accounting: each job's node-minutes from when the poller saw it run, and the sweep's node-hours."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from pytest_xlatune.engine.poller import Poller
from pytest_xlatune.engine.sweep import Sweep
from pytest_xlatune.launch.base import JobPhase, JobProgress
from pytest_xlatune.plan.expand import expand
from pytest_xlatune.report.html import cell_html
from pytest_xlatune.report.markdown import render_tuning_md
from pytest_xlatune.results import JobResult, Spent, node_minutes
from pytest_xlatune.store import ResultStore
from tests import report_cases as cases
from tests.unit.engine.test_poller import Clock, ScriptedLauncher, cell


class QueuedThenRuns(ScriptedLauncher):
    """Each job pends for two polls, runs for three, then completes."""

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobProgress]:
        self.poll_calls.append(list(job_ids))
        answer = {}
        for job_id in job_ids:
            self._seen[job_id] = seen = self._seen.get(job_id, 0) + 1
            answer[job_id] = (
                JobProgress(JobPhase.PENDING, "PENDING")
                if seen <= 2
                else JobProgress(JobPhase.RUNNING, "RUNNING")
                if seen <= 5
                else JobProgress(JobPhase.FINISHED, "COMPLETED", 0)
            )
        return answer


def test_the_poller_notes_when_a_job_first_ran_and_when_it_finished() -> None:
    clock = Clock()
    poller = Poller(QueuedThenRuns(), interval=10, clock=clock)
    poller.track("1")
    for _ in range(8):
        poller.status("1")
        clock.now += 10
    # polls at 0, 10 (pending), 20, 30, 40 (running), 50 (finished)
    assert poller.ran("1") == (20.0, 50.0)
    poller.forget("1")
    assert poller.ran("1") == (None, None)


def test_a_job_seen_finished_but_never_running_costs_nothing_rather_than_its_queue_time() -> None:
    clock = Clock()
    poller = Poller(ScriptedLauncher(polls_to_finish=1), interval=10, clock=clock)
    clock.now = 30
    poller.status("7")
    assert poller.ran("7") == (30.0, 30.0)


def test_each_result_stores_nodes_times_the_time_the_job_ran(tmp_path: Path) -> None:
    clock = Clock()
    specs = expand(cell())
    store = ResultStore(tmp_path / "s.jsonl")
    sweep = Sweep(
        cell=cell(),
        specs=specs,
        store=store,
        launcher=QueuedThenRuns(),
        nodelist="n[1-4]",
        nodes=4,
        poll_interval=30,
        sleep=clock.sleep,
        clock=clock,
    )
    result = sweep.run(specs[0]).result
    # pending at 0 and 30 s, running from 60 s, finished at 150 s: 90 s on 4 nodes
    assert (result.started_at, result.ended_at, result.nodes) == (60.0, 150.0, 4)
    assert result.node_minutes == 6.0
    assert store.jobs()[0].node_minutes == 6.0  # round-trips through the store


def test_an_old_record_without_accounting_still_loads_and_is_counted_as_unknown() -> None:
    new = cases.Jobs().add("wave1::baseline", "baseline", "baseline", 1000.0)
    old = {k: v for k, v in new.to_dict().items() if k not in ("nodes", "started_at", "ended_at", "node_minutes")}
    loaded = JobResult.from_dict({**old, "job_id": "1"})
    assert loaded.node_minutes is None and loaded.nodes == 0
    spent = Spent.of([loaded, new])
    assert (spent.node_minutes, spent.jobs, spent.unknown) == (32.0, 1, 1)
    assert spent.text() == "0.53 node-hours (32.0 node-minutes) over 1 job (1 job(s) without a recorded cost)"


def test_the_sweeps_cost_counts_every_job_once_attempts_included() -> None:
    jobs = cases.Jobs()
    first = jobs.add("wave1::baseline", "baseline", "baseline", 1000.0)
    retry = jobs.add("wave1::baseline", "baseline", "baseline", 1000.0)
    spent = Spent.of([first, retry, replace(retry, reason="stored twice")])
    assert (spent.node_minutes, spent.jobs) == (64.0, 2)
    assert spent.node_hours == 64.0 / 60


def test_node_minutes_are_nodes_times_minutes_and_never_negative() -> None:
    assert node_minutes(8, 100.0, 820.0) == 96.0
    assert node_minutes(2, 50.0, 40.0) == 0.0


def test_the_markdown_and_html_reports_show_the_sweeps_node_hours() -> None:
    data = cases.winner()  # 14 jobs of 32 node-minutes each
    assert data.spent == Spent(14 * 32.0, 14, 0)
    assert "- **Cost:** 7.47 node-hours (448.0 node-minutes) over 14 jobs" in render_tuning_md(data)
    assert "节点小时" in render_tuning_md(data, language="zh") and "7.47" in render_tuning_md(data, language="zh")
    assert "Cost: 7.47 node-hours (448.0 node-minutes) over 14 jobs" in cell_html(data)


def test_what_the_adaptive_sweep_saved_and_the_drift_reach_the_report_from_the_store() -> None:
    from pytest_xlatune.adaptive.stored import summary_lines
    from pytest_xlatune.results import Verdict

    jobs = cases.Jobs()
    jobs.wave1()  # every job of report_cases costs 32 node-minutes
    full = jobs.results
    base = full[0]
    stopped = replace(base, key="k-stop", item="wave2::slow", verdict=Verdict.STOPPED_EARLY, node_minutes=12.0)
    shared = replace(base, key="k-share", item="wave2::same", shared_from=base.item)
    events = [
        {"event": "skipped", "item": "wave2::late", "reason": "a confirmed win"},
        {"event": "drift", "text": "drift: not measured (fewer than two control points)"},
        {"event": "drift", "text": "drift: the controls moved 1.00 % over the sweep"},
    ]
    lines = summary_lines([*full, stopped, shared], events)
    # A full run costs the median of the runs that ran to their end (32): the early stop saved
    # 32 - 12, the share and the skip a full run each; the last drift record is the one shown.
    assert lines == (
        "saved node-minutes: 1 early stop(s) 20.00, 1 shared duplicate(s) 32.00, "
        "1 skipped item(s) 32.00 (a confirmed win)",
        "drift: the controls moved 1.00 % over the sweep",
    )
    assert summary_lines(full, []) == ()  # the fixed protocol saves nothing and has no controls
    data = replace(cases.winner(), adaptive=lines)
    assert "- **Adaptive sweep:** saved node-minutes: 1 early stop(s) 20.00" in render_tuning_md(data)
    assert "- **Adaptive sweep:** drift: the controls moved 1.00 %" in render_tuning_md(data)
    assert "自适应扫描" in render_tuning_md(data, language="zh")
    assert "Adaptive sweep: drift: the controls moved 1.00 %" in cell_html(data)
