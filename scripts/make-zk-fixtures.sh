#!/usr/bin/env bash
# make-zk-fixtures.sh makes the ZooKeeper data directories under
# zkdata/testdata/zk with a real Apache ZooKeeper 3.8 (the Debian package
# `zookeeper`), for the import/export tests.
#
# For each variant (plain, gz and snappy snapshots; snappy also with a
# separate dataLogDir) it starts a standalone ZooKeeper on a free loopback
# port with
#   zookeeper.snapCount=100                 a snapshot every 50-100 txns
#   zookeeper.preAllocSize=64               64 KB log preallocation
#   zookeeper.extendedTypesEnabled=true     TTL nodes
#   znode.container.checkIntervalMs=500     containers/TTL nodes reaped fast
#   zookeeper.snapshot.compression.method   gz / snappy
#   zookeeper.DigestAuthenticationProvider.superDigest (super:secret)
# runs internal/zkfixture against it (every kind of znode, ACLs,
# quotas, multis, failed writes, a closed session, three sessions left open
# with ephemerals), which writes the client's view of the tree to
# expected.json, then kills ZooKeeper with SIGKILL while those sessions are
# open. The newest two snapshots and the logs they need are kept, with the
# zero padding of the logs cut off so that the fixtures stay small
# (ZooKeeper reads a log to EOF the same way).
#
# Usage: scripts/make-zk-fixtures.sh [OUT_DIR]   (default zkdata/testdata/zk)
# Environment: JAVA (java binary), ZK_KEEP_TMP (keep the temporary dirs).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out_root="${1:-$repo_root/zkdata/testdata/zk}"
zk_jar=/usr/share/java/zookeeper.jar
java_bin="${JAVA:-$(command -v java || true)}"

log() { printf 'make-zk-fixtures: %s\n' "$*" >&2; }

if [[ ! -f "$zk_jar" || -z "$java_bin" ]]; then
	log "needs Apache ZooKeeper 3.8 ($zk_jar) and java: apt-get install zookeeper"
	exit 2
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/zk-fixtures.XXXXXX")"
zk_pid=""
client_pid=""

stop_all() {
	if [[ -n "$client_pid" ]]; then
		kill "$client_pid" 2>/dev/null || true
		wait "$client_pid" 2>/dev/null || true
		client_pid=""
	fi
	if [[ -n "$zk_pid" ]]; then
		kill -9 "$zk_pid" 2>/dev/null || true
		wait "$zk_pid" 2>/dev/null || true
		zk_pid=""
	fi
}
cleanup() {
	local status=$?
	stop_all
	if [[ -n "${ZK_KEEP_TMP:-}" ]]; then
		log "kept $tmp"
	else
		rm -rf "$tmp"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "building the fixture client"
(cd "$repo_root" && go build -o "$tmp/zkfixture" ./internal/zkfixture)

free_port() {
	local p=$((23181 + RANDOM % 2000))
	for _ in $(seq 1 200); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
		p=$((p + 1))
	done
	return 1
}

four_letter() {
	local out=""
	exec 3<>"/dev/tcp/127.0.0.1/$2" || return 1
	printf '%s' "$1" >&3
	out="$(timeout 2 cat <&3 || true)"
	exec 3<&- 3>&-
	printf '%s' "$out"
}

cp_jars="$zk_jar"
for jar in slf4j-log4j12.jar log4j-1.2.jar; do
	[[ -f "/usr/share/java/$jar" ]] && cp_jars="$cp_jars:/usr/share/java/$jar"
done

# make_variant NAME COMPRESSION SEPARATE_LOG_DIR BULK
make_variant() {
	local name=$1 method=$2 separate_log=$3 bulk=$4
	local dir="$tmp/$name"
	local data="$dir/data" logdir="$dir/data"
	mkdir -p "$dir/conf" "$data"
	if [[ "$separate_log" == yes ]]; then
		logdir="$dir/datalog"
		mkdir -p "$logdir"
	fi
	local port
	port="$(free_port)"
	cat >"$dir/conf/zoo.cfg" <<CFG
tickTime=2000
dataDir=$data
dataLogDir=$logdir
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
CFG
	cat >"$dir/conf/log4j.properties" <<CFG
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=$dir/zookeeper.log
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
CFG
	log "$name: starting ZooKeeper on 127.0.0.1:$port (snapshots: ${method:-plain})"
	"$java_bin" -Xmx256m \
		-Dlog4j.configuration="file:$dir/conf/log4j.properties" \
		-Dzookeeper.log.dir="$dir" \
		-Dzookeeper.admin.enableServer=false \
		-Dzookeeper.snapCount=100 \
		-Dzookeeper.preAllocSize=64 \
		-Dzookeeper.extendedTypesEnabled=true \
		-Dznode.container.checkIntervalMs=500 \
		-Dzookeeper.snapshot.compression.method="$method" \
		-Dzookeeper.DigestAuthenticationProvider.superDigest=super:lK75jTNcA+U9vtVEw5vB51mj/w4= \
		-cp "$dir/conf:$cp_jars" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$dir/conf/zoo.cfg" \
		>"$dir/stdout.log" 2>&1 </dev/null &
	zk_pid=$!
	local up=""
	for _ in $(seq 1 300); do
		if ! kill -0 "$zk_pid" 2>/dev/null; then
			break
		fi
		if [[ "$(four_letter conf "$port" 2>/dev/null)" == *"dataDir=$data/"* ]]; then
			up=1
			break
		fi
		sleep 0.1
	done
	if [[ -z "$up" ]]; then
		log "$name: ZooKeeper did not start:"
		tail -n 30 "$dir/stdout.log" "$dir/zookeeper.log" >&2 || true
		return 1
	fi

	mkfifo "$dir/client.out"
	# The client keeps its stdin open (a fifo nobody writes) so that it
	# holds its sessions until we kill it.
	mkfifo "$dir/client.in"
	"$tmp/zkfixture" load -addr "127.0.0.1:$port" -out "$dir/expected.json" -bulk "$bulk" \
		<"$dir/client.in" >"$dir/client.out" &
	client_pid=$!
	exec 4>"$dir/client.in"
	if ! read -r -t 120 line <"$dir/client.out" || [[ "$line" != READY ]]; then
		log "$name: the client failed"
		exec 4>&-
		return 1
	fi
	log "$name: workload done; killing ZooKeeper with the sessions open"
	kill -9 "$zk_pid"
	wait "$zk_pid" 2>/dev/null || true
	zk_pid=""
	exec 4>&-
	kill "$client_pid" 2>/dev/null || true
	wait "$client_pid" 2>/dev/null || true
	client_pid=""

	local prune_args=(-keep 2 -data "$data")
	[[ "$separate_log" == yes ]] && prune_args+=(-log "$logdir")
	"$tmp/zkfixture" prune "${prune_args[@]}"

	local dest="$out_root/$name"
	rm -rf "$dest"
	mkdir -p "$dest/data"
	cp -r "$data/version-2" "$dest/data/"
	if [[ "$separate_log" == yes ]]; then
		mkdir -p "$dest/datalog"
		cp -r "$logdir/version-2" "$dest/datalog/"
	fi
	cp "$dir/expected.json" "$dest/expected.json"
	log "$name: $(find "$dest" -type f | wc -l) files, $(du -sk "$dest" | cut -f1) KB in $dest"
}

mkdir -p "$out_root"
make_variant plain "" no 150
make_variant gz gz no 100
make_variant snappy snappy yes 100
log "done: $(du -sk "$out_root" | cut -f1) KB under $out_root"
