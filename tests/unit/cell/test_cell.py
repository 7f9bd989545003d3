"""cell.load_cell: good cells become frozen values; each bad one fails on one line naming file:line:key."""

from __future__ import annotations

import pickle
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from pytest_xlatune.cell import grammar
from pytest_xlatune.cell.load import CellError, load_cell
from pytest_xlatune.cell.values import (
    Backend,
    BackendKind,
    Cell,
    ClusterSlot,
    ConfigTag,
    EnvFileEntry,
    Parallelism,
    PipelineShape,
    Profile,
    Thresholds,
)

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "cells"

# Lines 1-3 of most malformed cells; what a case appends starts on line 4.
HEAD = "model_tag: demo\nnodes: 1\nparallelism: FSDP=8\n"
PP_HEAD = "model_tag: demo\nnodes: 1\nparallelism: PP=4\n"


def _cell(tmp_path: Path, text: str, name: str = "cell.yml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _wave2(profile: str) -> str:
    """Wrap one profile's YAML (its `- name:` on line 6) into a cell."""
    return HEAD + "waves:\n  2:\n" + textwrap.indent(textwrap.dedent(profile), "    ")


LONG = "x" * 60
MALFORMED = [
    # (id, text, key, line, fragment of the message)
    ("empty-file", "", "cell", 1, "an empty document"),
    ("comments-only", "# nothing here\n", "cell", 1, "an empty document"),
    ("top-level-list", "- model_tag: demo\n", "cell", 1, "found a list"),
    ("yaml-syntax", HEAD + "steps: [15\n", "yaml", 5, "expected ',' or ']'"),
    ("yaml-bad-indent", "model_tag: demo\n  nodes: 1\n", "yaml", 2, "mapping values are not allowed"),
    ("yaml-tab", HEAD + "waves:\n  2:\n\t- name: a\n", "yaml", 6, "(YAML indents with spaces, not tabs)"),
    (
        "yaml-block-indent",
        HEAD + "waves:\n  2:\n    - name: a\n    xla_flags: [--xla_a=1]\n",
        "yaml",
        7,
        "(while parsing a block collection from line 6: check its indentation)",
    ),
    (
        "yaml-flow-unclosed",
        "model_tag: demo\nnodes: 1\nparallelism: [FSDP=8\nsteps: 15\n",
        "yaml",
        4,
        "(while parsing a flow sequence from line 3: check its brackets)",
    ),
    ("yaml-two-documents", HEAD + "---\nsteps: 15\n", "yaml", 4, "another document"),
    ("yaml-control-char", HEAD + "image: a\x07b\n", "yaml", 4, "U+0007"),
    (
        "python-object-tag",
        "model_tag: !!python/object/apply:os.system [echo hi]\n",
        "model_tag",
        1,
        "the tag !!python/object/apply:os.system",
    ),
    ("custom-tag", HEAD + "steps: !env STEPS\n", "steps", 4, "the tag !env"),
    ("merge-key", HEAD + "base: &b {steps: 15}\n<<: *b\n", "<<", 5, "merge key"),
    ("explicit-int-tag-on-text", HEAD + "steps: !!int abc\n", "steps", 4, "steps 5-14"),
    (
        "unknown-key-did-you-mean",
        "modle_tag: demo\nnodes: 1\nparallelism: FSDP=8\n",
        "modle_tag",
        1,
        "(did you mean 'model_tag'?)",
    ),
    ("duplicate-key", HEAD + "steps: 15\nsteps: 20\n", "steps", 5, "'steps' again (first on line 4)"),
    ("schema-2", "schema: 2\n" + HEAD, "schema", 1, "expected schema version 1, found 2"),
    ("model-tag-missing", "nodes: 1\nparallelism: FSDP=8\n", "model_tag", 1, "no 'model_tag' key"),
    ("model-tag-uppercase", "model_tag: Qwen3\nnodes: 1\nparallelism: FSDP=8\n", "model_tag", 1, "found 'Qwen3'"),
    ("model-tag-integer", "model_tag: 70\nnodes: 1\nparallelism: FSDP=8\n", "model_tag", 1, "found 70 (an integer)"),
    ("slot-none", "model_tag: demo\nparallelism: FSDP=8\n", "nodes", 1, "found none of nodelist, partition, nodes"),
    ("slot-nodelist-and-nodes", HEAD + "nodelist: node[01-02]\n", "nodelist", 4, "found nodelist and nodes"),
    (
        "slot-partition-alone",
        "model_tag: demo\npartition: gpu\nparallelism: FSDP=8\n",
        "partition",
        2,
        "nodes alongside partition",
    ),
    (
        "nodes-zero",
        "model_tag: demo\nnodes: 0\nparallelism: FSDP=8\n",
        "nodes",
        2,
        "an integer from 1 to 100000, found 0",
    ),
    (
        "nodelist-shell",
        "model_tag: demo\nnodelist: 'n1;reboot'\nparallelism: FSDP=8\n",
        "nodelist",
        2,
        "found 'n1;reboot'",
    ),
    (
        "nodelist-unclosed-bracket",
        "model_tag: demo\nnodelist: node[01-\nparallelism: FSDP=8\n",
        "nodelist",
        2,
        "a Slurm nodelist such as node01,node02 or node[01-04,07] (no spaces), found 'node[01-'",
    ),
    (
        "nodelist-backwards",
        "model_tag: demo\nnodelist: node[04-01]\nparallelism: FSDP=8\n",
        "nodelist",
        2,
        "found 'node[04-01]' (the range 04-01 runs backwards)",
    ),
    (
        "nodelist-comma-space",
        "model_tag: demo\nnodelist: node01, node02\nparallelism: FSDP=8\n",
        "nodelist",
        2,
        "(no spaces), found 'node01, node02'",
    ),
    (
        "partition-space",
        "model_tag: demo\npartition: gpu a\nnodes: 2\nparallelism: FSDP=8\n",
        "partition",
        2,
        "a Slurm partition",
    ),
    ("parallelism-missing", "model_tag: demo\nnodes: 1\n", "parallelism", 1, "no 'parallelism' key"),
    ("parallelism-zero", "model_tag: demo\nnodes: 1\nparallelism: FSDP=0\n", "parallelism", 3, "found 'FSDP=0'"),
    ("parallelism-non-int", "model_tag: demo\nnodes: 1\nparallelism: FSDP=3,TP=x\n", "parallelism", 3, "found 'TP=x'"),
    ("parallelism-unknown-axis", "model_tag: demo\nnodes: 1\nparallelism: DP=2\n", "parallelism", 3, "FSDP|PP|TP"),
    (
        "parallelism-repeated",
        "model_tag: demo\nnodes: 1\nparallelism: FSDP=2,FSDP=4\n",
        "parallelism",
        3,
        "FSDP given twice",
    ),
    ("parallelism-empty", "model_tag: demo\nnodes: 1\nparallelism: ''\n", "parallelism", 3, "found ''"),
    ("parallelism-no-equals", "model_tag: demo\nnodes: 1\nparallelism: FSDP8\n", "parallelism", 3, "found 'FSDP8'"),
    ("steps-text", HEAD + "steps: x\n", "steps", 4, "the steady state is taken from steps 5-14"),
    ("steps-too-few", HEAD + "steps: 5\n", "steps", 4, "an integer from 10 to 10000000"),
    ("baseline-repeats-6", HEAD + "baseline_repeats: 6\n", "baseline_repeats", 4, "from 1 to 5"),
    ("pdbs-boolean", HEAD + "pdbs: yes\n", "pdbs", 4, "found yes (a boolean)"),
    ("overrides-list", HEAD + "overrides: [emb_dim]\n", "overrides", 4, "a mapping, found a list"),
    (
        "override-owned-steps",
        HEAD + "overrides:\n  emb_dim: 64\n  steps: 30\n",
        "overrides.steps",
        6,
        "top-level 'steps' key",
    ),
    (
        "override-owned-pdbs",
        HEAD + "overrides: {per_device_batch_size: 2}\n",
        "overrides.per_device_batch_size",
        4,
        "top-level 'pdbs' key",
    ),
    (
        "override-pdbs",
        HEAD + "overrides: {pdbs: 4, max_target_length: 2048}\n",
        "overrides.pdbs",
        4,
        "pdbs is xlatune's name for per_device_batch_size: set it with the top-level 'pdbs' key",
    ),
    (
        "override-owned-parallelism",
        HEAD + "overrides:\n  dcn_fsdp_parallelism: 4\n",
        "overrides.dcn_fsdp_parallelism",
        5,
        "top-level 'parallelism' key",
    ),
    ("override-env-passthrough", HEAD + "overrides: {_env_foo: 1}\n", "overrides._env_foo", 4, "profile's env"),
    ("override-key-grammar", HEAD + "overrides:\n  EmbDim: 64\n", "overrides.EmbDim", 5, "a MaxText override key"),
    ("override-value-shell", HEAD + "overrides:\n  run_tag: 'a;b'\n", "overrides.run_tag", 5, "found 'a;b'"),
    ("override-value-null", HEAD + "overrides:\n  emb_dim:\n", "overrides.emb_dim", 5, "a string, number or boolean"),
    ("config-tags-empty", HEAD + "config_tags: {}\n", "config_tags", 4, "at least one config tag"),
    (
        "config-tag-owned-key",
        HEAD + "config_tags:\n  sparse:\n    run_name: x\n",
        "config_tags.sparse.run_name",
        6,
        "the launcher sets it",
    ),
    ("config-tag-name-grammar", HEAD + "config_tags:\n  '+sparse': {}\n", "config_tags.+sparse", 5, "a name matching"),
    (
        "env-file-both-forms",
        HEAD + "env_file:\n  - flag: --xla_a=1\n    env: A=1\n    image_default: 0\n",
        "env_file[0]",
        5,
        "found flag and env",
    ),
    (
        "env-file-no-default",
        HEAD + "env_file:\n  - flag: --xla_a=1\n",
        "env_file[0].image_default",
        5,
        "no 'image_default' key",
    ),
    (
        "env-file-flag-default-null",
        HEAD + "env_file:\n  - flag: --xla_a=1\n    image_default: null\n",
        "env_file[0].image_default",
        6,
        "null unsets only an env entry), found null",
    ),
    (
        "env-file-flag-space",
        HEAD + "env_file:\n  - flag: '--xla_a=1 2'\n    image_default: '1'\n",
        "env_file[0].flag",
        5,
        "an XLA flag matching",
    ),
    (
        "env-file-env-no-equals",
        HEAD + "env_file:\n  - env: NCCL_X\n    image_default: null\n",
        "env_file[0].env",
        5,
        "NAME=value",
    ),
    (
        "env-file-repeated",
        HEAD + "env_file:\n  - env: A=1\n    image_default: null\n  - env: A=2\n    image_default: null\n",
        "env_file[1].env",
        7,
        "A again (first on line 5)",
    ),
    (
        "waves-list",
        HEAD + "waves: [a]\n",
        "waves",
        4,
        "a mapping of wave numbers (2, 3, 4) to their profiles, e.g. {2: [{name: a, xla_flags: [...]}]}, found a list",
    ),
    (
        "wave-5",
        HEAD + "waves:\n  5:\n    - {name: a, xla_flags: [--xla_a=1]}\n",
        "waves.5",
        5,
        "a wave number 2, 3 or 4",
    ),
    ("wave-int-and-text", HEAD + "waves:\n  2: []\n  '2': []\n", "waves.2", 6, "each key once"),
    (
        "profile-not-mapping",
        _wave2("- opt_o0\n"),
        "waves.2[0]",
        6,
        "a profile: a mapping of name and xla_flags, env or overrides, found 'opt_o0'",
    ),
    (
        "profile-catalog-in-list",
        _wave2("- catalog: fsdp\n  max: 3\n"),
        "waves.2[0].catalog",
        6,
        "(catalog is a key of the wave itself: `2: {catalog: ...}`, not of a profile in its list)",
    ),
    (
        "profile-unknown-key",
        _wave2("- name: a\n  xla_flag: [--xla_a=1]\n"),
        "waves.2[0].xla_flag",
        7,
        "(did you mean 'xla_flags'?)",
    ),
    ("profile-no-name", _wave2("- xla_flags: [--xla_a=1]\n"), "waves.2[0].name", 6, "no 'name' key"),
    ("profile-nothing-to-test", _wave2("- name: a\n"), "waves.2[0]", 6, "at least one of xla_flags, env, overrides"),
    (
        "profile-reserved-name",
        _wave2("- name: baseline\n  xla_flags: [--xla_a=1]\n"),
        "waves.2[0].name",
        6,
        "xlatune's own runs",
    ),
    (
        "profile-name-too-long",
        _wave2(f"- name: {LONG}\n  xla_flags: [--xla_a=1]\n"),
        "waves.2[0].name",
        6,
        "at most 48 characters, found 'xxxxxxxx",
    ),
    (
        "profile-name-too-long-says-how-long",
        _wave2(f"- name: {LONG}\n  xla_flags: [--xla_a=1]\n"),
        "waves.2[0].name",
        6,
        "x' (60 characters)",
    ),
    (
        "profile-name-repeated-across-waves",
        HEAD + "waves:\n  2:\n    - {name: a, xla_flags: [--xla_a=1]}\n  3:\n    - {name: a, xla_flags: [--xla_b=1]}\n",
        "waves.3[0].name",
        8,
        "'a' again (first on line 6)",
    ),
    (
        "profile-flag-repeated",
        _wave2("- name: a\n  xla_flags:\n    - --xla_a=1\n    - --xla_a=2\n"),
        "waves.2[0].xla_flags[1]",
        9,
        "XLA keeps the last",
    ),
    (
        "profile-flag-dollar",
        _wave2("- name: a\n  xla_flags: ['--xla_a=$(id)']\n"),
        "waves.2[0].xla_flags[0]",
        7,
        "found '--xla_a=$(id)'",
    ),
    (
        "profile-flag-not-xla",
        _wave2("- name: a\n  xla_flags: [--jax_a=1]\n"),
        "waves.2[0].xla_flags[0]",
        7,
        "an XLA flag matching",
    ),
    (
        "profile-env-lowercase",
        _wave2("- name: a\n  env: {nccl_x: 1}\n"),
        "waves.2[0].env.nccl_x",
        7,
        "an environment variable name",
    ),
    (
        "profile-env-xla-flags",
        _wave2("- name: a\n  env: {XLA_FLAGS: --xla_a=1}\n"),
        "waves.2[0].env.XLA_FLAGS",
        7,
        "the profile's 'xla_flags' list",
    ),
    (
        "profile-env-value-backtick",
        _wave2("- name: a\n  env: {NCCL_X: '`id`'}\n"),
        "waves.2[0].env.NCCL_X",
        7,
        "an environment value",
    ),
    (
        "profile-job-name-too-long",
        "model_tag: " + "m" * 150 + "\nnodes: 8\nparallelism: FSDP=8\nbackend: {kind: maxtext-slurm, checkout: /x}\n"
        "waves:\n  2:\n    - {name: " + "p" * 40 + ", xla_flags: [--xla_a=1]}\n",
        "waves.2[0].name",
        7,
        "found 280 bytes for profile 'pppp",
    ),
    (
        "pipeline-shapes-without-pp",
        HEAD + "pipeline_shapes:\n  - microbatches: 8\n",
        "pipeline_shapes",
        4,
        "found parallelism FSDP=8",
    ),
    (
        "pipeline-shape-repeated",
        PP_HEAD + "pipeline_shapes:\n  - microbatches: 8\n  - {microbatches: 8, virtual_stages: 1}\n",
        "pipeline_shapes[1]",
        6,
        "mb8_v1 again (first on line 5)",
    ),
    (
        "pipeline-shape-zero",
        PP_HEAD + "pipeline_shapes:\n  - microbatches: 0\n",
        "pipeline_shapes[0].microbatches",
        5,
        "an integer from 1 to 65536",
    ),
    ("thresholds-zero", HEAD + "thresholds:\n  win_pct: 0\n", "thresholds.win_pct", 5, "a number > 0"),
    (
        "thresholds-unknown",
        HEAD + "thresholds:\n  win_percent: 3\n",
        "thresholds.win_percent",
        5,
        "(did you mean 'win_pct'?)",
    ),
    (
        "threshold-at-the-top",
        HEAD + "win_pct: 5\n",
        "win_pct",
        4,
        "found unknown key 'win_pct' (a key of thresholds) (did you mean 'thresholds: {win_pct: 5}'?)",
    ),
    (
        "threshold-typo-at-the-top",
        HEAD + "winpct: 5\n",
        "winpct",
        4,
        "found unknown key 'winpct' (did you mean 'thresholds: {win_pct: 5}'?)",
    ),
    (
        "backend-option-at-the-top",
        HEAD + "checkout: /shared/maxtext-slurm\n",
        "checkout",
        4,
        "(a key of backend) (did you mean 'backend: {checkout: /shared/maxtext-slurm}'?)",
    ),
    (
        "backend-option-at-the-top-odd-value",
        HEAD + "checkout: 'a b;c'\n",
        "checkout",
        4,
        "(did you mean 'backend: {checkout: ...}'?)",
    ),
    ("backend-kind-typo", HEAD + "backend:\n  kind: sbtach\n", "backend.kind", 5, "(did you mean 'sbatch'?)"),
    (
        "backend-option-of-other-kind",
        HEAD + "backend:\n  kind: local\n  command: srun x\n",
        "backend.command",
        6,
        "an option of backend kind local: python",
    ),
    (
        "backend-option-typo",
        HEAD + "backend:\n  kind: maxtext-slurm\n  chekout: /x\n",
        "backend.chekout",
        6,
        "(did you mean 'checkout'?)",
    ),
    (
        "backend-time",
        HEAD + "backend:\n  kind: sbatch\n  time: 45 minutes\n",
        "backend.time",
        6,
        "HH:MM:SS, MM:SS or minutes",
    ),
    (
        "backend-ray-text",
        HEAD + "backend:\n  kind: maxtext-slurm\n  ray: 'on'\n",
        "backend.ray",
        6,
        "true or false, found 'on'",
    ),
    ("image-newline", HEAD + 'image: "rocm/jax\\nlatest"\n', "image", 4, "a container image"),
    # A newcomer's slips: the message says what they most likely meant.
    (
        "flag-without-dashes",
        _wave2("- name: a\n  xla_flags: [xla_backend_optimization_level=1]\n"),
        "waves.2[0].xla_flags[0]",
        7,
        "found 'xla_backend_optimization_level=1' (did you mean '--xla_backend_optimization_level=1'?)",
    ),
    (
        "flag-with-a-space-for-equals",
        _wave2("- name: a\n  xla_flags: ['--xla_backend_optimization_level 1']\n"),
        "waves.2[0].xla_flags[0]",
        7,
        "(did you mean '--xla_backend_optimization_level=1'?)",
    ),
    (
        "steps-in-quotes",
        HEAD + 'steps: "12"\n',
        "steps",
        4,
        "found '12' (text, in quotes: write the number without them)",
    ),
    (
        "percent-sign",
        HEAD + "thresholds: {win_pct: 5%}\n",
        "thresholds.win_pct",
        4,
        "(text: write the number alone, 5, without %)",
    ),
    (
        "parallelism-lower-case",
        "model_tag: demo\nnodes: 1\nparallelism: fsdp=8\n",
        "parallelism",
        3,
        "(did you mean 'FSDP=8'?)",
    ),
    (
        "model-tag-upper-case",
        "model_tag: Demo\nnodes: 1\nparallelism: FSDP=8\n",
        "model_tag",
        1,
        "(did you mean 'demo'?)",
    ),
    (
        "env-name-lower-case",
        _wave2("- name: a\n  env: {nccl_buffsize: '1'}\n"),
        "waves.2[0].env.nccl_buffsize",
        7,
        "(did you mean 'NCCL_BUFFSIZE'?)",
    ),
    (
        "catalog-upper-case",
        HEAD + "waves: {2: {catalog: CPU}}\n",
        "waves.2.catalog",
        4,
        "found 'CPU' (did you mean 'cpu'?)",
    ),
    (
        "one-flag-not-a-list",
        _wave2("- name: a\n  xla_flags: --xla_backend_optimization_level=1\n"),
        "waves.2[0].xla_flags",
        7,
        "a list of XLA flags, found '--xla_backend_optimization_level=1' "
        "(did you mean '[--xla_backend_optimization_level=1]'?)",
    ),
    (
        "env-file-name-lower-case",
        HEAD + "env_file:\n  - env: nccl_min_nchannels=32\n    image_default: null\n",
        "env_file[0].env",
        5,
        "found 'nccl_min_nchannels=32' (did you mean 'NCCL_MIN_NCHANNELS=32'?)",
    ),
    (
        "backend-a-bare-kind",
        HEAD + "backend: local\n",
        "backend",
        4,
        "a mapping such as {kind: local}, found 'local' (did you mean '{kind: local}'?)",
    ),
]


@pytest.mark.parametrize(
    ("text", "key", "line", "fragment"), [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED]
)
def test_malformed_cell_fails_on_one_line_naming_key_and_line(
    tmp_path: Path,
    text: str,
    key: str,
    line: int,
    fragment: str,
) -> None:
    path = _cell(tmp_path, text)
    with pytest.raises(CellError) as info:
        load_cell(path)
    err = info.value
    message = str(err)
    assert (err.path, err.key, err.line) == (path, key, line), message
    assert message.startswith(f"{path}:{line}: {key}: expected "), message
    assert fragment in message
    assert "\n" not in message


def test_malformed_table_is_large_and_ids_unique() -> None:
    ids = [case[0] for case in MALFORMED]
    assert len(ids) >= 25
    assert len(set(ids)) == len(ids)


def test_unreadable_file_is_line_zero(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yml"
    with pytest.raises(CellError) as info:
        load_cell(missing)
    assert (info.value.line, info.value.key) == (0, "file")
    assert str(info.value).startswith(f"{missing}:0: file: expected a readable cell file, found ")


def test_non_utf8_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yml"
    path.write_bytes(HEAD.encode() + b"image: caf\xe9\n")
    with pytest.raises(CellError) as info:
        load_cell(path)
    assert (info.value.line, info.value.key, info.value.found) == (4, "file", "byte 0xe9")


def test_error_message_escapes_newlines_in_found_text(tmp_path: Path) -> None:
    path = _cell(tmp_path, HEAD + 'model_tag: "a\\nb"\n')
    with pytest.raises(CellError) as info:
        load_cell(path)
    assert "\n" not in str(info.value)


def test_error_message_escapes_a_key_name_and_shortens_a_long_key_or_number(tmp_path: Path) -> None:
    """The key path is the cell's own text: a title-setting escape or a bidi override in a key
    name is shown escaped (the terminal cleaner would drop it, leaving `overrides.:`)."""
    path = _cell(tmp_path, HEAD.replace("nodes: 1", "nodes: -" + "9" * 4000) + 'overrides: {"\\e]0;x\\a\\u202e": 1}\n')
    with pytest.raises(CellError) as info:
        load_cell(path)
    assert (
        str(info.value)
        == f"{path}:2: nodes: expected an integer from 1 to 100000, found -{'9' * 56}... (4001 characters) (an integer)"
    )
    path = _cell(tmp_path, HEAD + 'overrides: {"\\e]0;x\\a\\u202e": 1}\n')
    with pytest.raises(CellError) as info:
        load_cell(path)
    assert str(info.value).startswith(f"{path}:4: overrides.\\x1b]0;x\\x07\\u202e: expected a MaxText override key")
    path = _cell(tmp_path, HEAD + f"overrides: {{{'k' * 500}: 1, {'k' * 500}: 2}}\n")
    with pytest.raises(CellError) as info:
        load_cell(path)
    assert str(info.value).startswith(f"{path}:4: overrides.{'k' * 107}...: expected each key once, found 'kkk")


def test_a_model_tag_too_long_for_its_file_names_is_refused_on_every_backend(tmp_path: Path) -> None:
    """Not only maxtext-slurm's JOB_NAME: a job's log `<id>-<model>-<run>-<tag>.log` and the
    report `<model>-tuning.zh.md` are path segments (was: every job ENAMETOOLONG, no report)."""
    for backend in ("", "backend: {kind: sbatch}\n"):
        path = _cell(tmp_path, HEAD.replace("demo", "m" * 300) + backend)
        with pytest.raises(CellError) as info:
            load_cell(path)
        assert str(info.value) == (
            f"{path}:1: model_tag: expected a model tag that fits the file names of its jobs and reports "
            "(255 bytes each), found 300 bytes, making the longest 345 bytes "
            "(<job id>-<model>-baseline-r2-oldimage-default.log): shorten it by 90"
        )
    assert load_cell(_cell(tmp_path, HEAD.replace("demo", "m" * 200))).model_tag == "m" * 200


@pytest.mark.parametrize(
    ("text", "line", "key", "expected"),
    [
        (
            PP_HEAD + "pipeline_shapes:\n  - {microbatches: 1" + "0" * 300 + "}\n",
            5,
            "pipeline_shapes[0].microbatches",
            "an integer from 1 to 65536",
        ),
        (
            PP_HEAD + "pipeline_shapes:\n  - {microbatches: 2, virtual_stages: 65537}\n",
            5,
            "pipeline_shapes[0].virtual_stages",
            "an integer from 1 to 65536",
        ),
        (HEAD + "waves:\n  4: {stack: 1" + "0" * 300 + "}\n", 5, "waves.4.stack", "true or an integer from 2 to 999*"),
    ],
    ids=["microbatches", "virtual-stages", "stack"],
)
def test_numbers_that_name_a_run_are_bounded(tmp_path: Path, text: str, line: int, key: str, expected: str) -> None:
    with pytest.raises(CellError) as info:
        load_cell(_cell(tmp_path, text))
    assert (info.value.line, info.value.key) == (line, key)
    assert re.fullmatch(re.escape(expected).replace(r"\*", ".*"), info.value.expected)


def test_virtual_stages_must_be_computable_from_the_layers(tmp_path: Path) -> None:
    """V sets num_layers_per_pipeline_stage = layers / (stages × V): a V the layer count does not
    give (or no layer count) is refused at collection, not run as another shape under its name."""
    shapes = "pipeline_shapes:\n  - {microbatches: 8}\n  - {microbatches: 8, virtual_stages: 3}\n"
    with pytest.raises(CellError) as info:
        load_cell(_cell(tmp_path, PP_HEAD + shapes + "overrides: {num_decoder_layers: 8}\n"))
    assert (info.value.line, info.value.key) == (6, "pipeline_shapes[1].virtual_stages")
    assert info.value.expected == (
        "a number of virtual stages that divides num_decoder_layers=8 over 4 pipeline stages (1, 2)"
    )
    with pytest.raises(CellError) as info:
        load_cell(_cell(tmp_path, PP_HEAD + shapes))
    assert "overrides.num_decoder_layers set as well" in info.value.expected
    with pytest.raises(CellError) as info:  # no V at all fits 10 layers over 4 stages: it says so
        load_cell(_cell(tmp_path, PP_HEAD + shapes + "overrides: {num_decoder_layers: 10}\n"))
    assert info.value.expected == (
        "a number of virtual stages that divides num_decoder_layers=10 over 4 pipeline stages "
        "(none does: 10 layers do not split evenly over 4 stages)"
    )
    good = shapes.replace("virtual_stages: 3", "virtual_stages: 2") + "overrides: {num_decoder_layers: 8}\n"
    assert [s.name for s in load_cell(_cell(tmp_path, PP_HEAD + good)).pipeline_shapes] == ["mb8_v1", "mb8_v2"]


def test_cell_error_survives_pickling() -> None:
    # pytest-xdist ships collection errors between processes.
    err = CellError(Path("c.yml"), 3, "steps", "an integer", "'x'", "steps")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) == "c.yml:3: steps: expected an integer, found 'x' (did you mean 'steps'?)"


# -- good cells -------------------------------------------------------------------------------


def test_demo_cell_loads_to_the_expected_values() -> None:
    cell = load_cell(ROOT / "cells" / "demo_fsdp8.yml")
    assert isinstance(cell, Cell)
    assert cell.model_tag == "demo"
    assert cell.slot == ClusterSlot(nodes=1)
    assert cell.parallelism == Parallelism((("FSDP", 8),))
    assert (cell.pdbs, cell.steps, cell.baseline_repeats) == (2, 15, 2)
    assert cell.overrides == (
        ("emb_dim", "128"),
        ("mlp_dim", "512"),
        ("num_decoder_layers", "4"),
        ("max_target_length", "128"),
    )
    assert cell.config_tags == (ConfigTag("default"),)
    assert cell.env_file == (EnvFileEntry("xla", "--xla_backend_optimization_level", "0", "2"),)
    assert [(p.name, p.wave, p.line) for p in cell.profiles] == [
        ("opt_o1", 2, 25),
        ("opt_o2", 2, 27),
        ("no_expensive", 2, 29),
        ("vec256", 2, 31),
        ("o1_bf16", 2, 33),
        ("no_eigen_mt", 3, 37),
        ("no_ar_combine", 3, 39),
        ("seq_sched", 3, 41),
        ("split4", 3, 43),
        ("o2_no_fastmath", 4, 46),
        ("stale_flag", 4, 48),
        ("o2_vec256", 4, 52),
    ]
    assert cell.profile("o1_bf16").overrides == (("dtype", "bfloat16"),)
    assert cell.profile("stale_flag") == Profile(
        # -O2 too: a variant of the recipe's lever, so the adaptive demo still runs it after the win
        "stale_flag",
        4,
        xla_flags=("--xla_backend_optimization_level=2", "--xla_gpu_enable_obsolete_thing=true"),
        line=48,
    )
    assert cell.backend == Backend(BackendKind.LOCAL)
    assert cell.thresholds == Thresholds()


def test_hybrid_cell_keeps_axis_order_and_multiplies_to_total() -> None:
    cell = load_cell(DATA / "hybrid_pp4_fsdp2.yml")
    assert cell.parallelism.axes == (("PP", 4), ("FSDP", 2))
    assert cell.parallelism.total == 8
    assert cell.parallelism.overrides() == (("dcn_fsdp_parallelism", "2"), ("dcn_pipeline_parallelism", "4"))
    assert cell.slot == ClusterSlot(nodelist="node[01-08]")


def test_config_tags_keep_file_order_and_render_maxtext_text() -> None:
    cell = load_cell(DATA / "hybrid_pp4_fsdp2.yml")
    assert [tag.name for tag in cell.config_tags] == ["sparse", "dense", "fallback"]
    assert cell.primary_config == ConfigTag("sparse", (("sparse_matmul", "true"),))
    assert cell.config_tags[1:] == (ConfigTag("dense", (("capacity_factor", "1.25"),)), ConfigTag("fallback"))


def test_hybrid_cell_reads_every_section() -> None:
    cell = load_cell(DATA / "hybrid_pp4_fsdp2.yml")
    assert (cell.pdbs, cell.steps, cell.baseline_repeats) == (4, 20, 3)
    assert cell.env_file == (
        EnvFileEntry("xla", "--xla_gpu_enable_latency_hiding_scheduler", "true", "false"),
        EnvFileEntry("env", "NCCL_NCHANNELS_PER_NET_PEER", "4", None),
    )
    # Waves sort by number whatever the file order; "3" and 3 are the same wave; `4:` is empty.
    assert cell.profiles == (
        Profile("lhs_off", 2, xla_flags=("--xla_gpu_enable_latency_hiding_scheduler=false",), line=27),
        Profile("noscan", 2, overrides=(("scan_layers", "false"),), line=29),
        Profile("nccl_chan8", 3, env=(("NCCL_NCHANNELS_PER_NET_PEER", "8"),), line=24),
    )
    assert cell.pipeline_shapes == (PipelineShape(8, 1, line=34), PipelineShape(16, 2, line=35))
    assert cell.thresholds == Thresholds(win_pct=3.0, bounded_profiles=30)
    assert (cell.image, cell.hardware) == ("rocm/jax-training:maxtext-v25.9", "8x MI355X per node")


def test_backend_options_are_sorted_text_and_time_keeps_its_spelling() -> None:
    # Unquoted 45:00 is a YAML 1.1 base-60 integer (2700); Slurm must still get "45:00".
    cell = load_cell(DATA / "hybrid_pp4_fsdp2.yml")
    assert cell.backend == Backend(
        BackendKind.MAXTEXT_SLURM,
        (("checkout", "/shared/maxtext-slurm"), ("partition", "gpu-a"), ("ray", "true"), ("time", "45:00")),
    )
    assert cell.backend.option("time") == "45:00"


def test_minimal_cell_gets_the_defaults(tmp_path: Path) -> None:
    cell = load_cell(_cell(tmp_path, HEAD))
    assert cell == Cell(
        path=tmp_path / "cell.yml", model_tag="demo", slot=ClusterSlot(nodes=1), parallelism=Parallelism((("FSDP", 8),))
    )
    assert (cell.pdbs, cell.steps, cell.baseline_repeats) == (None, 15, 2)
    assert cell.config_tags == (ConfigTag("default"),)
    assert cell.backend == Backend(BackendKind.LOCAL, ())
    assert (cell.profiles, cell.env_file, cell.pipeline_shapes, cell.overrides) == ((), (), (), ())


def test_partition_plus_nodes_slot(tmp_path: Path) -> None:
    text = "model_tag: demo\npartition: gpu\nnodes: 4\nparallelism: TP=8\n"
    cell = load_cell(_cell(tmp_path, text))
    assert cell.slot == ClusterSlot(partition="gpu", nodes=4)
    assert cell.slot.text == "partition=gpu+nodes=4"


def test_override_numbers_pass_as_written(tmp_path: Path) -> None:
    text = HEAD + "overrides:\n  learning_rate: 3.0e-4\n  remat_policy: full\n  use_iota: off\n"
    cell = load_cell(_cell(tmp_path, text))
    assert cell.overrides == (("learning_rate", "3.0e-4"), ("remat_policy", "full"), ("use_iota", "false"))


# -- grammar ------------------------------------------------------------------------------------


def test_job_name_matches_the_maxtext_slurm_example() -> None:
    # maxtext-slurm notes: `deepseek3-671b:pp8-A … -- steps=15 _env_TUNE_PROFILE=pp8-A`.
    name = grammar.job_name("deepseek3-671b", "pp8-A", ["steps=15", "_env_TUNE_PROFILE=pp8-A"])
    assert name == "JAX-deepseek3-671b-pp8-A-steps_15-_env_TUNE_PROFILE_pp8-A"


def test_long_overrides_and_the_tp_catalog_collect_on_every_backend(tmp_path: Path) -> None:
    # Settings go into the TUNE_PROFILE arm, not the JOB_NAME; `local` has no JOB_NAME at all.
    many = {f"{'k' * 60}{i}": "v" * 60 for i in range(4)}
    overrides = "".join(f"  {k}: {v}\n" for k, v in many.items())
    for backend in ("", "backend: {kind: maxtext-slurm, checkout: /x}\n", "backend: {kind: sbatch}\n"):
        text = (
            "model_tag: deepseek3-671b\nnodes: 1\nparallelism: TP=4\npdbs: 2\n"
            + backend
            + "overrides:\n"
            + overrides
            + "waves:\n  2: {catalog: tp}\n"
        )
        cell = load_cell(_cell(tmp_path, text))
        assert cell.catalog_waves and dict(cell.overrides) == many


def test_job_name_strips_one_leading_dash_and_drops_empty_args() -> None:
    assert grammar.job_name("m", "", ["--a=b", "-c=d=e", ""]) == "JAX-m-a_b-c_d_e"
    assert grammar.job_name("m", "", []) == "JAX-m"


@pytest.mark.parametrize(
    ("rule", "text", "ok"),
    [
        (grammar.NAME, "opt_o0", True),
        (grammar.NAME, "x" * 49, False),
        (grammar.NAME, "_lead", False),
        (grammar.XLA_FLAG, "--xla_gpu_foo=a,b:c/d+e-f.g", True),
        (grammar.XLA_FLAG, "--xla_gpu_foo='1'", False),
        (grammar.XLA_FLAG, "--xla_gpu_foo=1\n", False),
        (grammar.ENV_VALUE, "", True),
        (grammar.ENV_VALUE, "a=b@c%d", True),
        (grammar.ENV_VALUE, "a b", False),
        (grammar.NODELIST, "node[01-04],gpu7", True),
        (grammar.NODELIST, "rack[1-2]-gpu[01-08,10],login.b", True),
        (grammar.NODELIST, "node[01-", False),
        (grammar.NODELIST, "node01]", False),
        (grammar.NODELIST, "node[]", False),
        (grammar.NODELIST, "node[01--04]", False),
        (grammar.NODELIST, "node01,,node02", False),
        (grammar.NODELIST, "[01-04]", False),
        (grammar.PARTITION, "gpu[1]", False),
    ],
)
def test_grammar(rule: grammar.Grammar, text: str, ok: bool) -> None:
    assert rule.matches(text) is ok


def test_the_load_time_job_name_check_counts_what_submit_sh_is_given(tmp_path: Path) -> None:
    """cell.load's JOB_NAME check and submit_argv build the name from one rule (maxtext_job_name),
    for the longest run a profile gives: the image gate's `<profile>-oldimage` on the lock's image."""
    from pytest_xlatune.launch.maxtext.submit import submit_argv

    name = "p" * 48
    gate = f"{name}-oldimage"
    model = "m" * (grammar.JOB_NAME_MAX - len(grammar.maxtext_job_name("", gate, f"{gate}.default")) + 5)
    size = len(grammar.maxtext_job_name(model, gate, f"{gate}.default"))
    assert size == grammar.JOB_NAME_MAX + 5
    with pytest.raises(ValueError, match=f"JOB_NAME would be {size} bytes"):
        submit_argv(model, gate, 1, None, "45:00", None, [], False, arm=f"{gate}.default", profiles=[name])
    text = (
        f"model_tag: {model}\nnodes: 8\nparallelism: FSDP=8\nbackend: {{kind: maxtext-slurm, checkout: /x}}\n"
        f"waves:\n  2:\n    - name: {name}\n      xla_flags: [--xla_a=1]\n"
    )
    with pytest.raises(
        CellError,
        match=f"{size} bytes for profile '{name}' in the image gate "
        f"\\(as '{gate}', its run on the lock's image\\) .*: shorten the "
        f"profile name by 3 \\(it is the exp tag and the TUNE_PROFILE arm\\)",
    ):
        load_cell(_cell(tmp_path, text))


@pytest.mark.parametrize(
    ("model", "waves", "key", "line", "found"),
    [
        # xlatune's own runs and a catalog's candidates: the cell cannot rename them, so the model is
        # the part to shorten (a catalog can also be left out), never "shorten the profile name".
        (180, "", "model_tag", 1, "for xlatune's run 'baseline-r2' in the image gate"),
        (
            165,
            "waves:\n  2: {catalog: fsdp}\n",
            "waves.2.catalog",
            6,
            "for catalog fsdp's candidate 'ag_combine_256m' in the image gate",
        ),
    ],
)
def test_a_name_the_cell_did_not_choose_never_asks_to_shorten_that_name(
    tmp_path: Path, model: int, waves: str, key: str, line: int, found: str
) -> None:
    text = (
        f"model_tag: {'m' * model}\nnodes: 8\nparallelism: FSDP=8\n"
        "backend: {kind: maxtext-slurm, checkout: /x}\n" + waves
    )
    with pytest.raises(CellError) as info:
        load_cell(_cell(tmp_path, text))
    message = str(info.value)
    assert (info.value.key, info.value.line) == (key, line), message
    assert found in message and "not the cell: shorten model_tag by" in message, message
    assert "shorten the profile name" not in message
    if key.startswith("waves"):
        assert message.endswith(", or leave catalog fsdp out"), message


def test_every_key_of_the_schema_table_is_in_the_docs_cell() -> None:
    """schema.KEYS is the one list of top-level keys; the cell reference's example shows each."""
    from pytest_xlatune.cell.schema import KEYS, TOP_KEYS

    readme = (Path(__file__).parents[3] / "docs" / "reference" / "cell.md").read_text(encoding="utf-8")
    example = readme.split("## A cell", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    assert tuple(key.name for key in KEYS) == TOP_KEYS
    assert [k for k in TOP_KEYS if not re.search(rf"(^|[#|] *){k}:", example, re.M)] == []


def test_a_long_parallelism_or_policy_key_is_shortened_in_its_one_line(tmp_path: Path) -> None:
    """A 5,000-character axis was printed whole; 5,000 digits were Python's own 'Exceeds the
    limit (4300 digits)'; a 5,000-character policy key made a 5,500-character line."""
    for parallelism, found in (
        ("a" * 5000, "'" + "a" * 57 + "...' (5000 characters)"),
        ("FSDP=" + "9" * 5000, "'FSDP=" + "9" * 52 + "...' (5005 characters)"),
    ):
        path = _cell(tmp_path, HEAD.replace("parallelism: FSDP=8", f"parallelism: {parallelism}"))
        with pytest.raises(CellError) as info:
            load_cell(path)
        assert str(info.value).endswith(f"found {found}"), str(info.value)
    for policy, found in (
        ({"k" * 5000: {"retries": 1}}, f"policy.{'k' * 57}...: unknown key"),
        ({"rccl_init_flake": {"retries": "x" * 5000}}, f"retries: expected an integer ≥ 0, got '{'x' * 56}..."),
    ):
        path = _cell(tmp_path, HEAD + yaml.safe_dump({"policy": policy}, width=10**6))  # "? key" past 1024
        with pytest.raises(CellError) as info:
            load_cell(path)
        assert len(str(info.value)) < 700 and found in str(info.value), str(info.value)


def test_a_cell_file_past_256_kib_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """PyYAML scans in pure Python: a 60 MB comment took a minute of collection."""
    path = _cell(tmp_path, HEAD + "# " + "x" * (300 * 1024) + "\n")
    with pytest.raises(CellError) as info:
        load_cell(path)
    assert (
        str(info.value)
        == f"{path}:0: file: expected a cell file of at most 256 KiB, found {path.stat().st_size:,} bytes"
    )


def test_a_fifo_named_as_a_cell_is_one_line_not_a_wait_for_a_writer(tmp_path: Path) -> None:
    """The report CLI reads the cells it is given: a FIFO there waited forever."""
    import os
    import subprocess
    import sys

    os.mkfifo(tmp_path / "c.yml")
    done = subprocess.run(
        [sys.executable, "-m", "pytest_xlatune.report", str(tmp_path / "c.yml"), "--store", str(tmp_path / "s")],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"error: {tmp_path / 'c.yml'}:0: file: expected a readable cell file, found a FIFO (named pipe)"
    )


UNBOUNDED = [
    ("image-5000", f"image: {'a' * 5000}\n", "image", "a container image", "(5000 characters)"),
    ("image-space", "image: 'rocm/jax latest'\n", "image", "a container image", "'rocm/jax latest'"),
    ("image-shell", "image: 'x;reboot'\n", "image", "a container image", "'x;reboot'"),
    ("image-bidi", 'image: "rocm/jax\\u202e"\n', "image", "a container image", "'rocm/jax\\u202e'"),
    ("hardware-5000", f"hardware: {'h' * 5000}\n", "hardware", "at most 200 characters", "(5000 characters)"),
    ("hardware-bidi", 'hardware: "8x MI355\\u202egpj.exe"\n', "hardware", "text on one line", "\\u202e"),
    ("hardware-zero-width", 'hardware: "MI\\u200b355"\n', "hardware", "text on one line", "\\u200b"),
    ("hardware-c1", 'hardware: "MI\\x9b31m"\n', "hardware", "text on one line", "\\x9b"),
    (
        "override-5000",
        f"overrides: {{emb_dim: {'1' * 5000}}}\n",
        "overrides.emb_dim",
        "at most 1024",
        "(5000 characters)",
    ),
    ("override-key-200", f"overrides: {{{'k' * 200}: 1}}\n", "overrides.kkk", "at most 128", "k" * 40),
    (
        "env-name-200",
        f"env_file:\n  - env: {'A' * 200}=1\n    image_default: null\n",
        "env_file[0].env",
        "at most 128",
        "A",
    ),
    ("backend-path-5000", f"backend:\n  kind: local\n  python: {'p' * 5000}\n", "backend.python", "1024", "(5000"),
    ("nodes-googol", f"nodes: {'9' * 100}\n", "nodes", "an integer from 1 to 100000", "(100 characters)"),
    ("pdbs-huge", "pdbs: 99999999999\n", "pdbs", "an integer from 1 to 65536", "99999999999"),
    ("steps-huge", "steps: 99999999999\n", "steps", "an integer from 10 to 10000000", "99999999999"),
    ("win-pct-huge", "thresholds: {win_pct: 1.0e+308}\n", "thresholds.win_pct", "at most 100", "1.0e+308"),
    ("regression-pct-101", "thresholds: {regression_pct: 101}\n", "thresholds.regression_pct", "at most 100", "101"),
    ("remeasure-googol", f"thresholds: {{remeasure: {'9' * 100}}}\n", "thresholds.remeasure", "0 to 1000", "(100"),
]


@pytest.mark.parametrize(
    ("text", "key", "expected", "found"), [u[1:] for u in UNBOUNDED], ids=[u[0] for u in UNBOUNDED]
)
def test_every_string_and_number_key_is_bounded_with_one_line(
    tmp_path: Path, text: str, key: str, expected: str, found: str
) -> None:
    """A 5,000-character image or label, a bidi override, a googol of nodes: one line naming the
    file, the key, what was expected and what was found, never accepted."""
    head = HEAD.replace("nodes: 1\n", "") if text.startswith("nodes:") else HEAD
    path = _cell(tmp_path, head + text)
    with pytest.raises(CellError) as info:
        load_cell(path)
    message = str(info.value)
    assert "\n" not in message and len(message) < 600, message
    assert message.startswith(f"{path}:") and f" {key}" in message.split(": expected ", maxsplit=1)[0], message
    assert expected in message.split(", found ", maxsplit=1)[0] and found in message.split(", found ", 1)[1], message
