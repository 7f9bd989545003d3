#!/bin/bash
# Stand-in for maxtext-slurm's submit.sh (see README.md for what differs from upstream).
#
#   [RAY=1] ./submit.sh <model>[[:alias]:exp_tag] [sbatch args...] -- [passthrough args...]
#
# Prints, in upstream's order: MODEL_NAME= [MODEL_NAME_ALIAS=] EXP_TAG= SBATCH_ARGS="" PASSTHROUGH_ARGS=""
# JOB_NAME=, the [ARTIFACT] build lines, MAXTEXT_SLURM_DIR=, sbatch's own output, then
# "[ARTIFACT] <ws>/<id>-<JOB_NAME>/artifact -> .artifacts/<id>".
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export MAXTEXT_SLURM_DIR="$SCRIPT_DIR"

export JOB_WORKSPACE="${JOB_WORKSPACE:-$SCRIPT_DIR/outputs}"
mkdir -p -v "$JOB_WORKSPACE"; chmod a+w "$JOB_WORKSPACE"

_fs_type=$(df -T "$JOB_WORKSPACE" 2>/dev/null | awk 'NR==2 {print $2}' || true)
case "$_fs_type" in
    nfs|nfs4|lustre|gpfs|beegfs|cifs|panfs|pvfs2|orangefs|fuse.*|"") ;;
    *) echo "WARNING: JOB_WORKSPACE ($JOB_WORKSPACE) is on filesystem '$_fs_type'," \
            "which may not be shared across cluster nodes." >&2 ;;
esac

# ------- Split on `--`: script args before, passthrough after (empty passthrough args dropped) -------
SCRIPT_ARGS=()
PASSTHROUGH_ARGS=()
_seen_sep=false
for arg in "$@"; do
    if [[ "$arg" == "--" && "$_seen_sep" == false ]]; then
        _seen_sep=true
    elif [[ "$_seen_sep" == false ]]; then
        SCRIPT_ARGS+=("$arg")
    elif [[ -n "$arg" ]]; then
        PASSTHROUGH_ARGS+=("$arg")
    fi
done

