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
# shellcheck source=lib/zookeeper.sh
source "$repo_root/scripts/lib/zookeeper.sh"

zk_init zk-differential
command -v go >/dev/null 2>&1 || {
	log "go is not on PATH"
	exit 2
}
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

cleanup() {
	local status=$?
	stop_go
	stop_zk
	zk_cleanup_tmp
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

zk_start_free 22181 \
	-Dzookeeper.extendedTypesEnabled=true \
	-Dznode.container.checkIntervalMs=1000 \
	-Dzookeeper.DigestAuthenticationProvider.superDigest=super:lK75jTNcA+U9vtVEw5vB51mj/w4= \
	-Dzookeeper.enforceQuota=true

# Run the suite; its status is ours. It runs in the background so that an
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
