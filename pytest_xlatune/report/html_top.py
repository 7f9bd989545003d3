"""What the HTML report shows above a cell's chart (pure): the TL;DR, the warnings a reader must
see before trusting a bar (noise, unstable profiles, an inconclusive sweep, numerics changed) and
the recommended patch. The TL;DR and the patch are the markdown report's own sections, rendered
from the same ReportData and turned into HTML here, so the two reports cannot say different things.
"""

from __future__ import annotations

import re
from html import escape

from .data import ReportData
from .markdown import render_tuning_md

_CODE = re.compile(r"(?<!\\)`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_LINK = re.compile(r"(?<!\\)\[([^\]]+)(?<!\\)\]\([^)]*\)")  # a link to a markdown heading: its words only
# What shareable.markdown_text escapes for markdown (a backslash before \ ` [ ] |, and < > as
# entities): shown as the characters themselves, as a markdown viewer shows them.
_ESCAPED = re.compile(r"\\([\\`\[\]|])")


def section(markdown: str, title: str) -> str:
    """The body of the `## title` section of a rendered report ("" when it has none)."""
    start = markdown.find(f"\n## {title}\n")
    if start < 0:
        return ""
    body = markdown[start + len(title) + 5 :]
    end = body.find("\n## ")
    return (body if end < 0 else body[:end]).strip()


def inline(text: str) -> str:
    """Escaped text with the report's inline markdown: `code`, **bold**, [words](#anchor); the
    markdown escapes of the `md` filter (`\\[`, `&lt;`, …) outside code spans read as what they escape."""
    spans: list[str] = []

    def hold(span: re.Match[str]) -> str:  # a code span stays as written, even across **bold**
        spans.append(f"<code>{escape(span.group(1), quote=False)}</code>")
        return f"\0{len(spans) - 1}\0"

    text = _LINK.sub(r"\1", _CODE.sub(hold, text.replace("\0", "")))
    text = escape(_ESCAPED.sub(r"\1", text.replace("&lt;", "<").replace("&gt;", ">")), quote=False)
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    return re.sub("\0([0-9]+)\0", lambda held: spans[int(held.group(1))], text)


def to_html(markdown: str) -> str:
    """The markdown subset the report's sections use: paragraphs, `- ` lists, ``` fences."""
    out: list[str] = []
    fence: list[str] | None = None
    items: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append(f"<p>{inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{inline(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in markdown.splitlines():
        if line.startswith("```"):
            if fence is None:
                flush()
                fence = []
            else:
                out.append(f"<pre><code>{escape(chr(10).join(fence))}</code></pre>")
                fence = None
        elif fence is not None:
            fence.append(line)
        elif line.startswith("- "):
            if paragraph:
                flush()
            items.append(line[2:])
        elif not line.strip():
            flush()
        else:
            paragraph.append(line.strip())
    flush()
    return "".join(out)


def warnings(data: ReportData) -> list[str]:
    """One plain sentence per reason to doubt the chart, most important first (an under-powered
    sweep only when it found no winner: then "nothing better" is not established)."""
    found = []
    if data.disagreements:
        found.append(
            "Identical settings disagree beyond the noise prior: "
            + "; ".join(data.disagreements)
            + ". Check the nodes and the machine's load."
        )
    if data.noise is not None and data.noise.prior_rejected:
        found.append(
            f"Run-to-run noise is {data.noise.cv_pct:.2f} % (measured: no prior), beyond the "
            f"{data.noise.prior_cv_pct:.2f} % of a quiet machine: intervals are wide, check the "
            "nodes and the machine's load before trusting small effects."
        )
    for row in data.leaderboard:
        if row.unstable:
            found.append(f"Unstable: {row.profile}'s runs disagree beyond the noise ({row.runs}): never the recipe.")
    if data.winner is None and data.power is not None and not data.power.enough:
        more = (
            f"{data.power.runs_needed} runs of each profile (and of the baseline) would settle it"
            if data.power.runs_needed
            else "reduce the noise first"
        )
        found.append(
            f"Inconclusive: noise {data.power.noise_pct:.2f} %, "
            f"detectable ≥ {data.power.detectable_pct:.1f} %, above the "
            f"+{data.power.bound_pct:g} % bound; {more}."
        )
    for cross in data.cross_config:
        if cross.warning:
            found.append(f"Wave 6 passed with a warning: {cross.warning}.")
    for row in data.numerics_changed:
        found.append(
            f"Numerics changed: {row.profile}: {row.departed or 'its loss left the baseline’s'}"
            " (never the recipe unless --xlatune-numerics=warn)."
        )
    return found


def top_html(data: ReportData) -> str:
    """TL;DR, warnings and the recommended patch of a cell, as HTML for above its chart."""
    markdown = "\n" + render_tuning_md(data)
    parts = ['<div class="xlatune-tldr"><h3>TL;DR</h3>' + to_html(section(markdown, "TL;DR")) + "</div>"]
    if found := warnings(data):
        parts.append(
            '<div class="xlatune-warnings"><h3>Warnings</h3><ul>'
            + "".join(f"<li>{escape(w)}</li>" for w in found)
            + "</ul></div>"
        )
    patch = section(markdown, "Recommended deployment")
    if patch:
        parts.append('<div class="xlatune-patch"><h3>Recommended deployment</h3>' + to_html(patch) + "</div>")
    return "".join(parts)
