"""A cell's latest results as a pandas DataFrame, written as CSV and JSON (`--xlatune-export`).

One row per latest result of each run of the cell (what the report shows). `tgs` is the figure
of the run's settings, the mean of every run with identical effective settings (`runs` names them,
`job_tgs` is this job's own; `step_seconds` is the figure's mean step, as junit's), as in the
terminal, junit and the reports. Δ% and its 95 % interval are vs the mean of the config tag's
baseline-deployed repeats, as in the report; they are empty for the baseline repeats themselves
and for runs without a measurement. `shared_from` names the run whose result a row shares
(identical effective settings, or an inert candidate), and `inert` says why a candidate was cut
after its compile (the junit `xlatune_inert` text, evidence/inert.py), empty otherwise. Times are
UTC.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

from ..results import JobResult
from ..verdict import figures, stats

COLUMNS = (
    "item",
    "wave",
    "profile",
    "config_tag",
    "kind",
    "job_id",
    "verdict",
    "tgs",
    "runs",
    "job_tgs",
    "step_seconds",
    "delta_pct",
    "ci_low",
    "ci_high",
    "direction",
    "unstable",
    "shared_from",
    "inert",
    "flags",
    "env",
    "nodelist",
    "image",
    "log_path",
    "submitted_at",
    "finished_at",
)


def _row(result: JobResult, found: figures.Figure | None) -> dict[str, object]:
    comparison = found.comparison if found else None
    return {
        "item": result.item,
        "wave": result.wave,
        "profile": result.profile,
        "config_tag": result.config_tag,
        "kind": str(result.kind),
        "job_id": result.job_id,
        "verdict": result.verdict.value,
        # The figure of its settings (figures.py), as every other output shows it; job_tgs is
        # this job's own steady TGS, one of the runs behind it.
        "tgs": found.tgs if found else None,
        "runs": found.runs_text() if found else "",
        "job_tgs": result.own_tgs,
        "step_seconds": found.step_seconds if found else result.step_seconds,  # the figure's, as junit's
        "delta_pct": comparison.delta_pct if comparison else None,
        "ci_low": comparison.ci_low_pct if comparison else None,
        "ci_high": comparison.ci_high_pct if comparison else None,
        "direction": stats.direction(comparison) if comparison else "",
        "unstable": bool(found and found.unstable),
        "shared_from": result.shared_from,
        "inert": result.reason if result.inert else "",
        "flags": " ".join(result.xla_flags),
        "env": " ".join(f"{k}={v}" for k, v in result.env),
        "nodelist": result.nodelist,
        "image": result.image,
        "log_path": result.log_path,
        "submitted_at": result.submitted_at or None,
        "finished_at": result.finished_at or None,
    }


def _order(result: JobResult) -> tuple[int, str]:
    return (int(result.job_id), "") if result.job_id.isdigit() else (0, result.job_id)


def results_frame(results: Sequence[JobResult]) -> pd.DataFrame:
    """One row per result, sorted by job id, with the COLUMNS in that order."""
    found = figures.by_item(results)
    # Declared: pandas-stubs' constructor overloads come out Any here.
    frame: pd.DataFrame = pd.DataFrame(
        [_row(r, found.get(r.item) if r.measured else None) for r in sorted(results, key=_order)], columns=list(COLUMNS)
    )
    for column in ("tgs", "job_tgs", "step_seconds", "delta_pct", "ci_low", "ci_high"):
        frame[column] = frame[column].astype("float64")
    for column in ("submitted_at", "finished_at"):
        frame[column] = pd.to_datetime(frame[column].astype("float64"), unit="s", utc=True)
    return frame


def export_texts(results: Sequence[JobResult]) -> dict[str, str]:
    """File suffix → content: `.csv`, and `.json` as records with ISO-8601 UTC times."""
    frame = results_frame(results)
    return {
        ".csv": frame.to_csv(index=False, date_format="%Y-%m-%dT%H:%M:%S.%fZ"),
        # Through json.dumps: pandas escapes every "/" of the log paths as "\/".
        ".json": json.dumps(
            json.loads(frame.to_json(orient="records", date_format="iso", date_unit="ms")), indent=2, ensure_ascii=False
        )
        + "\n",
    }
