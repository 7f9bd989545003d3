"""maxtext_files: the TUNE_PROFILE block, submit.sh argv and output (recorded from the stand-in), inventory."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_xlatune.cell.grammar import JOB_NAME_MAX, job_name
from pytest_xlatune.launch.maxtext.files import (
    Arm,
    foreign_block,
    install_block,
    remove_block,
    render_env_file_block,
    render_tune_block,
)
from pytest_xlatune.launch.maxtext.submit import (
    parse_container_env,
    parse_env_sh,
    parse_gpu_yml,
    parse_job_dir,
    parse_submit_output,
    submit_argv,
)

TESTS = Path(__file__).resolve().parents[2]
DATA = TESTS / "data" / "maxtext"
STANDIN = TESTS / "maxtext_slurm_standin"

ARGS = ("steps=15", "dataset_type=synthetic", "jax_distributed_heartbeat_timeout_seconds=99999")
RESTORE = Arm(
    "restore_default",
    ("--xla_cpu_enable_fast_math=false",),
    (("XLA_PYTHON_CLIENT_MEM_FRACTION", ".93"), ("MAXTEXT_PATCH_BRANCH", None)),
    ARGS,
)
ARMS = (
    Arm("baseline", args=ARGS),
    RESTORE,
    Arm("ag_1g", ("--xla_gpu_all_gather_combine_threshold_bytes=1073741824",), args=ARGS),
    Arm("nccl_chan8", env=(("NCCL_NCHANNELS_PER_NET_PEER", "8"),), args=ARGS),
    Arm(
        "ovl2.mem+95",
        ("--xla_a=1", "--xla_b=x,y:z"),
        (("XLA_PYTHON_CLIENT_MEM_FRACTION", ".95"), ("ODD", "a=b,c:d@e%f+g/h"), ("EMPTY", "")),
        ARGS,
    ),
    Arm("baseline.sparse", args=(*ARGS, "sparse_matmul=true", "per_device_batch_size=2")),
)


def recorded(name: str) -> str:
    return (DATA / name).read_text()


def block(arms: tuple[Arm, ...] = ARMS) -> str:
    return "".join(render_tune_block(arms, "demo"))


# ---- render ----------------------------------------------------------------------------------


def test_render_follows_the_skill_pattern_and_appends_the_run_settings() -> None:
    small = (ARMS[0], Arm("restore_default", RESTORE.xla_flags, RESTORE.env[:1]), ARMS[3])
    xla, env = render_tune_block(small, "demo")
    assert (
        xla
        == """\
# ---- TUNE_PROFILE ----
TUNE_PROFILE="${TUNE_PROFILE:-${EXTRACTED_ENV_MAP[TUNE_PROFILE]:-}}"
TUNE_FLAGS=""
TUNE_ARGS=()
case "${TUNE_PROFILE}" in
    baseline)
        TUNE_ARGS+=(steps=15 dataset_type=synthetic jax_distributed_heartbeat_timeout_seconds=99999)
        ;;
    restore_default)
        TUNE_FLAGS+=' --xla_cpu_enable_fast_math=false'
        ;;
    nccl_chan8)
        TUNE_ARGS+=(steps=15 dataset_type=synthetic jax_distributed_heartbeat_timeout_seconds=99999)
        ;;
    *)
        echo "[train_env.sh] WARNING: unknown TUNE_PROFILE='$TUNE_PROFILE'" >&2
        ;;
