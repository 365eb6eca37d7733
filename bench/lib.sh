# Shared by the bench scripts: a work dir with a client key, a host key, fake
# nvidia-smi on the hosts' PATH, and loopback OpenSSH hosts started as
# daemons. Source it, then call bench_init and bench_host.

# bench_need TOOL...: exit 1 naming the first of sshd and TOOLs missing.
bench_need() {
  local tool
  for tool in "$(command -v sshd || echo /usr/sbin/sshd)" "$@"; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (apt-get install -y openssh-server $*)"; exit 1; }
  done
}

# bench_init PREFIX: make $W (removed on exit, with the sshd daemons).
bench_init() {
  SSHD=$(command -v sshd || echo /usr/sbin/sshd)
  W=$(mktemp -d "/tmp/$1.XXXXXX")
  BENCH_PIDS=()
  trap 'for p in "${BENCH_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; pkill -f "$W" 2>/dev/null || true; rm -rf "$W"' EXIT
  mkdir -p "$W/bin" "$W/home/.ssh" /run/sshd
  ln -s "$PWD/probe/testdata/fake-nvidia-smi" "$W/bin/nvidia-smi"
  ssh-keygen -q -t ed25519 -N '' -f "$W/id"
  ssh-keygen -q -t ed25519 -N '' -f "$W/hostkey"
  cp "$W/id.pub" "$W/authorized_keys"
  : > "$W/known_hosts"; : > "$W/ssh_config"
}

# bench_host NAME PORT FIXTURE: start sshd on 127.0.0.1:PORT whose nvidia-smi
# replays probe/testdata/fleet/FIXTURE, and add NAME to $W/ssh_config and
# $W/known_hosts.
bench_host() {
  local name=$1 port=$2 fixture=$3
  cat > "$W/sshd_$name.conf" <<CONF
ListenAddress 127.0.0.1:$port
HostKey $W/hostkey
AuthorizedKeysFile $W/authorized_keys
PidFile none
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
SetEnv PATH=$W/bin:/usr/bin:/bin GSSH_FAKE_SMI_DIR=$PWD/probe/testdata/fleet/$fixture HOME=$W/home
LogLevel ${BENCH_SSHD_LOGLEVEL:-ERROR}
${BENCH_SSHD_EXTRA:-}
CONF
  "$SSHD" -D -e -f "$W/sshd_$name.conf" 2>>"$W/sshd.log" & BENCH_PIDS+=($!)
  echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$W/hostkey.pub")" >> "$W/known_hosts"
  cat >> "$W/ssh_config" <<CONF
Host $name
  HostName 127.0.0.1
  Port $port
  User $(id -un)
  IdentityFile $W/id
  IdentitiesOnly yes
  UserKnownHostsFile $W/known_hosts
  StrictHostKeyChecking yes
  ControlMaster no
  ControlPath none
CONF
}
