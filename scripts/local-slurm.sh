#!/usr/bin/env bash
# Run a 4-node Slurm cluster on this one host, for pytest-xlatune's integration tests.
#
#   scripts/local-slurm.sh up [--accounting|--no-accounting]
#                                   install if missing, start munge + slurmctld + 4 slurmd, wait idle;
#                                   a slurmctld started here starts with an empty queue
#   scripts/local-slurm.sh down     stop everything this script started
#   scripts/local-slurm.sh status   print sinfo (and whether sacct works)
#
# One slurmctld and four slurmd (node01..node04, all NodeHostname=localhost, distinct ports,
# per-node pid/log/spool via %n). By default no accounting storage: sacct does not work, squeue
# and scontrol do. `up --accounting` adds MariaDB (private datadir, 127.0.0.1 only) + slurmdbd so
# sacct works; the choice is remembered, so a later plain `up` keeps it (`--no-accounting` drops
# it). Daemons are started directly (no systemd). Needs root.
#
# Every node declares 8 GPUs (Gres=gpu:8 in slurm.conf; gres.conf names 8 device files under
# $STATE/dev that are character devices with /dev/null's numbers, since Slurm drops a file-less
# GPU), so an upstream maxtext-slurm `_job.sbatch` (`#SBATCH --gpus-per-task=8`) runs unmodified.
# An older slurm.conf/gres.conf without the GPUs is rewritten and the daemons restarted by `up`.
#
# Environment knobs (defaults in brackets):
#   XLATUNE_SLURM_STATE   private state dir            [/var/lib/xlatune-slurm]
#   XLATUNE_SLURM_CONF    where slurm.conf is written  [/etc/slurm/slurm.conf]
#   XLATUNE_SLURM_TIMEOUT seconds to wait for idle     [60]
#   XLATUNE_SLURMCTLD_PORT, XLATUNE_SLURMD_PORT_BASE    [16817, 17000: slurmd ports 17001-17004]
#   XLATUNE_SLURM_MIN_JOB_AGE  seconds a finished job stays in squeue/scontrol  [30]
#   XLATUNE_SLURMDBD_PORT, XLATUNE_MARIADB_PORT         [16819, 16306] (with --accounting)
set -euo pipefail

STATE=${XLATUNE_SLURM_STATE:-/var/lib/xlatune-slurm}
CONF=${XLATUNE_SLURM_CONF:-/etc/slurm/slurm.conf}
export SLURM_CONF="$CONF"  # sinfo/scontrol below talk to this cluster
TIMEOUT=${XLATUNE_SLURM_TIMEOUT:-60}
NODES=(node01 node02 node03 node04)
# Not the default 6817/6818, so a real Slurm on the host is left alone.
CTLD_PORT=${XLATUNE_SLURMCTLD_PORT:-16817}
NODE_PORT_BASE=${XLATUNE_SLURMD_PORT_BASE:-17000}   # node01 -> base+1, ...
CLUSTER=xlatune
DBD_PORT=${XLATUNE_SLURMDBD_PORT:-16819}
MYSQL_PORT=${XLATUNE_MARIADB_PORT:-16306}
MYSQL_RUN=$STATE/mariadb-run   # owned by mysql: pid file + socket
MYSQL_SOCK=$MYSQL_RUN/mariadbd.sock
MYSQL_PID=$MYSQL_RUN/mariadbd.pid
DBD_CONF=$(dirname "$CONF")/slurmdbd.conf   # slurmdbd reads it next to $SLURM_CONF
GRES_CONF=$(dirname "$CONF")/gres.conf       # slurmd reads it next to $SLURM_CONF
GPUS_PER_NODE=8
ACCT_DB=xlatune_acct_db
MARK="# written by pytest-xlatune scripts/local-slurm.sh"

