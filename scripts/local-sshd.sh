#!/usr/bin/env bash
# Run a throw-away OpenSSH sshd on 127.0.0.1 for pytest-xlatune's transport tests.
#
#   scripts/local-sshd.sh up DIR     keys + config in DIR, start sshd, print the port on stdout
#   scripts/local-sshd.sh down DIR   stop the sshd started for DIR
#
# DIR ends up holding:
#   ssh_host_ed25519_key(.pub)  throw-away host key
#   id_ed25519(.pub)            throw-away user key, authorised for root
#   authorized_keys, known_hosts ([127.0.0.1]:PORT ssh-ed25519 ...), ssh_config (Host xlatune-test,
#   and Host xlatune-test-jump: the same sshd reached through ProxyJump xlatune-test)
#   sshd_config, sshd.pid, sshd.log, port
#
# XLATUNE_SSHD_PORT picks the port; otherwise the first free one from 2222 upwards. Needs root.
set -euo pipefail

log() { printf '[local-sshd] %s\n' "$*" >&2; }
die() { printf '[local-sshd] ERROR: %s\n' "$*" >&2; exit 1; }

usage() { echo "usage: $0 up|down DIR" >&2; exit 2; }

install_if_missing() {
    [ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null 2>&1 && return 0
    log "installing slurm-wlm munge openssh-server (sshd missing)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y slurm-wlm munge openssh-server
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pid_alive() {
    local pid
    [ -s "$1" ] || return 1
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

accepts_ssh() { # port: true once the server sends its SSH banner
    local banner
    # shellcheck disable=SC2016  # $1 expands in the inner bash
    banner=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"; head -c 8 <&3' _ "$1" 2>/dev/null) || return 1
    [ "$banner" = "SSH-2.0-" ]
}

write_client_files() { # dir port
    local dir=$1 port=$2 hostkey
    hostkey=$(cut -d' ' -f1,2 "$dir/ssh_host_ed25519_key.pub")
    printf '[127.0.0.1]:%s %s\n' "$port" "$hostkey" >"$dir/known_hosts"
    cat >"$dir/ssh_config" <<EOF
Host xlatune-test
    HostName 127.0.0.1
    Port $port
    User root
    IdentityFile $dir/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $dir/known_hosts
    StrictHostKeyChecking yes

Host xlatune-test-jump
    HostName 127.0.0.1
    Port $port
    User root
    IdentityFile $dir/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $dir/known_hosts
    StrictHostKeyChecking yes
    ProxyJump xlatune-test
EOF
    echo "$port" >"$dir/port"
}

cmd_up() {
    local dir=$1 port candidate
    [ "$(id -u)" = 0 ] || die "must run as root (sshd for root login)"
    install_if_missing
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    chmod 0700 "$dir"

    if pid_alive "$dir/sshd.pid" && [ -s "$dir/port" ] && accepts_ssh "$(cat "$dir/port")"; then
        log "sshd already running for $dir"
        cat "$dir/port"
        return 0
    fi

    # Privilege separation needs this directory; Debian creates it from the systemd unit.
    install -d -m 0755 /run/sshd
    [ -f "$dir/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C xlatune-test-host -f "$dir/ssh_host_ed25519_key"
    [ -f "$dir/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C xlatune-test-user -f "$dir/id_ed25519"
    cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
    chmod 0600 "$dir/authorized_keys"

    local tries=0
    candidate=${XLATUNE_SSHD_PORT:-2222}
    while :; do
        tries=$((tries + 1))
        [ $tries -le 50 ] || die "no free port for sshd in 50 tries"
        if port_in_use "$candidate"; then
            [ -n "${XLATUNE_SSHD_PORT:-}" ] && die "port $candidate (XLATUNE_SSHD_PORT) is in use"
            candidate=$((candidate + 1))
            continue
        fi
        port=$candidate
        cat >"$dir/sshd_config" <<EOF
# throw-away sshd for pytest-xlatune tests (scripts/local-sshd.sh)
Port $port
ListenAddress 127.0.0.1
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
PermitRootLogin prohibit-password
StrictModes no
AuthorizedKeysFile $dir/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding yes
AllowAgentForwarding no
X11Forwarding no
PrintMotd no
MaxSessions 50
MaxStartups 50:30:100
LogLevel VERBOSE
Subsystem sftp internal-sftp
EOF
        /usr/sbin/sshd -t -f "$dir/sshd_config" || die "sshd -t rejected $dir/sshd_config"
        rm -f "$dir/sshd.pid"
        /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log" || die "sshd failed to start; see $dir/sshd.log"
        local i ok=0
        for i in $(seq 1 100); do
            if accepts_ssh "$port"; then ok=1; break; fi
            pid_alive "$dir/sshd.pid" || [ "$i" -lt 10 ] || break
            sleep 0.1
        done
        if [ $ok = 1 ]; then break; fi
        # Lost a race for the port (or sshd died): try the next one.
        log "sshd did not come up on port $port: $(tail -n 3 "$dir/sshd.log" 2>/dev/null | tr '\n' ' ')"
        if pid_alive "$dir/sshd.pid"; then kill "$(cat "$dir/sshd.pid")" 2>/dev/null || true; fi
        [ -n "${XLATUNE_SSHD_PORT:-}" ] && die "sshd did not come up on port $port"
        candidate=$((port + 1))
    done
    write_client_files "$dir" "$port"
    log "sshd up on 127.0.0.1:$port (pid $(cat "$dir/sshd.pid"), dir $dir)"
    echo "$port"
}

cmd_down() {
    local dir=$1 pid i
    [ -d "$dir" ] || { log "no such dir $dir; nothing to stop"; return 0; }
    if pid_alive "$dir/sshd.pid"; then
        pid=$(cat "$dir/sshd.pid")
        kill -TERM "$pid"
        for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
        log "stopped sshd (pid $pid)"
    fi
    rm -f "$dir/sshd.pid"
}

[ $# -eq 2 ] || usage
case "$1" in
    up) cmd_up "$2" ;;
    down) cmd_down "$2" ;;
    *) usage ;;
esac
