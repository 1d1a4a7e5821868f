#!/usr/bin/env bash
# zk-differential.sh runs the conformance suite (./conformance) against a real
# Apache ZooKeeper 3.8 (the Debian package), so that the suite is known to
# encode ZooKeeper's behaviour and not ours.
#
# It installs ZooKeeper if it is missing (apt-get, so run it as root on a fresh
# Debian machine), starts a standalone server with tickTime=2000 on a free
# loopback port in a fresh temporary directory, waits until it answers, runs
#
#     CONFORMANCE_ADDR=127.0.0.1:<port> go test -count=1 -timeout=5m ./conformance/ "$@"
#
# from the repository root, stops the server, removes the temporary directory
# and exits with the status of go test. Extra arguments go to go test, e.g.
#
#     scripts/zk-differential.sh -v -run 'TestWatch'
#
# The server runs with the settings the suite expects (the embedded zkraft of
# conformance/embedded_test.go is configured the same way):
#   zookeeper.extendedTypesEnabled=true        TTL nodes (createTTL)
#   znode.container.checkIntervalMs=1000       container/TTL reaper every second
#   zookeeper.DigestAuthenticationProvider.superDigest=super:<digest of super:secret>
#   zookeeper.enforceQuota=true                hard quota limits fail writes
#
# Environment:
#   ZK_PORT       first port to try (default 22181); the next free one is used
#   ZK_KEEP_TMP   if non-empty, keep the temporary directory (server log) on exit
#   JAVA          java binary (default: java on PATH)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf 'zk-differential: %s\n' "$*" >&2; }

# ---------------------------------------------------------------------------
# 1. Make sure ZooKeeper and Java are installed.
zk_jar=/usr/share/java/zookeeper.jar
if [[ ! -f "$zk_jar" ]] || ! command -v "${JAVA:-java}" >/dev/null 2>&1; then
	log "installing ZooKeeper (apt-get install zookeeper zookeeper-bin)"
	if [[ "$(id -u)" -ne 0 ]]; then
		log "ZooKeeper is not installed and we are not root; install the Debian package 'zookeeper' first"
		exit 2
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y zookeeper zookeeper-bin
fi
java_bin="${JAVA:-$(command -v java || true)}"
if [[ ! -f "$zk_jar" || -z "$java_bin" ]]; then
	log "ZooKeeper or java still missing after installation"
	exit 2
fi
command -v go >/dev/null 2>&1 || {
	log "go is not on PATH"
	exit 2
}

# ---------------------------------------------------------------------------
# 2. A fresh temporary directory for zoo.cfg, log4j.properties, dataDir, logs.
tmp="$(mktemp -d "${TMPDIR:-/tmp}/zk-differential.XXXXXX")"
zk_pid=""
go_pid=""

# stop_go stops a still-running go test (after an interrupt): first the test
# binary it started, then go itself.
stop_go() {
	if [[ -n "$go_pid" ]] && kill -0 "$go_pid" 2>/dev/null; then
		local kids
		kids="$(pgrep -P "$go_pid" 2>/dev/null || true)"
		if [[ -n "$kids" ]]; then
			# shellcheck disable=SC2086 # a list of pids
			kill $kids 2>/dev/null || true
		fi
		kill "$go_pid" 2>/dev/null || true
		wait "$go_pid" 2>/dev/null || true
	fi
	go_pid=""
}

stop_zk() {
	if [[ -n "$zk_pid" ]] && kill -0 "$zk_pid" 2>/dev/null; then
		kill "$zk_pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$zk_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$zk_pid" 2>/dev/null || true
		wait "$zk_pid" 2>/dev/null || true
	fi
	zk_pid=""
}

