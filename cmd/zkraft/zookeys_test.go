package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/zkraft/zkraft/server"
)

// guideKeys are the settings of the ZooKeeper 3.8 and 3.9 Administrator's
// Guide (zookeeperAdmin.md, "Configuration Parameters" to "Metrics
// Providers"), as a zoo.cfg key, or "-Dname" for those ZooKeeper reads
// only as Java system properties.
var guideKeys = strings.Fields(`
4lw.commands.whitelist DigestAuthenticationProvider.digestAlg DigestAuthenticationProvider.enabled
DigestAuthenticationProvider.superDigest IPAuthenticationProvider.usexforwardedfor -Dreadonlymode.enabled
X509AuthenticationProvider.superUser admin.commandURL admin.enableServer admin.forceHttps admin.idleTimeout
admin.needClientAuth admin.portUnification admin.rateLimiterIntervalInMS admin.restore.enabled admin.serverAddress
admin.serverPort admin.snapshot.enabled advancedFlowControlEnabled audit.enable audit.impl.class authProvider
authProvider.1 autopurge.purgeInterval autopurge.snapRetainCount bitHashCacheSize client.certReload
client.portUnification clientPort clientPortAddress clientPortListenBacklog clientTcpKeepAlive cnxTimeout
commitLogCount connectToLearnerMasterLimit connectionDecreaseRatio connectionDropDecrease connectionDropIncrease
connectionFreezeTime connectionMaxTokens connectionTokenFillCount connectionTokenFillTime dataDir dataLogDir
digest.enabled electionAlg electionPortBindRetry emulate353TTLNodes enableEagerACLCheck enforce.auth.enabled
enforce.auth.schemes enforceQuota extendedTypesEnabled fastleader.maxNotificationInterval
fastleader.minNotificationInterval fips-mode flushDelay forceSync forward_learner_requests_to_commit_processor_disabled
fsync.warningthresholdms globalOutstandingLimit group.1 initLimit -Djute.maxbuffer jute.maxbuffer.extrasize
kerberos.canonicalizeHostNames kerberos.removeHostFromPrincipal kerberos.removeRealmFromPrincipal largeRequestMaxBytes
largeRequestThreshold leader.closeSocketAsync leaderServes learner.asyncSending learner.closeSocketAsync
localSessionsEnabled localSessionsUpgradingEnabled maxBatchSize maxClientCnxns maxCnxns maxConcurrentDiffSyncs
maxConcurrentSnapSyncs maxGetChildrenResponseCacheSize maxInProcessingDeadWatchers maxResponseCacheSize
maxSessionTimeout maxTimeToWaitForEpoch maxWriteQueuePollTime metricsProvider.className metricsProvider.exportJvmInfo
metricsProvider.httpHost metricsProvider.httpPort metricsProvider.maxQueueSize metricsProvider.numWorkerThreads
metricsProvider.workerShutdownTimeoutMs minSessionTimeout multiAddress.enabled multiAddress.reachabilityCheckEnabled
multiAddress.reachabilityCheckTimeoutMs netty.server.earlyDropSecureConnectionHandshakes observer.election.DelayMs
observer.reconnectDelayMs observerMasterPort outstandingHandshake.limit preAllocSize quorumCnxnTimeoutMs
quorumListenOnAllIPs reconfigEnabled requestStaleConnectionCheck requestStaleLatencyCheck requestThrottleDropStale
requestThrottleLimit requestThrottleStallTime secureClientPort secureClientPortAddress serializeLastProcessedZxid.enabled
server.1 serverCnxnFactory sessionRequireClientSASLAuth skipACL snapCount snapSizeLimitInKb
snapshot.compression.method snapshot.trust.empty ssl.allowReverseDnsLookup ssl.authProvider ssl.ciphersuites
ssl.clientAuth ssl.clientHostnameVerification ssl.context.supplier.class ssl.crl ssl.enabledProtocols
ssl.handshakeDetectionTimeoutMillis ssl.hostnameVerification ssl.keyStore.location ssl.keyStore.password
ssl.keyStore.passwordPath ssl.keyStore.type ssl.ocsp ssl.protocol ssl.quorum.allowReverseDnsLookup
ssl.quorum.ciphersuites ssl.quorum.clientAuth ssl.quorum.clientHostnameVerification ssl.quorum.context.supplier.class
ssl.quorum.crl ssl.quorum.enabledProtocols ssl.quorum.handshakeDetectionTimeoutMillis ssl.quorum.hostnameVerification
ssl.quorum.keyStore.location ssl.quorum.keyStore.password ssl.quorum.keyStore.passwordPath ssl.quorum.keyStore.type
ssl.quorum.ocsp ssl.quorum.protocol ssl.quorum.trustStore.location ssl.quorum.trustStore.password
ssl.quorum.trustStore.passwordPath ssl.quorum.trustStore.type ssl.sslProvider ssl.trustStore.location
ssl.trustStore.password ssl.trustStore.passwordPath ssl.trustStore.type sslQuorum sslQuorumReloadCertFiles
standaloneEnabled syncEnabled syncLimit tcpKeepAlive throttledOpWaitTime tickTime txnLogSizeLimitInKb
watchManagerName watcherCleanIntervalInSeconds watcherCleanThreadsNum watcherCleanThreshold weight.1
-Dznode.container.checkIntervalMs -Dznode.container.maxNeverUsedIntervalMs -Dznode.container.maxPerMinute
-Dzookeeper.commitProcessor.maxCommitBatchSize -Dzookeeper.commitProcessor.maxReadBatchSize
-Dzookeeper.commitProcessor.numWorkerThreads -Dzookeeper.connection_throttle_global_session_weight
-Dzookeeper.connection_throttle_local_session_weight -Dzookeeper.connection_throttle_renew_session_weight
-Dzookeeper.connection_throttle_weight_enabled -Dzookeeper.ensembleAuthName
-Dzookeeper.follower.skipLearnerRequestToNextProcessor -Dzookeeper.messageTracker.BufferSize
-Dzookeeper.messageTracker.Enabled -Dzookeeper.nio.numSelectorThreads -Dzookeeper.nio.numWorkerThreads
-Dzookeeper.request_throttler.shutdownTimeout -Dzookeeper.superUser -Dzookeeper.datadir.autocreate
-Dzookeeper.db.autocreate -Djava.security.auth.login.config
`)

