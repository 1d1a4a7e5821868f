#!/usr/bin/env bash
# soak.sh runs the fault test (faulttest.TestFaults) longer than CI does:
# a 3-member ensemble under a register workload and a lock recipe while
# members are SIGKILLed and restarted, SIGSTOPped and SIGCONTed, and cut off
# from the others in network namespaces, round after round; then porcupine
# checks the history, the acknowledged writes are read back from every
# member, and the lock and session checks run. Outside CI; needs root for
# the namespaces (or ZKRAFT_FAULT_NO_NETNS=1 to skip the partition step).
#
# Usage: scripts/soak.sh [duration]        default 30m, Go duration syntax (45m, 2h, 1h30m)
#
# Environment:
#   ZKRAFT_FAULT_DURATION  the duration, if not given as the argument
#   ZKRAFT_FAULT_ROUNDS    run at least this many rounds (default 1)
#   SOAK_RUNS              repeat the whole test this many times (default 1), each with a new ensemble
#   ZKRAFT_FAULT_NO_NETNS  1: run on 127.0.0.1, no partition step
#   ZKRAFT_FAULT_SEED      the workload's seed
#   ZKRAFT_FAULT_BIN       test this binary instead of building ./cmd/zkraft
#   SOAK_DIR               where each run's files go (default /tmp/zkraft-soak-<time>)
#
# Each run's directory keeps the members' configs, data and stderr.log, the
# clients' log and the test's output (test.log); on a linearizability
# failure also linearizability.html and history-<key>.txt.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
duration="${1:-${ZKRAFT_FAULT_DURATION:-30m}}"
runs="${SOAK_RUNS:-1}"
base="${SOAK_DIR:-${TMPDIR:-/tmp}/zkraft-soak-$(date +%Y%m%d-%H%M%S)}"

# seconds converts a Go-style duration (1h30m, 45m, 90s) to seconds.
seconds() {
	local d="$1" total=0 n unit
	if ! [[ "$d" =~ ^([0-9]+[hms])+$ ]]; then
		echo "soak.sh: duration $d: want e.g. 30m, 2h, 1h30m" >&2
		exit 2
	fi
	while [[ "$d" =~ ^([0-9]+)([hms])(.*)$ ]]; do
		n="${BASH_REMATCH[1]}" unit="${BASH_REMATCH[2]}" d="${BASH_REMATCH[3]}"
		case "$unit" in
		h) total=$((total + n * 3600)) ;;
		m) total=$((total + n * 60)) ;;
		s) total=$((total + n)) ;;
		esac
	done
	echo "$total"
}

secs=$(seconds "$duration")
# A round takes about 40s and the checks a minute or two more: allow the
# last round, the checks and a margin beyond the duration.
limit=$((secs + 900))

mkdir -p "$base"
cd "$repo_root"
echo "soak: $runs run(s) of $duration each; files under $base"
failed=0
for run in $(seq 1 "$runs"); do
	dir="$base/run$run"
	mkdir -p "$dir"
	echo "== run $run: $dir"
	set +e
	ZKRAFT_FAULT_DURATION="$duration" \
		ZKRAFT_FAULT_ROUNDS="${ZKRAFT_FAULT_ROUNDS:-1}" \
		ZKRAFT_FAULT_DIR="$dir" \
		go test ./faulttest -run '^TestFaults$' -count=1 -v -timeout "${limit}s" 2>&1 | tee "$dir/test.log"
	rc=${PIPESTATUS[0]}
	set -e
	if ((rc != 0)); then
		echo "== run $run FAILED (exit $rc): see $dir/test.log and the members' $dir/member*/stderr.log"
		failed=$((failed + 1))
	else
		echo "== run $run passed"
		grep -A 12 'failover (not asserted)' "$dir/test.log" | grep -E 'round [0-9]+ ' || true
	fi
done
echo "soak: $((runs - failed)) passed, $failed failed"
((failed == 0))
