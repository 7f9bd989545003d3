"""The per-cell history: one row per recipe and config tag for every sweep and gate run, so a
recipe's speed can be followed across images (`<store>/<slug>.history.csv`, beside the store).

A row holds the date, what wrote it (`sweep`, `gate`, `repair`), the image, the recipe, the
baseline's and the recipe's mean TGS with a 95 % t interval of their runs, the recipe's
same-window control on the lock's image (gate runs) and the node-hours the session spent on the
cell. The file is a pandas DataFrame written as CSV (no pyarrow needed), replaced in one rename
through safefs (a link where it goes is refused, never followed).
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pandas as pd
from scipy import stats as scipy_stats

from ..errors import XlatuneError
from ..results import JobResult, RunKind
from ..safefs import read_text_nofollow, write_atomic
from ..verdict import verdicts

SUFFIX = ".history.csv"


class HistoryError(XlatuneError):
    """The history file is unreadable; one line naming the file and what was found."""


@dataclass(frozen=True)
class HistoryRow:
    date: str  # ISO date-time of the session (UTC, seconds)
    kind: str  # sweep | gate | repair
    image: str  # "" = the session's default image
    config_tag: str
    recipe: str  # the recipe's profile ("" when the sweep found none)
    baseline_tgs: float
    baseline_low: float
    baseline_high: float
    recipe_tgs: float
    recipe_low: float
    recipe_high: float
    control_tgs: float  # gate: the recipe on the lock's image in the same window (nan otherwise)
    runs: int  # recipe runs behind recipe_tgs
    node_hours: float  # what the session's jobs of the cell cost


COLUMNS = tuple(f.name for f in fields(HistoryRow))


def history_path(store: Path) -> Path:
    """`<store>/<slug>.history.csv` beside the cell's `<slug>.jsonl`."""
    return store.with_name(store.stem + SUFFIX)


def interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and two-sided t interval of the runs; one run (or none) has no interval (nan)."""
    if not values:
        return math.nan, math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, len(values) - 1)) * sd / math.sqrt(len(values))
    return mean, mean - half, mean + half


def _tgs(runs: Iterable[JobResult]) -> list[float]:
    return [r.tgs for r in runs if r.measured and r.tgs is not None]


def row(
    date: str,
    kind: str,
    image: str,
    config_tag: str,
    recipe: str,
    recipe_values: Sequence[float],
    baseline_values: Sequence[float],
    node_hours: float,
    control_values: Sequence[float] = (),
) -> HistoryRow:
    """One history row from the steady TGS of the runs behind it."""
    base, rec = interval(baseline_values), interval(recipe_values)
    return HistoryRow(
        date,
        kind,
        image,
        config_tag,
        recipe,
        *base,
        *rec,
        sum(control_values) / len(control_values) if control_values else math.nan,
        len(recipe_values),
        node_hours,
    )


def gate_rows(
    date: str, image: str, results: Sequence[JobResult], node_hours: float, kind: str = "gate"
) -> list[HistoryRow]:
    """A gate session's rows: per config tag, the locked recipe and the baseline on the new image,
    the recipe's old-image runs as its control."""
    gate = [r for r in results if r.wave == "gate"]
    rows = []
    for tag in dict.fromkeys(r.config_tag for r in gate if r.kind is RunKind.GATE_RECIPE):
        in_tag = [r for r in gate if r.config_tag == tag]
        recipe = [r for r in in_tag if r.kind is RunKind.GATE_RECIPE]
        rows.append(
            row(
                date,
                kind,
                image,
                tag,
                recipe[0].profile,
                _tgs(recipe),
                _tgs(r for r in in_tag if r.kind is RunKind.BASELINE),
                node_hours,
                _tgs(r for r in in_tag if r.kind is RunKind.GATE_OLD_RECIPE),
            )
        )
    return rows