// appliedSample is a valid value for each setting zkraft applies.
var appliedSample = map[string]string{
	"clientPort": "2181", "clientPortAddress": "127.0.0.1", "secureClientPort": "2281", "secureClientPortAddress": "127.0.0.1",
	"dataDir": "", "dataLogDir": "", "tickTime": "2000", "maxClientCnxns": "60", "minSessionTimeout": "4000", "maxSessionTimeout": "40000",
	"globalOutstandingLimit": "1000", "snapCount": "100000", "maxCnxns": "0", "extendedTypesEnabled": "true", "enforceQuota": "true",
	"jute.maxbuffer": "1048575", "datadir.autocreate": "true", "server.1": "a:2888:3888", "standaloneEnabled": "true",
	"reconfigEnabled": "true", "4lw.commands.whitelist": "*", "dynamicConfigFile": "", "quorumListenOnAllIPs": "true",
	"sslQuorum": "false", "DigestAuthenticationProvider.superDigest": "super:x", "superUser": "bob",
	"sessionRequireClientSASLAuth": "false", "enforce.auth.enabled": "false", "enforce.auth.schemes": "sasl",
	"sasl.serverconfig": "Server", "java.security.auth.login.config": "/j.conf", "ssl.keyStore.location": "/k.pem",
	"ssl.keyStore.type": "PEM", "ssl.trustStore.location": "/ca.pem", "ssl.trustStore.type": "PEM", "ssl.clientAuth": "need",
	"ssl.quorum.keyStore.location": "/k.pem", "ssl.quorum.keyStore.type": "PEM", "ssl.quorum.trustStore.location": "/ca.pem",
	"ssl.quorum.trustStore.type": "PEM", "authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
	"znode.container.checkIntervalMs": "60000", "admin.enableServer": "true", "admin.serverAddress": "127.0.0.1",
	"admin.serverPort": "8080", "admin.idleTimeout": "30000", "admin.commandURL": "/commands",
	"admin.snapshot.enabled": "true", "admin.rateLimiterIntervalInMS": "300000",
	"metricsProvider.className": "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider",
	"metricsProvider.httpHost":  "127.0.0.1", "metricsProvider.httpPort": "7000",
}

// TestEveryGuideKeyIsAppliedOrNamed: each setting of the Administrator's
// Guide has a row, and set on its own (in zoo.cfg, or as a -D flag) it is
// either applied (no note) or named in exactly one note that says why it
// has no effect.
func TestEveryGuideKeyIsAppliedOrNamed(t *testing.T) {
	for _, g := range guideKeys {
		name, jvm := strings.CutPrefix(g, "-D")
		var row *zkKey
		var ok bool
		if jvm {
			row, ok = lookupProp(name)
		} else if isCfgKey(name) {
			row, ok = lookupCfgKey(name)
		} else {
			row, ok = lookupProp("zookeeper." + name)
		}
		if !ok {
			t.Errorf("%s: no row in zooKeeperKeys", g)
			continue
		}
		value := "true"
		if v, applied := appliedSample[strings.TrimPrefix(name, "zookeeper.")]; applied {
			value = v
		}
		if name == "electionAlg" {
			value = "3"
		}
		text, props := "dataDir=/d\nclientPort=2181\n", map[string]string{}
		if name == "secureClientPortAddress" {
			text += "secureClientPort=2281\n"
		}
		if jvm {
			props[name] = value
		} else if value != "" {
			text += name + "=" + value + "\n"
		}
		_, notes, err := parseWith(t, text, props)
		if err != nil {
			t.Errorf("%s=%s: %v", g, value, err)
			continue
		}
		var named []note
		for _, n := range notes {
			if n.key == name || n.key == "server.N" {
				named = append(named, n)
			}
		}
		switch {
		case row.why == "" && len(named) > 0 && name != "server.1":
			t.Errorf("%s is applied but named: %+v", g, named)
		case row.why != "" && (len(named) != 1 || named[0].why != row.why):
			t.Errorf("%s has no effect but its notes are %+v (all: %+v)", g, named, notes)
		}
		if len(notes) != len(named) {
			t.Errorf("%s: notes on other keys: %+v", g, notes)
		}
	}
}

