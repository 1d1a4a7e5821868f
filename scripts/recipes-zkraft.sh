#!/usr/bin/env bash
# recipes-zkraft.sh builds zkraft, starts it on a free loopback port with a
# fresh data directory (TTL nodes on, containers and TTL nodes checked every
# second as in scripts/recipes-zk.sh), runs the Curator and kazoo recipe
# checks of scripts/recipes.sh against it, and stops it.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/zkraft-recipes.XXXXXX")"
pid=""
cleanup() {
	local status=$?
	if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	if [[ $status -ne 0 ]]; then echo "--- zkraft log"; tail -40 "$tmp/server.log" 2>/dev/null || true; fi
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port="$(free_port)"
raft="$(free_port)"
(cd "$repo_root" && go build -o "$tmp/zkraft" ./cmd/zkraft)
"$tmp/zkraft" --client-addr "127.0.0.1:$port" --raft-addr "127.0.0.1:$raft" --data-dir "$tmp/data" --max-client-cnxns 0 \
	--extended-types --container-check-interval 1s 2>"$tmp/server.log" &
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
"$repo_root/scripts/recipes.sh" "127.0.0.1:$port"