log() { printf '[local-slurm] %s\n' "$*" >&2; }
die() { printf '[local-slurm] ERROR: %s\n' "$*" >&2; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (starts munged/slurmctld/slurmd)"; }

install_if_missing() {
    local missing=()
    command -v slurmctld >/dev/null 2>&1 || missing+=(slurm-wlm)
    command -v slurmd >/dev/null 2>&1 || missing+=(slurm-wlm)
    command -v sinfo >/dev/null 2>&1 || missing+=(slurm-wlm)
    command -v munged >/dev/null 2>&1 || missing+=(munge)
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing slurm-wlm munge openssh-server (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y slurm-wlm munge openssh-server
}

pid_alive() { # pidfile
    local pid
    [ -s "$1" ] || return 1
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# --- munge -----------------------------------------------------------------------------------

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/log/munge /etc/munge
    install -d -o munge -g munge -m 0711 /var/lib/munge
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating /etc/munge/munge.key"
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile=/etc/munge/munge.key
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        fi
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    if munge_works; then
        log "munged already running"
        return 0
    fi
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged
    touch "$STATE/munged.started-by-us"
    for _ in $(seq 1 50); do munge_works && return 0; sleep 0.1; done
    die "munged did not come up ($(tail -n 5 /var/log/munge/munged.log 2>/dev/null | tr '\n' ' '))"
}

# --- accounting (optional) ------------------------------------------------------------------

accounting_on() { [ -f "$STATE/accounting" ]; }

accounting_conf_lines() {
    if accounting_on; then
        # job_comment: sacct keeps each job's comment, where xlatune's submission mark lives
        # (a rerun finds a job its killed session submitted after slurmctld forgot it).
        printf '%s\n' "AccountingStorageType=accounting_storage/slurmdbd" \
            "AccountingStorageHost=localhost" "AccountingStoragePort=$DBD_PORT" \
            "AccountingStoreFlags=job_comment"
    else
        echo "AccountingStorageType=accounting_storage/none"
    fi
}

install_accounting_if_missing() {
    command -v slurmdbd >/dev/null 2>&1 && command -v mariadbd >/dev/null 2>&1 && return 0
    log "installing slurmdbd mariadb-server"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y slurmdbd mariadb-server
}

mysql_root() { mariadb --no-defaults --socket="$MYSQL_SOCK" -uroot "$@"; }

start_mariadb() {
    install -d -o mysql -g mysql -m 0750 "$STATE/mysql" "$STATE/mysql-tmp"
    install -d -o mysql -g mysql -m 0755 "$MYSQL_RUN"
    if mysql_root -e 'SELECT 1' >/dev/null 2>&1; then
        return 0
    fi
    if [ ! -d "$STATE/mysql/mysql" ]; then
        log "initialising MariaDB in $STATE/mysql"
        # --tmpdir: /tmp is not always writable for the mysql user.
        mariadb-install-db --no-defaults --user=mysql --datadir="$STATE/mysql" --tmpdir="$STATE/mysql-tmp" \
            --auth-root-authentication-method=socket --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 \
            || { tail -n 20 "$STATE/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    fi
    log "starting mariadbd on 127.0.0.1:$MYSQL_PORT"
    touch "$STATE/log/mariadb.log"
    chown mysql:mysql "$STATE/log/mariadb.log"
    setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$STATE/mysql" --tmpdir="$STATE/mysql-tmp" \
        --socket="$MYSQL_SOCK" --pid-file="$MYSQL_PID" --port="$MYSQL_PORT" --bind-address=127.0.0.1 \
        --log-error="$STATE/log/mariadb.log" --innodb-buffer-pool-size=64M </dev/null >/dev/null 2>&1 &
    local i
    for i in $(seq 1 60); do
        mysql_root -e 'SELECT 1' >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    tail -n 20 "$STATE/log/mariadb.log" >&2
    die "mariadbd did not come up"
}

start_slurmdbd() {
    local pass new i
    if [ ! -s "$STATE/slurmdbd.pass" ]; then
        (umask 077; tr -dc 'A-Za-z0-9' </dev/urandom | head -c 24 >"$STATE/slurmdbd.pass") || true
    fi
    pass=$(cat "$STATE/slurmdbd.pass")
    # Throw-away local credentials; the password lives only in two root-only files.
    mysql_root <<SQL
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON \`$ACCT_DB\`.* TO 'slurm'@'127.0.0.1';
SQL
    new="$MARK
AuthType=auth/munge
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MYSQL_PORT
StorageUser=slurm
StoragePass=$pass
StorageLoc=$ACCT_DB"
    if [ ! -f "$DBD_CONF" ] || [ "$(cat "$DBD_CONF")" != "$new" ]; then
        (umask 077; printf '%s\n' "$new" >"$DBD_CONF")
        stop_pidfile "$STATE/slurmdbd.pid" slurmdbd
    fi
    chmod 0600 "$DBD_CONF"
    if ! pid_alive "$STATE/slurmdbd.pid"; then
        log "starting slurmdbd on port $DBD_PORT"
        slurmdbd
    fi
    for i in $(seq 1 60); do
        sacctmgr -n list cluster format=cluster >/dev/null 2>&1 && break
        if [ "$i" = 60 ]; then tail -n 20 "$STATE/log/slurmdbd.log" >&2; die "slurmdbd did not answer"; fi
        sleep 0.5
    done
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null
    fi
}

stop_accounting() {
    stop_pidfile "$STATE/slurmdbd.pid" slurmdbd
    stop_pidfile "$MYSQL_PID" mariadbd
}

# --- slurm.conf ------------------------------------------------------------------------------

render_conf() {
    local ctld_host i
    ctld_host=$(uname -n); ctld_host=${ctld_host%%.*}
    cat <<EOF
$MARK
# state: $STATE
ClusterName=$CLUSTER
SlurmctldHost=$ctld_host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdPidFile=$STATE/slurmd.%n.pid
SlurmdLogFile=$STATE/log/slurmd.%n.log
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldDebug=info
SlurmdDebug=info
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
$(accounting_conf_lines)
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The declared CPUs/RealMemory win over what slurmd detects (4 nodes on a 2-core host).
SlurmdParameters=config_overrides
# A node that was DOWN for not responding comes back by itself once its slurmd registers again.
ReturnToService=2
# A killed slurmd shows DOWN* after SlurmdTimeout (pinged every SlurmdTimeout/3 s).
SlurmdTimeout=30
SlurmctldTimeout=30
# Finished jobs stay visible to squeue/scontrol for MinJobAge s (+ purge interval).
MinJobAge=${XLATUNE_SLURM_MIN_JOB_AGE:-30}
InactiveLimit=0
KillWait=5
Waittime=0
MessageTimeout=10
# 8 GPUs per node, declared by count only: upstream _job.sbatch asks --gpus-per-task=8.
GresTypes=gpu
NodeName=DEFAULT CPUs=1 RealMemory=2048 Gres=gpu:$GPUS_PER_NODE State=UNKNOWN
EOF
    for i in "${!NODES[@]}"; do
        echo "NodeName=${NODES[$i]} NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((NODE_PORT_BASE + i + 1))"
    done
    echo "PartitionName=debug Nodes=node[01-04] Default=YES MaxTime=INFINITE State=UP"
}

render_gres_conf() {
    echo "$MARK"
    echo "AutoDetect=off"
    echo "NodeName=node[01-04] Name=gpu File=$STATE/dev/gpu[0-$((GPUS_PER_NODE - 1))]"
}

make_gpu_devices() {
    # Stand-in GPU device files: char devices 1,3 (what /dev/null is), shared by the 4 nodes.
    local i f
    install -d -m 0755 "$STATE/dev"
    for i in $(seq 0 $((GPUS_PER_NODE - 1))); do
        f=$STATE/dev/gpu$i
        [ -c "$f" ] && continue
        rm -f "$f"
        mknod -m 0666 "$f" c 1 3 || die "cannot create the stand-in GPU device $f (mknod c 1 3 failed)"
    done
}

write_conf() { # prints "changed" when slurm.conf or gres.conf was (re)written
    local new gres
    new=$(render_conf)
    gres=$(render_gres_conf)
    if [ ! -f "$GRES_CONF" ] || [ "$(cat "$GRES_CONF")" != "$gres" ]; then
        install -d -m 0755 "$(dirname "$GRES_CONF")"
        if [ -f "$GRES_CONF" ] && ! grep -qF "$MARK" "$GRES_CONF"; then
            cp -p "$GRES_CONF" "$GRES_CONF.xlatune-backup.$(date +%s)"
        fi
        printf '%s\n' "$gres" >"$GRES_CONF.tmp.$$"
        mv -f "$GRES_CONF.tmp.$$" "$GRES_CONF"
        if [ -f "$CONF" ] && [ "$(cat "$CONF")" = "$new" ]; then
            echo changed
            return 0
        fi
    fi
    if [ -f "$CONF" ] && [ "$(cat "$CONF")" = "$new" ]; then
        return 0
    fi
    if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        cp -p "$CONF" "$CONF.xlatune-backup.$(date +%s)"
        log "saved the previous $CONF as $CONF.xlatune-backup.*"
    fi
    install -d -m 0755 "$(dirname "$CONF")"
    printf '%s\n' "$new" >"$CONF.tmp.$$"
    mv -f "$CONF.tmp.$$" "$CONF"
    echo changed
}

# --- daemons ---------------------------------------------------------------------------------

ctld_alive() { pid_alive "$STATE/slurmctld.pid"; }
slurmd_alive() { pid_alive "$STATE/slurmd.$1.pid"; }

any_alive() {
    local n
    ctld_alive && return 0
    for n in "${NODES[@]}"; do slurmd_alive "$n" && return 0; done
    return 1
}

stop_pidfile() { # pidfile name
    local pid i
    [ -s "$1" ] || return 0
    pid=$(cat "$1" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        log "stopping $2 (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            log "$2 (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$1"
}

stop_all_slurm() {
    local n
    # Each daemon takes ~2 s to exit; signal all slurmd first so they shut down together.
    for n in "${NODES[@]}"; do
        if slurmd_alive "$n"; then kill -TERM "$(cat "$STATE/slurmd.$n.pid")" 2>/dev/null || true; fi
    done
    for n in "${NODES[@]}"; do stop_pidfile "$STATE/slurmd.$n.pid" "slurmd $n"; done
    stop_pidfile "$STATE/slurmctld.pid" slurmctld
}

start_ctld() {
    if ctld_alive; then return 0; fi
    log "starting slurmctld on port $CTLD_PORT (empty queue)"
    # -c: start with no jobs. This is a throwaway test cluster; jobs a killed test run left held
    # or pending (recovered from the state dir) would otherwise sit in every later run's queue.
    # Tests that restart slurmctld mid-run start it without -c, so their jobs are recovered.
    slurmctld -f "$CONF" -i -c
}

start_slurmd() {
    local n=$1
    if slurmd_alive "$n"; then return 0; fi
    log "starting slurmd $n"
    install -d -m 0755 "$STATE/spool/$n"
    slurmd -f "$CONF" -N "$n"
}

dump_logs() {
    local f
    {
        echo "----- sinfo -----"
        sinfo -N -o '%N|%T|%P|%E' 2>&1 || true
        for f in "$STATE/log/slurmctld.log" "$STATE"/log/slurmd.node0*.log /var/log/munge/munged.log; do
            [ -f "$f" ] || continue
            echo "----- tail $f -----"
            tail -n 25 "$f"
        done
    } >&2
}

all_idle() {
    local out n
    out=$(sinfo -h -N -p debug -o '%N %T' 2>/dev/null) || return 1
    for n in "${NODES[@]}"; do
        grep -qx "$n idle" <<<"$out" || return 1
    done
}

resume_stuck_nodes() {
    # A node left DOWN/DRAIN from an earlier session (a killed slurmd, a test's drain) would
    # never turn idle on its own; `up` means "usable", so resume the ones whose slurmd is alive.
    local line n state
    while read -r line; do
        n=${line%% *}; state=${line#* }
        case "$state" in
            down*|drain*|fail*)
                if slurmd_alive "$n"; then
                    scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true
                fi
                ;;
        esac
    done < <(sinfo -h -N -p debug -o '%N %T' 2>/dev/null || true)
}

cmd_up() {
    need_root
    local t0 changed n deadline
    t0=$(date +%s.%N)
    install -d -m 0755 "$STATE" "$STATE/ctld" "$STATE/log" "$STATE/spool"
    case "${1:-}" in
        --accounting) touch "$STATE/accounting" ;;
        --no-accounting) rm -f "$STATE/accounting" ;;
        "") ;;
        *) die "unknown option for up: $1 (want --accounting or --no-accounting)" ;;
    esac
    install_if_missing
    start_munge
    make_gpu_devices
    changed=$(write_conf)
    if [ -n "$changed" ]; then
        log "wrote $CONF"
        if any_alive; then log "config changed; restarting the daemons"; fi
        stop_all_slurm
    fi
    # slurmdbd before slurmctld, which registers the cluster with it (sacctmgr reads $CONF).
    if accounting_on; then
        install_accounting_if_missing
        start_mariadb
        start_slurmdbd
    else
        stop_accounting
    fi
    start_ctld
    for n in "${NODES[@]}"; do start_slurmd "$n"; done
    deadline=$(( $(date +%s) + TIMEOUT ))
    local resumed=0
    until all_idle; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            log "cluster not idle after ${TIMEOUT}s"
            dump_logs
            die "local Slurm cluster failed to come up (state dir $STATE)"
        fi
        if ! ctld_alive; then
            dump_logs
            die "slurmctld died during start-up"
        fi
        # Give registration a few seconds before forcing stale DOWN/DRAIN nodes back.
        if [ $resumed -eq 0 ] && [ "$(date +%s)" -ge $(( deadline - TIMEOUT + 5 )) ]; then
            resume_stuck_nodes
            resumed=1
        fi
        sleep 0.5
    done
    log "up: 4 nodes idle in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s, accounting $(accounting_on && echo on || echo off)"
    sinfo
}

cmd_down() {
    need_root
    stop_all_slurm
    stop_accounting
    if [ -f "$STATE/munged.started-by-us" ]; then
        stop_pidfile /run/munge/munged.pid munged
        rm -f "$STATE/munged.started-by-us"
    fi
    log "down"
}

cmd_status() {
    if ! ctld_alive; then
        echo "slurmctld not running (state dir $STATE)"
        return 1
    fi
    sinfo
    sinfo -N -o '%N|%T|%P|%E'
    if accounting_on; then echo "accounting: on (sacct works)"; else echo "accounting: off (no sacct)"; fi
}

case "${1:-}" in
    up) shift; cmd_up "$@" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    *) echo "usage: $0 up [--accounting|--no-accounting] | down | status" >&2; exit 2 ;;
esac
