#!/bin/bash
# Stand-in for maxtext-slurm's container_env.sh (sourced by _container.sh on the node).
# Nothing is pulled or run in a container; the values are read by the inventory and logged.

DOCKER_REGISTRY="${DOCKER_REGISTRY:-docker.io}"
if [[ -f "$(dirname "${BASH_SOURCE[0]}")/container_env.local.sh" ]]; then
    source "$(dirname "${BASH_SOURCE[0]}")/container_env.local.sh"
fi

DOCKER_IMAGE="${DOCKER_IMAGE:-rocm/jax-training:maxtext-v26.2}"
USE_DOCKER_IMAGE_AINIC_DRIVER=true
MAXTEXT_REPO_DIR=/workspace/maxtext
MAXTEXT_PATCH_BRANCH="${MAXTEXT_PATCH_BRANCH-}"   # empty: the image's MaxText as it is
DATASET_DIR=/mnt/vast/datasets
