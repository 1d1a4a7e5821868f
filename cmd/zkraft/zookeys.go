package main

import "strings"

// keyKind says how ZooKeeper reads a setting.
type keyKind int

const (
	// cfgKey: QuorumPeerConfig parses it from zoo.cfg; there is no system
	// property.
	cfgKey keyKind = iota
	// sysProp: ZooKeeper reads the system property zookeeper.<key> (and
	// the names in props). A zoo.cfg line key=value sets that property,
	// overriding a -D flag, because ZooKeeper turns every zoo.cfg key it
	// does not parse into zookeeper.<key>.
	sysProp
	// sysOnly: a system property named in full (key), set only with a -D
	// flag. In zoo.cfg the same name becomes zookeeper.<name>, which
	// ZooKeeper does not read either.
	sysOnly
)

// zkKey is one setting of the ZooKeeper 3.8/3.9 Administrator's Guide.
type zkKey struct {
	key   string
	kind  keyKind
	props []string // further system property names it is read from
	// why is empty when zkraft applies the setting (applyZooKeeperSettings
	// reads it); otherwise it says why the setting has no effect, and the
	// setting is named with it in the start-up log.
	why string
	// warn marks a setting whose absence weakens what the operator asked
	// for (authentication, encryption, auditing): logged as a warning.
	warn bool
	// prefix matches every key that starts with key (authProvider.N).
	prefix bool
}

// Reasons shared by several keys.
const (
	whyQuorum     = "ZooKeeper's quorum protocol (Zab, fast leader election, learner sync) is replaced by Raft (Dragonboat), which has its own timing and flow control"
	whyRaftLog    = "the Raft log is Dragonboat's log store (tan, or Pebble in a data directory that has it), which sizes, preallocates and syncs its own files; it is compacted after each Raft snapshot (snapCount)"
	whyPipeline   = "tunes ZooKeeper's Java request pipeline or NIO threads; zkraft's pipeline is per connection, bounded by globalOutstandingLimit and per-connection limits"
	whyJava       = "a Java runtime setting; zkraft is a Go program"
	whyWatches    = "tunes ZooKeeper's Java watch manager; zkraft keeps watches in its own registry"
	whyThrottle   = "zkraft has no connection-rate or request-stall throttler: connections are bounded by maxClientCnxns and maxCnxns, requests by globalOutstandingLimit"
	whyNetty      = "zkraft serves TLS on secureClientPort itself, with no Netty"
	whyNoSnapshot = "zkraft writes no ZooKeeper snapshots or transaction logs while it serves (zkraft export writes them)"
	whyTLSOnly    = "zkraft reads PEM key and trust stores with Go's TLS defaults (TLS 1.2+, Go's cipher suites) and no revocation checks"
)

