"""Hostile input, in-process: YAML aliases refused (cells, policy text), secrets masked and
control sequences stripped by the one boundary cleaner, markdown escaping, report markers."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

from pytest_xlatune import safeyaml, shareable
from pytest_xlatune.cell.load import CellError, load_cell
from pytest_xlatune.report import sections
from pytest_xlatune.report.markdown import environment
from pytest_xlatune.triage.playbook_overrides import PolicyError, playbook_from_text

HEAD = "model_tag: demo\nnodes: 1\nparallelism: FSDP=8\n"


def bomb(levels: int) -> str:
    """A "billion laughs": each level's list holds nine aliases of the one below (9**levels)."""
    lines = ["  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for n in range(1, levels):
        lines.append(f"  l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


BOMB = bomb(10)  # 9**10 = 3.5 billion strings from ~560 bytes


def test_the_bomb_is_the_issue_size() -> None:
    assert len(BOMB) < 700


@pytest.mark.parametrize("levels", [3, 10])
def test_alias_in_a_cell_is_one_line_naming_file_line_and_key(tmp_path: Path, levels: int) -> None:
    path = tmp_path / "cell.yml"
    path.write_text(HEAD + "policy:\n" + bomb(levels))
    with pytest.raises(CellError) as info:
        load_cell(path)
    message = str(info.value)
    assert message == (
        f"{path}:6: policy.l1[0]: expected plain YAML without anchors and aliases "
        "(write the value out), found an alias (*l0)"
    )


@pytest.mark.parametrize("levels", [3, 10])
def test_alias_in_policy_text_is_one_line(levels: int) -> None:
    with pytest.raises(PolicyError) as info:
        playbook_from_text("{" + bomb(levels).replace("\n", ",").strip(",") + "}")
    assert str(info.value) == (
        "xlatune_policy:1: l1[0]: expected plain YAML without anchors and "
        "aliases (write the value out), found an alias (*l0)"
    )


def test_alias_in_policy_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yml", policy="rccl_init_flake: &r {retries: 3}\ncoord_timeout: *r\n")
    result = pytester.runpytest("--xlatune-policy=policy.yml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --xlatune-policy: *policy.yml:2: coord_timeout: expected plain "
            "YAML without anchors and aliases*, found an alias (*r)"
        ]
    )


# A value its tag cannot hold, a key Python cannot hash, a document nested past the parser's
# recursion: each a YAML error at its line, never a ValueError or RecursionError traceback.
UNREADABLE = [
    ("rccl_init_flake:\n  retries: !!int abc", 2, "'abc' under the tag !!int (invalid literal*"),
    ("oom: !!float x", 1, "'x' under the tag !!float*"),
    ("oom: {retries: " + "9" * 5000 + "}", 1, "'9999*' under the tag !!int (Exceeds the limit (4300 digits)*"),
    ("{[1]: 2}", 1, "unhashable key (while constructing a mapping)"),
]


@pytest.mark.parametrize(("text", "line", "found"), UNREADABLE, ids=["int", "float", "digits", "unhashable"])
def test_unreadable_value_in_a_cell_policy_is_one_line(tmp_path: Path, text: str, line: int, found: str) -> None:
    path = tmp_path / "cell.yml"
    path.write_text(HEAD + "policy:\n" + "".join(f"  {row}\n" for row in text.splitlines()))
    with pytest.raises(CellError) as info:
        load_cell(path)
    assert fnmatch.fnmatch(
        str(info.value), f"{path}:{line + 4}: policy: expected playbook overrides (docs/*), found {found}"
    ), str(info.value)


@pytest.mark.parametrize(("text", "line", "found"), UNREADABLE, ids=["int", "float", "digits", "unhashable"])
def test_unreadable_value_in_policy_text_is_one_line(text: str, line: int, found: str) -> None:
    with pytest.raises(PolicyError) as info:
        playbook_from_text(text)
    assert fnmatch.fnmatch(str(info.value), f"xlatune_policy:{line}: not valid YAML/JSON: {found}"), str(info.value)


def test_deeply_nested_policy_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yml", policy="[" * 1500 + "]" * 1500)
    for value in ("policy.yml", "{oom: " + "[" * 1200 + "]" * 1200 + "}"):
        result = pytester.runpytest(f"--xlatune-policy={value}", "-p", "no:cacheprovider")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["ERROR: --xlatune-policy: *: not valid YAML/JSON: a document nested too deeply"])
        assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_yaml_without_aliases_loads_as_safe_load_would() -> None:
    text = "a: {b: [1, 2.5, x, null, true]}\nc: 2024-01-01\n"
    import yaml

    assert safeyaml.load(text) == yaml.safe_load(text)
    assert safeyaml.load("") is None and safeyaml.compose("") is None
    with pytest.raises(yaml.YAMLError):
        safeyaml.load("!!python/object/apply:os.system [echo hi]")


