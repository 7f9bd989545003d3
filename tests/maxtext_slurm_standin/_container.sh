#!/bin/bash
# Stand-in for maxtext-slurm's _container.sh: no docker. Run once per node by `srun -l`:
#
#   _container.sh <model> <exp_tag> <alias> -- <passthrough...>
#
# Task 0 runs _train.sh (the real workload) and keeps a copy of its output in the job dir.
# Every other task waits for task 0 and re-prints its `completed step:` lines, so the Slurm log
# holds one copy per node as upstream does, at no extra CPU cost. With RAY=1 (USE_RAY=true)
# task 0's output also goes to <job dir>/ray_logs/<node>/worker0.out, where upstream's Ray
# workers write the authoritative step lines.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$SCRIPT_DIR/container_env.sh"

# Upstream passes only selected --env vars into the container: the host's XLA_FLAGS never
# reach training. The stand-in's "image" has no built-in XLA_FLAGS.
unset XLA_FLAGS

: "${JOB_DIR:?JOB_DIR must be set (exported by _job.sbatch)}"
: "${JOB_WORKSPACE:?JOB_WORKSPACE must be set (exported by submit.sh)}"
rank="${SLURM_PROCID:-0}"
node="${SLURMD_NODENAME:-$(hostname)}"
sync_dir="$JOB_WORKSPACE/$JOB_DIR/.standin"
task0_out="$sync_dir/task0.out"
task0_rc="$sync_dir/task0.rc"

if [[ "$rank" == 0 ]]; then
    mkdir -p "$sync_dir"
    echo "[stand-in] no docker: running on $node with DOCKER_IMAGE=$DOCKER_IMAGE"
    copies=("$task0_out")
    if [[ "${USE_RAY:-false}" == "true" ]]; then
        mkdir -p "$JOB_WORKSPACE/$JOB_DIR/ray_logs/$node"
        copies+=("$JOB_WORKSPACE/$JOB_DIR/ray_logs/$node/worker0.out")
    fi
    rc=0
    bash "$SCRIPT_DIR/_train.sh" "$@" 2>&1 | tee "${copies[@]}" || rc=$?
    echo "$rc" > "$task0_rc"
    exit "$rc"
fi

# Other tasks: mirror task 0's step lines until it has finished.
seen=0
while :; do
    finished=0
    [[ -f "$task0_rc" ]] && finished=1
    if [[ -f "$task0_out" ]]; then
        mapfile -t steps < <(grep '^completed step:' "$task0_out" || true)
        for (( i = seen; i < ${#steps[@]}; i++ )); do echo "${steps[i]}"; done
        seen=${#steps[@]}
    fi
    (( finished )) && break
    sleep 1
done
exit 0
