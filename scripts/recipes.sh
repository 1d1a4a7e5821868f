#!/usr/bin/env bash
# recipes.sh drives a running ZooKeeper-compatible server with real client
# libraries' recipes:
#
#   scripts/recipes/CuratorRecipes.java  Apache Curator 5 (Debian jars)
#   scripts/recipes/kazoo_recipes.py     kazoo 2.8 (Debian python3-kazoo)
#
# Usage: scripts/recipes.sh HOST:PORT
#
# The Java program is compiled into a fresh temporary directory (nothing is
# cached in the repository), then both programs run against HOST:PORT at the
# same time (they use distinct random base paths) and their output is printed
# one after the other. Every line of interest is "ok: <check>" or
# "FAIL: <check>: <reason>". Exits 0 if every check passed, 1 otherwise, 2 on a
# setup error. Each program is killed after RECIPES_TIMEOUT seconds (default
# 300), though their own per-check watchdogs should end them well before.
#
# The TTL and container checks expect extended types to be enabled and the
# container/TTL reaper to run about once a second (ZooKeeper:
# -Dzookeeper.extendedTypesEnabled=true -Dznode.container.checkIntervalMs=1000);
# scripts/recipes-zk.sh starts such a ZooKeeper and runs this script against it.
# For zkraft that is --extended-types --container-check-interval 1s (with the
# default interval of 1 minute the three reaping checks fail after 15 s).
#
# Needs: Java 17 (javac), the Debian packages libcurator-*-java (curator-
# client/framework/recipes jars), zookeeper, python3-kazoo.
#
# Environment:
#   JAVA, JAVAC          java and javac binaries (default: on PATH)
#   RECIPES_TIMEOUT      seconds before a program is killed (default 300)
#   RECIPES_LOG_LEVEL    slf4j-simple level for the Java clients (default error; warn adds
#                        the clients' noisy connection-close warnings)
set -euo pipefail

if [[ $# -ne 1 ]]; then
	echo "usage: $0 HOST:PORT" >&2
	exit 2
fi
addr="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf 'recipes: %s\n' "$*" >&2; }

java_bin="${JAVA:-$(command -v java || true)}"
javac_bin="${JAVAC:-$(command -v javac || true)}"
if [[ -z "$java_bin" || -z "$javac_bin" ]]; then
	log "java/javac not found"
	exit 2
fi
if [[ ! -x /usr/bin/python3 ]] || ! /usr/bin/python3 -c 'import kazoo' 2>/dev/null; then
	log "/usr/bin/python3 cannot import kazoo (install python3-kazoo)"
	exit 2
fi

# The Curator jars name their dependencies (guava, slf4j-api, zookeeper,
# zookeeper-jute, jackson) in their manifests' Class-Path, and zookeeper.jar
# names its own (netty, commons, ...); we list the direct ones anyway so that
# a missing jar is reported here rather than as a NoClassDefFoundError.
J=/usr/share/java
cp=""
for jar in curator-recipes curator-framework curator-client zookeeper zookeeper-jute guava slf4j-api; do
	if [[ ! -f "$J/$jar.jar" ]]; then
		log "missing $J/$jar.jar (install zookeeper and libcurator-*-java)"
		exit 2
	fi
	cp="$cp${cp:+:}$J/$jar.jar"
done
# A logger binding so that client warnings go to stderr; NOP if there is none.
for jar in slf4j-simple slf4j-nop; do
	if [[ -f "$J/$jar.jar" ]]; then
		cp="$cp:$J/$jar.jar"
		break
	fi
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/zkraft-recipes.XXXXXX")"
pids=()
cleanup() {
	local status=$?
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$(date +%s.%N)
mkdir -p "$tmp/classes"
if ! "$javac_bin" -nowarn -d "$tmp/classes" -cp "$cp" "$here/recipes/CuratorRecipes.java" 2>"$tmp/javac.log"; then
	log "javac failed:"
	cat "$tmp/javac.log" >&2
	exit 2
fi

limit="${RECIPES_TIMEOUT:-300}"
timeout -k 5 "$limit" "$java_bin" -Xmx256m \
	-Dorg.slf4j.simpleLogger.defaultLogLevel="${RECIPES_LOG_LEVEL:-error}" \
	-Dorg.slf4j.simpleLogger.logFile=System.err \
	-cp "$tmp/classes:$cp" CuratorRecipes "$addr" >"$tmp/curator.out" 2>"$tmp/curator.err" &
pids+=($!)
timeout -k 5 "$limit" /usr/bin/python3 "$here/recipes/kazoo_recipes.py" "$addr" \
	>"$tmp/kazoo.out" 2>"$tmp/kazoo.err" &
pids+=($!)

curator_status=0
kazoo_status=0
wait "${pids[0]}" || curator_status=$?
wait "${pids[1]}" || kazoo_status=$?
pids=()

# report NAME STATUS: prints a program's output; its stderr (client logs)
# only if it failed, trimmed.
report() {
	local name=$1 status=$2
	echo "== $name"
	cat "$tmp/$name.out"
	if [[ $status -eq 124 || $status -eq 137 ]]; then
		echo "FAIL: $name: killed after ${limit}s"
	fi
	if [[ $status -ne 0 && -s "$tmp/$name.err" ]]; then
		echo "-- $name stderr (last 40 lines)"
		tail -n 40 "$tmp/$name.err"
	fi
}
report curator "$curator_status"
report kazoo "$kazoo_status"

elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
if [[ $curator_status -eq 0 && $kazoo_status -eq 0 ]]; then
	echo "recipes: all checks passed against $addr (${elapsed}s)"
	exit 0
fi
echo "recipes: FAILED against $addr (curator exit $curator_status, kazoo exit $kazoo_status; ${elapsed}s)"
exit 1
