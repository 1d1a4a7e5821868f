#!/usr/bin/env bash
# proxy-conformance.sh runs the client smoke test (zkCli.sh and kazoo,
# scripts/client-smoke.sh), the Curator and kazoo recipes
# (scripts/recipes.sh) and the conformance suite through a zkraft proxy in
# front of a standalone zkraft: it builds the
# binary, starts a member with the settings the suite expects (those of the
# embedded zkraft in conformance/embedded_test.go) and --proxy-port, starts
# `zkraft proxy` in front of it on free loopback ports, and points the
# clients at the proxy. Extra arguments go to go test (e.g. -run TestWatch).
#
#   scripts/proxy-conformance.sh [go test flags]
#
# PROXY_SMOKE=0 skips the smoke test and the recipes (they need the Debian
# packages zookeeper, libcurator-*-java, a JDK and python3-kazoo; .ci/run
# installs them).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/proxy-conformance.XXXXXX")"
pids=()
cleanup() {
	local status=$?
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
	if [[ $status -ne 0 ]]; then
		echo "--- member log"; tail -30 "$tmp/member.log" || true
		echo "--- proxy log"; tail -30 "$tmp/proxy.log" || true
	fi
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
	for _ in $(seq 1 150); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "nothing listens on port $1" >&2
	return 1
}
client="$(free_port)"
proxyport="$(free_port)"
front="$(free_port)"
(cd "$repo_root" && go build -o "$tmp/zkraft" ./cmd/zkraft)
"$tmp/zkraft" --client-addr "127.0.0.1:$client" --data-dir "$tmp/data" --tick-time 2s \
	--extended-types --container-check-interval 1s --enforce-quota --4lw '*' \
	--super-digest 'super:lK75jTNcA+U9vtVEw5vB51mj/w4=' --max-client-cnxns 0 --admin-enable=false \
	--proxy-port "$proxyport" 2>"$tmp/member.log" &
pids+=($!)
wait_port "$client"
"$tmp/zkraft" proxy --members "127.0.0.1:$proxyport" --client-port "$front" --4lw '*' 2>"$tmp/proxy.log" &
pids+=($!)
wait_port "$front"

if [[ "${PROXY_SMOKE:-1}" != 0 ]]; then
	# The smoke test first: it wants a root holding only /zookeeper.
	echo "== client smoke test (zkCli.sh, kazoo) through the proxy"
	"$repo_root/scripts/client-smoke.sh" "127.0.0.1:$front"
	echo "== Curator and kazoo recipes through the proxy"
	"$repo_root/scripts/recipes.sh" "127.0.0.1:$front"
fi

echo "== conformance through the proxy (127.0.0.1:$front -> member 127.0.0.1:$client)"
(cd "$repo_root" && CONFORMANCE_ADDR="127.0.0.1:$front" go test -count=1 -timeout=10m ./conformance/ "$@")
echo "proxy conformance: passed"
