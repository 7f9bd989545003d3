"""The pytest-html report as a real browser renders it: headless Chromium, after JavaScript.

pytest-html 4 ships the results as a JSON blob and builds the results table with JavaScript, so
the file on disk holds no result rows at all: only the DOM Chromium dumps after running the page
shows what a reader sees. Needs /usr/bin/chromium (Debian package `chromium`); skipped without it,
except under CI=true, where a missing browser is a broken CI image and fails.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import REAL_FIXED as FIXED  # the full leaderboard: every item runs, the failures too

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
# No network, no first-run or background work: the page is a self-contained file.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

CELL = """\
model_tag: fake
nodes: 1
parallelism: FSDP=8
pdbs: 2
config_tags:
  sparse: {}
env_file:
  - flag: --xla_fake_env=1
    image_default: "0"
waves:
  2:
    - name: fast
      xla_flags: [--xla_fake_tgs=1100]
    - name: slow
      xla_flags: [--xla_fake_tgs=900]
  3:
    - name: stale
      xla_flags: [--xla_gpu_enable_obsolete_thing=true]
    - name: oom
      xla_flags: [--xla_fake_fail=oom]
"""


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    text: str = ""

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def iter(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        found = [] if (tag and self.tag != tag) or (cls and cls not in self.classes()) else [self]
        for child in self.children:
            found += child.iter(tag, cls)
        return found

    def all_text(self) -> str:
        return (self.text + "".join(c.all_text() for c in self.children)).strip()


class _Tree(HTMLParser):
    """The dumped DOM as Elements (it is HTML, not XML: void tags never close)."""

    VOID = frozenset({"meta", "link", "br", "img", "input", "hr", "source", "col", "wbr"})

    def __init__(self) -> None:
        super().__init__()
        self.root = Element("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in self.VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].text += data


def parse(html: str) -> Element:
    tree = _Tree()
    tree.feed(html)
    return tree.root


@pytest.fixture
def chromium() -> Path:
    if not CHROMIUM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {CHROMIUM} is missing: scripts/test.sh installs `chromium`")
        pytest.skip(f"needs {CHROMIUM} (apt-get install -y chromium)")
    return CHROMIUM


def run_chromium(binary: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(binary), *CHROMIUM_ARGS, f"--user-data-dir={profile}", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result


@pytest.fixture
def report_html(pytester: pytest.Pytester, fake_trainer_env: None) -> Path:
    cell = pytester.makefile(".yml", demo_cell=CELL)
    result = pytester.runpytest(str(cell), "--html=report.html", "--self-contained-html", *FIXED)
    # baseline ×2, restore_default, evidence, fast, slow, winner evidence pass; stale fails;
    # oom is an xfail.
    result.assert_outcomes(passed=7, failed=1, xfailed=1)
    return pytester.path / "report.html"


def test_rendered_report_has_xlatune_columns_rows_log_tail_and_chart(
    report_html: Path, chromium: Path, tmp_path: Path
) -> None:
    assert "<svg" in report_html.read_text() and "<script src" not in report_html.read_text()
    dom = parse(run_chromium(chromium, tmp_path / "profile", "--dump-dom", report_html.as_uri()).stdout)

    head = next(e for e in dom.iter("thead") if e.attrs.get("id") == "results-table-head")
    headers = [th.all_text() for th in head.iter("th")]
    for title in ("Profile", "Wave", "Config", "TGS", "Δ%", "Job", "Verdict"):
        assert any(h.startswith(title) for h in headers), (title, headers)

    rows = {
        body.attrs["id"]: body for body in dom.iter("tbody", "results-table-row") if "id" in body.attrs
    }  # the id-less one is the page's <template>
    assert rows, "no result rows: the page's JavaScript did not build the results table"
    fast = next(body for row_id, body in rows.items() if row_id.endswith("wave2::fast[sparse]"))
    cells = [td.all_text() for td in fast.iter("tr", "collapsible")[0].iter("td")]
    column = dict(zip(headers, cells))
    assert re.fullmatch(r"1,?100\.\d", column["TGS"]), column
    assert column["Profile"] == "fast" and column["Wave"] == "wave2" and column["Config"] == "sparse"
    assert re.match(
        r"\+(?:10\.0\d|9\.9\d) % \[\+\d+\.\d\d, \+\d+\.\d\d\]", column[next(h for h in headers if h.startswith("Δ%"))]
    ), column

    stale = next(body for row_id, body in rows.items() if row_id.endswith("wave3::stale[sparse]"))
    link = next(a for a in stale.iter("a") if a.all_text().startswith("log tail"))
    tail = base64.b64decode(link.attrs["href"].split("base64,", 1)[1]).decode()
    assert "Unknown flag in XLA_FLAGS: --xla_gpu_enable_obsolete_thing=true" in tail

    chart = dom.iter("svg", "xlatune-chart")
    assert len(chart) == 1
    bars = chart[0].iter("rect", "xlatune-bar")
    charted = [g.attrs["data-profile"] for g in chart[0].iter("g", "xlatune-row")]
    board = next(t for t in dom.iter("table") if "xlatune-leaderboard" in t.classes())
    listed = [tr.iter("td")[0].all_text().removesuffix(" ★") for tr in board.iter("tr")[1:]]
    assert charted == listed == ["fast", "baseline-deployed", "baseline-no-env", "slow"]
    assert len(bars) == len(listed)
    assert "xlatune-better" in bars[0].classes() and "xlatune-worse" in bars[-1].classes()
    assert len(chart[0].iter("path", "xlatune-errorbar")) == len(listed)
    baseline = chart[0].iter("line", "xlatune-baseline")
    assert len(baseline) == 1 and baseline[0].attrs.get("stroke-dasharray")

    # The rendered page opens on the TL;DR; pytest-html's Environment table comes after the
    # results, still filled in by the page's script (Python, Platform, Plugins).
    order = [
        e.attrs.get("id") or " ".join(sorted(e.classes()))
        for e in dom.iter()
        if e.attrs.get("id") in ("environment", "results-table") or "xlatune-tldr" in e.classes()
    ]
    assert order == ["xlatune-tldr", "results-table", "environment"], order
    environment = next(e for e in dom.iter("table") if e.attrs.get("id") == "environment")
    assert "Python" in environment.all_text() and "Plugins" in environment.all_text()


def test_screenshot_of_the_report(report_html: Path, chromium: Path, tmp_path: Path) -> None:
    png = tmp_path / "report.png"
    run_chromium(
        chromium,
        tmp_path / "profile",
        "--hide-scrollbars",
        "--window-size=1280,1800",
        f"--screenshot={png}",
        report_html.as_uri(),
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"screenshot: {png}")
