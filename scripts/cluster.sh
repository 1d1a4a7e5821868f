#!/usr/bin/env bash
# cluster.sh starts a 3-member zkraft ensemble on this machine, each member
# a process with its own zoo.cfg, myid and data directory under
# ./zkraft-cluster (loopback addresses only):
#
#   member 1: clients 127.0.0.1:2181, peers 127.0.0.1:2888
#   member 2: clients 127.0.0.1:2182, peers 127.0.0.1:2889
#   member 3: clients 127.0.0.1:2183, peers 127.0.0.1:2890
#
# Usage: scripts/cluster.sh [start|stop|status]   (default start)
# Connect with: zkCli.sh -server 127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${ZKRAFT_CLUSTER_DIR:-$PWD/zkraft-cluster}"
cmd="${1:-start}"

stop() {
	for i in 1 2 3; do
		if [[ -f "$dir/$i/pid" ]]; then
			kill "$(cat "$dir/$i/pid")" 2>/dev/null || true
			rm -f "$dir/$i/pid"
		fi
	done
}

case "$cmd" in
stop)
	stop
	echo "stopped"
	exit 0
	;;
status)
	for i in 1 2 3; do
		port=$((2180 + i))
		printf 'member %d (127.0.0.1:%d): ' "$i" "$port"
		if exec 3<>"/dev/tcp/127.0.0.1/$port" 2>/dev/null; then
			printf 'srvr' >&3
			grep -E '^Mode' <&3 || echo "up"
			exec 3<&-
		else
			echo "down"
		fi
	done
	exit 0
	;;
start) ;;
*)
	echo "usage: $0 [start|stop|status]" >&2
	exit 2
	;;
esac

mkdir -p "$dir"
(cd "$repo_root" && go build -o "$dir/zkraft" ./cmd/zkraft)
for i in 1 2 3; do
	mkdir -p "$dir/$i/data"
	echo "$i" >"$dir/$i/data/myid"
	cat >"$dir/$i/zoo.cfg" <<CFG
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$dir/$i/data
4lw.commands.whitelist=*
server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181
server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182
server.3=127.0.0.1:2890:3890:participant;127.0.0.1:2183
CFG
	if [[ -f "$dir/$i/pid" ]] && kill -0 "$(cat "$dir/$i/pid")" 2>/dev/null; then
		echo "member $i already running (pid $(cat "$dir/$i/pid"))"
		continue
	fi
	"$dir/zkraft" --config "$dir/$i/zoo.cfg" 2>"$dir/$i/server.log" &
	echo $! >"$dir/$i/pid"
done
# Wait until the members have elected a leader and all serve.
for _ in $(seq 1 150); do
	st=$("$0" status 2>/dev/null || true)
	if grep -q 'Mode: leader' <<<"$st" && [[ $(grep -c -E 'Mode: (leader|follower)' <<<"$st") == 3 ]]; then
		break
	fi
	sleep 0.2
done
"$0" status
echo "logs: $dir/<n>/server.log; stop with: $0 stop"