esac
if [[ -n "$TUNE_FLAGS" ]]; then
    XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }${TUNE_FLAGS# }"
    export XLA_FLAGS
fi
# The train step's program for pytest-xlatune's inert flags (rank 0; not when the run dumps already).
if [[ -n "${JOB_DIR:-}" && -n "${OUTPUT_PATH:-}" && "${GLOBAL_RANK:-${NODE_RANK:-0}}" == "0" && " ${XLA_FLAGS:-} " != *" --xla_dump"* ]]; then
    XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_dump_to=${OUTPUT_PATH%/*}/${JOB_DIR}/program --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*"
    export XLA_FLAGS
fi
# _train.sh builds TRAIN_ARGS=(gpu.yml base_output_directory=… "${PASSTHROUGH_ARGS[@]}") after this.
PASSTHROUGH_ARGS+=("${TUNE_ARGS[@]}")
echo "[TUNE_PROFILE] ${TUNE_PROFILE}: PASSTHROUGH_ARGS+=(${TUNE_ARGS[*]}) TUNE_FLAGS=${TUNE_FLAGS# }"
"""
    )
    assert (
        env
        == """\
# ---- TUNE_PROFILE: post-NCCL overrides ----
case "${TUNE_PROFILE:-}" in
    restore_default)
        export XLA_PYTHON_CLIENT_MEM_FRACTION=.93
        ;;
    nccl_chan8)
        export NCCL_NCHANNELS_PER_NET_PEER=8
        ;;
esac
"""
    )


def test_render_has_no_env_block_when_nothing_sets_env() -> None:
    assert render_tune_block(ARMS[:1], "demo")[1] == ""


@pytest.mark.parametrize("arms, message", [
    ((Arm("a"), Arm("a")), "duplicate TUNE_PROFILE arms: a"),
    ((Arm("a b"),), "a TUNE_PROFILE arm name"),
    ((Arm("a", ("--xla_a=1;rm",)),), "an XLA flag"),
    ((Arm("a", env=(("lower", "1"),)),), "an environment variable name"),
    ((Arm("a", env=(("A", "$(id)"),)),), "an environment value"),
    ((Arm("a", args=("x=$(id)",)),), "a MaxText override value"),
    ((Arm("a", args=("--steps=1",)),), "a MaxText override key"),
])  # fmt: skip
def test_render_rejects_what_would_break_the_case_block(arms: tuple[Arm, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        render_tune_block(arms, "demo")


def _source(
    train_env: str, profile: str | None, env_profile: str | None = None, job: str = "OUTPUT_PATH=/tmp/out"
) -> subprocess.CompletedProcess[str]:
    """Source train_env.sh as _train.sh does (set -eu, EXTRACTED_ENV_MAP, PASSTHROUGH_ARGS) and print
    the result; `job`: the job's variables (JOB_DIR, OUTPUT_PATH, NODE_RANK) as bash assignments."""
    script = "\n".join([
        "set -euo pipefail",
        "declare -A EXTRACTED_ENV_MAP=()",
        f"EXTRACTED_ENV_MAP[TUNE_PROFILE]={shlex.quote(profile)}" if profile is not None else "",
        job,
        "PASSTHROUGH_ARGS=()",
        train_env,
        'printf "XLA_FLAGS=%s\\n" "$XLA_FLAGS"',
        'printf "ARGS=%s\\n" "${PASSTHROUGH_ARGS[*]}"',
        "for v in NCCL_NCHANNELS_PER_NET_PEER XLA_PYTHON_CLIENT_MEM_FRACTION ODD EMPTY MAXTEXT_PATCH_BRANCH; do",
        '  if [[ -v $v ]]; then printf "%s=%s\\n" "$v" "${!v}"; else echo "$v unset"; fi',
        "done",
    ])  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "MAXTEXT_PATCH_BRANCH": "branch"}
    if env_profile is not None:
        env["TUNE_PROFILE"] = env_profile
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=True)


BASE_FLAGS = "--xla_cpu_enable_fast_math=false"
BASE_ARGS = " ".join(ARGS)


@pytest.mark.parametrize("profile, flags, values", [
    (None, BASE_FLAGS, {"NCCL_NCHANNELS_PER_NET_PEER": "4", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".93", "ARGS": ""}),
    ("baseline", BASE_FLAGS, {"NCCL_NCHANNELS_PER_NET_PEER": "4", "ARGS": BASE_ARGS}),
    ("restore_default", f"{BASE_FLAGS} --xla_cpu_enable_fast_math=false",
     {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".93", "MAXTEXT_PATCH_BRANCH": None}),
    ("ag_1g", f"{BASE_FLAGS} --xla_gpu_all_gather_combine_threshold_bytes=1073741824", {}),
    ("nccl_chan8", BASE_FLAGS, {"NCCL_NCHANNELS_PER_NET_PEER": "8"}),
    ("ovl2.mem+95", f"{BASE_FLAGS} --xla_a=1 --xla_b=x,y:z",
     {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".95", "ODD": "a=b,c:d@e%f+g/h", "EMPTY": "", "NCCL_NCHANNELS_PER_NET_PEER": "4"}),
    ("baseline.sparse", BASE_FLAGS, {"ARGS": f"{BASE_ARGS} sparse_matmul=true per_device_batch_size=2"}),
])  # fmt: skip
def test_installed_block_sets_each_arm_in_bash(profile: str | None, flags: str, values: dict[str, str | None]) -> None:
    text = install_block((STANDIN / "train_env.sh").read_text(), block(), "s1")
    proc = _source(text, profile)
    out = proc.stdout.splitlines()
    assert f"XLA_FLAGS={flags}" in out
    for name, value in values.items():
        assert (f"{name}={value}" if value is not None else f"{name} unset") in out
    if profile is not None:  # the job log records what the arm appended
        arm = next(a for a in ARMS if a.name == profile)
        flags_added = " ".join(arm.xla_flags)
        assert f"[TUNE_PROFILE] {profile}: PASSTHROUGH_ARGS+=({' '.join(arm.args)}) TUNE_FLAGS={flags_added}" in out


def test_tune_profile_from_the_environment_wins_over_the_env_arg() -> None:
    text = install_block((STANDIN / "train_env.sh").read_text(), block(), "s1")
    assert "NCCL_NCHANNELS_PER_NET_PEER=8" in _source(text, "ag_1g", env_profile="nccl_chan8").stdout


def test_unknown_profile_warns_and_changes_nothing() -> None:
    text = install_block((STANDIN / "train_env.sh").read_text(), block(), "s1")
    proc = _source(text, "typo")
    assert f"XLA_FLAGS={BASE_FLAGS}" in proc.stdout.splitlines()
    assert "ARGS=" in proc.stdout.splitlines()
    assert "[train_env.sh] WARNING: unknown TUNE_PROFILE='typo'" in proc.stderr


DUMP = "--xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*"


@pytest.mark.parametrize("job, arm, dumped", [
    # upstream's job: OUTPUT_PATH=/outputs/$JOB_DIR (utils/job_dir.sh), rank 0 dumps into its own dir
    ("JOB_DIR=7-JAX-demo OUTPUT_PATH=/outputs/7-JAX-demo", "ag_1g", "/outputs/7-JAX-demo/program"),
    # checkpointing: OUTPUT_PATH is the model's dir, shared by jobs; the dump still goes to the job's
    ("JOB_DIR=7-JAX-demo OUTPUT_PATH=/outputs/demo NODE_RANK=0", "baseline", "/outputs/7-JAX-demo/program"),
    ("JOB_DIR=7-JAX-demo OUTPUT_PATH=/outputs/7-JAX-demo NODE_RANK=1", "baseline", None),  # rank 0 only
    ("JOB_DIR=7-JAX-demo OUTPUT_PATH=/outputs/7-JAX-demo GLOBAL_RANK=3 NODE_RANK=0", "baseline", None),
    ("JOB_DIR=7-JAX-demo OUTPUT_PATH=/outputs/7-JAX-demo", "own_dump", None),  # the run's own dump is kept
    ("OUTPUT_PATH=/tmp/out", "baseline", None),  # not a maxtext-slurm job: no job dir to dump into
])  # fmt: skip
def test_rank_0_dumps_the_train_step_into_the_jobs_dir_unless_the_run_dumps_itself(
    job: str, arm: str, dumped: str | None
) -> None:
    arms = (*ARMS, Arm("own_dump", ("--xla_dump_to=/outputs/mine",), args=ARGS))
    flags = next(a.xla_flags for a in arms if a.name == arm)
    out = _source(install_block((STANDIN / "train_env.sh").read_text(), block(arms), "s1"), arm, job=job)
    expected = " ".join((BASE_FLAGS, *flags, *((f"--xla_dump_to={dumped}", DUMP) if dumped else ())))
    assert f"XLA_FLAGS={expected}" in out.stdout.splitlines()


# ---- install / remove / foreign --------------------------------------------------------------

ORIGINALS = ["", "a", "a\n", "a\n\n", "#!/bin/bash\nexport X=1", (STANDIN / "train_env.sh").read_text()]


@pytest.mark.parametrize("original", ORIGINALS)
def test_install_is_idempotent_and_remove_restores_the_original_exactly(original: str) -> None:
    once = install_block(original, block(), "sweep-1")
    assert install_block(once, block(), "sweep-1") == once
    assert remove_block(once, "sweep-1") == original
    assert once.startswith(original)
    assert once.endswith("# <<< xlatune TUNE_PROFILE <<<\n")


def test_install_replaces_our_block_and_keeps_it_last() -> None:
    first = install_block("export A=1\n", block(ARMS[:1]), "sweep-1")
    edited = first + "export NCCL_NCHANNELS_PER_NET_PEER=2\n"  # someone appended after our block
    second = install_block(edited, block(), "sweep-1")
    assert second.count(">>> xlatune TUNE_PROFILE") == 1
    assert second.index("export NCCL_NCHANNELS_PER_NET_PEER=2") < second.index("# >>> xlatune")
    assert "nccl_chan8)" in second
    assert remove_block(second, "sweep-1") == "export A=1\nexport NCCL_NCHANNELS_PER_NET_PEER=2\n"


def test_begin_marker_carries_the_sweep_id() -> None:
    text = install_block("", block(), "qwen3-32b.fsdp8")
    assert "# >>> xlatune TUNE_PROFILE sweep=qwen3-32b.fsdp8 (managed by pytest-xlatune; do not edit) >>>" in text


def test_remove_without_a_block_is_a_no_op() -> None:
    assert remove_block("export A=1\n", "s") == "export A=1\n"


def test_clean_train_env_and_our_own_block_are_not_foreign() -> None:
    clean = (STANDIN / "train_env.sh").read_text()
    assert foreign_block(clean, "s1") is None
    assert foreign_block(install_block(clean, block(), "s1"), "s1") is None


@pytest.mark.parametrize("text, expected", [
    (install_block("export A=1\n", block(), "old-sweep"), "line 3: a pytest-xlatune block of sweep 'old-sweep'"),
    ('export A=1\ncase "${TUNE_PROFILE}" in\n  x) ;;\nesac\n', "line 2: 'case \"${TUNE_PROFILE}\" in'"),
    ("# TUNE_PROFILE leftovers\n", "line 1: '# TUNE_PROFILE leftovers'"),
    ("x\n# >>> xlatune TUNE_PROFILE sweep=s1 (managed by pytest-xlatune; do not edit) >>>\nTUNE_FLAGS=\n",
     "has no end marker"),
])  # fmt: skip
def test_foreign_block_describes_what_we_did_not_write(text: str, expected: str) -> None:
    found = foreign_block(text, "s1")
    assert found is not None and expected in found
    with pytest.raises(ValueError, match="we did not write"):
        install_block(text, block(), "s1")


def test_hand_written_case_next_to_our_block_is_still_foreign() -> None:
    ours = install_block("export A=1\n", block(), "s1")
    found = foreign_block(ours + 'TUNE_PROFILE="${TUNE_PROFILE:-x}"\n', "s1")
    assert found is not None and found.startswith(f"line {ours.count(chr(10)) + 1}:")


# ---- submit.sh argv --------------------------------------------------------------------------


def test_submit_argv_carries_only_the_arm_and_env_args() -> None:
    argv = submit_argv("deepseek3-671b", "pp8-A", 8, "node[01-08]", "45:00", "mi355",
                       ["_env_ENABLE_XLA_DUMP=1"], True, arm="pp8-A")  # fmt: skip
    assert argv == [
        "env", "RAY=1", "./submit.sh", "deepseek3-671b:pp8-A",
        "--partition=mi355", "--nodes=8", "--nodelist=node[01-08]", "--time=45:00", "--",
        "_env_ENABLE_XLA_DUMP=1", "_env_TUNE_PROFILE=pp8-A",
    ]  # fmt: skip


def test_submit_argv_without_ray_partition_nodelist_or_exp_tag() -> None:
    argv = submit_argv("demo", "", 2, None, "5:00", None, [], False, arm="baseline")
    assert argv == ["./submit.sh", "demo", "--nodes=2", "--time=5:00", "--", "_env_TUNE_PROFILE=baseline"]


def test_awkward_but_legal_values_survive_a_shell_round_trip() -> None:
    awkward = ["_env_NCCL_IB_HCA=mlx5_0:1,mlx5_1:1", "_env_EMPTY="]
    argv = submit_argv(
        "llama3.1-405b", "v1.0+ovl", 2, "gpu-[001,003]", "1-02:00:00", "p.1", awkward, True, arm="v1.0+ovl.sparse.2"
    )
    assert shlex.split(shlex.join(argv)) == argv
    assert argv[argv.index("--") + 1 :] == [*awkward, "_env_TUNE_PROFILE=v1.0+ovl.sparse.2"]
    assert "--nodelist=gpu-[001,003]" in argv


@pytest.mark.parametrize("kwargs, message", [
    ({"env_args": ["steps=1"]}, "only _env_ args"),
    ({"env_args": ["_env_X=a b"]}, "an environment value"),
    ({"env_args": ["_env_TUNE_PROFILE=x"]}, "only _env_ args"),
    ({"arm": "a;b"}, "a TUNE_PROFILE arm name"),
    ({"exp_tag": "a:b"}, "a run name"),
    ({"nodelist": "node01 node02"}, "a Slurm nodelist"),
    ({"partition": "a;b"}, "a Slurm partition"),
    ({"time": "5 min"}, "a Slurm time limit"),
    ({"model_name": "Demo"}, "a model tag"),
    ({"nodes": 0}, "nodes must be at least 1"),
])  # fmt: skip
def test_submit_argv_refuses_illegal_arguments(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"model_name": "demo", "exp_tag": "t", "nodes": 1, "nodelist": None, "time": "5:00",
                               "partition": None, "env_args": [], "ray": False, "arm": "t"}  # fmt: skip
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        submit_argv(**args)  # type: ignore[arg-type]


def test_job_name_of_243_bytes_is_accepted_and_244_refused_naming_what_each_part_costs() -> None:
    bare = len(job_name("m", "t", ["_env_TUNE_PROFILE=t"])) - 1
    model = "m" * (JOB_NAME_MAX - bare)
    argv = submit_argv(model, "t", 1, None, "5:00", None, [], False, arm="t")
    assert len(job_name(model, "t", argv[argv.index("--") + 1 :])) == 243
    with pytest.raises(
        ValueError,
        match=r"JOB_NAME would be 244 bytes; submit.sh refuses more than 243 .*"
        r"model name 'm+' 218, exp tag 't' 2, _env_TUNE_PROFILE 20; "
        r"xlatune names 't', not the cell: shorten the model name by 1",
    ):
        submit_argv(model + "m", "t", 1, None, "5:00", None, [], False, arm="t")


@pytest.mark.parametrize(
    ("profile", "profiles", "remedy"),
    [
        # The cell's own profile: a byte of its name counts twice (exp tag and arm).
        ("long_name", {"long_name"}, "shorten the profile name by 2 (it is the exp tag and the TUNE_PROFILE arm)"),
        ("long_name-oldimage", {"long_name"}, "shorten the profile name by 2"),  # the gate's old-image run
        ("ab", {"ab"}, "not even a one-character profile name fits: shorten the model name by 3"),
        # A name xlatune or a catalog chose: the model name is the part to shorten, never the name.
        (
            "restore_default",
            {"long_name"},
            "xlatune names 'restore_default', not the cell: shorten the model name by 3",
        ),
    ],
)
def test_a_refused_job_name_asks_to_shorten_what_the_cell_controls(
    profile: str, profiles: set[str], remedy: str
) -> None:
    bare = len(job_name("", profile, [f"_env_TUNE_PROFILE={profile}"]))
    model = "m" * (JOB_NAME_MAX - bare + 3)
    with pytest.raises(ValueError, match=re.escape(remedy)):
        submit_argv(model, profile, 1, None, "5:00", None, [], False, arm=profile, profiles=profiles)


def test_a_gate_run_of_a_48_character_profile_is_a_valid_exp_tag() -> None:
    """The image gate submits `<profile>-oldimage`: a profile name of 48 characters (NAME's limit)
    must stay submittable there (it was refused as an exp tag of more than 48 characters)."""
    name = "p" * 48 + "-oldimage"
    argv = submit_argv("qwen3-30b-a3b", name, 1, "node01", "45:00", None, [], False, arm=name)
    assert f"qwen3-30b-a3b:{name}" in argv


def test_recorded_refusal_counts_bytes_as_job_name_does() -> None:
    assert "[ERROR] JOB_NAME is 247B;" in recorded("submit_job_name_too_long.txt")
    assert len(job_name("demo", "long", ["steps=12", "pad=" + "x" * 220])) == 247


# ---- submit.sh output ------------------------------------------------------------------------


@pytest.mark.parametrize("name, job_id", [
    ("submit_success.txt", "79"),
    ("submit_first_use.txt", "78"),
    ("submit_ray.txt", "88"),
    ("submit_fault_oom.txt", "89"),
])  # fmt: skip
def test_job_id_from_recorded_submit_output(name: str, job_id: str) -> None:
    assert parse_submit_output(recorded(name)) == job_id


@pytest.mark.parametrize("name, message", [
    ("submit_died_in_prolog.txt", r"job 91 was accepted but died before writing a log: \[ERROR\] Job 91 died in prolog"),
    ("submit_job_name_too_long.txt", r"no 'Submitted batch job <id>' line(.|\n)*JOB_NAME is 247B"),
    ("submit_sbatch_error.txt", r"(.|\n)*sbatch: error: invalid partition specified: nope"),
    ("submit_unknown_model.txt", r"(.|\n)*!!! Model name resolution failed"),
])  # fmt: skip
def test_failed_submissions_raise_with_the_reason(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_submit_output(recorded(name))


def test_submit_output_edge_cases() -> None:
    assert parse_submit_output("Submitted batch job 12 on cluster c1\n") == "12"
    with pytest.raises(ValueError, match=r"\(no output\)"):
        parse_submit_output("")


# ---- inventory -------------------------------------------------------------------------------


def test_gpu_yml_inventory_of_the_stand_in() -> None:
    assert parse_gpu_yml((STANDIN / "configs" / "demo.gpu.yml").read_text()) == {
        "dcn_data_parallelism": 1, "dcn_fsdp_parallelism": 2, "dcn_pipeline_parallelism": 1,
        "dcn_tensor_parallelism": 1, "ici_fsdp_parallelism": 1, "ici_tensor_parallelism": 1,
        "per_device_batch_size": 2, "max_target_length": 64, "remat_policy": "full",
        "sparse_matmul": False, "capacity_factor": 1.25,
    }  # fmt: skip


def test_gpu_yml_inventory_picks_moe_and_pipeline_keys() -> None:
    text = """
base_config: "base.yml"
ici_expert_parallelism: 8
dcn_pipeline_parallelism: 8
pipeline_parallel_layers: 56
num_pipeline_microbatches: 8
use_turbo_grouped_gemm: true
use_deepep_dispatch: false
megablox: False
attention: "cudnn_flash_te"
"""
    assert parse_gpu_yml(text) == {
        "ici_expert_parallelism": 8, "dcn_pipeline_parallelism": 8, "pipeline_parallel_layers": 56,
        "num_pipeline_microbatches": 8, "use_turbo_grouped_gemm": True, "use_deepep_dispatch": False,
        "megablox": False,
    }  # fmt: skip


@pytest.mark.parametrize("text, message", [("- a\n- b\n", "expected a mapping"), ("a: [1\n", "not valid YAML")])
def test_gpu_yml_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_gpu_yml(text)


def test_env_sh_inventory_of_the_stand_in() -> None:
    assert parse_env_sh((STANDIN / "configs" / "demo.env.sh").read_text()) == [
        ("--xla_cpu_enable_fast_math", "true"), ("XLA_PYTHON_CLIENT_MEM_FRACTION", ".85"),
    ]  # fmt: skip


def test_env_sh_forms() -> None:
    text = r"""#!/bin/bash
# export COMMENTED=1
export XLA_PYTHON_CLIENT_MEM_FRACTION=.85 NCCL_PROTO="Simple"
XLA_FLAGS="${XLA_FLAGS} --xla_a=1 --xla_b=2"
XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_c=3"
export XLA_FLAGS="$XLA_FLAGS --xla_gpu_enable_command_buffer=''"
XLA_FLAGS+=" --xla_d=4"
_ds_cfg() { local key=$1; echo "$key"; }
_pp=$(_ds_cfg dcn_pipeline_parallelism 1)
if (( _pp <= 1 )); then XLA_FLAGS="$XLA_FLAGS --xla_gpu_all_gather_combine_threshold_bytes=1073741824"; else
    XLA_FLAGS="$XLA_FLAGS \
 --xla_gpu_experimental_parallel_collective_overlap_limit=2"
fi
[[ -n "${X:-}" ]] && export NCCL_ALGO=Ring
: <<'DISABLED'
export XLA_FLAGS="--xla_in_heredoc=1"
DISABLED
read -r a <<< "here string"
export MAXTEXT_PATCH_BRANCH='yihuang/grok2-support'
export XLA_FLAGS
"""
    assert parse_env_sh(text) == [
        ("XLA_PYTHON_CLIENT_MEM_FRACTION", ".85"), ("NCCL_PROTO", "Simple"),
        ("--xla_a", "1"), ("--xla_b", "2"), ("--xla_c", "3"), ("--xla_gpu_enable_command_buffer", "''"),
        ("--xla_d", "4"), ("--xla_gpu_all_gather_combine_threshold_bytes", "1073741824"),
        ("--xla_gpu_experimental_parallel_collective_overlap_limit", "2"),
        ("NCCL_ALGO", "Ring"), ("MAXTEXT_PATCH_BRANCH", "yihuang/grok2-support"),
    ]  # fmt: skip


def test_env_sh_inventory_skips_the_disabled_heredoc_of_train_env() -> None:
    deployed = parse_env_sh((STANDIN / "train_env.sh").read_text())
    assert ("--xla_cpu_enable_fast_math", "false") in deployed
    assert ("NCCL_NCHANNELS_PER_NET_PEER", "4") in deployed
    assert not any(name == "--xla_gpu_enable_latency_hiding_scheduler" for name, _ in deployed)


def test_container_env_inventory_of_the_stand_in() -> None:
    assert parse_container_env((STANDIN / "container_env.sh").read_text()) == {
        "DOCKER_IMAGE": "rocm/jax-training:maxtext-v26.2",
        "MAXTEXT_REPO_DIR": "/workspace/maxtext",
        "MAXTEXT_PATCH_BRANCH": "",
    }


def test_container_env_takes_the_last_assignment_and_plain_values() -> None:
    text = 'DOCKER_IMAGE=/shared/images/jax.tar\nexport DOCKER_IMAGE="${DOCKER_IMAGE-rocm/jax:v2}"\n'
    assert parse_container_env(text) == {"DOCKER_IMAGE": "rocm/jax:v2"}


# ---- the stand-in's _train.sh: where the block lands (bash only, no Slurm) --------------------


def _train(tmp_path: Path, passthrough: list[str], env_file_block: bool = False) -> list[str]:
    """Run the stand-in's _train.sh with `echo` as python: its output and the workload argv."""
    root = tmp_path / "maxtext-slurm"
    shutil.copytree(STANDIN, root)
    train_env = root / "train_env.sh"
    train_env.write_text(install_block(train_env.read_text(), block(), "s1"))
    if env_file_block:
        env_sh = root / "configs" / "demo.env.sh"
        env_sh.write_text(install_block(env_sh.read_text(), render_env_file_block(ARMS, "demo"), "s1"))
    env = {"PATH": "/usr/bin:/bin", "JOB_WORKSPACE": str(tmp_path / "outputs"), "JOB_DIR": "7-JAX-demo",
           "JOB_NAME": "JAX-demo", "XLATUNE_PYTHON": "echo"}  # fmt: skip
    proc = subprocess.run(["bash", str(root / "_train.sh"), "demo", "t", "", "--", *passthrough],
                          capture_output=True, text=True, env=env, check=True)  # fmt: skip
    return proc.stdout.splitlines()


def test_train_sh_passes_yml_defaults_then_output_dir_then_passthrough(tmp_path: Path) -> None:
    out = _train(tmp_path, ["steps=3", "_env_TUNE_PROFILE=ag_1g", '_env_QUOTED="a b"', "profiler="])
    argv = out[-1].split(" ")
    assert argv[:3] == ["-u", "-m", "pytest_xlatune.workload"]
    assert argv.index("steps=15") < argv.index(f"base_output_directory={tmp_path}/outputs/7-JAX-demo")
    # the arm's settings come after the command line's (train_env.sh appends them to PASSTHROUGH_ARGS)
    assert argv[argv.index("run_name=JAX-demo") + 1 :] == ["steps=3", "profiler=", *ARGS]
    assert "Extracted env: QUOTED=a b" in out
    assert not any(a.startswith("_env_") for a in argv)


def test_env_file_sourced_after_train_env_overrides_restore_default(tmp_path: Path) -> None:
    """Pins upstream's order train_env.sh -> configs/<M>.env.sh -> _env_: a restore_default case in
    train_env.sh runs *before* the env file, so the env file's flag and env var still win."""
    out = _train(tmp_path, ["_env_TUNE_PROFILE=restore_default"])
    # (between them, our program dump into the job's dir: the env file may still set its own)
    assert ("XLA_FLAGS=--xla_cpu_enable_fast_math=false --xla_cpu_enable_fast_math=false "
            f"--xla_dump_to={tmp_path}/outputs/7-JAX-demo/program {DUMP} "
            "--xla_cpu_enable_fast_math=true") in out  # fmt: skip
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.85" in out
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.80" in _train(tmp_path / "b", ["_env_XLA_PYTHON_CLIENT_MEM_FRACTION=.80"])


def test_env_file_block_makes_restore_default_end_with_the_image_defaults(tmp_path: Path) -> None:
    """The fix for the test above: our second block at the end of configs/demo.env.sh."""
    out = _train(tmp_path, ["_env_TUNE_PROFILE=restore_default"], env_file_block=True)
    flags = next(line for line in out if line.startswith("XLA_FLAGS="))
    assert flags.endswith(" --xla_cpu_enable_fast_math=true --xla_cpu_enable_fast_math=false")
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=.93" in out


@pytest.mark.parametrize("passthrough, flags_end, values", [
    ([], "--xla_cpu_enable_fast_math=true", {"XLA_PYTHON_CLIENT_MEM_FRACTION=.85", "NCCL_NCHANNELS_PER_NET_PEER=4"}),
    (["_env_TUNE_PROFILE=nccl_chan8"], "--xla_cpu_enable_fast_math=true", {"NCCL_NCHANNELS_PER_NET_PEER=8"}),
    (["_env_TUNE_PROFILE=ovl2.mem+95"], "--xla_a=1 --xla_b=x,y:z", {"XLA_PYTHON_CLIENT_MEM_FRACTION=.95"}),
    (["_env_TUNE_PROFILE=ovl2.mem+95", "_env_XLA_PYTHON_CLIENT_MEM_FRACTION=.80"], "--xla_b=x,y:z",
     {"XLA_PYTHON_CLIENT_MEM_FRACTION=.80"}),
])  # fmt: skip
def test_env_file_block_keeps_baseline_deployed_and_env_args_last(
    tmp_path: Path, passthrough: list[str], flags_end: str, values: set[str]
) -> None:
    out = _train(tmp_path, passthrough, env_file_block=True)
    assert next(line for line in out if line.startswith("XLA_FLAGS=")).endswith(flags_end)
    assert values <= set(out)


def test_env_file_block_is_a_no_op_without_the_train_env_block() -> None:
    """A job frozen from a train_env.sh without our block (no TUNE_FLAGS, no TUNE_PROFILE)."""
    text = "export XLA_FLAGS=--xla_a=0 XLA_PYTHON_CLIENT_MEM_FRACTION=.85\n"
    text += render_env_file_block(ARMS, "demo")
    out = _source(text, "restore_default").stdout.splitlines()
    assert {"XLA_FLAGS=--xla_a=0", "XLA_PYTHON_CLIENT_MEM_FRACTION=.85", "MAXTEXT_PATCH_BRANCH=branch"} <= set(out)


def test_env_file_block_installs_and_removes_byte_exactly() -> None:
    original = (STANDIN / "configs" / "demo.env.sh").read_text()
    once = install_block(original, render_env_file_block(ARMS, "demo"), "s1")
    assert foreign_block(once, "s1") is None and foreign_block(once, "s2") is not None
    assert remove_block(once, "s1") == original


def test_job_dir_from_recorded_submit_output() -> None:
    text = recorded("submit_ray.txt")
    assert parse_job_dir(text, "88") == (
        "/tmp/maxtext-slurm/outputs/88-JAX-demo-no_eigen_mt-steps_15-dataset_type_synthetic-per_device_batch_size_2-"
        "jax_distributed_heartbeat_timeout_seconds_99999-_env_TUNE_PROFILE_no_eigen_mt")  # fmt: skip
    assert parse_job_dir(text, "8") is None
    assert parse_job_dir(recorded("submit_job_name_too_long.txt"), "88") is None