// zooKeeperKeys lists every key of the ZooKeeper 3.8 and 3.9
// Administrator's Guide and every key QuorumPeerConfig parses, with what
// zkraft does with it. docs/operations.md has the same table.
var zooKeeperKeys = []zkKey{
	// Minimum and advanced configuration.
	{key: "clientPort"},
	{key: "clientPortAddress"},
	{key: "secureClientPort"},
	{key: "secureClientPortAddress"},
	{key: "observerMasterPort", why: "observers replicate from the Raft leader through Dragonboat; zkraft opens no observer master port"},
	{key: "dataDir"},
	{key: "dataLogDir"},
	{key: "tickTime"},
	{key: "maxClientCnxns"},
	{key: "minSessionTimeout"},
	{key: "maxSessionTimeout"},
	{key: "clientPortListenBacklog", why: "Go listens with the kernel's somaxconn backlog and offers no other"},
	{key: "globalOutstandingLimit", kind: sysProp},
	{key: "preAllocSize", kind: sysProp, why: whyRaftLog},
	{key: "snapCount", kind: sysProp},
	{key: "commitLogCount", kind: sysProp, why: "followers catch up from the Raft log, or from a streamed snapshot, not from a list of committed proposals"},
	{key: "snapSizeLimitInKb", kind: sysProp, why: "Raft snapshots are taken every snapCount entries; Dragonboat has no size trigger"},
	{key: "txnLogSizeLimitInKb", kind: sysProp, why: whyRaftLog},
	{key: "maxCnxns", kind: sysProp},
	{key: "fsync.warningthresholdms", kind: sysProp, why: "Dragonboat syncs the Raft log; zkraft_proposal_commit_seconds measures what fsync costs a write"},
	{key: "maxResponseCacheSize", kind: sysProp, why: "zkraft caches nodes and child lists in its state machine, not serialized responses"},
	{key: "maxGetChildrenResponseCacheSize", kind: sysProp, why: "zkraft caches nodes and child lists in its state machine, not serialized responses"},
	{key: "autopurge.snapRetainCount", why: "zkraft purges on its own: Dragonboat keeps only the Raft snapshots it needs and compacts the Raft log behind each one; zkraft leaves ZooKeeper's version-2 files alone"},
	{key: "autopurge.purgeInterval", why: "zkraft purges on its own: Dragonboat keeps only the Raft snapshots it needs and compacts the Raft log behind each one; zkraft leaves ZooKeeper's version-2 files alone"},
	{key: "syncEnabled", props: []string{"zookeeper.observer.syncEnabled"}, why: "a zkraft observer always keeps the Raft log and state on disk (ZooKeeper's default, syncEnabled=true)"},
	{key: "extendedTypesEnabled", kind: sysProp},
	{key: "emulate353TTLNodes", kind: sysProp, why: "zkraft stores TTLs in its own format; zkraft import reads ZooKeeper's current TTL encoding, not the 3.5.3 one"},
	{key: "watchManagerName", kind: sysProp, why: whyWatches},
	{key: "watcherCleanThreadsNum", kind: sysProp, why: whyWatches},
	{key: "watcherCleanThreshold", kind: sysProp, why: whyWatches},
	{key: "watcherCleanIntervalInSeconds", kind: sysProp, why: whyWatches},
	{key: "maxInProcessingDeadWatchers", kind: sysProp, why: whyWatches},
	{key: "bitHashCacheSize", kind: sysProp, why: whyWatches},
	{key: "fastleader.minNotificationInterval", kind: sysProp, why: whyQuorum},
	{key: "fastleader.maxNotificationInterval", kind: sysProp, why: whyQuorum},
	{key: "connectionMaxTokens", kind: sysProp, props: []string{"zookeeper.connection_throttle_tokens"}, why: whyThrottle},
	{key: "connectionTokenFillTime", kind: sysProp, props: []string{"zookeeper.connection_throttle_fill_time"}, why: whyThrottle},
	{key: "connectionTokenFillCount", kind: sysProp, props: []string{"zookeeper.connection_throttle_fill_count"}, why: whyThrottle},
	{key: "connectionFreezeTime", kind: sysProp, props: []string{"zookeeper.connection_throttle_freeze_time"}, why: whyThrottle},
	{key: "connectionDropIncrease", kind: sysProp, props: []string{"zookeeper.connection_throttle_drop_increase"}, why: whyThrottle},
	{key: "connectionDropDecrease", kind: sysProp, props: []string{"zookeeper.connection_throttle_drop_decrease"}, why: whyThrottle},
	{key: "connectionDecreaseRatio", kind: sysProp, props: []string{"zookeeper.connection_throttle_decrease_ratio"}, why: whyThrottle},
	{key: "connection_throttle_weight_enabled", kind: sysProp, why: whyThrottle},
	{key: "connection_throttle_global_session_weight", kind: sysProp, why: whyThrottle},
	{key: "connection_throttle_local_session_weight", kind: sysProp, why: whyThrottle},
	{key: "connection_throttle_renew_session_weight", kind: sysProp, why: whyThrottle},
	{key: "serverCnxnFactory", kind: sysProp, why: "zkraft has one connection layer; it serves TLS on secureClientPort without NettyServerCnxnFactory"},
	{key: "flushDelay", kind: sysProp, why: "Dragonboat commits and syncs proposals in groups itself"},
	{key: "maxWriteQueuePollTime", kind: sysProp, why: "Dragonboat commits and syncs proposals in groups itself"},
	{key: "maxBatchSize", kind: sysProp, why: "Dragonboat commits and syncs proposals in groups itself"},
	{key: "enforceQuota", kind: sysProp},
	{key: "requestThrottleLimit", kind: sysProp, props: []string{"zookeeper.request_throttle_max_requests"}, why: whyThrottle},
	{key: "requestThrottleStallTime", kind: sysProp, props: []string{"zookeeper.request_throttle_stall_time"}, why: whyThrottle},
	{key: "requestThrottleDropStale", kind: sysProp, props: []string{"zookeeper.request_throttle_drop_stale", "request_throttle_drop_stale"}, why: whyThrottle},
	{key: "requestStaleLatencyCheck", kind: sysProp, props: []string{"zookeeper.request_stale_latency_check"}, why: whyThrottle},
	{key: "requestStaleConnectionCheck", kind: sysProp, props: []string{"zookeeper.request_stale_connection_check"}, why: "zkraft drops the pending replies of a closed connection always"},
	{key: "request_throttler.shutdownTimeout", kind: sysProp, why: whyThrottle},
	{key: "advancedFlowControlEnabled", kind: sysProp, props: []string{"zookeeper.netty.advancedFlowControl.enabled"}, why: "zkraft always stops reading a connection whose replies wait (TCP backpressure), which is what this asks of Netty"},
	{key: "enableEagerACLCheck", kind: sysProp, why: "zkraft checks a write's ACL where ZooKeeper's leader does, when it is applied; a denied write gets NOAUTH either way"},
	{key: "maxConcurrentSnapSyncs", kind: sysProp, props: []string{"zookeeper.leader.maxConcurrentSnapSyncs"}, why: whyQuorum},
	{key: "maxConcurrentDiffSyncs", kind: sysProp, props: []string{"zookeeper.leader.maxConcurrentDiffSyncs"}, why: whyQuorum},
	{key: "digest.enabled", kind: sysProp, why: "zkraft keeps no ZooKeeper tree digest while it serves (Pebble checksums its blocks, the Raft log included); zkraft import and export check ZooKeeper's digest"},
	{key: "snapshot.compression.method", kind: sysProp, why: whyNoSnapshot + " (export --compression)"},
	{key: "snapshot.trust.empty", kind: sysProp, why: "applies to loading ZooKeeper files; zkraft import reads a log without a snapshot as ZooKeeper 3.8 does"},
	{key: "audit.enable", kind: sysProp},
	{key: "audit.impl.class", kind: sysProp, why: "zkraft's audit log is Slf4jAuditLogger's, the default; another class cannot be loaded"},
	{key: "largeRequestMaxBytes", kind: sysProp, why: "zkraft bounds each connection instead: a frame over jute.maxbuffer closes it, and a connection's pending requests and replies are capped"},
	{key: "largeRequestThreshold", kind: sysProp, why: "zkraft bounds each connection instead: a frame over jute.maxbuffer closes it, and a connection's pending requests and replies are capped"},
	{key: "outstandingHandshake.limit", kind: sysProp, props: []string{"zookeeper.netty.server.outstandingHandshake.limit"}, why: whyNetty + "; a handshake that does not finish in 10 s is closed"},
	{key: "netty.server.earlyDropSecureConnectionHandshakes", kind: sysProp, why: whyNetty + "; a standalone member listens only once it serves, an ensemble member refuses clients until it knows a leader"},
	{key: "throttledOpWaitTime", kind: sysProp, props: []string{"zookeeper.throttled_op_wait_time"}, why: whyThrottle},
	{key: "learner.closeSocketAsync", kind: sysProp, props: []string{"learner.closeSocketAsync"}, why: whyQuorum},
	{key: "leader.closeSocketAsync", kind: sysProp, props: []string{"leader.closeSocketAsync"}, why: whyQuorum},
	{key: "learner.asyncSending", kind: sysProp, props: []string{"learner.asyncSending"}, why: whyQuorum},
	{key: "forward_learner_requests_to_commit_processor_disabled", kind: sysProp, why: whyQuorum},
	{key: "serializeLastProcessedZxid.enabled", kind: sysProp, why: whyNoSnapshot},
	{key: "jute.maxbuffer", kind: sysOnly},
	{key: "jute.maxbuffer.extrasize", kind: sysProp, why: "zkraft adds nothing to a request before it is logged, so a request of jute.maxbuffer always fits"},
	{key: "datadir.autocreate", kind: sysProp},
	{key: "db.autocreate", kind: sysProp, why: "zkraft has no non-voting catch-up for a member whose data is gone: an ensemble member with an empty data directory starts a new Raft replica from its server.N lines; replace such a member under a new id (reconfig, --join)", warn: true},

	// Cluster options.
	{key: "electionAlg", why: "Raft elects the leader; any value but 3 is refused, as ZooKeeper does"},
	{key: "maxTimeToWaitForEpoch", kind: sysProp, props: []string{"zookeeper.leader.maxTimeToWaitForEpoch"}, why: whyQuorum},
	{key: "initLimit", why: "Raft replaces it: a follower catches up from the leader's log or a streamed snapshot with no deadline. Mapping it to a Raft timeout would slow zkraft's failover: see docs/operations.md"},
	{key: "syncLimit", why: "Raft replaces it: a follower that hears nothing from the leader for an election timeout (1 s) calls an election and a leader without a quorum steps down as long; taken literally (syncLimit x tickTime) it would make failover after a leader crash take seconds"},
	{key: "connectToLearnerMasterLimit", kind: sysProp, why: whyQuorum},
	{key: "leaderServes", kind: sysProp, why: "every zkraft member, the leader too, serves clients"},
	{key: "server.", prefix: true},
	{key: "group.", prefix: true, why: "zkraft's quorum is a majority of the voting members; hierarchical quorums are not supported", warn: true},
	{key: "weight.", prefix: true, why: "zkraft's quorum is a majority of the voting members; a weight of 0 does not make a member non-voting (list it as an observer)", warn: true},
	{key: "cnxTimeout", kind: sysProp, why: whyQuorum},
	{key: "quorumCnxnTimeoutMs", kind: sysProp, why: whyQuorum},
	{key: "standaloneEnabled"},
	{key: "reconfigEnabled"},
	{key: "4lw.commands.whitelist", kind: sysProp},
	{key: "tcpKeepAlive", kind: sysProp, why: whyQuorum},
	{key: "clientTcpKeepAlive", kind: sysProp, why: "zkraft always sets TCP keep-alive on client sockets (Go's default, every 15 s), what clientTcpKeepAlive=true asks for"},
	{key: "electionPortBindRetry", kind: sysProp, why: "zkraft opens no election port"},
	{key: "observer.reconnectDelayMs", kind: sysProp, why: whyQuorum},
	{key: "observer.election.DelayMs", kind: sysProp, why: whyQuorum},
	{key: "localSessionsEnabled", why: "every zkraft session is global (replicated); a client sees no difference except that ephemerals are always allowed"},
	{key: "localSessionsUpgradingEnabled", why: "every zkraft session is global (replicated)"},
	{key: "peerType", why: "the server.N line's role (participant or observer) decides, as ZooKeeper does when the two disagree"},
	{key: "dynamicConfigFile"},
	{key: "quorumListenOnAllIPs"},
	{key: "sslQuorum"},
	{key: "sslQuorumReloadCertFiles", why: "Dragonboat reads the members' certificates at start; restart the member to change them (the client port's reload: client.certReload)"},
	{key: "portUnification", why: "zkraft serves TLS only on secureClientPort, not on the client port", warn: true},
	{key: "quorum.cnxn.threads.size", why: whyQuorum},
	{key: "quorum.auth.enableSasl", why: "members authenticate each other with mutual TLS (sslQuorum), not SASL", warn: true},
	{key: "quorum.auth.serverRequireSasl", why: "members authenticate each other with mutual TLS (sslQuorum), not SASL", warn: true},
	{key: "quorum.auth.learnerRequireSasl", why: "members authenticate each other with mutual TLS (sslQuorum), not SASL", warn: true},
	{key: "quorum.auth.learner.saslLoginContext", why: "members authenticate each other with mutual TLS (sslQuorum), not SASL"},
	{key: "quorum.auth.server.saslLoginContext", why: "members authenticate each other with mutual TLS (sslQuorum), not SASL"},
	{key: "quorum.auth.kerberos.servicePrincipal", why: "members authenticate each other with mutual TLS (sslQuorum), not SASL"},
	{key: "multiAddress.enabled", why: "a zkraft member has one Raft address; a server.N line with several ('|') is refused"},
	{key: "multiAddress.reachabilityCheckTimeoutMs", why: "a zkraft member has one Raft address"},
	{key: "multiAddress.reachabilityCheckEnabled", why: "a zkraft member has one Raft address"},
	{key: "oraclePath", why: "zkraft's quorum is a Raft majority; there is no oracle for two-member ensembles"},
	{key: "jvm.pause.monitor", why: whyJava},
	{key: "jvm.pause.info-threshold.ms", why: whyJava},
	{key: "jvm.pause.warn-threshold.ms", why: whyJava},
	{key: "jvm.pause.sleep.time.ms", why: whyJava},
	{key: "follower.skipLearnerRequestToNextProcessor", kind: sysProp, why: whyQuorum},

	// Encryption, authentication, authorization.
	{key: "DigestAuthenticationProvider.enabled", kind: sysProp, why: "the digest scheme is always available in zkraft", warn: true},
	{key: "DigestAuthenticationProvider.superDigest", kind: sysProp},
	{key: "DigestAuthenticationProvider.digestAlg", kind: sysProp, why: "zkraft computes digest credentials with SHA1, ZooKeeper's default; digests made with another algorithm will not match", warn: true},
	{key: "IPAuthenticationProvider.usexforwardedfor", kind: sysProp, why: "zkraft's AdminServer does not authenticate by IP"},
	{key: "X509AuthenticationProvider.superUser", kind: sysProp, why: "a client certificate makes the connection x509:<subject> but never the super user in zkraft", warn: true},
	{key: "superUser", kind: sysProp},
	{key: "superUser.", kind: sysProp, prefix: true, why: "zkraft takes one SASL super user (zookeeper.superUser)", warn: true},
	{key: "ssl.authProvider", kind: sysProp, why: "zkraft's x509 scheme is built in; custom providers are not loaded", warn: true},
	{key: "ensembleAuthName", kind: sysProp, why: "zkraft has no ensemble authentication scheme", warn: true},
	{key: "sessionRequireClientSASLAuth", kind: sysProp},
	{key: "enforce.auth.enabled", kind: sysProp},
	{key: "enforce.auth.schemes", kind: sysProp},
	{key: "allowSaslFailedClients", kind: sysProp, why: "a failed SASL exchange is answered AUTHFAILED and the connection closed, ZooKeeper's default", warn: true},
	{key: "sasl.serverconfig", kind: sysProp},
	{key: "java.security.auth.login.config", kind: sysOnly},
	{key: "ssl.keyStore.location", kind: sysProp},
	{key: "ssl.keyStore.password", kind: sysProp, why: "zkraft reads unencrypted PEM key stores"},
	{key: "ssl.keyStore.passwordPath", kind: sysProp, why: "zkraft reads unencrypted PEM key stores"},
	{key: "ssl.keyStore.type", kind: sysProp},
	{key: "ssl.trustStore.location", kind: sysProp},
	{key: "ssl.trustStore.password", kind: sysProp, why: "PEM trust stores need no password"},
	{key: "ssl.trustStore.passwordPath", kind: sysProp, why: "PEM trust stores need no password"},
	{key: "ssl.trustStore.type", kind: sysProp},
	{key: "ssl.clientAuth", kind: sysProp},
	{key: "ssl.quorum.keyStore.location", kind: sysProp},
	{key: "ssl.quorum.keyStore.password", kind: sysProp, why: "zkraft reads unencrypted PEM key stores"},
	{key: "ssl.quorum.keyStore.passwordPath", kind: sysProp, why: "zkraft reads unencrypted PEM key stores"},
	{key: "ssl.quorum.keyStore.type", kind: sysProp},
	{key: "ssl.quorum.trustStore.location", kind: sysProp},
	{key: "ssl.quorum.trustStore.password", kind: sysProp, why: "PEM trust stores need no password"},
	{key: "ssl.quorum.trustStore.passwordPath", kind: sysProp, why: "PEM trust stores need no password"},
	{key: "ssl.quorum.trustStore.type", kind: sysProp},
	{key: "ssl.quorum.clientAuth", kind: sysProp, why: "members always require each other's certificate (Dragonboat's mutual TLS)"},
	{key: "ssl.protocol", kind: sysProp, why: whyTLSOnly},
	{key: "ssl.quorum.protocol", kind: sysProp, why: whyTLSOnly},
	{key: "ssl.enabledProtocols", kind: sysProp, why: whyTLSOnly},
	{key: "ssl.quorum.enabledProtocols", kind: sysProp, why: whyTLSOnly},
	{key: "ssl.ciphersuites", kind: sysProp, why: whyTLSOnly},
	{key: "ssl.quorum.ciphersuites", kind: sysProp, why: whyTLSOnly},
	{key: "ssl.context.supplier.class", kind: sysProp, why: whyJava},
	{key: "ssl.quorum.context.supplier.class", kind: sysProp, why: whyJava},
	{key: "ssl.hostnameVerification", kind: sysProp, why: "zkraft does not check a client certificate's host name (ZooKeeper's default for clients, ssl.clientHostnameVerification=false)"},
	{key: "ssl.quorum.hostnameVerification", kind: sysProp, why: "members check each other's certificate against the CA (Dragonboat's mutual TLS), not host names", warn: true},
	{key: "ssl.clientHostnameVerification", kind: sysProp, why: "zkraft does not check a client certificate's host name (ZooKeeper's default)"},
	{key: "ssl.quorum.clientHostnameVerification", kind: sysProp, why: "members check each other's certificate against the CA (Dragonboat's mutual TLS), not host names", warn: true},
	{key: "ssl.allowReverseDnsLookup", kind: sysProp, why: "zkraft checks no host names, so looks none up"},
	{key: "ssl.quorum.allowReverseDnsLookup", kind: sysProp, why: "zkraft checks no host names, so looks none up"},
	{key: "ssl.crl", kind: sysProp, why: whyTLSOnly, warn: true},
	{key: "ssl.quorum.crl", kind: sysProp, why: whyTLSOnly, warn: true},
	{key: "ssl.ocsp", kind: sysProp, why: whyTLSOnly, warn: true},
	{key: "ssl.quorum.ocsp", kind: sysProp, why: whyTLSOnly, warn: true},
	{key: "ssl.handshakeDetectionTimeoutMillis", kind: sysProp, why: "a TLS handshake that does not finish in 10 s is closed"},
	{key: "ssl.quorum.handshakeDetectionTimeoutMillis", kind: sysProp, why: "Dragonboat's transport times its own handshakes"},
	{key: "ssl.sslProvider", kind: sysProp, why: "zkraft uses Go's TLS"},
	{key: "client.certReload", kind: sysProp},
	{key: "client.portUnification", kind: sysProp, why: "zkraft serves TLS only on secureClientPort, not on the client port", warn: true},
	{key: "authProvider", kind: sysProp, why: "zkraft's providers (digest, ip, sasl, x509) are built in; a custom provider class is not loaded"},
	{key: "authProvider.", kind: sysProp, prefix: true},
	{key: "kerberos.removeHostFromPrincipal", kind: sysProp, why: "zkraft's SASL is DIGEST-MD5 only (no Kerberos/GSSAPI)"},
	{key: "kerberos.removeRealmFromPrincipal", kind: sysProp, why: "zkraft's SASL is DIGEST-MD5 only (no Kerberos/GSSAPI)"},
	{key: "kerberos.canonicalizeHostNames", kind: sysProp, why: "zkraft's SASL is DIGEST-MD5 only (no Kerberos/GSSAPI)"},
	{key: "fips-mode", kind: sysProp, why: "zkraft's TLS is Go's; its SASL is DIGEST-MD5 (which FIPS mode would disable in ZooKeeper)"},

	// Experimental, unsafe and performance options.
	{key: "readonlymode.enabled", kind: sysOnly, why: "zkraft has no read-only mode: a member cut off from the quorum holds its clients' requests and then closes them"},
	{key: "forceSync", kind: sysProp, why: "zkraft always syncs the Raft log before acknowledging a write"},
	{key: "skipACL", kind: sysProp, why: "zkraft always checks ACLs", warn: true},
	{key: "nio.numSelectorThreads", kind: sysProp, why: whyPipeline},
	{key: "nio.numWorkerThreads", kind: sysProp, why: whyPipeline},
	{key: "commitProcessor.numWorkerThreads", kind: sysProp, why: whyPipeline},
	{key: "commitProcessor.maxReadBatchSize", kind: sysProp, why: whyPipeline},
	{key: "commitProcessor.maxCommitBatchSize", kind: sysProp, why: whyPipeline},
	{key: "znode.container.checkIntervalMs", kind: sysOnly},
	{key: "znode.container.maxPerMinute", kind: sysOnly, why: "zkraft's leader removes at most a fixed batch of empty containers and expired TTL nodes per check"},
	{key: "znode.container.maxNeverUsedIntervalMs", kind: sysOnly, why: "zkraft keeps a container that never had a child, ZooKeeper's default (0)"},
	{key: "messageTracker.BufferSize", kind: sysProp, why: whyQuorum},
	{key: "messageTracker.Enabled", kind: sysProp, why: whyQuorum},

	// AdminServer and metrics.
	{key: "admin.enableServer", kind: sysProp},
	{key: "admin.serverAddress", kind: sysProp},
	{key: "admin.serverPort", kind: sysProp},
	{key: "admin.idleTimeout", kind: sysProp},
	{key: "admin.commandURL", kind: sysProp},
	{key: "admin.forceHttps", kind: sysProp, why: "zkraft's AdminServer speaks HTTP only, so with admin.forceHttps=true it is not started", warn: true},
	{key: "admin.portUnification", kind: sysProp, why: "zkraft's AdminServer speaks HTTP only"},
	{key: "admin.needClientAuth", kind: sysProp, why: "zkraft's AdminServer speaks HTTP only, with no client certificates", warn: true},
	{key: "admin.rateLimiterIntervalInMS", kind: sysProp},
	{key: "admin.snapshot.enabled", kind: sysProp},
	{key: "admin.restore.enabled", kind: sysProp, why: "zkraft's AdminServer has no restore command"},
	{key: "metricsProvider.className"},
	{key: "metricsProvider.httpHost"},
	{key: "metricsProvider.httpPort"},
	{key: "metricsProvider.exportJvmInfo", why: "there is no JVM; the Go runtime's figures are not exported either"},
	{key: "metricsProvider.numWorkerThreads", why: "zkraft computes summaries when /metrics is read"},
	{key: "metricsProvider.maxQueueSize", why: "zkraft computes summaries when /metrics is read"},
	{key: "metricsProvider.workerShutdownTimeoutMs", why: "zkraft computes summaries when /metrics is read"},

	// Set by zkServer.sh or zkEnv.sh.
	{key: "zookeeper.log.dir", kind: sysOnly, why: "zkraft logs to stderr (--log-level); redirect it where ZooKeeper's log went"},
	{key: "zookeeper.log.file", kind: sysOnly, why: "zkraft logs to stderr (--log-level); redirect it where ZooKeeper's log went"},
	{key: "zookeeper.root.logger", kind: sysOnly, why: "zkraft logs to stderr (--log-level)"},
	{key: "zookeeper.jmx.log4j.disable", kind: sysOnly, why: whyJava},
}

