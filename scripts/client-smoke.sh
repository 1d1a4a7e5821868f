#!/usr/bin/env bash
# client-smoke.sh builds zkraft, starts it on a free loopback port with a
# fresh data directory, and drives it with real ZooKeeper clients: zkCli.sh
# (the Java client) and kazoo. It needs the Debian packages zookeeper and
# python3-kazoo (.ci/run installs them).
#
#   scripts/client-smoke.sh             start a zkraft and drive it
#   scripts/client-smoke.sh HOST:PORT   drive a running server instead (a
#                                       proxy: scripts/proxy-conformance.sh);
#                                       / must hold only /zookeeper
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/zkraft-smoke.XXXXXX")"
pid=""
cleanup() {
	local status=$?
	[[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	if [[ $status -ne 0 ]]; then echo "--- server log"; tail -50 "$tmp/server.log" || true; fi
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT

if [[ $# -ge 1 ]]; then
	addr="$1"
else
	free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
	port="$(free_port)"
	raft="$(free_port)"
	(cd "$repo_root" && go build -o "$tmp/zkraft" ./cmd/zkraft)
	"$tmp/zkraft" --client-addr "127.0.0.1:$port" --raft-addr "127.0.0.1:$raft" --data-dir "$tmp/data" --max-client-cnxns 0 2>"$tmp/server.log" &
	pid=$!
	# Until it listens (up to 60 s on a slow machine; it used to go on after
	# 10 s whether or not), or fail if it exited.
	listening=""
	for _ in $(seq 1 600); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && listening=1 && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if [[ -z "$listening" ]]; then
		echo "zkraft does not listen on 127.0.0.1:$port" >&2
		exit 1
	fi
	addr="127.0.0.1:$port"
fi

echo "== zkCli.sh"
out="$(/usr/share/zookeeper/bin/zkCli.sh -server "$addr" 2>&1 <<'CLI'
create /smoke hello
create /smoke/a 1
create -e /smoke/eph x
create -s /smoke/seq- y
ls /smoke
get /smoke
set /smoke bye
stat /smoke
get /smoke
delete /smoke/a
deleteall /smoke
ls /
quit
CLI
)"
expect() {
	if grep -qF -- "$1" <<<"$out"; then echo "ok: $1"; else echo "FAIL: zkCli output lacks: $1"; echo "$out"; exit 1; fi
}
expect "Created /smoke/seq-0000000002"
expect "[a, eph, seq-0000000002]"
expect "hello"
expect "dataVersion = 1"
expect "numChildren = 3"
expect "bye"
expect "[zookeeper]"

echo "== kazoo"
/usr/bin/python3 "$repo_root/scripts/kazoo_smoke.py" "$addr"
echo "client smoke: passed"
