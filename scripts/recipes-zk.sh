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
# shellcheck source=lib/zookeeper.sh
source "$here/lib/zookeeper.sh"

zk_init recipes-zk
run_pid=""

cleanup() {
	local status=$?
	if [[ -n "$run_pid" ]] && kill -0 "$run_pid" 2>/dev/null; then
		kill "$run_pid" 2>/dev/null || true
		wait "$run_pid" 2>/dev/null || true
	fi
	stop_zk
	zk_cleanup_tmp
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

zk_start_free 23181 -Dzookeeper.extendedTypesEnabled=true -Dznode.container.checkIntervalMs=1000

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
