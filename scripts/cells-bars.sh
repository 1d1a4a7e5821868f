#!/usr/bin/env bash
# cells-bars.sh takes issue 14's two figures for cells (docs/cells.md,
# "Several cells under load") with `zkraft bench -cell`, on a fleet of three
# `zkraft serve` members it starts on this machine (loopback addresses
# 127.X.0.1-3 of a network of its own) and stops at the end:
#
#   scaling    four cells c1..c4 on the same 3 members against one cell (c1)
#              at the same per-cell load (-inflight per cell): the aggregate
#              write throughput of four over one's (the bar: >= 1.5x);
#   isolation  cell c2 at -inflight 16 alone, beside c1 driven with 64 in
#              flight past its max_request_rate (LIMIT=200/s per member, so
#              600/s for the cell), and beside c1 driven at about its limit
#              (AT_INFLIGHT=4 in flight: no request waits for long): c2's
#              p99 beside c1 over alone (the bar: a rise of at most 20 %).
#              c2 is measured only once c1 has created its znodes and
#              warmed up (c1's set-up runs at its rate too).
#
# Each comparison runs ROUNDS alternating rounds (A, B[, C], then reversed)
# and prints every run, the load average before it, the medians, c1's
# achieved rate and, over each c2 run, each member's CPU (% of one core)
# and fsync plus fdatasync calls a second (with perf, when it may trace the
# members: tan syncs its logs with fsync, the Pebble stores with fdatasync),
# and each load generator's CPU. The figures are printed, never asserted:
# on a shared machine they measure the machine as much as zkraft; repeat
# them on a quiet one.
#
# Usage: scripts/cells-bars.sh   (ROUNDS=3 DURATION=8s WARMUP=2s LIMIT=200
#                                 AT_INFLIGHT=4; ONLY=isolation skips scaling,
#                                 ONLY=scaling skips isolation;
#                                 SCALE_INFLIGHT=64 the per-cell load of
#                                 the scaling runs;
#                                 ZKRAFT_BIN=path measures that binary;
#                                 ZKRAFT_BIN_B=path compares a second one in
#                                 the isolation rounds, abba; KINDS="alone
#                                 past at" the isolation runs of a round, in
#                                 order, and "c1" adds c1 alone past its
#                                 limit; CELLS_BARS_DIR=/dev/shm/NAME puts
#                                 the members' data on tmpfs)
# Bounded: (2 + 3) x ROUNDS runs of WARMUP+DURATION each, plus start-up and
# c1's set-ups (about 5 minutes with the defaults). Needs jq. Work files
# under $CELLS_BARS_DIR (default: a new /tmp/cells-bars.XXXXXX, removed at
# the end unless KEEP=1).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds="${ROUNDS:-3}"
duration="${DURATION:-8s}"
warmup="${WARMUP:-2s}"
limit="${LIMIT:-200}"
at_inflight="${AT_INFLIGHT:-4}"
scale_inflight="${SCALE_INFLIGHT:-64}"
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

# ZKRAFT_BIN: a zkraft binary to measure instead of building this tree's
# (to compare two commits with the same script). ZKRAFT_BIN_B: a second
# binary for the isolation rounds: each round runs its kinds under both
# (A then B, B then A in the next round: abba), restarting the members on
# the same data directories between them. The load generator and the
# operator commands are always ZKRAFT_BIN's, so only the members change.
zk="${ZKRAFT_BIN:-$dir/zkraft}"
if [[ -z "${ZKRAFT_BIN:-}" ]]; then
	(cd "$repo_root" && go build -o "$zk" ./cmd/zkraft)
fi
zk_b="${ZKRAFT_BIN_B:-}"

ip() { echo "127.$net.0.$1"; }
lines=""
for i in 1 2 3; do
	lines+="server.$i=$(ip "$i"):$((base + i)):$((base + 3 + i));$(ip "$i"):$((base + 6 + i))"$'\n'
done
for i in 1 2 3; do
	mkdir -p "$dir/m$i/data"
	echo "$i" >"$dir/m$i/data/myid"
	printf 'tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\n%s' "$dir/m$i/data" "$lines" >"$dir/m$i/zoo.cfg"
