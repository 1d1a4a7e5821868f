#!/usr/bin/env bash
# cells-bars.sh takes issue 14's two figures for cells (docs/cells.md,
# "Several cells under load") with `zkraft bench -cell`, on a fleet of three
# `zkraft serve` members it starts on this machine (loopback addresses
# 127.X.0.1-3 of a network of its own) and stops at the end:
#
#   scaling    four cells c1..c4 on the same 3 members against one cell (c1)
#              at the same per-cell load (-inflight per cell): the aggregate
#              write throughput of four over one's (the bar: >= 1.5x);
#   isolation  cell c2 at -inflight 16 alone, and beside c1 driven with 64
#              in flight past its max_request_rate (200/s per member): c2's
#              p99 beside c1 over alone (the bar: a rise of at most 20 %).
#
# Each comparison runs ROUNDS alternating pairs (A then B, B then A, ...)
# and prints every run, the load average before it, and the medians. The
# figures are printed, never asserted: on a shared machine they measure the
# machine as much as zkraft; repeat them on a quiet one.
#
# Usage: scripts/cells-bars.sh            (ROUNDS=3 DURATION=8s WARMUP=2s)
# Bounded: 4 x ROUNDS runs of WARMUP+DURATION each, plus start-up (about 3
# minutes with the defaults). Needs jq. Work files under $CELLS_BARS_DIR
# (default: a new /tmp/cells-bars.XXXXXX, removed at the end unless KEEP=1).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds="${ROUNDS:-3}"
duration="${DURATION:-8s}"
warmup="${WARMUP:-2s}"
# c1, driven past its limit, runs longer than c2's warm-up and window.
limited_duration="${LIMITED_DURATION:-12s}"
command -v jq >/dev/null || { echo "cells-bars.sh needs jq" >&2; exit 2; }
dir="${CELLS_BARS_DIR:-$(mktemp -d /tmp/cells-bars.XXXXXX)}"
mkdir -p "$dir"
net=$((20 + $$ % 200))
base=$((24000 + ($$ % 50) * 20))
super_digest='super:lK75jTNcA+U9vtVEw5vB51mj/w4=' # super:secret
export ZKRAFT_SUPER=super:secret

pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	if [[ "${KEEP:-0}" != 1 ]]; then
		rm -rf "$dir"
	else
		echo "work files kept in $dir"
	fi
}
trap cleanup EXIT

(cd "$repo_root" && go build -o "$dir/zkraft" ./cmd/zkraft)
zk="$dir/zkraft"

ip() { echo "127.$net.0.$1"; }
lines=""
for i in 1 2 3; do
	lines+="server.$i=$(ip "$i"):$((base + i)):$((base + 3 + i));$(ip "$i"):$((base + 6 + i))"$'\n'
done
for i in 1 2 3; do
	mkdir -p "$dir/m$i/data"
	echo "$i" >"$dir/m$i/data/myid"
	printf 'tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\n%s' "$dir/m$i/data" "$lines" >"$dir/m$i/zoo.cfg"
	"$zk" serve --config "$dir/m$i/zoo.cfg" --super-digest "$super_digest" \
		--admin-addr "$(ip "$i"):$((base + 10))" >"$dir/m$i/log" 2>&1 &
	pids+=($!)
done
admin="http://$(ip 1):$((base + 10))/commands"

# wait_cmd tries a command for up to 60 s.
wait_cmd() {
	for _ in $(seq 120); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.5
	done
	echo "gave up: $*" >&2
	return 1
}
addrs() { echo "$(ip 1):$1,$(ip 2):$1,$(ip 3):$1"; }
for c in 1 2 3 4; do
	port=$((base + 10 + c))
	wait_cmd "$zk" cell create "c$c" --voters 1,2,3 --port "$port" --admin "$admin"
done
for c in 1 2 3 4; do
	port=$((base + 10 + c))
	for i in 1 2 3; do
		wait_cmd bash -c "exec 3<>/dev/tcp/$(ip "$i")/$port && printf srvr >&3 && grep -qE 'Mode: (leader|follower)' <&3"
	done
