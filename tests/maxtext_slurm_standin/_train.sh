#!/bin/bash
# Stand-in for maxtext-slurm's _train.sh: `_env_` args, train_env.sh, configs/<M>.env.sh, then
# the embedded JAX workload instead of MaxText.
#
#   _train.sh <model> [<exp_tag> <alias>] -- <passthrough...>
#
# Override order, as upstream: train_env.sh -> configs/<M>.env.sh -> _env_NAME=value args.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
echo "Running _train.sh"
echo "args: $*"

SCRIPT_ARGS=()
PASSTHROUGH_ARGS=()
_seen_sep=false
for arg in "$@"; do
    if [[ "$arg" == "--" && "$_seen_sep" == false ]]; then _seen_sep=true
    elif [[ "$_seen_sep" == false ]]; then SCRIPT_ARGS+=("$arg")
    elif [[ -n "$arg" ]]; then PASSTHROUGH_ARGS+=("$arg")
    fi
done
echo "PASSTHROUGH_ARGS=\"${PASSTHROUGH_ARGS[*]}\""

# _env_KEY=VALUE args become env vars (one layer of matching outer quotes stripped) and are
# removed from the MaxText args.
EXTRACTED_ENVS=()
FILTERED_PASSTHROUGH_ARGS=()
for arg in "${PASSTHROUGH_ARGS[@]}"; do
    if [[ "$arg" =~ ^_env_([^=]+)=(.*)$ ]]; then
        env_key="${BASH_REMATCH[1]}"
        env_value="${BASH_REMATCH[2]}"
        if [[ "$env_value" =~ ^\"(.*)\"$ ]]; then
            env_value="${BASH_REMATCH[1]}"
        elif [[ "$env_value" =~ ^\'(.*)\'$ ]]; then
            env_value="${BASH_REMATCH[1]}"
        fi
        EXTRACTED_ENVS+=("$env_key=$env_value")
        echo "Extracted env: $env_key=$env_value"
    else
        FILTERED_PASSTHROUGH_ARGS+=("$arg")
    fi
done
PASSTHROUGH_ARGS=("${FILTERED_PASSTHROUGH_ARGS[@]}")

MODEL_NAME=${SCRIPT_ARGS[0]:?model_name is required}
if [[ ! -f "$SCRIPT_DIR/configs/$MODEL_NAME.gpu.yml" ]]; then
    echo "!!! Unknown model: $MODEL_NAME (no configs/$MODEL_NAME.gpu.yml)." >&2
    exit 1
fi
echo "MODEL_NAME=$MODEL_NAME"

: "${JOB_DIR:?JOB_DIR must be set (exported by _job.sbatch)}"
export OUTPUT_PATH="${JOB_WORKSPACE:?JOB_WORKSPACE must be set}/$JOB_DIR"
echo "OUTPUT_PATH=$OUTPUT_PATH"
mkdir -p "$OUTPUT_PATH"

# train_env.sh can read not-yet-exported values, e.g. ${EXTRACTED_ENV_MAP[TUNE_PROFILE]}.
declare -A EXTRACTED_ENV_MAP=()
for env_pair in "${EXTRACTED_ENVS[@]}"; do
    EXTRACTED_ENV_MAP["${env_pair%%=*}"]="${env_pair#*=}"
done

source "$SCRIPT_DIR/train_env.sh"

_model_env="$SCRIPT_DIR/configs/$MODEL_NAME.env.sh"
if [[ -f "$_model_env" ]]; then
    echo "Loading per-model env: configs/$MODEL_NAME.env.sh"
    source "$_model_env"
fi

if [ ${#EXTRACTED_ENVS[@]} -gt 0 ]; then
    echo "Exporting extracted environment variables:"
    for env_pair in "${EXTRACTED_ENVS[@]}"; do
        echo "  export $env_pair"
        export "$env_pair"
    done
fi

# Upstream dumps the whole environment (printenv | sort); the stand-in shows the tuned parts.
echo "Show XLA/NCCL environment variables:"
printenv | grep -E '^(XLA_|NCCL_|RCCL_|TUNE_|JAX_|ENABLE_XLA_DUMP=)' | sort || true

# gpu.yml top-level `key: value` lines become key=value defaults; passthrough args come later
# and win (the workload, like MaxText, takes the last value of a key).
YML_ARGS=()
while IFS= read -r line || [[ -n "$line" ]]; do
    [[ "$line" =~ ^([A-Za-z_][A-Za-z0-9_]*):[[:space:]]*(.*)$ ]] || continue
    key="${BASH_REMATCH[1]}"
    value="${BASH_REMATCH[2]}"
    value="${value%%[[:space:]]#*}"
    value="${value%"${value##*[![:space:]]}"}"
    [[ -z "$value" ]] && continue  # a nested mapping or list follows
    if [[ "$value" =~ ^\"(.*)\"$ || "$value" =~ ^\'(.*)\'$ ]]; then value="${BASH_REMATCH[1]}"; fi
    YML_ARGS+=("$key=$value")
done < "$SCRIPT_DIR/configs/$MODEL_NAME.gpu.yml"

export PYTHONUNBUFFERED=1
echo "Launching the embedded workload (stand-in for MaxText.train)..."
exec "${XLATUNE_PYTHON:-python3}" -u -m pytest_xlatune.workload \
    "${YML_ARGS[@]}" base_output_directory="$OUTPUT_PATH" run_name="$JOB_NAME" "${PASSTHROUGH_ARGS[@]}"
