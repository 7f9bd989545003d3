"""One figure per settings: every item's TGS read back from each output of a sweep.

Used by tests/plugin/test_figure_consistency.py on a fake-trainer sweep, and by hand on the demo:

    pytest cells/demo_fsdp8.yml -v --junitxml=junit.xml --html=report.html \
        --xlatune-export=exports | tee demo.out
    python -m tests.figure_consistency . demo.out demo-tuning.md \
        exports/cells__demo_fsdp8-results.csv default cells/demo_fsdp8.lock.json

prints each item's figure per output and exits 1 when two outputs disagree.
"""

from __future__ import annotations

import csv
import html
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

_NUMBER = r"(\d[\d,]*\.\d)"
# `cells/x.yml::wave2::fast[sparse] PASSED 1029.9 TGS ...` (-v) and the summary's corrections
# `cells/x.yml::wave1::baseline[sparse]: 1041.6 TGS ...`.
_LINE_RE = re.compile(r"^(?P<node>\S+?\.ya?ml::\S+?)(?::| (?:PASSED|REUSED)) " + _NUMBER + " TGS")
_MD_ROW_RE = re.compile(r"^\| (?P<name>[^|`]+?)(?: ⭐)? \| `[^`]*` \| " + _NUMBER + r"(?: \(derived\))? \|")
_HTML_ROW_RE = re.compile(
    r"<tr><td>(?P<name>[^<]+?)(?: ★)?</td><td><code>.*?</code></td>"
    r'<td class="num">' + _NUMBER + "</td>"
)
_HTML_ITEM_RE = re.compile(
    r'<td class="col-testId">(?P<node>[^<]+)</td>.*?'
    r'<td class="xlatune-col xlatune-fig-tgs">' + r"(\d[\d,]*\.\d)?</td>"
)
LEADERBOARD_KINDS = {
    "baseline": "baseline-deployed",
    "restore_default": "baseline-no-env",
    "profile": None,
    "stack": None,
    "pipeline_shape": None,
}


def _num(text: str) -> str:
    return f"{float(text.replace(',', '')):.1f}"


def terminal(stdout: str) -> dict[str, str]:
    """Item → the figure the terminal shows last for it (its line, then the summary's correction)."""
    found = {}
    for line in stdout.splitlines():
        m = _LINE_RE.match(line.strip())
        if m:
            found[m.group("node").split("::", 1)[1]] = _num(m.group(2))
    return found


def junit(path: Path) -> dict[str, str]:
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        if props.get("xlatune_tgs") not in (None, "None"):
            found[str(props["xlatune_item"])] = _num(str(props["xlatune_tgs"]))
    return found


def exports(path: Path) -> tuple[dict[str, str], dict[str, tuple[str, str, str]]]:
    """Item → figure, and item → (kind, profile, config tag), from a results CSV."""
    figures, names = {}, {}
    with path.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            names[row["item"]] = (row["kind"], row["profile"], row["config_tag"])
            if row["tgs"]:
                figures[row["item"]] = _num(row["tgs"])
    return figures, names


def _by_profile(rows: dict[str, str], names: dict[str, tuple[str, str, str]], primary: str) -> dict[str, str]:
    """Leaderboard rows (by profile name) as item → figure, for the items a leaderboard shows."""
    found = {}
    for item, (kind, profile, tag) in names.items():
        if kind in LEADERBOARD_KINDS and tag == primary:
            name = LEADERBOARD_KINDS[kind] or profile
            if name in rows:
                found[item] = rows[name]
    return found


def markdown(path: Path, names: dict[str, tuple[str, str, str]], primary: str) -> dict[str, str]:
    text = path.read_text(encoding="utf-8")
    board = text.split("## Tuning leaderboard", 1)[1].split("\n## ", 1)[0]
    rows = {m.group("name").strip(): _num(m.group(2)) for line in board.splitlines() if (m := _MD_ROW_RE.match(line))}
    return _by_profile(rows, names, primary)


def html_report(
    path: Path, names: dict[str, tuple[str, str, str]], primary: str
) -> tuple[dict[str, str], dict[str, str]]:
    """The HTML leaderboard's figures, and the per-item table's TGS column (both as item → figure)."""
    text = html.unescape(path.read_text(encoding="utf-8")).replace('\\"', '"')
    rows = {m.group("name").strip(): _num(m.group(2)) for m in _HTML_ROW_RE.finditer(text)}
    items = {
        m.group("node").split("::", 1)[1].removesuffix("::call"): _num(m.group(2))
        for m in _HTML_ITEM_RE.finditer(text)
        if m.group(2)
    }
    return _by_profile(rows, names, primary), items


def lock_figures(path: Path, names: dict[str, tuple[str, str, str]]) -> dict[str, str]:
    """The lock's recipes as item → figure, for the items of the recipe's profile and tag."""
    recipes = json.loads(path.read_text(encoding="utf-8")).get("recipes", [])
    return {
        item: _num(str(r["tgs"]))
        for r in recipes
        for item, (kind, profile, tag) in names.items()
        if kind in ("profile", "stack") and profile == r["profile"] and tag == r["config_tag"]
    }


def compare(outputs: dict[str, dict[str, str]]) -> list[str]:
    """One line per item whose figure differs between two outputs that show it."""
    problems = []
    items = sorted({item for found in outputs.values() for item in found})
    for item in items:
        seen = {name: found[item] for name, found in outputs.items() if item in found}
        if len(set(seen.values())) > 1:
            problems.append(f"{item}: " + ", ".join(f"{name} {value}" for name, value in seen.items()))
    return problems


def collect(
    root: Path, stdout: str, report: Path, csv_path: Path, primary: str, lock: Path | None = None
) -> dict[str, dict[str, str]]:
    figures, names = exports(csv_path)
    board, rows = html_report(root / "report.html", names, primary)
    found = {
        "terminal": terminal(stdout),
        "junit": junit(root / "junit.xml"),
        "html": board,
        "html-rows": rows,
        "markdown": markdown(report, names, primary),
        "csv": figures,
    }
    if lock is not None and lock.exists():
        found["lock"] = lock_figures(lock, names)
    return found


def main(argv: list[str]) -> int:
    root, out, report, csv_path = (Path(a) for a in argv[:4])
    primary = argv[4] if len(argv) > 4 else "default"
    lock = Path(argv[5]) if len(argv) > 5 else None
    outputs = collect(root, out.read_text(encoding="utf-8"), report, csv_path, primary, lock)
    for name, found in outputs.items():
        print(f"{name}: {len(found)} items")
    problems = compare(outputs)
    print("\n".join(problems) or "every item shows one figure in every output")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