def sweep_rows(
    date: str,
    image: str,
    results: Sequence[JobResult],
    recipes: dict[str, str],
    node_hours: float,
    ran: Collection[str] | None = None,
    kind: str = "sweep",
) -> list[HistoryRow]:
    """A sweep's rows: per config tag whose baseline ran in the session (`ran`: the items that
    ran; None: every tag), its recipe (config tag → profile; "" when none was found) against the
    tag's baselines — each the runs behind the figure every other output shows (every run of the
    recipe's settings; every baseline run of the tag)."""
    rows = []
    measured = [r for r in results if r.measured and r.tgs is not None and r.image == image]
    tags = (r.config_tag for r in measured if r.kind is RunKind.BASELINE and (ran is None or r.item in ran))
    for tag in dict.fromkeys(tags):
        in_tag = [r for r in measured if r.config_tag == tag]
        profile = recipes.get(tag, "")
        recipe = [r for r in in_tag if profile and r.profile == profile and r.kind is not RunKind.BASELINE]
        values = list(verdicts.group_of(recipe[0], measured)) if recipe else []
        rows.append(row(date, kind, image, tag, profile, values, verdicts.baseline_values(measured, tag), node_hours))
    return rows


def load_history(path: Path) -> pd.DataFrame:
    """The history as a DataFrame (no file: empty, with the columns)."""
    text = read_text_nofollow(path)
    if not text:
        empty: pd.DataFrame = pd.DataFrame(columns=list(COLUMNS))
        return empty
    try:
        frame = pd.read_csv(
            io.StringIO(text),
            keep_default_na=False,
            na_values=[""],
            dtype={"image": str, "recipe": str, "config_tag": str, "kind": str, "date": str},
        )
    except (ValueError, pd.errors.ParserError) as error:
        raise HistoryError(f"{path}: expected the history CSV, found {error}") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise HistoryError(f"{path}: columns: expected {', '.join(COLUMNS)}, found no {', '.join(missing)}")
    frame[["image", "recipe"]] = frame[["image", "recipe"]].fillna("")
    kept: pd.DataFrame = frame[list(COLUMNS)]
    _check_rows(path, kept)
    return kept


TEXT_COLUMNS = ("date", "kind", "image", "config_tag", "recipe")
KINDS = ("sweep", "gate", "repair")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][0-9:.]+(?:Z|[+-]\d{2}:?\d{2})?)?")


def _row_error(where: str, column: str, expected: str, found: object) -> HistoryError:
    shown = repr(str(found))
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return HistoryError(f"{where}: {column}: expected {expected}, found {shown}")


def _check_rows(path: Path, frame: pd.DataFrame) -> None:
    """Every row as append_rows writes it (the file may have been edited by hand): a date, a
    kind, finite numbers or nothing; HistoryError naming the line, column and value otherwise."""
    for index, record in enumerate(frame.astype(object).to_dict("records")):
        fail = functools.partial(_row_error, f"{path}:{index + 2}")  # line 1 is the header
        date, kind = record["date"], record["kind"]
        if not isinstance(date, str) or not _DATE.fullmatch(date):
            raise fail("date", "an ISO date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS+00:00)", date)
        if kind not in KINDS:
            raise fail("kind", f"one of {', '.join(KINDS)}", kind)
        for column in COLUMNS:
            value = record[column]
            if column in TEXT_COLUMNS or value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise fail(column, "a number or nothing", value) from None
            if not math.isfinite(number) or (column in ("runs", "node_hours") and number < 0):
                raise fail(column, "a finite number" + (" >= 0" if column in ("runs", "node_hours") else ""), value)


def append_rows(path: Path, rows: Sequence[HistoryRow]) -> pd.DataFrame:
    """Append `rows` to the history at `path` (created when missing); the whole history back."""
    frame = load_history(path)
    if rows:
        new = pd.DataFrame([asdict(r) for r in rows], columns=list(COLUMNS))
        frame = new if frame.empty else pd.concat([frame, new], ignore_index=True)
        write_atomic(path, frame.to_csv(index=False, float_format="%.6g"))
    return frame
