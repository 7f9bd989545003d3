"""Print the public real-log corpus (tests/data/logs/real/) as two Markdown tables: cases per failure
class (step cases as one row) and per source repository, real and synthetic counted apart.

    python scripts/corpus_counts.py [--since REV]

--since REV also counts the cases added after that git revision (files not in REV's tree).
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
from pathlib import Path

import yaml

REAL = Path(__file__).resolve().parents[1] / "tests" / "data" / "logs" / "real"
_GITHUB = re.compile(r"https://github\.com/([\w.-]+/[\w.-]+)")


def header(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8").partition("\n---\n")[0])


def source_of(head: dict) -> str:
    text = str(head["source"])
    m = _GITHUB.search(text)
    if m:
        return m.group(1)
    if "maxtext-slurm" in text:
        return "maxtext-slurm snapshot f64d93f"
    if "search index" in text:
        return "GitHub file in the search index (repository not named)"
    return "other: " + text.split(":", maxsplit=1)[0]


def table(title: str, counts: dict[str, collections.Counter], new: collections.Counter | None) -> str:
    """One Markdown table; the `new` column only when --since was given."""
    extra = " new |" if new is not None else ""
    rows = [f"| {title} | real | synthetic |{extra}", "|---|---|---|" + ("---|" if extra else "")]
    total: collections.Counter = collections.Counter()
    for key in sorted(counts, key=lambda k: (-sum(counts[k].values()), k)):
        c = counts[key]
        total.update(c)
        added = f" {new[key] or ''} |" if new is not None else ""
        rows.append(f"| {key} | {c['real'] or ''} | {c['synthetic'] or ''} |{added}")
    added = f" {sum(new.values())} |" if new is not None else ""
    rows.append(f"| **total** | {total['real']} | {total['synthetic']} |{added}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--since", help="count the cases added after this git revision")
    args = parser.parse_args()
    old: set[str] = set()
    if args.since:
        listed = subprocess.run(
            ["git", "ls-tree", "--name-only", f"{args.since}:tests/data/logs/real"],
            cwd=REAL.parents[3],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        old = set(listed.split())
    by_class: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    by_source: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    new_class: collections.Counter = collections.Counter()
    new_source: collections.Counter = collections.Counter()
    for path in sorted(REAL.glob("*.txt")):
        head = header(path)
        kind = "synthetic" if head.get("synthetic") else "real"
        cls = head["expect"].get("class", "step lines")
        src = source_of(head)
        by_class[cls][kind] += 1
        by_source[src][kind] += 1
        if args.since and path.name not in old:
            new_class[cls] += 1
            new_source[src] += 1
    since = args.since is not None
    print(table("class / kind", by_class, new_class if since else None))
    print()
    print(table("source", by_source, new_source if since else None))


if __name__ == "__main__":
    main()