done
# start_members BIN: the three members, from BIN, on their data dirs.
running=""
start_members() {
	local i
	pids=()
	for i in 1 2 3; do
		"$1" serve --config "$dir/m$i/zoo.cfg" --super-digest "$super_digest" \
			--admin-addr "$(ip "$i"):$((base + 10))" >>"$dir/m$i/log" 2>&1 &
		pids+=($!)
	done
	running=$1
}
stop_members() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
start_members "$zk"
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
# cells_ready: every cell has a leader or follower on every member.
cells_ready() {
	local c i port
	for c in 1 2 3 4; do
		port=$((base + 10 + c))
		for i in 1 2 3; do
			wait_cmd bash -c "exec 3<>/dev/tcp/$(ip "$i")/$port && printf srvr >&3 && grep -qE 'Mode: (leader|follower)' <&3"
		done
	done
}
cells_ready
# use_members BIN: the members run BIN (restarted on the same data if not).
use_members() {
	[[ $running == "$1" ]] && return 0
	stop_members
	start_members "$1"
	cells_ready
	# A leader of every cell and the limiter's settings from the map first.
	wait_cmd "$zk" cell show c1 --admin "$admin"
	sleep 2
}
cell() { echo "-cell c$1=$(addrs $((base + 10 + $1)))"; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }
bench() {
	"$zk" bench -q -json -workload write -duration "$duration" -warmup "$warmup" -delete-existing "$@"
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
secs() { awk -v d="$1" 'BEGIN {if (d ~ /ms$/) print d / 1000; else print d + 0}'; }

# measure CMD...: runs CMD while counting each member's CPU ticks and, with
# perf, its fsync and fdatasync calls; sets cpu_line. Its stdout is CMD's.
have_perf=0
if command -v perf >/dev/null && perf stat -x, -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync -p "${pids[0]}" sleep 0.1 >/dev/null 2>&1; then
	have_perf=1
fi
ticks() { for p in "${pids[@]}"; do awk '{print $14 + $15}' "/proc/$p/stat"; done; }
# busy: the machine's busy and total ticks (every core) from /proc/stat.
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
measure() {
	local t0 t1 s0 s1 b0 b1 a0 a1 i perfs=()
	mapfile -t t0 < <(ticks)
	read -r b0 a0 < <(busy)
	s0=$(date +%s.%N)
	if ((have_perf)); then
		for i in 0 1 2; do
			perf stat -x, -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync -p "${pids[i]}" -o "$dir/perf$i" >/dev/null 2>&1 &
			perfs+=($!)
		done
	fi
	# A run that fails (a connection lost on a loaded machine) is reported
	# and left out of the medians; the others go on.
	run_ok=1
	"$@" || run_ok=0
	mapfile -t t1 < <(ticks)
	read -r b1 a1 < <(busy)
	s1=$(date +%s.%N)
	for p in "${perfs[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${perfs[@]}"; do wait "$p" 2>/dev/null || true; done
	local el
	el=$(awk -v a="$s0" -v b="$s1" 'BEGIN {print b - a}')
	cpu_line="members CPU"
	for i in 0 1 2; do
		cpu_line+=$(awk -v d=$((t1[i] - t0[i])) -v el="$el" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf " %.0f%%", d / hz / el * 100}')
	done
	if ((have_perf)); then
		cpu_line+=", fsync+fdatasync/s"
		for i in 0 1 2; do
			cpu_line+=$(awk -F, -v el="$el" '/sys_enter_f(data)?sync/ {n += $1} END {printf " %.0f", n / el}' "$dir/perf$i")
		done
	fi
	cpu_line+=$(awk -v b=$((b1 - b0)) -v a=$((a1 - a0)) -v n="$(nproc)" 'BEGIN {if (a > 0) printf ", machine busy %.0f%% of %d cores", b / a * 100, n}')
}
# client_cpu FILE: a load generator's CPU (% of one core) from /usr/bin/time's "user sys elapsed".
client_cpu() { awk '{if ($3 > 0) printf "%.0f%%", ($1 + $2) / $3 * 100; else print "?"}' "$1"; }
timed() {
	local out=$1
	shift
	if [[ -x /usr/bin/time ]]; then
		/usr/bin/time -f "%U %S %e" -o "$out" "$@"
	else
		echo "0 0 0" >"$out"
		"$@"
	fi
}

if [[ "${ONLY:-}" != isolation ]]; then
echo "== scaling: one cell vs four cells on the same 3 members, -workload write -inflight $scale_inflight per cell, $duration (+$warmup warm-up)"
one=() four=()
for r in $(seq "$rounds"); do
	order=(one four)
	((r % 2 == 0)) && order=(four one)
	for kind in "${order[@]}"; do
		la=$(loadavg)
		if [[ $kind == one ]]; then
			# shellcheck disable=SC2046
			measure timed "$dir/lg.time" "$zk" bench -q -json -workload write -duration "$duration" -warmup "$warmup" -delete-existing -inflight "$scale_inflight" $(cell 1) >"$dir/run.json"
			if ((!run_ok)); then
				printf 'round %d  %-10s  load %5s  failed\n' "$r" "$kind" "$la"
				continue
			fi
			out=$(cat "$dir/run.json")
			t=$(jq '.aggregate_throughput' <<<"$out")
			one+=("$t")
			printf 'round %d  one cell    load %5s  %8.0f ops/s  p99 %6.1f ms  (%s, load generator CPU %s)\n' "$r" "$la" "$t" \
				"$(jq '.cells[0].result.latency.p99_us / 1000' <<<"$out")" "$cpu_line" "$(client_cpu "$dir/lg.time")"
		else
			# shellcheck disable=SC2046
			measure timed "$dir/lg.time" "$zk" bench -q -json -workload write -duration "$duration" -warmup "$warmup" -delete-existing -inflight "$scale_inflight" $(cell 1) $(cell 2) $(cell 3) $(cell 4) >"$dir/run.json"
			if ((!run_ok)); then
				printf 'round %d  %-10s  load %5s  failed\n' "$r" "$kind" "$la"
				continue
			fi
			out=$(cat "$dir/run.json")
			t=$(jq '.aggregate_throughput' <<<"$out")
			four+=("$t")
			printf 'round %d  four cells  load %5s  %8.0f ops/s aggregate  per cell %s  (%s)\n' "$r" "$la" "$t" \
				"$(jq -r '[.cells[] | "\(.cell) \(.result.throughput | floor) ops/s p99 \(.result.latency.p99_us / 1000 | floor) ms"] | join(", ")' <<<"$out")" "$cpu_line, load generator CPU $(client_cpu "$dir/lg.time")"
		fi
	done
done
m1=$(printf '%s\n' "${one[@]}" | median)
m4=$(printf '%s\n' "${four[@]}" | median)
printf 'median: one cell %.0f ops/s, four cells %.0f ops/s aggregate: %.2fx (bar: >= 1.5x)\n' "$m1" "$m4" "$(awk -v a="$m4" -v b="$m1" 'BEGIN {print a / b}')"
fi

if [[ "${ONLY:-}" == scaling ]]; then
	echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
	exit 0
fi
echo "== isolation: c2 at -inflight 16, alone, beside c1 driven with 64 in flight past max_request_rate $limit (per member), and beside c1 at about its limit (-inflight $at_inflight)"
"$zk" cell limits c1 --max-request-rate "$limit" --admin "$admin" >/dev/null
c2_window=$(awk -v a="$(secs "$duration")" -v b="$(secs "$warmup")" 'BEGIN {print a + b}')
# beside INFLIGHT: c1 at INFLIGHT, c2 measured once c1 runs its load.
beside() {
	# shellcheck disable=SC2046
	timed "$dir/c1.time" "$zk" bench -json -workload write -duration "$(awk -v w="$c2_window" 'BEGIN {print w + 4}')s" -warmup "$warmup" \
		-delete-existing -prefix /zkraft-bench-c1 -inflight "$1" $(cell 1) >"$dir/c1.json" 2>"$dir/c1.log" &
	local c1pid=$! i
	# c1's set-up (its znodes, created at its rate) and warm-up first.
	for i in $(seq 1200); do
		grep -qs 'in flight' "$dir/c1.log" && break
		sleep 0.1
	done
	sleep "$(secs "$warmup")"
	# shellcheck disable=SC2046
	measure timed "$dir/c2.time" "$zk" bench -q -json -workload write -duration "$duration" -warmup "$warmup" -delete-existing -inflight 16 $(cell 2) >"$dir/run.json" 2>"$dir/c2.err"
	wait "$c1pid" || true
	out=$(cat "$dir/run.json")
	c1_line=$(jq -r '"c1 \(.aggregate_throughput | floor) ops/s p99 \(.cells[0].result.latency.p99_us / 1000 | floor) ms"' "$dir/c1.json" 2>/dev/null || echo 'c1 ?')
	c1_line+=", c1's client CPU $(client_cpu "$dir/c1.time")"
}
# c1alone: c1 alone past its limit (its rate, the members' CPU and fsyncs).
c1alone() {
	# shellcheck disable=SC2046
	measure timed "$dir/c1.time" "$zk" bench -q -json -workload write -duration "$duration" -warmup "$warmup" \
		-delete-existing -prefix /zkraft-bench-c1 -inflight 64 $(cell 1) >"$dir/c1.json" 2>"$dir/c1.log"
	out=""
	c1_line=$(jq -r '"c1 alone \(.aggregate_throughput | floor) ops/s p99 \(.cells[0].result.latency.p99_us / 1000 | floor) ms"' "$dir/c1.json" 2>/dev/null || echo 'c1 ?')
	c1_line+=", c1's client CPU $(client_cpu "$dir/c1.time")"
}
kinds=(${KINDS:-alone past at})
bins=("$zk")
[[ -n $zk_b ]] && bins+=("$zk_b")
label() { if [[ $1 == "$zk" ]]; then echo A; else echo B; fi; }
declare -A p99s
for r in $(seq "$rounds"); do
	border=("${bins[@]}")
	((r % 2 == 0)) && border=($(printf '%s\n' "${bins[@]}" | tac))
	for bin in "${border[@]}"; do
		use_members "$bin"
		order=("${kinds[@]}")
		((r % 2 == 0)) && order=($(printf '%s\n' "${kinds[@]}" | tac))
		tag=""
		[[ -n $zk_b ]] && tag="$(label "$bin") "
		for kind in "${order[@]}"; do
			la=$(loadavg)
			c1_line="c1 idle"
			case $kind in
			alone)
				# shellcheck disable=SC2046
				measure timed "$dir/c2.time" "$zk" bench -q -json -workload write -duration "$duration" -warmup "$warmup" -delete-existing -inflight 16 $(cell 2) >"$dir/run.json" 2>"$dir/c2.err"
				out=$(cat "$dir/run.json")
				;;
			past) beside 64 ;;
			at) beside "$at_inflight" ;;
			c1) c1alone ;;
			esac
			if ((!run_ok)); then
				printf 'round %d  %sc2 %-14s load %5s  failed: %s\n' "$r" "$tag" "$kind" "$la" "$(tail -1 "$dir/c2.err" 2>/dev/null)"
				continue
			fi
			if [[ $kind == c1 ]]; then
				printf 'round %d  %s%-17s load %5s  (%s; %s)\n' "$r" "$tag" "c1 alone" "$la" "$c1_line" "$cpu_line"
				continue
			fi
			p=$(jq '.cells[0].result.latency.p99_us / 1000' <<<"$out")
			p99s["$tag$kind"]+="$(printf '%.1f' "$p") "
			printf 'round %d  %sc2 %-14s load %5s  p99 %6.1f ms  %6.0f ops/s  (%s; %s, c2'"'"'s client CPU %s)\n' "$r" "$tag" "$kind" "$la" "$p" \
				"$(jq '.cells[0].result.throughput' <<<"$out")" "$c1_line" "$cpu_line" "$(client_cpu "$dir/c2.time")"
		done
	done
done
"$zk" cell limits c1 --max-request-rate 0 --admin "$admin" >/dev/null
rise() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%+.0f", (a / b - 1) * 100}'; }
for bin in "${bins[@]}"; do
	tag=""
	[[ -n $zk_b ]] && tag="$(label "$bin") "
	[[ -n ${p99s["${tag}alone"]:-} ]] || continue
	ma=$(tr ' ' '\n' <<<"${p99s["${tag}alone"]}" | grep . | median | xargs printf '%.1f')
	line="median ${tag}(${bin}): c2 p99 alone $ma ms [${p99s["${tag}alone"]% }]"
	for kind in past at; do
		[[ -n ${p99s["$tag$kind"]:-} ]] || continue
		m=$(tr ' ' '\n' <<<"${p99s["$tag$kind"]}" | grep . | median | xargs printf '%.1f')
		line+=", beside c1 $kind its limit $m ms ($(rise "$m" "$ma") %) [${p99s["$tag$kind"]% }]"
	done
	echo "$line (bar: <= +20 %)"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
