"""maxtext-slurm: each run's compilation cache is exported inside its TUNE_PROFILE arm (and given
to MaxText as `jax_cache_dir`, which its pyconfig applies over the variable); an XLA dump turns
the cache off; a checkout that names its own cache gets none from us."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from pytest_xlatune.adaptive.cache import cache_dir, request_for
from pytest_xlatune.cell.load import load_cell
from pytest_xlatune.launch.maxtext.files import Arm, install_block, render_tune_block
from pytest_xlatune.launch.maxtext.launcher import MaxTextSlurmLauncher
from pytest_xlatune.plan.expand import RunKind, expand
from pytest_xlatune.plan.request import possible_specs
from tests.unit.launch.test_maxtext_launcher import (
    CELL,
    CK,
    STANDIN,
    FakeTransport,
    checkout_files,
    submit_output,
)
from tests.unit.launch.test_maxtext_launcher import make as make_launcher

ARGS = ("steps=15", "dataset_type=synthetic")
CACHED = Arm("baseline", args=ARGS, compile_cache="demo/0123456789ab")


@pytest.fixture
def cell_path(tmp_path: Path) -> Path:
    """The demo cell of test_maxtext_launcher.py, in this test's directory."""
    path = tmp_path / "demo.yml"
    path.write_text(CELL)
    return path


def test_the_arm_exports_its_cache_and_passes_jax_cache_dir() -> None:
    xla, _ = render_tune_block((CACHED, Arm("ag_1g", ("--xla_a=1",), args=ARGS)), "demo")
    assert (
        """\
    baseline)
        TUNE_ARGS+=(steps=15 dataset_type=synthetic)
        export JAX_COMPILATION_CACHE_DIR="${OUTPUT_PATH%/*}/xlatune-jax-cache/demo/0123456789ab"
        export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
        export JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
        TUNE_ARGS+=("jax_cache_dir=$JAX_COMPILATION_CACHE_DIR")
        ;;
    ag_1g)
        TUNE_FLAGS+=' --xla_a=1'
        TUNE_ARGS+=(steps=15 dataset_type=synthetic)
        ;;
"""
        in xla
    )
    assert (
        """\
fi
# An XLA dump compiles: no compilation cache (a hit would skip the passes the dump records).
_xlatune_dump="${ENABLE_XLA_DUMP:-${EXTRACTED_ENV_MAP[ENABLE_XLA_DUMP]:-0}}"
if [[ "${_xlatune_dump,,}" =~ ^(1|y|yes|true)$ ]]; then
    export JAX_ENABLE_COMPILATION_CACHE=false
fi
unset _xlatune_dump
# _train.sh builds"""
        in xla
    )


def test_a_block_without_caches_is_the_one_before_caches() -> None:
    xla, _ = render_tune_block((Arm("baseline", args=ARGS),), "demo")
    assert "JAX_" not in xla and "jax_cache_dir" not in xla


def _source(profile: str, dump: str | None = None) -> dict[str, str]:
    """Source train_env.sh with our block as _train.sh does; the JAX variables and the args."""
    text = install_block((STANDIN / "train_env.sh").read_text(), "".join(render_tune_block((CACHED,), "demo")), "s1")
    script = "\n".join([
        "set -euo pipefail", "declare -A EXTRACTED_ENV_MAP=()",
        f"EXTRACTED_ENV_MAP[TUNE_PROFILE]={shlex.quote(profile)}",
        f"EXTRACTED_ENV_MAP[ENABLE_XLA_DUMP]={dump}" if dump else "",
        "OUTPUT_PATH='/shared/out puts/123-JAX-demo-baseline'", "PASSTHROUGH_ARGS=()", text,
        'for v in JAX_COMPILATION_CACHE_DIR JAX_ENABLE_COMPILATION_CACHE; do printf "%s=%s\\n" "$v" "${!v:-}"; done',
        'printf "ARG=%s\\n" "${PASSTHROUGH_ARGS[@]}"',
    ])  # fmt: skip
    out = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"}
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if line.startswith(("JAX_", "ARG=jax")))


