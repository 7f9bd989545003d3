"""What may leave the machine: control sequences stripped, secrets masked, markdown escaped.

Every shareable output (the tuning reports, exports and lock, the HTML report, junit.xml, the
terminal, notifications) passes its text through `clean` at the boundary where it is written or
handed to pytest; the raw job logs and the private results store keep the text as it was.
docs/explanation/security.md states the rule.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

MASK = "[masked]"

# Environment variable names that hold secrets (case-insensitive, anywhere in the name; PASS and
# PWD only as a name's last word after another: DB_PASS, not PWD, the working directory).
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|[_-](?:PASS|PWD)$", re.IGNORECASE)
# Values shorter than this are not masked: FOO_KEY=1 would mask every "1" of a report.
MIN_SECRET_LENGTH = 6
_NOT_SECRET = frozenset({"true", "false", "none", "null", "unset", "enabled", "disabled"})

# The words of a secret's name, as a name or an option holds them (API_KEY, api-key, apikey).
_SECRET_WORDS = r"(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API[_-]?KEY|ACCESS[_-]?KEY|PRIVATE[_-]?KEY|CREDENTIALS?)"

# The words before a final KEY that name no secret: a cache's, a sort's, a PRNG's or a public key.
_ORDINARY_KEYS = (
    r"(?:cache|compilation|sort|lookup|hash|dict|map|primary|foreign|public|pub|host|rng|prng|random|seed"
    r"|group|partition|shard|index|row|column|sequence|metric|config|cfg|jit|name|sharding)"
)

# One line of a PEM or OpenSSH key's base64 body: 60 to 76 characters, capitals, small letters
# and digits all present (a hex hash has no capitals and small letters both). Alone, it neither
# starts with nor holds five `/` (a path; a random body line holds one on average); beside such
# a line, any goes. Nothing of a name or a path touches it.
_KEY_MIX = r"(?=[A-Za-z0-9+/]{0,75}[A-Z])(?=[A-Za-z0-9+/]{0,75}[a-z])(?=[A-Za-z0-9+/]{0,75}[0-9])"
_KEY_BODY = rf"(?!/)(?![A-Za-z0-9+=]*(?:/[A-Za-z0-9+=]*){{5}}){_KEY_MIX}[A-Za-z0-9+/]{{60,76}}={{0,2}}"
_KEY_NEXT = rf"{_KEY_MIX}[A-Za-z0-9+/]{{60,76}}={{0,2}}"
_KEY_LINE = rf"(?<![A-Za-z0-9+/=_.-]){_KEY_BODY}(?![A-Za-z0-9+/=_.-])"
_KEY_LINE_NEXT = rf"(?<![A-Za-z0-9+/=_.-]){_KEY_NEXT}(?![A-Za-z0-9+/=_.-])"
# What may stand before a log line: indentation, srun --label's task number.
_LINE_START = r"^[ \t]*(?:\d{1,6}:[ \t]*)?"

# Well-known token shapes, wherever they appear (a job that printed its environment, a URL).
TOKEN_SHAPES: tuple[tuple[str, str], ...] = (
    ("GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    ("GitHub fine-grained token", r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    ("Slack token", r"\bxox[abposre]-[A-Za-z0-9-]{8,}"),
    ("AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("Hugging Face token", r"\bhf_[A-Za-z0-9]{20,}"),
    ("OpenAI / Anthropic key", r"\bsk-(?:proj-|ant-(?:[a-z]+\d*-)?)?[A-Za-z0-9_-]{20,}"),
    ("GitLab token", r"\bgl(?:pat|dt|ptt|rt)-[A-Za-z0-9_-]{20,}"),
    ("Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("npm token", r"\bnpm_[A-Za-z0-9]{36}"),
    ("PyPI token", r"\bpypi-AgE[A-Za-z0-9_-]{40,}"),
    ("JWT", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    ("Bearer credential", r"(?i:\bBearer\s+)(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
    # An HTTP Authorization header a job printed, whatever its scheme (Basic, Token, Digest…).
    (
        "Authorization header",
        r"(?i:\b(?:Proxy-)?Authorization\b[\"']?\s*[:=]\s*[\"']?(?:[A-Za-z]+\s+)?)"
        r"(?P<secret>[^\s\"'`,;|<>]{6,})",
    ),
    (
        # The word may be followed by more of the name (SOME_SECRET_VALUE), `_PASS` only ends it
        # (DB_PASS, not PASS_RATE); a quote may close the name and open the value (JSON, YAML);
        # words may be joined by `-` as in HTTP headers (x-api-key: …).
        "secret-named assignment",
        rf"(?i:\b[A-Za-z0-9_-]*(?:{_SECRET_WORDS}(?:[_-][A-Za-z0-9_-]*)?|[_-]PASS)\b)[\"']?\s*[=:]\s*[\"']?"
        rf"(?P<secret>[^\s\"'`,;|<>]{{{MIN_SECRET_LENGTH},}})",
    ),
    # A name whose last word is KEY or PWD (WANDB_KEY, HF_KEY, DB_PWD, an exported bare KEY): the
    # words above catch these words anywhere in a name; KEY and PWD only end one, after a word that
    # is no data structure's (cache_key, sort_key, rng_key, public_key) and not PWD alone (the
    # working directory an environment dump prints).
    (
        "secret-named variable",
        rf"(?:(?<!\w)(?:(?i:(?:[A-Za-z0-9]+[_-])*(?!{_ORDINARY_KEYS}[_-])[A-Za-z0-9]+[_-](?:KEY|PWD))|KEY)"
        rf"[\"']?\s*[=:]\s*[\"']?)(?P<secret>[^\s\"'`,;|<>]{{{MIN_SECRET_LENGTH},}})",
    ),
    # A command-line option with its value after a space (--password hunter2, --api-key …); the
    # value is no other option.
    (
        "secret-named option",
        rf"(?i:(?<![\w-])--?[A-Za-z0-9_-]*{_SECRET_WORDS}\s+)(?P<secret>[^\s\"'`,;|<>-][^\s\"'`,;|<>]"
        rf"{{{MIN_SECRET_LENGTH - 1},}})",
    ),
    # A PEM private key (a job that printed a key file), from its BEGIN line to its END line.
    ("PEM private key", r"(?s:-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z))"),
    # A PEM key's body whose BEGIN line the excerpt cut off (a log tail, a failure's excerpt): whole
    # lines of 60 to 76 base64 characters (PEM's 64, OpenSSH's 70) mixing capitals, small letters
    # and digits, with the short last line and an END line after them; or such 64-character runs
    # joined by escaped newlines (a JSON string). A hash (hex), a path or a module name is no such line.
    (
        "PEM key body",
        rf"(?m:(?:{_LINE_START}{_KEY_LINE_NEXT}[ \t]*\r?\n)*{_LINE_START}{_KEY_LINE}"
        rf"(?:[ \t]*\r?\n{_LINE_START}{_KEY_LINE_NEXT})*"
        rf"(?:[ \t]*\r?\n{_LINE_START}[A-Za-z0-9+/]{{1,76}}={{0,2}}(?=[ \t]*\r?$))?"
        rf"(?:[ \t]*\r?\n{_LINE_START}-----END [A-Z ]*PRIVATE KEY-----)?[ \t]*(?=\r?$))",
    ),
    # The last lines of a body right before its END line, the BEGIN line cut off: the END line
    # vouches for them, so any key line goes (a lone one that starts with `/` or holds five reads
    # as a path above). At most three lines before the short last one: a longer body holds a
    # line the pattern above takes (but for odds of 1 in 64**4), and the bound keeps a run of
    # path-like lines linear.
    (
        "PEM key body before its END line",
        rf"(?m:{_LINE_START}{_KEY_LINE_NEXT}(?:[ \t]*\r?\n{_LINE_START}{_KEY_LINE_NEXT}){{0,2}}"
        rf"(?:[ \t]*\r?\n{_LINE_START}[A-Za-z0-9+/]{{1,76}}={{0,2}})?"
        rf"[ \t]*\r?\n{_LINE_START}-----END [A-Z ]*PRIVATE KEY-----[ \t]*(?=\r?$))",
    ),
    (
        "PEM key body, escaped newlines",
        rf"(?:(?<=\\n)|(?<![A-Za-z0-9+/=_.-])){_KEY_NEXT}(?:\\r)?\\n(?:{_KEY_NEXT}(?:\\r)?\\n)+"
        r"(?:[A-Za-z0-9+/]{1,76}={0,2}(?![A-Za-z0-9+/=_.-]))?",
    ),
    # The password of a URL's user info (https://user:password@host/…), the user name kept.
    ("URL password", r"(?i:\b[a-z][a-z0-9+.-]*://[^\s/?#@:\"'<>]*:)(?P<secret>[^\s/?#@\"'<>]+)(?=@)"),
)

# ESC-introduced sequences: CSI (SGR colours are the CSI ending in "m"), OSC (window title,
# hyperlinks, clipboard) and DCS/SOS/PM/APC up to BEL or ST (or the end of the line), then any
# other two-byte escape; C1 controls; C0 controls but tab and newline; bidi overrides.
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
_CONTROLS = re.compile(rf"{_STRING}|{_CSI}|\x1b[ -~]?|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SGR = re.compile(r"(?:\x1b\[|\x9b)[0-9;:]*m")


def strip_controls(text: str, keep_sgr: bool = False) -> str:
    """Drop terminal control sequences and control characters (tab and newline stay); with
    `keep_sgr`, colour sequences stay (terminal output only)."""
    if keep_sgr:
        return _CONTROLS.sub(lambda m: m.group() if _SGR.fullmatch(m.group()) else "", text)
    return _CONTROLS.sub("", text)


@dataclass(frozen=True)
class Masker:
    """Literal secrets (with their HTML, JSON and markdown renderings) and token patterns."""

    literals: tuple[str, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def build(cls, environ: Mapping[str, str] | None = None, extra: Iterable[re.Pattern[str]] = ()) -> Masker:
        """From the secret-named variables of `environ` (os.environ), the token shapes and `extra`."""
        env = os.environ if environ is None else environ
        values = {v for name, v in env.items() if named_value(name, v) == MASK}
        literals = {variant for v in values for variant in _renderings(v) if variant}
        patterns = tuple(re.compile(p) for _, p in TOKEN_SHAPES) + tuple(extra)
        # Longest first, so a value that contains another is masked whole.
        return cls(tuple(sorted(literals, key=len, reverse=True)), patterns)

    def mask(self, text: str) -> str:
        for literal in self.literals:
            if literal in text:
                text = text.replace(literal, MASK)
        for pattern in self.patterns:
            text = pattern.sub(_masked, text)
        return text


def named_value(name: str, value: str) -> str:
    """A value shown apart from its variable's name (an env file's image default): [masked]
    when the name looks secret (rule 1's test), else the value as it is."""
    if (
        SECRET_NAME.search(name)
        and len(value.strip()) >= MIN_SECRET_LENGTH
        and value.strip().lower() not in _NOT_SECRET
    ):
        return MASK
    return value


def _masked(match: re.Match[str]) -> str:
    if "secret" in match.re.groupindex and match.group("secret") is not None:
        start, end = match.span("secret")
        whole = match.group()
        offset = match.start()
        return whole[: start - offset] + MASK + whole[end - offset :]
    return MASK


def _renderings(value: str) -> set[str]:
    """A secret as each output writes it: raw, HTML-escaped, JSON-escaped, markdown-escaped."""
    value = value.strip()
    return {
        value,
        html.escape(value),
        html.escape(value, quote=False),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        markdown_text(value),
        value.replace("|", "\\|"),
    }


# The masker of the session running in this context: the Session sets it at its start and puts
# back what was there at its end (a pytester session run inside another restores the outer one's).
_MASKER: ContextVar[Masker | None] = ContextVar("xlatune_masker", default=None)


def configure(extra: Iterable[re.Pattern[str]] = (), environ: Mapping[str, str] | None = None) -> Token[Masker | None]:
    """Set this context's masker (the Session's start; the report CLI); `extra` from --xlatune-mask /
    xlatune_mask. Hand the token to `reset` to put the one before back."""
    return _MASKER.set(Masker.build(environ, extra))


def reset(token: Token[Masker | None] | None = None) -> None:
    """Put back the masker `token`'s configure replaced (none: forget this context's)."""
    if token is None:
        _MASKER.set(None)
    else:
        _MASKER.reset(token)


def masker() -> Masker:
    """The session's masker, or one from the current environment when none was configured."""
    return _MASKER.get() or Masker.build()


def clean(text: str, terminal: bool = False) -> str:
    """THE boundary function: control sequences stripped (SGR kept for the terminal), secrets masked."""
    return masker().mask(strip_controls(text, keep_sgr=terminal))


def cut_at_word(text: str, width: int) -> str:
    """The first `width` characters of `text`, less the word the cut would split: the masker knows a
    secret by its whole shape (`ghp_` and 36 characters, an environment variable's value), so the
    prefix of one would pass unmasked. A word ends at whitespace or at one of ``"',;&|<>`` (compact
    JSON, a URL's query); a single word longer than `width` goes whole."""
    if len(text) <= width or text[width] in WORD_ENDS:
        return text[:width]
    split = LAST_WORD.search(text, 0, width)  # the character before the word the cut is in
    return text[: split.start() + 1] if split else ""


WORD_ENDS = frozenset(" \t\r\n\v\f\"',;&|<>")
LAST_WORD = re.compile(r"[\s\"',;&|<>][^\s\"',;&|<>]*\Z")


def clean_data(value: Any) -> Any:
    """`clean` on every string inside lists, tuples and dicts (user properties, JSON records)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list):
        return [clean_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clean_data(v) for v in value)
    if isinstance(value, dict):
        return {clean_data(k): clean_data(v) for k, v in value.items()}
    return value


# ---- markdown ---------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`\[\]|])")


def markdown_text(value: object) -> str:
    """A value as inline markdown text or a table cell: one line, no HTML, no link or image, no
    code span, no cell break (emphasis characters stay: they cannot reach outside the text)."""
    text = " ".join(strip_controls(str(value)).splitlines())
    text = text.replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def markdown_code(value: object) -> str:
    """A value as an inline code span (backticks included) safe in a table cell: fenced with more
    backticks than it holds, one line, `|` escaped (GitHub tables split cells before code spans)."""
    text = " ".join(strip_controls(str(value)).splitlines()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# ---- pytest reports ---------------------------------------------------------------------------


def clean_report(report: Any) -> None:
    """`clean` a test or collect report in place before pytest, junitxml, pytest-html and xdist
    see it: the failure text, captured sections, user properties and pytest-html extras."""
    longrepr = report.longrepr
    if isinstance(longrepr, str):
        report.longrepr = clean(longrepr)
    elif isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        report.longrepr = (longrepr[0], longrepr[1], clean(str(longrepr[2])))
    elif longrepr is not None:
        text = report.longreprtext
        if clean(text) != text:  # only then give up pytest's structured repr
            report.longrepr = clean(text)
    report.sections = [(clean(title), clean(content)) for title, content in report.sections]
    if hasattr(report, "user_properties"):
        report.user_properties = [(name, clean_data(value)) for name, value in report.user_properties]
    if isinstance(getattr(report, "wasxfail", None), str):
        report.wasxfail = clean(report.wasxfail)
    for extra in getattr(report, "extras", ()):
        for field in ("name", "content"):
            if isinstance(extra.get(field), str):
                extra[field] = clean(extra[field])