def test_every_yaml_read_of_the_package_goes_through_safeyaml() -> None:
    import pytest_xlatune

    package = Path(pytest_xlatune.__file__).parent
    direct = [
        f"{p.relative_to(package)}:{n}"
        for p in package.rglob("*.py")
        if p.name != "safeyaml.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"(?<![\w.])yaml\.(safe_load|load|compose|full_load|unsafe_load|load_all)\(", line)
    ]
    assert direct == []


# ---- control sequences -------------------------------------------------------------------------

TITLE = "\x1b]0;owned\x07"
LINK = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"
CLIPBOARD = "\x1b]52;c;ZWNobyBvd25lZA==\x07"
CURSOR = "\x1b[2J\x1b[H\x1b[1A\r"
RED = "\x1b[31mred\x1b[0m"


def test_control_sequences_are_stripped_and_colours_kept_only_for_the_terminal() -> None:
    text = f"a{TITLE}b {LINK} {CLIPBOARD}{CURSOR}{RED} \u202eevil\x00\x9b2J end\n\tnext"
    assert shareable.strip_controls(text) == "ab click red evil end\n\tnext"
    assert shareable.strip_controls(text, keep_sgr=True) == f"ab click {RED} evil end\n\tnext"
    assert shareable.clean(text, terminal=True) == f"ab click {RED} evil end\n\tnext"
    assert shareable.strip_controls("\x1b]0;no terminator\nkept") == "\nkept"


# ---- masking -----------------------------------------------------------------------------------

TOKENS = {
    "GitHub classic": "ghp_" + "a1B2c3D4e5" * 4,
    "GitHub OAuth": "gho_" + "Z9y8X7w6V5" * 4,
    "GitHub fine-grained": "github_pat_11ABCDEFG0123456789_abcdefghijKLMNOPQRSTUVWXYZ0123456789abcd",
    "Slack bot": "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx",
    "AWS access key id": "AKIAIOSFODNN7EXAMPLE",
    "Hugging Face": "hf_" + "AbCdEfGhIj" * 3 + "kl",
    "JWT": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "OpenAI": "sk-proj-" + "Ab1Cd2Ef3G" * 4,
    "Anthropic": "sk-ant-api03-" + "Ab1Cd2Ef3G" * 4,
    "GitLab": "glpat-" + "Ab1Cd2Ef3G" * 2,
    "Google API key": "AIza" + "Sy0Ab1Cd2E" * 3 + "f3G4h",
    "npm": "npm_" + "Ab1Cd2Ef3G" * 3 + "h4I5j6",
    "PyPI": "pypi-AgEIcHlwaS5vcmc" + "Ab1Cd2Ef3G" * 5,
}


@pytest.mark.parametrize("token", TOKENS.values(), ids=TOKENS.keys())
def test_token_shapes_are_masked_anywhere(token: str) -> None:
    masker = shareable.Masker.build({})
    assert masker.mask(f"log: using {token}, done") == "log: using [masked], done"


def test_bearer_and_secret_named_assignments_keep_their_names() -> None:
    masker = shareable.Masker.build({})
    assert masker.mask("Authorization: Bearer abc.def-ghi_jkl") == "Authorization: Bearer [masked]"
    assert (
        masker.mask("WANDB_API_KEY=0123456789abcdef HF_TOKEN=whatever1 password: hunter22")
        == "WANDB_API_KEY=[masked] HF_TOKEN=[masked] password: [masked]"
    )
    # Not secrets: MaxText's throughput field, an NCCL setting, a short value.
    for text in ("Tokens/s/device: 1234.5, total_weights: 1024", "NCCL_IB_PKEY=0x8001", "HF_TOKEN=1"):
        assert masker.mask(text) == text


def test_authorization_headers_hyphenated_names_options_and_private_keys_are_masked() -> None:
    """What a failing job prints: an HTTP client's headers, its command line, a key file."""
    masker = shareable.Masker.build({})
    assert masker.mask("Authorization: Basic dXNlcjpwYXNzd29yZA== ok") == "Authorization: Basic [masked] ok"
    assert masker.mask('{"authorization": "token 0123456789abcdef"}') == '{"authorization": "token [masked]"}'
    assert masker.mask("x-api-key: sk_0123456789 X-Auth-Token=abcdefgh") == "x-api-key: [masked] X-Auth-Token=[masked]"
    assert masker.mask("train.py --password hunter2long --api-key abcdefgh1 -x") == (
        "train.py --password [masked] --api-key [masked] -x"
    )
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
    assert masker.mask(f"key:\n{pem}\nnext") == "key:\n[masked]\nnext"
    # Not secrets: throughput and batch options, a path to a token file, the next option.
    for text in (
        "--max_tokens 204800 --tokenizer_path /x/y --token_budget 500000",
        "--token-file /run/secrets/tok --password -x",
        "task-abcdefghijklmnopqrstuvwxyz disk-abcdefghijklmnopqrstuvwxyz",
        "mesh: data-parallel sharding",
    ):
        assert masker.mask(text) == text


def test_url_passwords_and_secret_names_mid_name_quoted_or_ending_in_pass_are_masked() -> None:
    """A cell's env and overrides reach the report, HTML and exports as `NAME=value`, JSON
    `"NAME": "value"` and URLs: each secret there is masked, its name kept."""
    masker = shareable.Masker.build({})
    assert masker.mask("hub_url=https://carol:pa55w0rd-zz@hub.example.com/x ok") == (
        "hub_url=https://carol:[masked]@hub.example.com/x ok"
    )
    assert masker.mask("DB_PASS=plainpw123 SOME_SECRET_VALUE=topsecret42 db_passphrase: abcdefgh") == (
        "DB_PASS=[masked] SOME_SECRET_VALUE=[masked] db_passphrase: [masked]"
    )
    assert masker.mask('{"WANDB_API_KEY": "0123456789abcdef", "a": 1}') == '{"WANDB_API_KEY": "[masked]", "a": 1}'
    # Not secrets: a host and port, git's scp form, a name that only starts like one.
    for text in (
        "http://host:8080/path",
        "ssh://git@host:22/x",
        "git@github.com:org/repo",
        "tokenizer_path=/data/tok.model",
        "PASS_RATE=0.951234 bypass=abcdefgh",
    ):
        assert masker.mask(text) == text


def test_values_of_secret_named_environment_variables_are_masked_in_every_rendering() -> None:
    secret = 'p<a|s"s&w\\ord-42'
    masker = shareable.Masker.build(
        {
            "my_api_Token": secret,
            "DB_PASSWORD": "hunter2x",
            "SSH_PRIVATE_KEY_PASS": "correct-horse",
            "HOME": "/root",
            "TOKENIZERS_PARALLELISM": "false",
            "NCCL_KEY": "1",
        }
    )
    import html
    import json

    for rendering in (secret, html.escape(secret), json.dumps(secret), shareable.markdown_text(secret)):
        assert "[masked]" in masker.mask(f"x {rendering} y") and "w\\ord" not in masker.mask(rendering)
    assert masker.mask("hunter2x correct-horse /root false 1") == "[masked] [masked] /root false 1"


@pytest.mark.parametrize(
    ("secret", "body"),
    [
        ("ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "ghp_A1b2"),
        ('"HF_TOKEN":"s3cr3tValue-abcdefghijklmnop"', "s3cr3tVa"),  # compact JSON, the variable's value
    ],
)
def test_a_log_line_cut_short_leaves_no_prefix_of_a_secret(secret: str, body: str) -> None:
    """The failure reason, the log tail's 4 KiB lines and Slurm's quoted output are cut: at any cut,
    what is kept masks whole or leaves the secret out (a prefix is no shape the masker knows)."""
    from pytest_xlatune.slurm.parsers import SlurmParseError, parse_sbatch_parsable
    from pytest_xlatune.triage.diagnosis import Evidence, diagnose
    from pytest_xlatune.triage.logs import StepLog

    masker = shareable.Masker.build({"HF_TOKEN": "s3cr3tValue-abcdefghijklmnop"})
    for pad in range(250, 310):
        log = StepLog()
        log.feed(f"ValueError: {'x' * pad} {secret} rest\n".encode())
        log.flush()
        reason = masker.mask(diagnose(Evidence.from_log(log, 100, exit_code=1)).reason)
        assert body not in reason, reason[-60:]
    for pad in range(4050, 4096):
        line = f"{'y' * pad},{secret} rest"
        log = StepLog()
        log.feed(f"start\n{line}\n".encode())
        log.flush()
        shown = log.tail[-1]
        assert body not in masker.mask(shown), shown[-60:]
        kept, more = re.fullmatch(r"(.*) \[\.\.\. (\d+) more bytes\]", shown).groups()  # type: ignore[union-attr]
        assert line[len(kept) : len(line) - int(more)].strip() == ""  # the figure counts every byte not shown
    for pad in range(100, 125):
        with pytest.raises(SlurmParseError) as err:
            parse_sbatch_parsable(f"sbatch: error: {'z' * pad} {secret}")
        assert body not in masker.mask(str(err.value))


def test_extra_patterns_mask_the_whole_match_or_its_secret_group() -> None:
    masker = shareable.Masker.build({}, [re.compile(r"internal-[0-9]+"), re.compile(r"session=(?P<secret>\w+)")])
    assert masker.mask("host internal-42 session=abc123") == "host [masked] session=[masked]"


def test_mask_option_rejects_a_bad_pattern(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--xlatune-mask=(unclosed", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--xlatune-mask: expected a regular expression, found '(unclosed'*"])


def test_clean_report_cleans_every_field_of_a_report() -> None:
    report = pytest.TestReport(
        "x.yml::a",
        ("x.yml", 0, "a"),
        {},
        "failed",
        f"boom {TOKENS['JWT']}{TITLE}",
        "call",
        [("Captured stdout call", f"out {TOKENS['Slack bot']}")],
        user_properties=[("xlatune_reason", f"r {TOKENS['AWS access key id']}")],
    )
    report.extras = [{"name": "log", "content": f"tail {TOKENS['Hugging Face']}{CLIPBOARD}"}]  # type: ignore[attr-defined]
    shareable.clean_report(report)
    assert report.longrepr == "boom [masked]"
    assert report.sections == [("Captured stdout call", "out [masked]")]
    assert report.user_properties == [("xlatune_reason", "r [masked]")]
    assert report.extras == [{"name": "log", "content": "tail [masked]"}]  # type: ignore[attr-defined]


# ---- markdown ----------------------------------------------------------------------------------


def test_markdown_text_neutralises_html_links_code_and_cell_breaks() -> None:
    assert (
        shareable.markdown_text("<img src=x onerror=alert(1)> ![t](http://e/p.png) `c` a|b \\ x\ny")
        == "&lt;img src=x onerror=alert(1)&gt; !\\[t\\](http://e/p.png) \\`c\\` a\\|b \\\\ x y"
    )
    assert shareable.markdown_text("MI300X x8, 192 GB") == "MI300X x8, 192 GB"


def test_markdown_code_fences_around_backticks_and_escapes_pipes() -> None:
    assert shareable.markdown_code("/logs/1.log") == "`/logs/1.log`"
    assert shareable.markdown_code("a`b|c\nd") == "``a`b\\|c d``"
    assert shareable.markdown_code("`x`") == "`` `x` ``"


def test_template_values_are_escaped_where_they_are_rendered() -> None:
    template = environment().from_string("| {{ v | md }} | {{ v | code }} | {{ w }} |")
    text = template.render(v="<b>x</b>|`y`", w=f"plain{TITLE}")
    assert text == "| &lt;b&gt;x&lt;/b&gt;\\|\\`y\\` | `` <b>x</b>\\|`y` `` | plain |"


@pytest.mark.parametrize("cell", ["cells/a-->b.yml", "cells/x--!>y.yml", "cells/new\nline.yml", "cells/&gt;.yml"])
def test_report_section_marker_cannot_be_closed_by_the_cell_name(cell: str) -> None:
    summary = sections.CellSummary(cell=cell, parallelism="FSDP=8", config_tag="sparse", date="2026-01-01")
    text = sections.wrap(summary, "# body\n")
    first = text.splitlines()[0]
    assert first.startswith("<!-- xlatune:cell ") and first.endswith(" -->") and first.count(">") == 1
    assert [s.cell for s in sections.parse(text).sections] == [cell]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_an_env_file_secrets_image_default_is_masked_where_it_stands_apart_from_its_name(language: str) -> None:
    # `WANDB_API_KEY=[masked]` (image default: `fedcba…`): the deployed value is masked by its
    # name; the image default, shown without it, was written out (a 40-hex key has no token shape).
    from dataclasses import replace

    from pytest_xlatune.cell.values import EnvFileEntry
    from pytest_xlatune.report.markdown import render_tuning_md
    from tests import report_cases

    default = "fedcba9876543210fedcba9876543210fedcba98"
    entries = (
        EnvFileEntry("env", "WANDB_API_KEY", "abcdef0123456789abcdef0123456789abcdef01", default),
        EnvFileEntry("env", "NCCL_MIN_NCHANNELS", "16", "4"),
        EnvFileEntry("env", "TOKENIZERS_PARALLELISM", "true", "false"),  # not a secret value
    )
    data = report_cases.env_file_hurts()
    text = shareable.clean(
        render_tuning_md(replace(data, cell=replace(data.cell, env_file=entries)), language=language)
    )
    assert default not in text and "abcdef0123456789" not in text
    assert text.count("`[masked]`") == 2  # the env file's list and the restore list
    assert "`4`" in text and "`false`" in text  # other image defaults as they are


def test_names_whose_last_word_is_key_or_pwd_are_masked_but_not_ordinary_keys() -> None:
    """A job's environment dump or shell trace: `WANDB_KEY=…`, `export HF_KEY=…`, `DB_PWD=…`."""
    masker = shareable.Masker.build({})
    for name in ("WANDB_KEY", "HF_KEY", "export MY_API_KEY", "export KEY", "SSH_KEY", "wandb_key", "DB_PWD"):
        for sep in ("=", ": ", " = ", '="'):
            shown = masker.mask(f"{name}{sep}abc123def456xyz ok")
            assert "abc123def456xyz" not in shown and name in shown and shown.endswith(" ok"), shown
    assert masker.mask('{"WANDB_KEY": "abc123def456"}') == '{"WANDB_KEY": "[masked]"}'
    # Not secrets: the working directory, a cache's, a sort's or a PRNG's key, a word that ends in key.
    for text in (
        "PWD=/home/user/project OLDPWD=/home/user",
        "cache_key=jit_train_step-0123abcd sort_key=abcdefgh",
        "rng_key=PRNGKeyArray123 public_key=ssh-ed25519",
        "MONKEY=bananasplit hotkey=ctrlaltdel KEYS=abcdefgh KEY_PATH=/tmp/key.pem",
        "the key=lookup-value Persistent cache key: jit_f-abc123",
        "NCCL_IB_PKEY=0x8001",
    ):
        assert masker.mask(text) == text
    # The environment's own DB_PASS / DB_PWD values are masked wherever they appear, not PWD's.
    env = shareable.Masker.build({"DB_PASS": "hunter2x", "REDIS_PWD": "letmein9", "PWD": "/home/user"})
    assert env.mask("hunter2x letmein9 /home/user") == "[masked] [masked] /home/user"


def _key_body(width: int, size: int = 1190) -> list[str]:
    """A private key's base64 body as PEM (64) or OpenSSH (70) wraps it."""
    import base64
    import random
    import textwrap

    return textwrap.wrap(base64.b64encode(random.Random(7).randbytes(size)).decode(), width)


@pytest.mark.parametrize("width", [64, 70])
@pytest.mark.parametrize("prefix", ["", "    ", "0: "])
def test_a_private_keys_body_is_masked_when_the_excerpt_cut_its_begin_line(width: int, prefix: str) -> None:
    """A log excerpt (the tail, a failure's lines) starts inside a printed key: no BEGIN line."""
    masker = shareable.Masker.build({})
    body = _key_body(width)
    for start in (1, 5, len(body) - 3):
        lines = [prefix + line for line in body[start:]]
        for end in ("\n-----END RSA PRIVATE KEY-----\n", "\n"):
            text = "step 12, loss 3.20\n" + "\n".join(lines) + end + "Traceback (most recent call last):\n"
            shown = masker.mask(text)
            assert not any(line.strip()[-16:] in shown for line in body), shown
            assert shown.startswith("step 12, loss 3.20\n") and "Traceback (most recent call last):" in shown
    escaped = "\\n".join(body[3:9]) + "\\n"
    assert masker.mask(f'{{"key": "{escaped}"}}') == '{"key": "[masked]"}'
    assert masker.mask(f'{{"key": "{escaped[10:]}"}}').count(body[5]) == 0  # cut inside a line


def _key_ending_in(lone: str) -> list[str]:
    """A key body (PEM's 64 wrap) whose last full line is `lone`: the rest from _key_body."""
    body = _key_body(64)
    return [*body[:-2], lone, body[-1]]


@pytest.mark.parametrize(
    "lone",
    [
        "/ZrusApvH5bNMdG/7iVIqIlVdPEbh1rkmVyEhM7679z2pIp6qpcp1Uf77C2V1OX1",  # starts with `/`
        "ZrusA/pvH5bNMdG/7iVIqI/lVdPEbh1rkm/VyEhM7679z2pIp6/qpcp1Uf77C2V1OX1",  # five `/`
    ],
)
@pytest.mark.parametrize("prefix", ["", "0: "])
def test_a_lone_key_line_that_reads_like_a_path_is_masked_before_its_end_line(lone: str, prefix: str) -> None:
    """An excerpt cut from the BEGIN line down to the last full line: alone, a line that starts
    with `/` or holds five reads as a path, but the END line after it says it is a key's."""
    masker = shareable.Masker.build({})
    body = _key_ending_in(lone[:64])
    for tail in ([], [body[-1]]):  # the lone line with and without the short last line
        lines = "\n".join(prefix + line for line in [body[-2], *tail])
        text = (
            f"step 12, loss 3.20\n{lines}\n{prefix}-----END RSA PRIVATE KEY-----\nTraceback (most recent call last):\n"
        )
        shown = masker.mask(text)
        assert body[-2][-16:] not in shown and body[-1][-8:] not in shown, shown
        assert shown.startswith("step 12, loss 3.20\n") and "Traceback (most recent call last):" in shown
    whole = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *body, "-----END RSA PRIVATE KEY-----"])
    assert masker.mask(whole) == "[masked]"