def test_in_bash_the_cache_lies_beside_the_job_dirs_and_maxtext_gets_the_same() -> None:
    seen = _source("baseline")
    assert seen["JAX_COMPILATION_CACHE_DIR"] == "/shared/out puts/xlatune-jax-cache/demo/0123456789ab"
    assert seen["ARG"] == "jax_cache_dir=/shared/out puts/xlatune-jax-cache/demo/0123456789ab"
    assert seen["JAX_ENABLE_COMPILATION_CACHE"] == ""


def test_in_bash_an_xla_dump_turns_the_cache_off() -> None:
    assert _source("baseline", dump="1")["JAX_ENABLE_COMPILATION_CACHE"] == "false"


def make(cell_path: Path, transport: FakeTransport, cache: bool = True) -> MaxTextSlurmLauncher:
    """As Session does: install the block, then an arm for every run, with its cache (or none)."""
    cell, launcher = load_cell(cell_path), make_launcher(transport, cell_path, prepare=False)
    launcher.prepare()
    launcher.check_requests(request_for(cell, s, cache=cache) for s in possible_specs(expand(cell)))
    return launcher


def test_each_run_s_arm_carries_its_settings_cache(cell_path: Path) -> None:
    cell, transport = load_cell(cell_path), FakeTransport(checkout_files())
    launcher = make(cell_path, transport)
    specs = {s.profile: s for s in expand(cell)}
    assert launcher.arms["baseline"].compile_cache == cache_dir(cell, specs["baseline"]) != ""
    assert launcher.arm_for(request_for(cell, specs["baseline-r2"])) == ("baseline", False)
    winner = next(s for s in expand(cell) if s.kind is RunKind.WINNER_EVIDENCE)
    evidence = {name for name, arm in launcher.arms.items() if "profiler=xplane" in arm.args}
    assert {"evidence", "winner"} <= evidence  # the evidence runs: no cache
    assert all(bool(arm.compile_cache) == (name not in evidence) for name, arm in launcher.arms.items())
    train_env = transport.files[f"{CK}/train_env.sh"].decode()
    assert train_env.count("export JAX_COMPILATION_CACHE_DIR=") == len(launcher.arms) - len(evidence)
    transport.submit_replies.append((0, submit_output("77"), ""))
    job = launcher.submit(request_for(cell, specs["baseline"]))
    assert job.compile_cache == f"{CK}/outputs/xlatune-jax-cache/{cache_dir(cell, specs['baseline'])}"
    transport.submit_replies.append((0, submit_output("78"), ""))
    assert launcher.submit(request_for(cell, winner.resolve(specs["no_eigen_mt"]))).compile_cache == ""
    launcher.close()


def test_the_fixed_protocol_installs_the_block_of_before(cell_path: Path) -> None:
    transport = FakeTransport(checkout_files())
    make(cell_path, transport, cache=False)
    assert "JAX_" not in transport.files[f"{CK}/train_env.sh"].decode()


@pytest.mark.parametrize("where, name, line", [
    ("configs/demo.gpu.yml sets jax_cache_dir", "configs/demo.gpu.yml", "jax_cache_dir: /mine"),
    ("train_env.sh exports JAX_COMPILATION_CACHE_DIR", "train_env.sh",
     'export JAX_COMPILATION_CACHE_DIR="$OUTPUT_PATH/../jax_cache"'),  # upstream's example, uncommented
    ("configs/demo.env.sh exports JAX_COMPILATION_CACHE_DIR", "configs/demo.env.sh", "export JAX_COMPILATION_CACHE_DIR=/c"),
])  # fmt: skip
def test_a_checkout_that_names_its_own_cache_gets_none_from_us(
    cell_path: Path, where: str, name: str, line: str
) -> None:
    transport = FakeTransport(checkout_files(**{name: (STANDIN / name).read_bytes() + f"{line}\n".encode()}))
    launcher = make(cell_path, transport)
    assert launcher.user_cache == where and launcher.inventory()["compile_cache"]["user_setting"] == where
    assert not any(arm.compile_cache for arm in launcher.arms.values())
    assert "jax_cache_dir=$JAX" not in transport.files[f"{CK}/train_env.sh"].decode()
    launcher.close()
