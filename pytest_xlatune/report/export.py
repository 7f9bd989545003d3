"""A cell's latest results as a pandas DataFrame, written as CSV and JSON (`--xlatune-export`).

One row per latest result of each run of the cell (what the report shows). Δ% and its 95 %
interval are vs the mean of the config tag's baseline-deployed repeats, as in the report; they
are empty for the baseline repeats themselves and for runs without a measurement. Times are UTC.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

from ..judge import verdicts
from ..plan.expand import RunKind
from ..results import JobResult

COLUMNS = ("item", "wave", "profile", "config_tag", "kind", "job_id", "verdict", "tgs",
           "step_seconds", "delta_pct", "ci_low", "ci_high", "direction", "flags", "env",
           "nodelist", "image", "log_path", "submitted_at", "finished_at")


def _row(result: JobResult, results: Sequence[JobResult]) -> dict[str, object]:
    comparison = None
    if result.kind is not RunKind.BASELINE and result.measured and result.tgs is not None:
        comparison = verdicts.compare([result.tgs], results, result.config_tag)
    return {
        "item": result.item, "wave": result.wave, "profile": result.profile,
        "config_tag": result.config_tag, "kind": result.kind.value, "job_id": result.job_id,
        "verdict": result.verdict.value, "tgs": result.tgs, "step_seconds": result.step_seconds,
        "delta_pct": comparison.delta_pct if comparison else None,
        "ci_low": comparison.ci_low_pct if comparison else None,
        "ci_high": comparison.ci_high_pct if comparison else None,
        "direction": comparison.verdict.value if comparison else "",
        "flags": " ".join(result.xla_flags),
        "env": " ".join(f"{k}={v}" for k, v in result.env),
        "nodelist": result.nodelist, "image": result.image, "log_path": result.log_path,
        "submitted_at": result.submitted_at or None, "finished_at": result.finished_at or None,
    }


def _order(result: JobResult) -> tuple[int, str]:
    return (int(result.job_id), "") if result.job_id.isdigit() else (0, result.job_id)


def results_frame(results: Sequence[JobResult]) -> pd.DataFrame:
    """One row per result, sorted by job id, with the COLUMNS in that order."""
    # Declared: pandas-stubs' constructor overloads come out Any here.
    frame: pd.DataFrame = pd.DataFrame([_row(r, results) for r in sorted(results, key=_order)],
                         columns=list(COLUMNS))
    for column in ("tgs", "step_seconds", "delta_pct", "ci_low", "ci_high"):
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
        ".json": json.dumps(json.loads(frame.to_json(orient="records", date_format="iso",
                                                     date_unit="ms")),
                            indent=2, ensure_ascii=False) + "\n",
    }