done
cell() { echo "-cell c$1=$(addrs $((base + 10 + $1)))"; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }
bench() {
	"$zk" bench -q -json -workload write -duration "$duration" -warmup "$warmup" -delete-existing "$@"
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

echo "== scaling: one cell vs four cells on the same 3 members, -workload write -inflight 64 per cell, $duration (+$warmup warm-up)"
one=() four=()
for r in $(seq "$rounds"); do
	order=(one four)
	((r % 2 == 0)) && order=(four one)
	for kind in "${order[@]}"; do
		la=$(loadavg)
		if [[ $kind == one ]]; then
			# shellcheck disable=SC2046
			out=$(bench -inflight 64 $(cell 1))
			t=$(jq '.aggregate_throughput' <<<"$out")
			one+=("$t")
			printf 'round %d  one cell    load %5s  %8.0f ops/s  p99 %6.1f ms\n' "$r" "$la" "$t" \
				"$(jq '.cells[0].result.latency.p99_us / 1000' <<<"$out")"
		else
			# shellcheck disable=SC2046
			out=$(bench -inflight 64 $(cell 1) $(cell 2) $(cell 3) $(cell 4))
			t=$(jq '.aggregate_throughput' <<<"$out")
			four+=("$t")
			printf 'round %d  four cells  load %5s  %8.0f ops/s aggregate  per cell %s\n' "$r" "$la" "$t" \
				"$(jq -r '[.cells[] | "\(.cell) \(.result.throughput | floor) ops/s p99 \(.result.latency.p99_us / 1000 | floor) ms"] | join(", ")' <<<"$out")"
		fi
	done
done
m1=$(printf '%s\n' "${one[@]}" | median)
m4=$(printf '%s\n' "${four[@]}" | median)
printf 'median: one cell %.0f ops/s, four cells %.0f ops/s aggregate: %.2fx (bar: >= 1.5x)\n' "$m1" "$m4" "$(awk -v a="$m4" -v b="$m1" 'BEGIN {print a / b}')"

echo "== isolation: c2 at -inflight 16, alone and beside c1 driven with 64 in flight past max_request_rate 200"
"$zk" cell limits c1 --max-request-rate 200 --admin "$admin" >/dev/null
alone=() beside=()
for r in $(seq "$rounds"); do
	order=(alone beside)
	((r % 2 == 0)) && order=(beside alone)
	for kind in "${order[@]}"; do
		la=$(loadavg)
		if [[ $kind == alone ]]; then
			# shellcheck disable=SC2046
			out=$(bench -inflight 16 $(cell 2))
			p=$(jq '.cells[0].result.latency.p99_us / 1000' <<<"$out")
			alone+=("$p")
			printf 'round %d  c2 alone     load %5s  p99 %6.1f ms  %6.0f ops/s\n' "$r" "$la" "$p" "$(jq '.cells[0].result.throughput' <<<"$out")"
		else
			# shellcheck disable=SC2046
			"$zk" bench -q -json -workload write -duration "$limited_duration" -warmup "$warmup" -delete-existing -inflight 64 $(cell 1) >"$dir/c1.json" 2>/dev/null &
			over=$!
			sleep 1
			# shellcheck disable=SC2046
			out=$(bench -inflight 16 $(cell 2))
			wait "$over" || true
			p=$(jq '.cells[0].result.latency.p99_us / 1000' <<<"$out")
			beside+=("$p")
			printf 'round %d  c2 beside c1 load %5s  p99 %6.1f ms  %6.0f ops/s  (c1 over its limit: %s ops/s)\n' "$r" "$la" "$p" \
				"$(jq '.cells[0].result.throughput' <<<"$out")" "$(jq '.aggregate_throughput | floor' "$dir/c1.json" 2>/dev/null || echo '?')"
		fi
	done
done
"$zk" cell limits c1 --max-request-rate 0 --admin "$admin" >/dev/null
ma=$(printf '%s\n' "${alone[@]}" | median)
mb=$(printf '%s\n' "${beside[@]}" | median)
printf 'median: c2 p99 alone %.1f ms, beside c1 over its limit %.1f ms: %+.0f %% (bar: <= +20 %%)\n' "$ma" "$mb" "$(awk -v a="$mb" -v b="$ma" 'BEGIN {print (a / b - 1) * 100}')"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
