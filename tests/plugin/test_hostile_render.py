"""Hostile text in every shareable output: a job log that prints tokens, terminal escape codes,
HTML and markdown; a cell whose file name and `hardware` hold markup; a broken cell beside it
under --html. One session, rendered by the real pytest-html, junitxml and the report writer."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from tests.conftest import FIXED

SECRET = "s3cr3t-Value-0042"  # an environment variable with a secret-looking name holds it
GITHUB = "ghp_" + "A1b2C3d4E5" * 4  # a token shape, known to nobody's environment
KEYED = "wandbK3yValue42"  # a `*_KEY=` assignment's value, known to nobody's environment
OSC = "\x1b]0;pwned-title\x07\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\\x1b]52;c;Y2xpcA==\x07"
SAY = f"{OSC} token={SECRET} gh {GITHUB} WANDB_KEY={KEYED} <script>alert(1)</script> [click](http://evil.example/) | cell break"
# A private key's body the job printed, its BEGIN line not in the excerpt (the END line is).
KEY_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
    "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo",
)
SAY_KEY = SAY + "\n" + "\n".join(KEY_BODY) + "\n-----END RSA PRIVATE KEY-----"

CELL = """\
model_tag: fake
nodes: 1
parallelism: FSDP=8
hardware: "<b>MI300X</b> [x](http://evil.example/) | y"
config_tags:
  sparse: {}
waves:
  2:
    - name: fast
      xla_flags: [--xla_fake_tgs=1100]
    - name: crashy
      xla_flags: [--xla_fake_fail=crash]
"""
HOSTILE_NAME = "<img src=x onerror=alert(1)>"


def _outputs(root: Path) -> dict[str, str]:
    """Every shareable file the session wrote (not the private store or the raw job logs)."""
    store = root / ".xlatune"
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8", errors="replace")
        for p in root.rglob("*")
        if p.is_file() and store not in p.parents and p.suffix in (".md", ".html", ".xml", ".csv", ".json", ".txt")
    }


def _outside_code_and_comments(markdown: str) -> str:
    """What a markdown renderer would interpret: without HTML comments and code spans."""
    text = re.sub(r"<!--.*?-->", "", markdown, flags=re.S)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)


def _html_rows(page: str) -> list[dict[str, object]]:
    blob = re.search(r'data-jsonblob="([^"]*)"', page)
    assert blob, "pytest-html wrote no data blob"
    data = json.loads(html.unescape(blob.group(1)))
    return [test for tests in data["tests"].values() for test in tests]


def test_hostile_text_is_masked_escaped_and_stripped_everywhere(
    pytester: pytest.Pytester, fake_trainer_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XLATUNE_TEST_API_TOKEN", SECRET)
    monkeypatch.setenv("FAKE_TRAINER_SAY", SAY_KEY)
    cell = pytester.mkdir("cells") / f"{HOSTILE_NAME}.yml"
    cell.write_text(CELL)
    result = pytester.runpytest(
        str(cell),
        *FIXED,
        "--html=report.html",
        "--junitxml=junit.xml",
        "--xlatune-export=exports",
        "--xlatune-mask=cell br[a-z]+",
    )
    result.assert_outcomes(passed=5, failed=1)
    terminal = result.stdout.str() + result.stderr.str()
    files = _outputs(pytester.path)
    assert {"fake-tuning.md", "report.html", "junit.xml"} <= set(files)
    assert any(name.startswith("exports/") for name in files)
    failing = next(t for t in _html_rows(files["report.html"]) if t["result"] == "Failed")
    assert "boom" in str(failing["log"])  # the job's error line reached the report, cleaned
    for name, text in {"terminal": terminal, **files}.items():
        assert SECRET not in text and GITHUB not in text and KEYED not in text and "cell break" not in text, name
        assert not any(line[20:] in text for line in KEY_BODY), name
        assert "pwned-title" not in text and "Y2xpcA" not in text and "\x1b]" not in text, name
        assert "#x1B" not in text and "\\u001b" not in text, name
    assert "[masked]" in files["fake-tuning.md"] and "[masked]" in files["junit.xml"]

    # pytest-html: the test id cell shows the file name as text, never as an element.
    for test in _html_rows(files["report.html"]):
        cells_html = "".join(str(c) for c in test["resultsTableRow"])  # type: ignore[union-attr]
        assert "<img" not in cells_html and "&lt;img src=x" in cells_html
        assert "<script>" not in str(test["log"])

    # The tuning report: markup from the cell and the log is text, the failed-runs row keeps
    # its four cells, and no link or HTML element comes from a value.
    report = files["fake-tuning.md"]
    rendered = _outside_code_and_comments(report)
    assert not re.search(r"<[A-Za-z/!]", rendered), re.findall(r".{20}<[A-Za-z/!].{20}", rendered)
    assert "](http" not in rendered.replace("\\](http", "")
    assert "&lt;b&gt;MI300X&lt;/b&gt; \\[x\\](http://evil.example/) \\| y" in report
    row = next(line for line in report.splitlines() if "boom" in line)
    assert len(re.findall(r"(?<!\\)\|", row)) == 5, row  # | item | job | verdict | reason |
    assert "<!-- xlatune:cell FSDP=8 cells/&lt;img src=x onerror=alert(1)&gt;.yml -->" not in report
    assert re.search(r"^<!-- xlatune:cell FSDP=8 cells/<img src=x onerror=alert\(1\)&gt;\.yml -->$", report, re.M)


def test_collection_error_with_html_is_a_collection_error(pytester: pytest.Pytester) -> None:
    """pytest-html's row hooks see a CollectReport (no user_properties): no INTERNALERROR."""
    pytester.makefile(".yml", bad="model_tag: [unclosed\n")
    pytester.makepyfile(test_import_error="import no_such_module_anywhere\n")
    result = pytester.runpytest("bad.yml", "test_import_error.py", "--html=report.html", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "INTERNALERROR" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*bad.yml:1: yaml: expected valid YAML*", "*2 errors*"])
    rows = _html_rows((pytester.path / "report.html").read_text())
    assert {t["result"] for t in rows} == {"Error"} and len(rows) == 2