// lookupKey finds the row of a zoo.cfg key that QuorumPeerConfig parses.
func lookupCfgKey(k string) (*zkKey, bool) {
	for i := range zooKeeperKeys {
		z := &zooKeeperKeys[i]
		if z.kind != cfgKey {
			continue
		}
		if z.key == k || (z.prefix && strings.HasPrefix(k, z.key)) {
			return z, true
		}
	}
	return nil, false
}

// isCfgKey reports whether QuorumPeerConfig parses zoo.cfg key k itself
// (as opposed to turning it into the system property zookeeper.<k>).
func isCfgKey(k string) bool {
	if strings.HasPrefix(k, "metricsProvider.") || strings.HasPrefix(k, "server.") ||
		strings.HasPrefix(k, "group") || strings.HasPrefix(k, "weight") {
		return true
	}
	_, ok := lookupCfgKey(k)
	return ok
}

// lookupProp finds the row of system property p.
func lookupProp(p string) (*zkKey, bool) {
	for i := range zooKeeperKeys {
		z := &zooKeeperKeys[i]
		for _, name := range z.propNames() {
			if name == p || (z.prefix && strings.HasPrefix(p, name)) {
				return z, true
			}
		}
	}
	return nil, false
}

// propNames are the system properties a row is read from.
func (z *zkKey) propNames() []string {
	switch z.kind {
	case sysProp:
		return append([]string{"zookeeper." + z.key}, z.props...)
	case sysOnly:
		return append([]string{z.key}, z.props...)
	}
	return z.props
}
