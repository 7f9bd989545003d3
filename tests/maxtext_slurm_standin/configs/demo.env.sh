#!/bin/bash
# Per-model overrides for demo, sourced after train_env.sh and before the _env_ exports.
# The deployed recipe: one XLA flag (appended, so it wins over train_env.sh's) and one env var.
XLA_FLAGS="${XLA_FLAGS} --xla_cpu_enable_fast_math=true"
export XLA_FLAGS
export XLA_PYTHON_CLIENT_MEM_FRACTION=.85
