# shellcheck shell=bash
# scripts/lib/zookeeper.sh: start and stop a standalone Apache ZooKeeper 3.8
# (the Debian package) on a free loopback port, for the scripts that check
# zkraft against the real thing. Source it, then:
#
#   zk_init NAME            checks (or, as root, installs) ZooKeeper and java,
#                           makes $tmp with a log4j config; log() prefixes NAME
#   zk_start_free BASE OPTS start on the first free port from BASE (retrying if
#                           another process grabs it) with extra java OPTS;
#                           sets $port and $zk_pid; exits 2 if it cannot
#   stop_zk                 stops it
#   zk_cleanup_tmp          removes $tmp (kept when ZK_KEEP_TMP is set)
#
# The server logs to $tmp/zookeeper.log. Environment: ZK_PORT (first port to
# try), ZK_KEEP_TMP, JAVA.

zk_name="zookeeper"
log() { printf '%s: %s\n' "$zk_name" "$*" >&2; }

zk_init() {
	zk_name=$1
	zk_jar=/usr/share/java/zookeeper.jar
	if [[ ! -f "$zk_jar" ]] || ! command -v "${JAVA:-java}" >/dev/null 2>&1; then
		log "installing ZooKeeper (apt-get install zookeeper zookeeper-bin)"
		if [[ "$(id -u)" -ne 0 ]]; then
			log "ZooKeeper is not installed and we are not root; install the Debian package 'zookeeper' first"
			exit 2
		fi
		export DEBIAN_FRONTEND=noninteractive
		apt-get update
		apt-get install -y zookeeper zookeeper-bin
	fi
	java_bin="${JAVA:-$(command -v java || true)}"
	if [[ ! -f "$zk_jar" || -z "$java_bin" ]]; then
		log "ZooKeeper or java still missing after installation"
		exit 2
	fi
	tmp="$(mktemp -d "${TMPDIR:-/tmp}/$zk_name.XXXXXX")"
	zk_pid=""
	mkdir -p "$tmp/conf"
	cat >"$tmp/conf/log4j.properties" <<LOG4J
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=$tmp/zookeeper.log
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
LOG4J
	# zookeeper.jar's manifest Class-Path names its runtime dependencies
	# under /usr/share/java. slf4j-log4j12 + log4j 1.2 give it a logger that
	# writes to our file; without them slf4j falls back to NOP.
	zk_cp="$tmp/conf:$zk_jar"
	for jar in slf4j-log4j12.jar log4j-1.2.jar; do
		if [[ -f "/usr/share/java/$jar" ]]; then
			zk_cp="$zk_cp:/usr/share/java/$jar"
		fi
	done
}

stop_zk() {
	if [[ -n "${zk_pid:-}" ]] && kill -0 "$zk_pid" 2>/dev/null; then
		kill "$zk_pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$zk_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$zk_pid" 2>/dev/null || true
		wait "$zk_pid" 2>/dev/null || true
	fi
	zk_pid=""
}

zk_cleanup_tmp() {
	[[ -n "${tmp:-}" ]] || return 0
	if [[ -n "${ZK_KEEP_TMP:-}" ]]; then
		log "kept $tmp (server log: $tmp/zookeeper.log)"
	else
		rm -rf "$tmp"
	fi
}

# port_in_use PORT: true if something accepts connections on 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# next_free_port PORT: prints the first port >= PORT that nobody listens on.
next_free_port() {
	local p=$1
	for _ in $(seq 1 200); do
		if ! port_in_use "$p"; then
			echo "$p"
			return 0
		fi
		p=$((p + 1))
	done
	return 1
}

# four_letter WORD PORT: prints the server's answer to a four-letter word.
four_letter() {
	local line out=""
	exec 3<>"/dev/tcp/127.0.0.1/$2" || return 1
	printf '%s' "$1" >&3
	while IFS= read -r -t 2 line <&3; do
		out+="$line"$'\n'
	done
	out+="$line"
	exec 3<&- 3>&-
	printf '%s' "$out"
}

# is_our_zk PORT: true if the server on PORT is up and is the one we started
# (its "conf" names our dataDir; another run may have won the port race).
is_our_zk() {
	[[ "$(four_letter conf "$1" 2>/dev/null)" == *"dataDir=$tmp/data/"* ]]
}

# start_zk PORT [java options...]: starts a standalone ZooKeeper on
# 127.0.0.1:PORT with an empty dataDir and waits (at most 30 s) until it
# answers. Returns 1 if the server died during startup (e.g. another process
# took the port), 2 if it did not answer in time.
start_zk() {
	local p=$1
	shift
	rm -rf "$tmp/data"
	mkdir -p "$tmp/data"
	cat >"$tmp/conf/zoo.cfg" <<CFG
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$tmp/data
clientPort=$p
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
CFG
	log "starting ZooKeeper on 127.0.0.1:$p (dir $tmp)"
	"$java_bin" -Xmx512m \
		-Dlog4j.configuration="file:$tmp/conf/log4j.properties" \
		-Dzookeeper.log.dir="$tmp" \
		-Dzookeeper.admin.enableServer=false \
		"$@" \
		-cp "$zk_cp" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$tmp/conf/zoo.cfg" \
		>"$tmp/stdout.log" 2>&1 </dev/null &
	zk_pid=$!
	for _ in $(seq 1 300); do # 300 * 0.1 s = 30 s
		if ! kill -0 "$zk_pid" 2>/dev/null; then
			wait "$zk_pid" 2>/dev/null || true
			zk_pid=""
			return 1
		fi
		if is_our_zk "$p"; then
			return 0
		fi
		sleep 0.1
	done
	return 2
}

# zk_start_free BASE [java options...]: starts ZooKeeper on the first free
# port from ZK_PORT (or BASE plus a random offset, so concurrent runs rarely
# collide), trying the next port if another process grabs it first. Sets
# $port.
zk_start_free() {
	local base=$1
	shift
	port="${ZK_PORT:-$((base + RANDOM % 1000))}"
	local rc attempt
	for attempt in 1 2 3 4 5; do
		if ! port="$(next_free_port "$port")"; then
			log "no free port found from ${ZK_PORT:-$base}"
			exit 2
		fi
		rc=0
		start_zk "$port" "$@" || rc=$?
		if [[ $rc -eq 0 ]]; then
			log "ZooKeeper is up (pid $zk_pid, port $port)"
			return 0
		fi
		if [[ $rc -eq 2 ]]; then
			log "ZooKeeper did not answer within 30 s; its log:"
			tail -n 50 "$tmp/zookeeper.log" >&2 2>/dev/null || true
			exit 2
		fi
		log "ZooKeeper exited during startup (attempt $attempt); its output:"
		cat "$tmp/stdout.log" "$tmp/zookeeper.log" 2>/dev/null | tail -n 20 >&2 || true
		port=$((port + 1))
	done
	log "could not start ZooKeeper"
	exit 2
}