// TestOperationsDocListsEveryKey: docs/operations.md has a row for every
// setting of the table.
func TestOperationsDocListsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, rest, ok := strings.Cut(strings.TrimPrefix(line, "| `"), "` |"); ok && strings.HasPrefix(line, "| `") {
			rows[k] = rest
		}
	}
	for _, z := range zooKeeperKeys {
		k := z.key
		if z.prefix {
			k += "N"
		}
		row, ok := rows[k]
		switch {
		case !ok:
			t.Errorf("docs/operations.md has no row for `%s`", k)
		case z.why != "" && !strings.Contains(row, "no effect: "+z.why):
			t.Errorf("docs/operations.md's row for `%s` does not give zookeys.go's reason %q: %s", k, z.why, row)
		case z.why == "" && strings.Contains(row, "no effect"):
			t.Errorf("docs/operations.md says `%s` has no effect; zkraft applies it", k)
		}
	}
}

// TestAppliedSettingsChangeTheConfig: every applied setting, set to a
// value other than its default, changes the resulting config (so none is
// listed as applied and silently dropped).
func TestAppliedSettingsChangeTheConfig(t *testing.T) {
	nonDefault := map[string]string{
		"tickTime": "1000", "maxClientCnxns": "7", "minSessionTimeout": "5000", "maxSessionTimeout": "50000",
		"clientPort": "2182", "secureClientPort": "2281", "globalOutstandingLimit": "10", "snapCount": "10", "maxCnxns": "5",
		"extendedTypesEnabled": "true", "enforceQuota": "true", "reconfigEnabled": "true", "sslQuorum": "true",
		"4lw.commands.whitelist": "*", "DigestAuthenticationProvider.superDigest": "super:x", "superUser": "bob",
		"sessionRequireClientSASLAuth": "true", "enforce.auth.enabled": "true", "sasl.serverconfig": "Other",
		"ssl.keyStore.location": "/k.pem", "ssl.trustStore.location": "/ca.pem", "ssl.clientAuth": "want",
		"ssl.quorum.keyStore.location": "/q.pem", "ssl.quorum.trustStore.location": "/qca.pem",
		"admin.enableServer": "false", "admin.serverAddress": "127.0.0.1", "admin.serverPort": "9090",
		"admin.idleTimeout": "1000", "admin.commandURL": "/c", "admin.snapshot.enabled": "false", "admin.rateLimiterIntervalInMS": "1000",
		"metricsProvider.className": "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider",
		"metricsProvider.httpHost":  "127.0.0.1", "metricsProvider.httpPort": "7001", "standaloneEnabled": "false",
		"dataLogDir": "/l", "audit.enable": "true", "client.certReload": "true",
	}
	jvmOnly := map[string]string{"jute.maxbuffer": "10", "znode.container.checkIntervalMs": "10", "java.security.auth.login.config": "/j"}
	base, _, err := parseWith(t, "dataDir=/d\nclientPort=2181\nserver.1=a:1:2\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	baseText := fmtConfig(base)
	for k, v := range nonDefault {
		cfg, _, err := parseWith(t, "dataDir=/d\nclientPort=2181\nserver.1=a:1:2\n"+k+"="+v+"\n", nil)
		if err != nil {
			t.Errorf("%s=%s: %v", k, v, err)
			continue
		}
		if fmtConfig(cfg) == baseText {
			t.Errorf("%s=%s changed nothing", k, v)
		}
	}
	for k, v := range jvmOnly {
		cfg, _, err := parseWith(t, "dataDir=/d\nclientPort=2181\nserver.1=a:1:2\n", map[string]string{k: v})
		if err != nil || fmtConfig(cfg) == baseText {
			t.Errorf("-D%s=%s changed nothing (%v)", k, v, err)
		}
	}
}

func fmtConfig(c *server.Config) string {
	c.Logger = nil
	return strings.ReplaceAll(strings.TrimSpace(fmtAny(c)), " ", "")
}

func fmtAny(v any) string { return fmt.Sprintf("%+v", v) }
