#!/usr/bin/env bash
# bench-vs-zk.sh compares zkraft with Apache ZooKeeper 3.8 (the Debian
# package) on this machine.
#
# By default it runs the side-by-side harness, scripts/sidebyside: standard
# go-zookeeper clients in the shapes real clients have, servers it starts
# itself, alternating runs, medians, CPU per operation; every argument is
# the harness's (see `go run ./scripts/sidebyside -h` and the section
# "Side-by-side harness" of docs/performance.md). This is the comparison
# that performance claims are judged by:
#
#   scripts/bench-vs-zk.sh -members 1,3 -pairs 3
#   scripts/bench-vs-zk.sh -smoke
#
# With -L as its first argument it runs the older comparison instead, with
# zkraft's own load generator (`zkraft bench`: few sessions, deep
# pipelines), which also measures memory per session and the large tree
# (-t); its options follow.
#
# Usage: scripts/bench-vs-zk.sh -L [options] [-- extra zkraft bench flags]
#   -d DURATION   measured duration per run (default 10s)
#   -u WARMUP     warm-up per run (default 3s; the JVM needs its JIT warm)
#   -w SPECS      workloads, space-separated NAME[:N] (default
#                 "write:64 write:256 read:64 read:256 sessions:3000");
#                 N is the total in-flight count for write, read, mixed,
#                 create-seq and multi, and the number of sessions for
#                 sessions, watch and lock
#   -s SESSIONS   sessions of the load workloads (default 4)
#   -r REPEAT     runs per workload and server (default 1); the table shows
#                 the median, and the order of the servers alternates
#   -m MODES      "1", "3" or "1 3": standalone and/or 3 members on
#                 loopback (default "1")
#   -o DIR        keep the JSON results and the table in DIR (default: a
#                 new directory under ${TMPDIR:-/tmp}, printed at the end)
#   -k            keep the server data directories and logs
#   -t ZNODES     also compare a standalone server holding ZNODES znodes of
#                 100 bytes (scripts/bigtree, built from the working tree):
#                 RSS per znode and the time from a restart after SIGKILL to
#                 a served read of the last znode (e.g. -t 1000000)
#
# Both servers run with their durability defaults: ZooKeeper forceSync=yes
# (fsync of the transaction log before acknowledging), zkraft fsyncs its
# Raft log (Dragonboat/Pebble). Each run starts its servers fresh with an
# empty data directory under ${TMPDIR:-/tmp} and stops them afterwards.
# ZooKeeper gets -Xmx${ZK_HEAP:-1000m} (zkServer.sh's default heap is 1000 MB).
# In 3-member mode the load workloads spread their sessions over the three
# members, and the sessions workload opens all its sessions on member 1 and
# reports member 1's RSS.
#
# Environment: ZK_HEAP (JVM heap), JAVA (java binary), ZK_PORT_BASE (first
# port to try; default random in 30000..39999).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ "${1:-}" != "-L" ]]; then
	cd "$repo_root"
	exec go run ./scripts/sidebyside "$@"
fi
shift

log() { printf 'bench-vs-zk: %s\n' "$*" >&2; }

duration=10s
warmup=3s
specs="write:64 write:256 read:64 read:256 sessions:3000"
load_sessions=4
repeat=1
modes="1"
out=""
keep=""
tree=""
while getopts "d:u:w:s:r:m:o:t:kh" opt; do
	case "$opt" in
	d) duration=$OPTARG ;;
	u) warmup=$OPTARG ;;
	w) specs=$OPTARG ;;
	s) load_sessions=$OPTARG ;;
	r) repeat=$OPTARG ;;
	m) modes=$OPTARG ;;
	o) out=$OPTARG ;;
	k) keep=1 ;;
	t) tree=$OPTARG ;;
	h)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
extra=("$@")

