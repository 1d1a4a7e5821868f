#!/usr/bin/env bash
# java-client-ops.sh checks zkraft with the operators' Java tools of the
# Debian zookeeper 3.8 package: zkServer.sh status (srvr parsing), zkCli.sh
# over TLS (PEM key and trust stores, x509 ACL) and with SASL DIGEST-MD5 from
# a JAAS file (right, wrong and no credentials), curl on the AdminServer and
# /metrics. With ZK=1 the SASL part also runs against a real ZooKeeper 3.8
# started with the same JAAS file, for comparison.
#
# Everything listens on 127.0.0.1 (ports from BASE, default 26100); the
# servers are stopped and the temporary directory removed on exit. Exits
# non-zero on the first check that fails.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base="${BASE:-26100}"
client=$base secure=$((base + 1)) admin=$((base + 2)) metrics=$((base + 3)) raft=$((base + 4)) zkport=$((base + 5))
tmp="$(mktemp -d "${TMPDIR:-/tmp}/zkraft-java-ops.XXXXXX")"
pids=()
cleanup() {
	local st=$?
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [[ -n "${KEEP_TMP:-}" ]]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
	exit "$st"
}
trap cleanup EXIT
say() { printf '\n$ %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v java >/dev/null && [[ -x /usr/share/zookeeper/bin/zkCli.sh ]] || { echo "needs the Debian zookeeper package" >&2; exit 2; }

# Certificates: a CA, a server certificate for 127.0.0.1, a client
# certificate CN=alice,O=zkraft; PEM key stores hold certificate and key.
cd "$tmp"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=zkraft-test-ca" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile san.ext 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj "/O=zkraft/CN=alice" 2>/dev/null
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.crt -days 2 2>/dev/null
cat server.crt server.key >server-keystore.pem
cat client.crt client.key >client-keystore.pem

cat >server-jaas.conf <<'JAAS'
Server {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_super="adminsecret"
       user_alice="secret";
};
JAAS
printf 'Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username="alice"\n  password="%s";\n};\n' secret >client-jaas.conf
printf 'Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username="alice"\n  password="%s";\n};\n' wrong >client-jaas-wrong.conf

cat >zoo.cfg <<CFG
tickTime=2000
dataDir=$tmp/data
clientPort=$client
clientPortAddress=127.0.0.1
4lw.commands.whitelist=*
admin.enableServer=true
admin.serverAddress=127.0.0.1
admin.serverPort=$admin
metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider
metricsProvider.httpHost=127.0.0.1
metricsProvider.httpPort=$metrics
secureClientPort=$secure
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=$tmp/server-keystore.pem
ssl.keyStore.type=PEM
ssl.trustStore.location=$tmp/ca.pem
ssl.trustStore.type=PEM
ssl.clientAuth=need
authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider
CFG

(cd "$repo_root" && go build -o "$tmp/zkraft" ./cmd/zkraft)
"$tmp/zkraft" serve --config zoo.cfg --jaas-config server-jaas.conf --raft-addr "127.0.0.1:$raft" >zkraft.log 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$client") 2>/dev/null && break
	sleep 0.1
done

zkcli() { # port, extra JVM flags, command...
	local port=$1 flags=$2
	shift 2
	CLIENT_JVMFLAGS="$flags" timeout 60 /usr/share/zookeeper/bin/zkCli.sh -waitforconnection -server "127.0.0.1:$port" "$@" 2>&1 |
		grep -v '^SLF4J\|INFO\|^Connecting\|^$\|WATCHER\|WatchedEvent state:SyncConnected' || true
}

say "zkServer.sh status $tmp/zoo.cfg"
out="$(/usr/share/zookeeper/bin/zkServer.sh status "$tmp/zoo.cfg" 2>&1)"
echo "$out"
[[ "$out" == *"Mode: standalone"* ]] || fail "zkServer.sh status"

# TLS. Debian's zookeeper.jar manifest lacks netty-resolver and netty-codec.
cp_tls="/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/netty-resolver.jar:/usr/share/java/netty-codec.jar"
tls="-cp $cp_tls -Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty -Dzookeeper.client.secure=true \
-Dzookeeper.ssl.keyStore.location=$tmp/client-keystore.pem -Dzookeeper.ssl.keyStore.type=PEM \
-Dzookeeper.ssl.trustStore.location=$tmp/ca.pem -Dzookeeper.ssl.trustStore.type=PEM"
say "zkCli.sh (TLS) create /tls hello auth::cdrwa; getAcl /tls; whoami"
out="$(zkcli "$secure" "$tls" create /tls hello auth::cdrwa; zkcli "$secure" "$tls" getAcl /tls; zkcli "$secure" "$tls" whoami)"
echo "$out"
[[ "$out" == *"x509: CN=alice,O=zkraft"* && "$out" == *"Created /tls"* ]] || fail "TLS"

sasl_checks() { # port, label
	local port=$1 label=$2 ok wrong none
	say "[$label] zkCli.sh (SASL alice/secret) create /sasl-$label hello sasl:alice:cdrwa; get; whoami"
	ok="$(zkcli "$port" "-Djava.security.auth.login.config=$tmp/client-jaas.conf" create "/sasl-$label" hello sasl:alice:cdrwa
		zkcli "$port" "-Djava.security.auth.login.config=$tmp/client-jaas.conf" get "/sasl-$label"
		zkcli "$port" "-Djava.security.auth.login.config=$tmp/client-jaas.conf" whoami)"
	echo "$ok"
	[[ "$ok" == *"SaslAuthenticated"* && "$ok" == *"sasl: alice"* && "$ok" == *hello* ]] || fail "$label SASL"
	say "[$label] zkCli.sh (SASL alice/wrong) get /sasl-$label"
	wrong="$(zkcli "$port" "-Djava.security.auth.login.config=$tmp/client-jaas-wrong.conf" get "/sasl-$label")"
	echo "$wrong"
	[[ "$wrong" == *AuthFailed* ]] || fail "$label wrong password"
	say "[$label] zkCli.sh (no JAAS) get /sasl-$label"
	none="$(zkcli "$port" "" get "/sasl-$label")"
	echo "$none"
	[[ "$none" == *"Insufficient permission"* ]] || fail "$label no credentials"
}
sasl_checks "$client" zkraft

