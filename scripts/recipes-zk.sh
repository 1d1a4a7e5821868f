#!/usr/bin/env bash
# recipes-zk.sh runs scripts/recipes.sh (Curator and kazoo recipes) against a
# real Apache ZooKeeper 3.8 (the Debian package), so that the checks are known
# to encode ZooKeeper's behaviour and not ours.
#
# It starts a standalone server the way scripts/zk-differential.sh does (java
# directly, tickTime=2000, a free loopback port, a fresh temporary directory),
# with extended types (TTL nodes) enabled and the container/TTL reaper running
# every second:
#
#     -Dzookeeper.extendedTypesEnabled=true -Dznode.container.checkIntervalMs=1000
#
# waits until it answers, runs scripts/recipes.sh 127.0.0.1:<port>, stops the
# server, removes the temporary directory and exits with recipes.sh's status.
#
# Environment:
#   ZK_PORT       first port to try (default: random from 23181); the next free one is used
#   ZK_KEEP_TMP   if non-empty, keep the temporary directory (server log) on exit
#   JAVA          java binary (default: java on PATH)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf 'recipes-zk: %s\n' "$*" >&2; }

zk_jar=/usr/share/java/zookeeper.jar
java_bin="${JAVA:-$(command -v java || true)}"
if [[ ! -f "$zk_jar" || -z "$java_bin" ]]; then
	log "ZooKeeper ($zk_jar) or java missing; install the Debian package 'zookeeper'"
	exit 2
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/recipes-zk.XXXXXX")"
zk_pid=""
run_pid=""

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
	if [[ -n "$run_pid" ]] && kill -0 "$run_pid" 2>/dev/null; then
		kill "$run_pid" 2>/dev/null || true
		wait "$run_pid" 2>/dev/null || true
	fi
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

port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

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

# is_our_zk PORT: the server on PORT is up and is the one we started.
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

cp="$tmp/conf:$zk_jar"
for jar in slf4j-log4j12.jar log4j-1.2.jar; do
	if [[ -f "/usr/share/java/$jar" ]]; then
		cp="$cp:/usr/share/java/$jar"
	fi
done

# start_zk PORT: 0 when up, 1 if it died during startup, 2 if no answer in 30 s.
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
		-cp "$cp" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$tmp/conf/zoo.cfg" \
		>"$tmp/stdout.log" 2>&1 </dev/null &
	zk_pid=$!
	for _ in $(seq 1 300); do
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

port="${ZK_PORT:-$((23181 + RANDOM % 1000))}"
started=""
for attempt in 1 2 3 4 5; do
	if ! port="$(next_free_port "$port")"; then
		log "no free port found"
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

# Run in the background so that INT/TERM reach our trap at once.
status=0
"$here/recipes.sh" "127.0.0.1:$port" &
run_pid=$!
wait "$run_pid" || status=$?
run_pid=""
if [[ $status -ne 0 ]]; then
	log "recipes.sh failed with status $status; last lines of the ZooKeeper log:"
	tail -n 30 "$tmp/zookeeper.log" >&2 2>/dev/null || true
fi
exit "$status"