[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || {
	log "-r: want a positive count"
	exit 2
}
for m in $modes; do
	[[ "$m" == 1 || "$m" == 3 ]] || {
		log "-m: modes are 1 and 3"
		exit 2
	}
done

zk_jar=/usr/share/java/zookeeper.jar
java_bin="${JAVA:-$(command -v java || true)}"
if [[ ! -f "$zk_jar" || -z "$java_bin" ]]; then
	log "needs ZooKeeper and java: apt-get install zookeeper"
	exit 2
fi
for tool in go jq; do
	command -v "$tool" >/dev/null 2>&1 || {
		log "$tool is not on PATH"
		exit 2
	}
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/bench-vs-zk.XXXXXX")"
if [[ -z "$out" ]]; then
	out="$(mktemp -d "${TMPDIR:-/tmp}/bench-vs-zk-results.XXXXXX")"
fi
mkdir -p "$out"
: >>"$out/loadavg.txt"
pids=()    # servers we started and have not stopped yet
bench_pid=""

stop_pid() {
	local p=$1
	if kill -0 "$p" 2>/dev/null; then
		kill "$p" 2>/dev/null || true
		for _ in $(seq 1 100); do # 10 s
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$p" 2>/dev/null || true
	fi
	wait "$p" 2>/dev/null || true
}

stop_servers() {
	local p
	for p in "${pids[@]}"; do
		stop_pid "$p"
	done
	pids=()
}

cleanup() {
	local status=$?
	if [[ -n "$bench_pid" ]]; then
		stop_pid "$bench_pid"
	fi
	stop_servers
	if [[ -n "$keep" ]]; then
		log "kept server directories in $tmp"
	else
		rm -rf "$tmp"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_in_use() { (exec 2>/dev/null 3<>"/dev/tcp/127.0.0.1/$1"); }

# take_ports N: sets the array ports to N consecutive free ports.
next_port="${ZK_PORT_BASE:-$((30000 + RANDOM % 10000))}"
take_ports() {
	local n=$1 tries=0 p ok
	while ((tries < 200)); do
		ok=1
		for ((p = next_port; p < next_port + n; p++)); do
			if port_in_use "$p"; then
				ok=""
				break
			fi
		done
		if [[ -n "$ok" ]]; then
			ports=()
			for ((p = next_port; p < next_port + n; p++)); do ports+=("$p"); done
			next_port=$((next_port + n))
			return 0
		fi
		next_port=$((next_port + n + 1))
		tries=$((tries + 1))
	done
	log "no $n free ports found"
	return 1
}

# four_letter WORD PORT: the server's answer to a four-letter word.
four_letter() {
	local out=""
	out="$(
		exec 2>/dev/null
		exec 3<>"/dev/tcp/127.0.0.1/$2" || exit 1
		printf '%s' "$1" >&3
		timeout 2 cat <&3
	)" || true
	printf '%s' "$out"
}

log "building zkraft"
(cd "$repo_root" && go build -o "$tmp/bin/zkraft" ./cmd/zkraft)
zkraft="$tmp/bin/zkraft"
# Flags of newer zkraft builds: the AdminServer would take port 8080.
zkraft_flags=(--log-level warn)
if "$zkraft" serve -h 2>&1 | grep -q -- '-admin-enable'; then
	zkraft_flags+=(--admin-enable=false)
fi

cp="$zk_jar"
for jar in slf4j-log4j12.jar log4j-1.2.jar; do
	[[ -f "/usr/share/java/$jar" ]] && cp="$cp:/usr/share/java/$jar"
done

# write_cfgs KIND N: writes zoo.cfg (and myid) for N members under
# $tmp/KIND/<i>, on ports from take_ports; sets client_addrs and dirs.
write_cfgs() {
	local kind=$1 n=$2 i
	take_ports $((3 * n))
	client_addrs=()
	dirs=()
	for ((i = 1; i <= n; i++)); do
		local d="$tmp/$kind/$i"
		rm -rf "$d"
		mkdir -p "$d/data"
		dirs+=("$d")
		client_addrs+=("127.0.0.1:${ports[$((3 * (i - 1)))]}")
		cat >"$d/log4j.properties" <<EOF
log4j.rootLogger=WARN, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=$d/server.log
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
EOF
		cat >"$d/zoo.cfg" <<EOF
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$d/data
clientPort=${ports[$((3 * (i - 1)))]}
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
EOF
		if ((n > 1)); then
			echo "$i" >"$d/data/myid"
		fi
	done
	if ((n > 1)); then
		for ((i = 1; i <= n; i++)); do
			local j
			for ((j = 1; j <= n; j++)); do
				local b=$((3 * (j - 1)))
				echo "server.$j=127.0.0.1:${ports[$((b + 1))]}:${ports[$((b + 2))]}:participant;127.0.0.1:${ports[$b]}" >>"$tmp/$kind/$i/zoo.cfg"
			done
		done
	fi
}

# ready KIND N: true once every member answers srvr as a serving member
# (and, for ZooKeeper, is the one we started: its conf names our dataDir).
ready() {
	local kind=$1 n=$2 i
	for ((i = 1; i <= n; i++)); do
		local port="${client_addrs[$((i - 1))]##*:}" srvr
		srvr="$(four_letter srvr "$port")"
		if ((n == 1)); then
			[[ "$srvr" == *"Mode: standalone"* ]] || return 1
		else
			[[ "$srvr" == *"Mode: leader"* || "$srvr" == *"Mode: follower"* ]] || return 1
		fi
		if [[ "$kind" == zookeeper ]]; then
			[[ "$(four_letter conf "$port")" == *"dataDir=${dirs[$((i - 1))]}/data"* ]] || return 1
		else
			[[ "$srvr" == *zkraft* ]] || return 1
		fi
	done
}

# start KIND N: starts N members of KIND (zookeeper or zkraft), fresh, and
# waits (at most 60 s) until they serve. Sets client_addrs and server_pids.
start() {
	local kind=$1 n=$2 attempt i
	for attempt in 1 2 3; do
		write_cfgs "$kind" "$n"
		server_pids=()
		for ((i = 1; i <= n; i++)); do
			local d="${dirs[$((i - 1))]}"
			if [[ "$kind" == zookeeper ]]; then
				local main=org.apache.zookeeper.server.ZooKeeperServerMain
				((n > 1)) && main=org.apache.zookeeper.server.quorum.QuorumPeerMain
				"$java_bin" "-Xmx${ZK_HEAP:-1000m}" \
					-Dlog4j.configuration="file:$d/log4j.properties" \
					-Dzookeeper.log.dir="$d" \
					-Dzookeeper.admin.enableServer=false \
					-cp "$d:$cp" "$main" "$d/zoo.cfg" \
					>"$d/stdout.log" 2>&1 </dev/null &
			elif ((n == 1)); then
				"$zkraft" --client-addr "${client_addrs[0]}" --raft-addr "127.0.0.1:${ports[1]}" \
					--data-dir "$d/data" --max-client-cnxns 0 "${zkraft_flags[@]}" >"$d/server.log" 2>&1 </dev/null &
			else
				"$zkraft" --config "$d/zoo.cfg" "${zkraft_flags[@]}" >"$d/server.log" 2>&1 </dev/null &
			fi
			server_pids+=($!)
			pids+=($!)
		done
		local dead=""
		for _ in $(seq 1 600); do # 600 * 0.1 s = 60 s
			for p in "${server_pids[@]}"; do
				kill -0 "$p" 2>/dev/null || dead=1
			done
			[[ -n "$dead" ]] && break
			if ready "$kind" "$n"; then
				log "$kind ($n member(s)) serving on ${client_addrs[*]}"
				return 0
			fi
			sleep 0.1
		done
		log "$kind did not come up (attempt $attempt); last log lines:"
		for d in "${dirs[@]}"; do
			tail -n 5 "$d/server.log" "$d/stdout.log" 2>/dev/null >&2 || true
		done
		stop_servers
	done
	return 1
}

# seconds DURATION: whole seconds of a Go duration like 10s, 2m or 500ms
# (rounded up; 600 for forms it does not know).
seconds() {
	case "$1" in
	*ms) echo 1 ;;
	*s) echo "${1%s}" | cut -d. -f1 ;;
	*m) echo $((${1%m} * 60)) ;;
	*) echo 600 ;;
	esac
}