say "curl -s http://127.0.0.1:$admin/commands/ruok; curl -s .../commands/mntr | grep znode_count"
curl -sf "http://127.0.0.1:$admin/commands/ruok" || fail "admin ruok"
curl -sf "http://127.0.0.1:$admin/commands/mntr" | grep '"znode_count"' || fail "admin mntr"
say "curl -s http://127.0.0.1:$metrics/metrics | grep -E '^(znode_count|updatelatency_count|zkraft_is_leader) '"
curl -sf "http://127.0.0.1:$metrics/metrics" | grep -E '^(znode_count|updatelatency_count|zkraft_is_leader) ' || fail "metrics"

if [[ -n "${ZK:-}" ]]; then
	mkdir -p zk/data
	printf 'tickTime=2000\ndataDir=%s/zk/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n' "$tmp" "$zkport" >zk/zoo.cfg
	printf 'log4j.rootLogger=INFO, F\nlog4j.appender.F=org.apache.log4j.FileAppender\nlog4j.appender.F.File=%s/zk/zookeeper.log\nlog4j.appender.F.layout=org.apache.log4j.PatternLayout\n' "$tmp" >zk/log4j.properties
	java -Xmx256m -Dlog4j.configuration="file:$tmp/zk/log4j.properties" -Djava.security.auth.login.config="$tmp/server-jaas.conf" \
		-Dzookeeper.authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider \
		-cp "$tmp/zk:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$tmp/zk/zoo.cfg" >zk/stdout.log 2>&1 &
	pids+=($!)
	for _ in $(seq 1 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$zkport") 2>/dev/null && break
		sleep 0.1
	done
	sasl_checks "$zkport" zookeeper
fi
echo
echo "all checks passed"