# ------- Model spec: peel exp_tag, then alias, from the right -------
if [[ ${#SCRIPT_ARGS[@]} -eq 0 || "${SCRIPT_ARGS[0]}" == -* ]]; then
    echo "!!! model_name is required." >&2
    echo "    Usage: submit.sh <model_name> [sbatch_args...] -- [passthrough_args...]" >&2
    exit 1
fi
MODEL_NAME="${SCRIPT_ARGS[0]}"
MODEL_NAME_ALIAS=""
EXP_TAG=""
if [[ "$MODEL_NAME" == *:* ]]; then EXP_TAG="${MODEL_NAME##*:}"; MODEL_NAME="${MODEL_NAME%:*}"; fi
if [[ "$MODEL_NAME" == *:* ]]; then MODEL_NAME_ALIAS="${MODEL_NAME##*:}"; MODEL_NAME="${MODEL_NAME%:*}"; fi
if [[ "$MODEL_NAME" == *:* ]]; then
    echo "!!! Invalid model spec '${SCRIPT_ARGS[0]}': too many ':' separators." >&2
    echo "    Expected format: model_name[[:model_name_alias]:exp_tag]" >&2
    exit 1
fi
SBATCH_ARGS=("${SCRIPT_ARGS[@]:1}")

# Passthrough args are appended to EXP_TAG: leading --/- stripped, '=' -> '_', joined with '-'.
if [[ ${#PASSTHROUGH_ARGS[@]} -gt 0 ]]; then
    _parts=()
    for arg in "${PASSTHROUGH_ARGS[@]}"; do
        arg="${arg#--}"; arg="${arg#-}"
        _parts+=("${arg//=/_}")
    done
    _suffix="$(IFS='-'; echo "${_parts[*]}")"
    EXP_TAG="${EXP_TAG:+$EXP_TAG-}$_suffix"
fi

# ------- Model name: exact configs/<name>.gpu.yml, else a unique substring match -------
resolve_model_name() {
    local dir="$1" name="$2" matches=() f
    if [[ -f "$dir/$name.gpu.yml" ]]; then echo "$name"; return 0; fi
    shopt -s nullglob
    matches=("$dir"/*"$name"*.gpu.yml)
    shopt -u nullglob
    if (( ${#matches[@]} == 1 )); then
        f="${matches[0]##*/}"; echo "${f%.gpu.yml}"; return 0
    fi
    if (( ${#matches[@]} == 0 )); then
        echo "Error: no model file matches pattern '$dir/*${name}*.gpu.yml'." >&2
    else
        echo "Error: ambiguous model name '${name}'. Multiple matches:" >&2
        for f in "${matches[@]}"; do echo "  ${f##*/}" >&2; done
    fi
    echo "Supported models:" >&2
    for f in "$dir"/*.gpu.yml; do f="${f##*/}"; echo "  ${f%.gpu.yml}"; done | sort -u >&2
    return 1
}
if ! MODEL_NAME=$(resolve_model_name "$SCRIPT_DIR/configs" "$MODEL_NAME"); then
    echo "!!! Model name resolution failed. Exiting..." >&2
    exit 1
fi

JOB_NAME="JAX-${MODEL_NAME}${EXP_TAG:+-$EXP_TAG}"
# '<id>-$JOB_NAME.log' and the per-job dir must fit ext4's 255-byte path segment:
# 7-digit id + '-' + '.log' = 12 bytes.
if (( ${#JOB_NAME} + 12 > 255 )); then
    echo >&2 "[ERROR] JOB_NAME is ${#JOB_NAME}B; '<id>-\$JOB_NAME.log' would exceed 255B."
    echo >&2 "        Shorten passthrough args (each KEY=VALUE gets encoded into EXP_TAG),"
    echo >&2 "        or use 'model_name:alias[:exp_tag]' spec to pick a shorter alias."
    exit 1
fi

echo "MODEL_NAME=$MODEL_NAME"
if [[ -n "$MODEL_NAME_ALIAS" ]]; then echo "MODEL_NAME_ALIAS=$MODEL_NAME_ALIAS"; fi
echo "EXP_TAG=$EXP_TAG"
echo "SBATCH_ARGS=\"${SBATCH_ARGS[*]}\""
echo "PASSTHROUGH_ARGS=\"${PASSTHROUGH_ARGS[*]}\""
echo "JOB_NAME=$JOB_NAME"

# ------- Ray: the job runs "through Ray" (the stand-in only writes ray_logs/<host>/worker0.out) -------
RAY_EXPORT=()
if [[ "${RAY:-0}" == "1" || "${RAY:-}" == "true" ]]; then
    _me="$(id -un)"
    RAY_EXPORT=("--export=ALL,USE_RAY=true,LOGIN_NODE_HOSTNAME=$_me@$(hostname),LOGIN_NODE_IP=$_me@127.0.0.1")
fi

# ------- Artifact freeze: the job runs from a copy, so later edits cannot reach it -------
ARTIFACT_BASE_DIR="$JOB_WORKSPACE/.artifacts"
ARTIFACT_ID="artifact_$(date +%Y%m%d_%H%M%S)_$(printf '%04x' $RANDOM)"
ARTIFACT_DIR="$ARTIFACT_BASE_DIR/$ARTIFACT_ID"
echo "[ARTIFACT] Building artifact..."
echo "[ARTIFACT]   Source : $SCRIPT_DIR"
echo "[ARTIFACT]   Target : $ARTIFACT_DIR"
_t0=$(date +%s)
mkdir -p "$ARTIFACT_DIR"
if command -v rsync >/dev/null 2>&1; then
    rsync -a --exclude='.git/' --filter=':- .gitignore' "$SCRIPT_DIR/" "$ARTIFACT_DIR/"
else
    tar -C "$SCRIPT_DIR" --exclude=./.git --exclude=./outputs -cf - . | tar -C "$ARTIFACT_DIR" -xf -
fi
echo "[ARTIFACT] Done in $(( $(date +%s) - _t0 ))s ($(du -sh "$ARTIFACT_DIR" 2>/dev/null | cut -f1))"
{
    [[ "$JOB_WORKSPACE" != "$SCRIPT_DIR/outputs" ]] && printf 'JOB_WORKSPACE=%q ' "$JOB_WORKSPACE"
    [[ -n "${RAY:-}" ]] && printf 'RAY=%q ' "$RAY"
    _cmd=$(printf '%q ' "$0" "$@")
    echo "${_cmd% }"
} > "$ARTIFACT_DIR/submit_cmd.txt"
export MAXTEXT_SLURM_DIR="$ARTIFACT_DIR"
echo "MAXTEXT_SLURM_DIR=$MAXTEXT_SLURM_DIR"

# ------- Submit -------
_rc=0
SBATCH_OUTPUT=$(sbatch -J "$JOB_NAME" \
    --output="$JOB_WORKSPACE/%j-$JOB_NAME.log" \
    "${RAY_EXPORT[@]}" \
    "${SBATCH_ARGS[@]}" \
    "$ARTIFACT_DIR/_job.sbatch" \
    "$MODEL_NAME" "$EXP_TAG" "$MODEL_NAME_ALIAS" -- "${PASSTHROUGH_ARGS[@]}" 2>&1) || _rc=$?
if (( _rc != 0 )); then
    echo "$SBATCH_OUTPUT"
    echo "[ARTIFACT] sbatch failed — cleaning up artifact: $ARTIFACT_DIR"
    rm -rf "$ARTIFACT_DIR"
    exit 1
fi
echo "$SBATCH_OUTPUT"

JOB_ID=$(echo "$SBATCH_OUTPUT" | awk '/Submitted batch job/ {print $NF}')
if [[ -z "$JOB_ID" ]]; then
    echo "[ARTIFACT] WARNING: Could not parse job ID. Artifact at: $ARTIFACT_DIR"
    exit 0
fi
JOB_DIR="$JOB_ID-$JOB_NAME"
mkdir -p "$JOB_WORKSPACE/$JOB_DIR"; chmod a+w "$JOB_WORKSPACE/$JOB_DIR"
ln -snf "../.artifacts/$ARTIFACT_ID" "$JOB_WORKSPACE/$JOB_DIR/artifact"
echo "[ARTIFACT] $JOB_WORKSPACE/$JOB_DIR/artifact -> .artifacts/$ARTIFACT_ID"
ln -snf "../$JOB_DIR.log" "$JOB_WORKSPACE/$JOB_DIR/log"  # dangles until the job starts

# A job killed before it wrote any log (bad --output, node fault) is reported here. Upstream
# goes by the state alone: its jobs spend minutes in preflight/pull stages, so nothing else
# ends within 3 s. The stand-in's jobs can, hence the extra "no log yet" condition.
sleep "${SUBMIT_PROLOG_CHECK_SECONDS:-3}"
_state=$(squeue -t all -h -j "$JOB_ID" -o '%T' 2>/dev/null || true)
if [[ "$_state" =~ ^(FAILED|CANCELLED|NODE_FAIL|BOOT_FAIL|TIMEOUT|OUT_OF_MEMORY|DEADLINE)$ \
      && ! -s "$JOB_WORKSPACE/$JOB_DIR.log" ]]; then
    echo >&2 "[ERROR] Job $JOB_ID died in prolog before writing any log: $_state"
    rm -rf "${JOB_WORKSPACE:?}/$JOB_DIR" "$ARTIFACT_DIR"
    exit 1
fi