# spec_n SPEC: the N of NAME[:N], or the workload's default.
spec_n() {
	local name="${1%%:*}" n="${1#*:}"
	if [[ "$n" == "$1" ]]; then
		case "$name" in
		sessions) n=3000 ;;
		watch) n=100 ;;
		lock) n=8 ;;
		*) n=64 ;;
		esac
	fi
	echo "$n"
}

# run_bench KIND MODE NAME N REP: one run; writes $out/MODE-NAME-N-KIND-rREP.json.
run_bench() {
	local kind=$1 mode=$2 name=$3 n=$4 rep=$5
	local file="$out/$mode-$name-$n-$kind-r$rep.json"
	local addr args=()
	addr="$(
		IFS=,
		echo "${client_addrs[*]}"
	)"
	case "$name" in
	write | read | mixed | create-seq | multi)
		args=(-inflight "$n" -sessions "$load_sessions")
		;;
	sessions)
		addr="${client_addrs[0]}"
		args=(-sessions "$n" -server-pid "${server_pids[0]}")
		;;
	*)
		args=(-sessions "$n")
		;;
	esac
	local secs=$(($(seconds "$duration") + $(seconds "$warmup") + 300))
	log "$kind: $name $n (${args[*]} ${extra[*]})"
	timeout "$secs" "$zkraft" bench -addr "$addr" -workload "$name" -duration "$duration" -warmup "$warmup" \
		-json -q "${args[@]}" "${extra[@]}" >"$file" &
	bench_pid=$!
	local rc=0
	wait "$bench_pid" || rc=$?
	bench_pid=""
	if [[ $rc -ne 0 ]]; then
		log "$kind: $name $n failed (status $rc)"
		echo '{}' >"$file"
	fi
}

