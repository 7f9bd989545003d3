"""The maxtext-slurm launcher's readers of submit.sh output, on what the real upstream submit.sh
printed for one job of each run kind and for three refusals (tests/data/maxtext/upstream/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_xlatune.launch.maxtext.submit import parse_job_dir, parse_submit_output

DATA = Path(__file__).resolve().parents[2] / "data" / "maxtext" / "upstream"

SUBMITTED = {  # file → (job id, exp tag of its JOB_NAME)
    "submit_baseline.txt": ("3101", "baseline-_env_TUNE_PROFILE_baseline"),
    "submit_restore_default.txt": ("3102", "restore_default-_env_TUNE_PROFILE_restore_default"),
    "submit_evidence.txt": ("3103", "evidence-_env_ENABLE_XLA_DUMP_1-_env_TUNE_PROFILE_evidence"),
    "submit_profile.txt": ("3104", "opt1-_env_TUNE_PROFILE_opt1"),
    "submit_winner_evidence.txt": ("3105", "winner-_env_ENABLE_XLA_DUMP_1-_env_TUNE_PROFILE_winner"),
    "submit_ray_fallback.txt": ("3106", "baseline-_env_TUNE_PROFILE_baseline"),
    "submit_ray.txt": ("3107", "baseline-_env_TUNE_PROFILE_baseline"),
    "submit_stack_arm_at_run_time.txt": ("3108", "stack_top2-_env_TUNE_PROFILE_stack_top2"),
}


@pytest.mark.parametrize("name", sorted(SUBMITTED))
def test_the_job_id_and_its_directory_are_read_from_real_output(name: str) -> None:
    text = (DATA / name).read_text()
    job_id, exp_tag = SUBMITTED[name]
    assert parse_submit_output(text) == job_id
    job_dir = parse_job_dir(text, job_id)
    assert job_dir is not None and job_dir.endswith(f"/outputs/{job_id}-JAX-deepseek3-671b-{exp_tag}")
    assert f"JOB_NAME=JAX-deepseek3-671b-{exp_tag}\n" in text  # upstream's own line, as the launcher reads it


@pytest.mark.parametrize("name, reason", [
    ("submit_unknown_model.txt", "!!! Model name resolution failed"),
    ("submit_ambiguous_model.txt", "ambiguous model name 'qwen3'"),
    ("submit_sbatch_error.txt", "sbatch: error: invalid partition specified: nope"),
])  # fmt: skip
def test_a_real_refusal_raises_with_upstreams_reason(name: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        parse_submit_output((DATA / name).read_text())
