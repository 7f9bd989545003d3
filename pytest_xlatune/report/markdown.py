"""Render the tuning report (markdown) from ReportData with the package's jinja2 templates."""

from __future__ import annotations

from collections.abc import Iterable

import jinja2

from .data import ReportData


def _num(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f} %"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} %"


def _pairs(pairs: Iterable[tuple[str, str]]) -> str:
    return " ".join(f"{k}={v}" for k, v in pairs)


def _ci(row: object) -> str:
    low, high = getattr(row, "ci_low", None), getattr(row, "ci_high", None)
    return "—" if low is None or high is None else f"[{low:+.2f}, {high:+.2f}] %"


def _oneline(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_xlatune", "report/templates"),
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False,
    )
    env.filters.update(num=_num, signed=_signed, pct=_pct, pairs=_pairs, oneline=_oneline, ci=_ci)
    return env


def render_tuning_md(data: ReportData) -> str:
    return environment().get_template("tuning.md.j2").render(d=data)
