package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/zktest"
	"github.com/zkraft/zkraft/server"
)

// TestAuditLogMatchesZooKeeper: the same clients' changes, made on a real
// ZooKeeper 3.8 with zookeeper.audit.enable=true and on zkraft with
// --audit-log, give the same audit lines (level, logger and message; the
// session ids numbered in order of appearance), serverStart included.
func TestAuditLogMatchesZooKeeper(t *testing.T) {
	zktest.Require(t)
	z := zktest.Start(t, zktest.Config{DataDir: t.TempDir(), Props: map[string]string{"zookeeper.audit.enable": "true"}})
	auditScript(t, z.Addr)
	zkLines := zooKeeperAuditLines(z.Log(1 << 20))

	auditFile := filepath.Join(t.TempDir(), "audit.log")
	cfg, _, err := serveConfig([]string{"--client-addr", fmt.Sprintf("127.0.0.1:%d", zktest.FreePort(t)),
		"--data-dir", t.TempDir(), "--extended-types", "--super-digest", zktest.SuperDigest,
		"--log-level", "error", "--audit-log", auditFile}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Admin.Enabled, cfg.Metrics.Addr = false, ""
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	auditScript(t, srv.Addr().String())
	srv.Close()
	b, err := os.ReadFile(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	ours := zkraftAuditLines(t, string(b))
	if len(ours) == 0 || ours[len(ours)-1] != "INFO "+server.AuditLogger+" user="+osUser(zkLines)+"\toperation=serverStop\tresult=invoked" {
		t.Errorf("zkraft's audit log does not end with serverStop: %q", ours)
	} else {
		ours = ours[:len(ours)-1] // ZooKeeper logs it when its JVM exits, after the test reads
	}
	if len(zkLines) < 10 {
		t.Fatalf("ZooKeeper logged too few audit lines (%d):\n%s", len(zkLines), strings.Join(zkLines, "\n"))
	}
	if got, want := strings.Join(numberSessions(ours), "\n"), strings.Join(numberSessions(zkLines), "\n"); got != want {
		t.Errorf("zkraft's audit lines:\n%s\nZooKeeper's:\n%s", got, want)
	}
}

// auditScript makes changes that ZooKeeper audits, and some it does not,
// from a client without auth, the super user and a digest user.
func auditScript(t *testing.T, addr string) {
	t.Helper()
	plain, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	super := zktest.Connect(t, addr)
	alice, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if err := alice.AddAuth("digest", []byte("alice:pw")); err != nil {
		t.Fatal(err)
	}
	open := zk.WorldACL(zk.PermAll)
	expect := func(err, want error) {
		t.Helper()
		if err != want {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	_, err = plain.Create("/a", []byte("x"), 0, open)
	expect(err, nil)
	_, err = plain.Create("/a", nil, 0, open)
	expect(err, zk.ErrNodeExists)
	_, err = plain.Create("/a/s-", nil, zk.FlagSequence, open)
	expect(err, nil)
	_, err = plain.Create("/a/e", nil, zk.FlagEphemeral, open)
	expect(err, nil)
	_, err = plain.Create("/a/es-", nil, zk.FlagEphemeral|zk.FlagSequence, open)
	expect(err, nil)
	_, err = plain.Set("/a", []byte("y"), -1)
	expect(err, nil)
	_, err = plain.Set("/nope", nil, -1)
	expect(err, zk.ErrNoNode)
	_, _, err = plain.Get("/a") // reads are not audited
	expect(err, nil)
	_, err = alice.Create("/alice", []byte("a\tb\nc"), 0, zk.DigestACL(zk.PermAll, "alice", "pw"))
	expect(err, nil)
	_, err = super.SetACL("/a", append(zk.DigestACL(zk.PermRead|zk.PermAdmin, "alice", "pw"), open...), -1)
	expect(err, nil)
	_, err = plain.SetACL("/alice", open, -1)
	expect(err, zk.ErrNoAuth)
	_, err = plain.Set("/alice", nil, -1)
	expect(err, zk.ErrNoAuth)
	expect(plain.Delete("/a/e", -1), nil)
	expect(plain.Delete("/nope", -1), zk.ErrNoNode)
	_, err = plain.CreateContainer("/box", nil, zk.FlagContainer, open)
	expect(err, nil)
	_, err = plain.CreateTTL("/ttl", nil, zk.FlagTTL, open, time.Hour)
	expect(err, nil)
	_, err = plain.Multi(
		&zk.CreateRequest{Path: "/m", Data: []byte("1"), Acl: open},
		&zk.CreateRequest{Path: "/m/s-", Acl: open, Flags: zk.FlagSequence},
		&zk.CreateRequest{Path: "/m/e", Acl: open, Flags: zk.FlagEphemeral},
		&zk.SetDataRequest{Path: "/m", Data: []byte("2"), Version: -1},
		&zk.CheckVersionRequest{Path: "/m", Version: 1},
		&zk.DeleteRequest{Path: "/m/e", Version: -1},
	)
	expect(err, nil)
	_, err = plain.Multi(
		&zk.CreateRequest{Path: "/m2", Acl: open},
		&zk.CreateRequest{Path: "/m", Acl: open},
	)
	expect(err, zk.ErrNodeExists)
	expect(super.Delete("/a/s-0000000000", -1), nil)
	// The plain session's close deletes its last ephemeral, which is
	// audited: wait until that is done, so the log is read after it.
	plain.Close()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ok, _, err := super.Exists("/a/es-0000000002")
		if err == nil && !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed session's ephemeral is still there (%v)", err)
		}
	}
}

var (
	// ZooKeeper's test log: "%d{ISO8601} %-5p [%t:%C{1}@%L] - %m".
	zkAuditLine = regexp.MustCompile(`^\S+ \S+ (INFO|ERROR)\s+\[[^\]]*:Slf4jAuditLogger@\d+\] - (.*)$`)
	// zkraft's: "%d{ISO8601} %p %c{2}: %m".
	ourAuditLine = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|ERROR) audit\.Slf4jAuditLogger: (.*)$`)
	sessionField = regexp.MustCompile(`session=0x[0-9a-f]+`)
)

func zooKeeperAuditLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if m := zkAuditLine.FindStringSubmatch(l); m != nil {
			out = append(out, m[1]+" "+server.AuditLogger+" "+m[2])
		}
	}
	return out
}

func zkraftAuditLines(t *testing.T, log string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		m := ourAuditLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("not an audit line: %q", l)
			continue
		}
		out = append(out, m[1]+" "+server.AuditLogger+" "+m[2])
	}
	return out
}

// osUser is the user of ZooKeeper's serverStart line.
func osUser(lines []string) string {
	for _, l := range lines {
		if strings.Contains(l, "operation=serverStart") {
			u, _, _ := strings.Cut(strings.TrimPrefix(l[strings.Index(l, " user=")+1:], "user="), "\t")
			return u
		}
	}
	return "?"
}

// numberSessions replaces each session id by its order of appearance.
func numberSessions(lines []string) []string {
	seen := map[string]int{}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = sessionField.ReplaceAllStringFunc(l, func(s string) string {
			if _, ok := seen[s]; !ok {
				seen[s] = len(seen) + 1
			}
			return fmt.Sprintf("session=S%d", seen[s])
		})
	}
	return out
}
