#!/usr/bin/env bash
# logsync.sh: how often, and how long, a standalone zkraft syncs its files
# under a write load. It starts BIN under strace with --seccomp-bpf (only
# the sync calls stop the process, so the server runs at about its own
# speed), drives scripts/tailprobe against it, and prints for the measured
# window: the server's CPU per request (from /proc), tailprobe's figures,
# and per sync call (fdatasync, fsync, sync_file_range) the count, the
# requests per call and the latency distribution. Optionally a dd of
# DDLOAD_MB MiB writes beside it (the disk load of another suite).
#
#   scripts/logsync.sh BIN WORKDIR [extra zkraft serve flags]
#   SESSIONS=64 PER=1 DURATION=8 MULTI= DDLOAD_MB= scripts/logsync.sh ./zkraft /tmp/me/logsync
#
# Figures only; nothing is asserted. WORKDIR is emptied first. Everything
# it starts is stopped before it returns. Needs strace, nc, awk.
# docs/performance.md, "Raft log store".
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
BIN=$(realpath "$1"); W=$2; shift 2
SESSIONS=${SESSIONS:-64}; PER=${PER:-1}; DURATION=${DURATION:-8}
cd "$(dirname "$0")/.."
rm -rf "$W"; mkdir -p "$W"
go build -o "$W/tailprobe" ./scripts/tailprobe
PORT=$("$W/tailprobe" -free-ports 1)
strace -f --seccomp-bpf -qq -e trace=fsync,fdatasync,sync_file_range -T -ttt -o "$W/strace.out" \
	"$BIN" serve --data-dir "$W/data" --client-addr "127.0.0.1:$PORT" --log-level warn --max-client-cnxns 0 "$@" >"$W/server.log" 2>&1 &
SPID=$!
ZPID=""
cleanup() {
	# strace ends with its child; before the child is known, stop strace.
	if [ -n "$ZPID" ]; then kill "$ZPID" 2>/dev/null || true; else kill "$SPID" 2>/dev/null || true; fi
	wait "$SPID" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 150); do
	out=$(echo srvr | timeout 1 nc -q1 127.0.0.1 "$PORT" 2>/dev/null || true)
	[[ $out == *Mode* ]] && break
	sleep 0.2
done
ZPID=$(pgrep -P "$SPID" | head -1)
M=""; [ -n "${MULTI:-}" ] && M=-multi4
L0=$(cut -d' ' -f1 /proc/loadavg)
"$W/tailprobe" -addr "127.0.0.1:$PORT" -sessions "$SESSIONS" -per "$PER" -duration "${DURATION}s" -warmup 3s $M >"$W/probe.out" 2>&1 &
PP=$!
DDP=""
if [ -n "${DDLOAD_MB:-}" ]; then
	(timeout $((DURATION + 30)) dd if=/dev/zero of="$W/ddload" bs=1M count="$DDLOAD_MB" conv=fdatasync 2>"$W/dd.out" || true; rm -f "$W/ddload") &
	DDP=$!
fi
sleep 3
WS=$(date +%s.%N); T0=$(awk '{print $14+$15}' "/proc/$ZPID/stat")
sleep "$DURATION"
WE=$(date +%s.%N); T1=$(awk '{print $14+$15}' "/proc/$ZPID/stat")
wait "$PP"
[ -n "$DDP" ] && wait "$DDP"
OPS=$(awk '/^ops/{print $2}' "$W/probe.out")
echo "load1 $L0..$(cut -d' ' -f1 /proc/loadavg)  window ${DURATION}s  server CPU $((T1 - T0)) ticks  requests $OPS  server CPU per request $(awk -v t=$((T1 - T0)) -v o="$OPS" 'BEGIN{printf "%.1f", t*10000/o}') us"
grep -v '^slow' "$W/probe.out" | tail -3
# strace lines: TID EPOCH call(fd...) = 0 <seconds>, or TID EPOCH <... call resumed>) = 0 <seconds>
# for a call another thread's line interrupted
awk -v s="$WS" -v e="$WE" '$2+0 >= s && $2+0 <= e && / = 0 </ { c = ($3 == "<...") ? $4 : $3; sub(/\(.*/, "", c); d = $NF; gsub(/[<>]/, "", d); print c, d }' "$W/strace.out" |
	sort -k1,1 -k2,2g | awk -v ops="$OPS" -v win="$DURATION" '
	function flush() { if (n == 0) return
		printf "%-16s n %6d  %5.0f/s  requests per call %6.1f  p50 %.2f  p99 %.2f  p99.9 %.2f  max %.1f ms  in the call %.2f s\n",
			call, n, n / win, ops / n, v[int(n * .5) + 1] * 1000, v[int(n * .99) + 1] * 1000, v[int(n * .999) + 1] * 1000, v[n] * 1000, sum }
	$1 != call { flush(); call = $1; n = 0; sum = 0 }
	{ v[++n] = $2; sum += $2 }
	END { flush() }'
awk '/^slow/{print $4, $2}' "$W/probe.out" | sort -rn | head -3 | sed 's/^/worst reply /'