def test_hashes_paths_and_module_names_are_not_taken_for_key_lines() -> None:
    masker = shareable.Masker.build({})
    text = "\n".join(
        [
            "I1205 03:22:17.123456 140234 gpu_compiler.cc:1234] module_0042.jit_train_step.sm_9.0_gpu_after_opt.txt",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08",
            "/mnt/Data/Models/Llama3/Checkpoints/Run42/Final/items/0/params/layers/x",
            "Data/Models/Llama3/Checkpoints/Run42/Final/items/0/params/layers/x/y",
            "gs://MyBucket/Runs/2024/Llama3-70B/checkpoints/0001200/items/abcdefgh",
            "jit_train_step-5f0c3a9be1d24e7f8a6b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f",
            "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08AbC",
            "ThisIsAVeryLongCamelCaseIdentifierWithoutDigitsThatGoesOnAndOnForever",
            "Tokens/s/device: 1234.5, total_weights: 1024",
            # Path lines of ordinary logs: an END line vouches for a path-like line only right before it.
            "/usr/lib/x86_64-linux-gnu/libnccl.so.2: version `NCCL_2.18' not found",
            "/opt/Rocm6/Lib/Llvm/Bin/Ld/Lld/Archive/Members/Obj42/Final/Linker/abc",
            "node01:1234:1234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
            "node01:1234:1234 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
            "0: /Workspace/MaxText/Configs/Models/Llama3/Run7/Checkpoints/Items/00012",
            "    /Home/User1/Jax/Cache/Compiled/Module0042/Train/Step/Sm90/Artifacts/x",
        ]
    )
    assert masker.mask(text) == text
    many = "\n".join(f"/Home/User{i:04d}/Jax/Cache/Compiled/Module0042/Train/Step/Sm90/Artifactsx" for i in range(300))
    assert masker.mask(many) == many
