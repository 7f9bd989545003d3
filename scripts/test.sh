#!/usr/bin/env bash
# Set up and run the whole test suite on the real parts: the embedded JAX workload, a local
# 4-node Slurm cluster and a loopback sshd (both started here and stopped at exit).
# Extra args go to pytest.
#
# scripts/test.sh --fast [pytest args]: the unit and plugin lanes only (tests/unit, tests/plugin;
# not the tests marked slurm, sshd, jax, browser or realproc): no root, no Slurm, no sshd, no Chromium, no
# upstream checkout; lint and type check included (tests/unit/test_lint.py). Two xdist workers
# (the tests are independent; `-n 0` after --fast runs one process), each test file on one worker
# (`--dist loadfile`: a module fixture, e.g. the README examples' shared pytest sessions, runs
# once; xdist_group marks do not group plain tests under pytest 9). docs/development.md says how
# long it takes.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/venv.sh"
cd "$repo"
if [[ "${1:-}" == "--fast" ]]; then
    shift
    exec pytest tests/unit tests/plugin -p no:cacheprovider -ra -n 2 --dist loadfile \
        -m "not slurm and not sshd and not jax and not browser and not realproc" "$@"
fi
# The real upstream maxtext-slurm checkout of the conformance tests (copied per test, never edited):
# $XLATUNE_MAXTEXT_SLURM, else the snapshot beside the repo (CI copies shared/ next to the clone),
# else a clone of the public repository at f64d93f under .upstream/ (made once).
UPSTREAM_URL=${XLATUNE_MAXTEXT_SLURM_URL:-https://github.com/AMD-AGI/maxtext-slurm.git}
if [[ -z "${XLATUNE_MAXTEXT_SLURM:-}" ]]; then
    snapshot="$repo/../shared/upstream/maxtext-slurm-f64d93f"
    clone="$repo/.upstream/maxtext-slurm-f64d93f"
    if [[ -f "$snapshot/submit.sh" ]]; then
        XLATUNE_MAXTEXT_SLURM="$(cd "$snapshot" && pwd)"
    elif [[ -f "$clone/submit.sh" ]] || { rm -rf "$clone" && git clone -q "$UPSTREAM_URL" "$clone" \
            && git -C "$clone" checkout -q f64d93f; }; then
        XLATUNE_MAXTEXT_SLURM="$clone"
    else
        rm -rf "$clone"
        echo "scripts/test.sh: no upstream maxtext-slurm checkout: set XLATUNE_MAXTEXT_SLURM to a clone of the" \
             "public maxtext-slurm repository at f64d93f, or put it at $snapshot (cloning $UPSTREAM_URL failed)" >&2
        exit 1
    fi
fi
export XLATUNE_MAXTEXT_SLURM
# Ray for the fake container image only (the conformance test in which upstream's Ray cluster
# starts), in a cache dir outside the venv; installed once, a stamp makes re-runs instant.
scripts/image-ray.sh python >/dev/null
# Debian packages the real-part tests need (Slurm and sshd are installed by their own scripts).
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
if [[ -x scripts/local-slurm.sh ]]; then
    scripts/local-slurm.sh up --accounting
    trap 'scripts/local-slurm.sh down || true' EXIT
fi
# Two lanes at once, each a pytest session of its own: the tests of the one local Slurm cluster
# (marked `slurm`, tests/conftest.py) one after another, as they share its four nodes, and beside
# them everything else (unit, pytester, JAX, sshd). The second lane's output follows the first's;
# the exit code is the first failing lane's (a lane that selected nothing, exit 5, counts as
# passed when the other ran). Extra args go to both lanes.
lanes="$(mktemp -d)"
# A background command of a script starts with SIGINT ignored (and under nohup, SIGHUP), and so
# would every pytest the tests spawn (Python then installs no handler): each lane starts with the
# signals' defaults, as in a terminal, so the tests that press Ctrl-C or hang up test what a user
# gets, however this script itself was started.
with_default_signals=(python -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM): signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])')
"${with_default_signals[@]}" pytest tests -p no:cacheprovider -ra -m "not slurm" --basetemp="$lanes/rest" "$@" >"$lanes/rest.log" 2>&1 &
rest=$!
trap 'kill "$rest" 2>/dev/null || true; scripts/local-slurm.sh down || true' EXIT
set +e
"${with_default_signals[@]}" pytest tests -p no:cacheprovider -ra -m slurm --basetemp="$lanes/slurm" "$@"
slurm_rc=$?
wait "$rest"
rest_rc=$?
set -e
echo "======================== the other lane: tests -m 'not slurm' ========================"
cat "$lanes/rest.log"
if [[ $slurm_rc -eq 5 && $rest_rc -ne 5 ]]; then slurm_rc=0; fi
if [[ $rest_rc -eq 5 && $slurm_rc -ne 5 ]]; then rest_rc=0; fi
echo "scripts/test.sh: lane 'slurm' exited $slurm_rc, lane 'not slurm' exited $rest_rc"
if [[ $slurm_rc -ne 0 ]]; then exit "$slurm_rc"; fi
exit "$rest_rc"