for mode in $modes; do
	for spec in $specs; do
		name="${spec%%:*}"
		n="$(spec_n "$spec")"
		for ((rep = 1; rep <= repeat; rep++)); do
			order="zookeeper zkraft"
			((rep % 2 == 0)) && order="zkraft zookeeper"
			for kind in $order; do
				if ! start "$kind" "$mode"; then
					log "could not start $kind"
					exit 1
				fi
				read -r load1 _ </proc/loadavg
				echo "$mode $name $n $kind $rep $load1" >>"$out/loadavg.txt"
				run_bench "$kind" "$mode" "$name" "$n" "$rep"
				stop_servers
			done
		done
	done
done

# The tree comparison: scripts/bigtree starts and kills each server itself.
if [[ -n "$tree" ]]; then
	for kind in zookeeper zkraft; do
		log "$kind: tree of $tree znodes (scripts/bigtree)"
		(cd "$repo_root" && timeout 1800 go run ./scripts/bigtree -n "$tree" -system "$kind") >"$out/tree-$kind.txt" 2>&1 ||
			log "$kind: bigtree failed (see $out/tree-$kind.txt)"
	done
fi
# tree_figure FILE WHAT: bytes per znode (rss) or restart seconds (restart).
tree_figure() {
	case "$2" in
	rss) sed -n 's/^server RSS with the tree: .*(\([0-9]*\) bytes per znode)$/\1/p' "$1" 2>/dev/null | head -1 ;;
	restart) sed -n 's/^restart after SIGKILL: serving .* again after \(.*\)$/\1/p' "$1" 2>/dev/null | head -1 ;;
	esac
}