cleanup() {
	local status=$?
	stop_go
	stop_zk
	if [[ -n "${ZK_KEEP_TMP:-}" ]]; then
		log "kept $tmp (server log: $tmp/zookeeper.log)"
	else
		rm -rf "$tmp"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# port_in_use PORT: true if something accepts connections on 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# next_free_port PORT: prints the first port >= PORT that nobody listens on.
next_free_port() {
	local p=$1
	for _ in $(seq 1 200); do
		if ! port_in_use "$p"; then
			echo "$p"
			return 0
		fi
		p=$((p + 1))
	done
	return 1
}

# four_letter WORD PORT: prints the server's answer to a four-letter word.
four_letter() {
	local line out=""
	exec 3<>"/dev/tcp/127.0.0.1/$2" || return 1
	printf '%s' "$1" >&3
	while IFS= read -r -t 2 line <&3; do
		out+="$line"$'\n'
	done
	out+="$line"
	exec 3<&- 3>&-
	printf '%s' "$out"
}

# is_our_zk PORT: true if the server on PORT is up and is the one we started
# (its "conf" names our dataDir; another run may have won the port race).
is_our_zk() {
	[[ "$(four_letter conf "$1" 2>/dev/null)" == *"dataDir=$tmp/data/"* ]]
}

mkdir -p "$tmp/conf"
cat >"$tmp/conf/log4j.properties" <<EOF
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=$tmp/zookeeper.log
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
EOF

# zookeeper.jar's manifest Class-Path names its runtime dependencies under
# /usr/share/java. slf4j-log4j12 + log4j 1.2 give it a logger that writes to
# our file; without them slf4j falls back to NOP and there is no server log.
cp="$tmp/conf:$zk_jar"
for jar in slf4j-log4j12.jar log4j-1.2.jar; do
	if [[ -f "/usr/share/java/$jar" ]]; then
		cp="$cp:/usr/share/java/$jar"
	fi
done

# start_zk PORT: starts a standalone ZooKeeper on 127.0.0.1:PORT with an empty
# dataDir and waits (at most 30 s) until it answers. Returns 1 if the
# server died during startup (e.g. another process took the port), 2 if it
# did not answer in time.
start_zk() {
	local port=$1
	rm -rf "$tmp/data"
	mkdir -p "$tmp/data"
	cat >"$tmp/conf/zoo.cfg" <<EOF
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$tmp/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
EOF
	log "starting ZooKeeper on 127.0.0.1:$port (dir $tmp)"
	"$java_bin" -Xmx512m \
		-Dlog4j.configuration="file:$tmp/conf/log4j.properties" \
		-Dzookeeper.log.dir="$tmp" \
		-Dzookeeper.admin.enableServer=false \
		-Dzookeeper.extendedTypesEnabled=true \
		-Dznode.container.checkIntervalMs=1000 \
		-Dzookeeper.DigestAuthenticationProvider.superDigest=super:lK75jTNcA+U9vtVEw5vB51mj/w4= \
		-Dzookeeper.enforceQuota=true \
		-cp "$cp" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$tmp/conf/zoo.cfg" \
		>"$tmp/stdout.log" 2>&1 </dev/null &
	zk_pid=$!
	for _ in $(seq 1 300); do # 300 * 0.1 s = 30 s
		if ! kill -0 "$zk_pid" 2>/dev/null; then
			wait "$zk_pid" 2>/dev/null || true
			zk_pid=""
			return 1
		fi
		if is_our_zk "$port"; then
			return 0
		fi
		sleep 0.1
	done
	return 2
}

# ---------------------------------------------------------------------------
# 3. Start ZooKeeper on the first free port from ZK_PORT; if another process
# grabs the port first, try the next one.
# Without ZK_PORT, start at a random offset from 22181 so that concurrent
# runs rarely collide.
port="${ZK_PORT:-$((22181 + RANDOM % 1000))}"
started=""
for attempt in 1 2 3 4 5; do
	if ! port="$(next_free_port "$port")"; then
		log "no free port found from ${ZK_PORT:-22181}"
		exit 2
	fi
	rc=0
	start_zk "$port" || rc=$?
	if [[ $rc -eq 0 ]]; then
		started=1
		break
	fi
	if [[ $rc -eq 2 ]]; then
		log "ZooKeeper did not answer within 30 s; its log:"
		tail -n 50 "$tmp/zookeeper.log" >&2 2>/dev/null || true
		exit 2
	fi
	log "ZooKeeper exited during startup (attempt $attempt); its output:"
	cat "$tmp/stdout.log" "$tmp/zookeeper.log" 2>/dev/null | tail -n 20 >&2 || true
	port=$((port + 1))
done
if [[ -z "$started" ]]; then
	log "could not start ZooKeeper"
	exit 2
fi
log "ZooKeeper is up (pid $zk_pid, port $port)"

# ---------------------------------------------------------------------------
# 4. Run the suite; its status is ours. It runs in the background so that an
# INT or TERM reaches our trap at once instead of after the suite ends.
status=0
(cd "$repo_root" && CONFORMANCE_ADDR="127.0.0.1:$port" exec go test -count=1 -timeout=5m ./conformance/ "$@") &
go_pid=$!
wait "$go_pid" || status=$?
go_pid=""
if [[ $status -ne 0 ]]; then
	log "go test failed with status $status; last lines of the ZooKeeper log:"
	tail -n 30 "$tmp/zookeeper.log" >&2 2>/dev/null || true
fi
exit "$status"