# ---------------------------------------------------------------------------
# The table: per workload the median over the repetitions.
table="$out/results.md"
{
	echo "| members | workload | ZooKeeper | zkraft | ratio | ZooKeeper p99 | zkraft p99 | p99 ratio | notes |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
	for mode in $modes; do
		for spec in $specs; do
			name="${spec%%:*}"
			n="$(spec_n "$spec")"
			zk="$(jq -s . "$out/$mode-$name-$n-zookeeper-r"*.json)"
			zr="$(jq -s . "$out/$mode-$name-$n-zkraft-r"*.json)"
			jq -r -n --argjson a "$zk" --argjson b "$zr" --arg mode "$mode" --arg name "$name" --arg n "$n" '
				def median: map(select(. != null)) | sort |
					if length == 0 then null
					elif length % 2 == 1 then .[(length - 1) / 2]
					else (.[length / 2 - 1] + .[length / 2]) / 2 end;
				def total: map(select(. != null)) | if length == 0 then null else add end;
				def f0: if . == null then "-" else (round | tostring) end;
				def ms: if . == null then "-" else ((. / 10 | round) / 100 | tostring) + " ms" end;
				def ratio($x; $y): if $x == null or $y == null or $x == 0 then "-" else (($y / $x) * 100 | round / 100 | tostring) end;
				def errs: map(.errors // {} | to_entries[]) | group_by(.key) | map("\(map(.value) | add)× \(.[0].key)") | join(", ");
				def lbl: if $name == "sessions" then "sessions \($n)"
					elif ($name == "watch" or $name == "lock") then "\($name) \($n) sessions"
					else "\($name) \($n) in flight" end;
				def tp: map(.throughput) | median;
				def p99: map(.latency.p99_us) | median;
				(($a + $b) | map(.unit) | map(select(. != null)) | .[0] // "ops") as $unit |
				(if $name == "sessions" then
					($a | map(.rss_per_session_bytes) | median) as $zm | ($b | map(.rss_per_session_bytes) | median) as $rm |
					"sessions opened/s; p99 is the handshake; RSS per session ZooKeeper \($zm | f0) B, zkraft \($rm | f0) B (ratio \(ratio($zm; $rm))); unexpected expiries \($a | map(.unexpected_expiries) | total // "-") / \($b | map(.unexpected_expiries) | total // "-"), disconnects \($a | map(.unexpected_disconnects) | total // 0) / \($b | map(.unexpected_disconnects) | total // 0)"
				elif $name == "watch" then
					"\($unit)/s; lost notifications \($a | map(.lost_notifications) | total // "-") / \($b | map(.lost_notifications) | total // "-")"
				elif $name == "lock" then
					"\($unit)/s; exclusion violations \($a | map(.mutual_exclusion_violations) | total // "-") / \($b | map(.mutual_exclusion_violations) | total // "-")"
				else "\($unit)/s" end) as $note |
				($a | map(select(.workload == null)) | length) as $zfail |
				($b | map(select(.workload == null)) | length) as $rfail |
				"| \($mode) | \(lbl) | \($a | tp | f0) | \($b | tp | f0) | \(ratio($a | tp; $b | tp)) | \($a | p99 | ms) | \($b | p99 | ms) | \(ratio($a | p99; $b | p99)) | \($note)" +
				(if ($a | errs) != "" then "; ZooKeeper errors: " + ($a | errs) else "" end) +
				(if ($b | errs) != "" then "; zkraft errors: " + ($b | errs) else "" end) +
				(if $zfail > 0 then "; ZooKeeper runs failed: \($zfail)" else "" end) +
				(if $rfail > 0 then "; zkraft runs failed: \($rfail)" else "" end) + " |"
			'
		done
	done
	if [[ -n "$tree" ]]; then
		zb="$(tree_figure "$out/tree-zookeeper.txt" rss)"
		rb="$(tree_figure "$out/tree-zkraft.txt" rss)"
		zt="$(tree_figure "$out/tree-zookeeper.txt" restart)"
		rt="$(tree_figure "$out/tree-zkraft.txt" restart)"
		ratio="-"
		if [[ -n "$zb" && -n "$rb" ]]; then
			ratio="$(awk -v z="$zb" -v r="$rb" 'BEGIN { printf "%.2f", r / z }')"
		fi
		echo "| 1 | tree of $tree znodes | ${zb:--} B RSS per znode | ${rb:--} B RSS per znode | $ratio | - | - | - | restart after SIGKILL to a served read: ZooKeeper ${zt:--}, zkraft ${rt:--} |"
	fi
} >"$table"

loads="$(awk '{print $6}' "$out/loadavg.txt" | sort -n | sed -n '1p;$p' | paste -sd' ')"
echo
echo "zkraft / ZooKeeper, one server at a time on $(nproc) cores shared with the client; duration $duration, warm-up $warmup,"
echo "$load_sessions sessions for the load workloads; median of $repeat run(s) each, alternating which server goes first;"
echo "1-minute load average before the runs: min ${loads% *}, max ${loads#* } (other processes on the machine count too)"
echo "(ratio: zkraft/ZooKeeper throughput, higher is better; p99 ratio: zkraft/ZooKeeper, lower is better)"
echo
cat "$table"
echo
log "JSON results, load averages and the table: $out"
