package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/zktest"
	"github.com/zkraft/zkraft/zkdata"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("zkfixture: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: zkfixture load|prune ...")
	}
	switch os.Args[1] {
	case "load":
		load(os.Args[2:])
	case "prune":
		prune(os.Args[2:])
	default:
		log.Fatalf("unknown command %q", os.Args[1])
	}
}

func connect(addr string, timeout time.Duration) *zk.Conn {
	c, ev, err := zk.Connect([]string{addr}, timeout, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for c.State() != zk.StateHasSession {
		select {
		case <-ev:
		case <-deadline:
			log.Fatalf("no session with %s", addr)
		}
	}
	return c
}

func must(v string, err error) string {
	if err != nil {
		log.Fatalf("%s: %v", v, err)
	}
	return v
}

func check(what string, err error) {
	if err != nil {
		log.Fatalf("%s: %v", what, err)
	}
}

func expect(what string, err, want error) {
	if err != want {
		log.Fatalf("%s: %v, want %v", what, err, want)
	}
}

func load(args []string) {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:2181", "ZooKeeper address")
	out := fs.String("out", "expected.json", "where to write the client's view of the tree")
	bulk := fs.Int("bulk", 150, "nodes created under /bulk")
	fs.Parse(args)

	open := zk.WorldACL(zk.PermAll)
	s1 := connect(*addr, 30*time.Second)
	s2 := connect(*addr, 20*time.Second)
	s3 := connect(*addr, 30*time.Second)
	s4 := connect(*addr, 30*time.Second)
	check("auth", s4.AddAuth("digest", []byte("alice:secret")))

	// Persistent nodes, data of every shape; the root gets data too.
	must(s1.Create("/app", []byte("app"), 0, open))
	_, err := s1.Set("/", []byte("root data"), -1)
	check("set /", err)
	must(s1.Create("/app/null", nil, 0, open))
	must(s1.Create("/app/empty", []byte{}, 0, open))
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	must(s1.Create("/app/binary", bin, 0, open))
	must(s1.Create("/app/big", bytes.Repeat([]byte("0123456789abcdef"), 256), 0, open))
	must(s1.Create("/app/ünïcødé-名前", []byte("unicode"), 0, open))

	// Containers and TTL nodes; the server reaps the used empty container
	// and the short TTL node with deleteContainer transactions.
	must(s1.CreateContainer("/app/cont-used", nil, zk.FlagContainer, open))
	must(s1.Create("/app/cont-used/child", nil, 0, open))
	check("delete", s1.Delete("/app/cont-used/child", -1))
	must(s1.CreateContainer("/app/cont-kept", []byte("c"), zk.FlagContainer, open))
	must(s1.Create("/app/cont-kept/child", nil, 0, open))
	must(s1.CreateContainer("/app/cont-never", nil, zk.FlagContainer, open))
	must(s1.CreateTTL("/app/ttl-short", nil, zk.FlagTTL, open, 200*time.Millisecond))
	must(s1.CreateTTL("/app/ttl-long", []byte("ttl"), zk.FlagTTL, open, 10*365*24*time.Hour))
	must(s1.CreateTTL("/app/ttl-seq-", nil, zk.FlagPersistentSequentialWithTTL, open, 24*time.Hour))
	reapDeadline := time.Now().Add(10 * time.Second)

	// Sequential nodes; some deleted so that cversion and numChildren part.
	must(s1.Create("/app/seq", nil, 0, open))
	var seqs []string
	for i := 0; i < 6; i++ {
		seqs = append(seqs, must(s1.Create("/app/seq/s-", []byte(strconv.Itoa(i)), zk.FlagSequence, open)))
	}
	check("delete", s1.Delete(seqs[1], -1))
	check("delete", s1.Delete(seqs[4], -1))

	// Ephemerals of three sessions; s3 closes and takes its own along.
	must(s1.Create("/app/eph-s1", []byte("s1"), zk.FlagEphemeral, open))
	must(s1.Create("/app/seq/e-", nil, zk.FlagEphemeralSequential, open))
	must(s1.Create("/app/seq/e-", nil, zk.FlagEphemeralSequential, open))
	must(s2.Create("/app/eph-s2", nil, zk.FlagEphemeral, open))
	must(s3.Create("/app/eph-s3", nil, zk.FlagEphemeral, open))
	must(s3.Create("/app/seq/e3-", nil, zk.FlagEphemeralSequential, open))

	// ACLs of every scheme, and ACL changes.
	alice := zk.DigestACL(zk.PermAll, "alice", "secret")
	must(s4.Create("/app/acl-digest", []byte("alice only"), 0, alice))
	must(s4.Create("/app/acl-auth", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "auth", ID: ""}}))
	must(s4.Create("/app/eph-s4", nil, zk.FlagEphemeral, alice))
	must(s1.Create("/app/acl-read", []byte("ro"), 0, zk.WorldACL(zk.PermRead)))
	must(s1.Create("/app/acl-ip", nil, 0, []zk.ACL{
		{Perms: zk.PermAll, Scheme: "ip", ID: "127.0.0.1"},
		{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
	}))
	must(s1.Create("/app/acl-change", nil, 0, open))
	_, err = s1.SetACL("/app/acl-change", zk.WorldACL(zk.PermRead|zk.PermWrite|zk.PermAdmin), 0)
	check("setACL", err)
	_, err = s1.SetACL("/app/acl-change", zk.WorldACL(zk.PermAll), 1)
	check("setACL", err)

	// Quotas: a soft one on /app and a hard one on /bulk, as zkCli's
	// setquota writes them.
	must(s1.Create("/zookeeper/quota/app", nil, 0, open))
	must(s1.Create("/zookeeper/quota/app/zookeeper_limits", []byte("count=5000,bytes=1000000"), 0, open))
	must(s1.Create("/zookeeper/quota/app/zookeeper_stats", []byte("count=0,bytes=0"), 0, open))
	must(s1.Create("/bulk", nil, 0, open))
	must(s1.Create("/zookeeper/quota/bulk", nil, 0, open))
	must(s1.Create("/zookeeper/quota/bulk/zookeeper_limits", []byte("count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=100000"), 0, open))
	must(s1.Create("/zookeeper/quota/bulk/zookeeper_stats", []byte("count=0,bytes=0"), 0, open))

	// Multis that succeed and fail; failed single writes.
	must(s1.Create("/app/multi", nil, 0, open))
	_, err = s1.Multi(
		&zk.CreateRequest{Path: "/app/multi/a", Data: []byte("a"), Acl: open},
		&zk.CreateRequest{Path: "/app/multi/b", Acl: open},
		&zk.SetDataRequest{Path: "/app/multi/a", Data: []byte("a2"), Version: 0},
		&zk.CheckVersionRequest{Path: "/app/multi", Version: 0},
		&zk.DeleteRequest{Path: "/app/multi/b", Version: 0},
	)
	check("multi", err)
	_, err = s1.Multi(
		&zk.CreateRequest{Path: "/app/multi/c", Acl: open},
		&zk.DeleteRequest{Path: "/app/nonexistent", Version: -1},
	)
	expect("failed multi", err, zk.ErrNoNode)
	_, err = s1.Create("/app", nil, 0, open)
	expect("create existing", err, zk.ErrNodeExists)
	expect("delete missing", s1.Delete("/app/nonexistent", -1), zk.ErrNoNode)
	_, err = s1.Set("/app", nil, 42)
	expect("bad version", err, zk.ErrBadVersion)

	// Bulk load from several goroutines (so that the fuzzy snapshots the
	// server takes meanwhile catch writes in flight), with updates and
	// deletes.
	var wg sync.WaitGroup
	const writers = 4
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < *bulk; i += writers {
				p := fmt.Sprintf("/bulk/n-%04d", i)
				must(s1.Create(p, []byte(fmt.Sprintf("value %d", i)), 0, open))
				if i%3 == 0 {
					_, err := s1.Set(p, []byte(fmt.Sprintf("updated %d", i)), 0)
					check("set", err)
				}
				if i%7 == 0 {
					check("delete", s1.Delete(p, -1))
				}
			}
		}(w)
	}
	wg.Wait()

	for _, p := range []string{"/app/cont-used", "/app/ttl-short"} {
		for {
			ok, _, err := s1.Exists(p)
			check("exists", err)
			if !ok {
				break
			}
			if time.Now().After(reapDeadline) {
				log.Fatalf("%s was not reaped (is znode.container.checkIntervalMs set?)", p)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	s3.Close()

	dumper := connect(*addr, 10*time.Second)
	check("auth", dumper.AddAuth("digest", []byte("super:secret")))
	nodes, err := zktest.DumpTree(dumper)
	check("dump", err)
	dumper.Close()
	d := &zktest.Dump{Nodes: nodes}
	for _, s := range []*zk.Conn{s1, s2, s4} {
		ses := zktest.Session{ID: s.SessionID()}
		for _, n := range nodes {
			if n.Stat.EphemeralOwner == s.SessionID() {
				ses.Ephemerals = append(ses.Ephemerals, n.Path)
			}
		}
		d.Sessions = append(d.Sessions, ses)
	}
	check("write", zktest.WriteDump(*out, d))
	fmt.Println("READY")
	// Hold the sessions until killed (or stdin closes).
	io.Copy(io.Discard, os.Stdin)
	select {}
}

// prune keeps the newest snapshots and the logs needed to replay from the
// oldest kept one, and cuts the preallocated zeros off the logs.
func prune(args []string) {
	fs := flag.NewFlagSet("prune", flag.ExitOnError)
	keep := fs.Int("keep", 2, "snapshots to keep")
	data := fs.String("data", "", "ZooKeeper dataDir")
	logDir := fs.String("log", "", "ZooKeeper dataLogDir (default: the dataDir)")
	fs.Parse(args)
	if *logDir == "" {
		*logDir = *data
	}
	snaps := zxidFiles(filepath.Join(*data, "version-2"), "snapshot.")
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].zxid > snaps[j].zxid })
	if len(snaps) > *keep {
		for _, s := range snaps[*keep:] {
			check("remove", os.Remove(s.path))
		}
		snaps = snaps[:*keep]
	}
	oldest := snaps[len(snaps)-1].zxid
	logs := zxidFiles(filepath.Join(*logDir, "version-2"), "log.")
	sort.Slice(logs, func(i, j int) bool { return logs[i].zxid < logs[j].zxid })
	first := 0
	for i, l := range logs {
		if l.zxid <= oldest {
			first = i
		}
	}
	for _, l := range logs[:first] {
		check("remove", os.Remove(l.path))
	}
	for _, l := range logs[first:] {
		r, err := zkdata.OpenLog(l.path)
		check("open log", err)
		for {
			_, _, err := r.Next()
			if err == io.EOF {
				break
			}
			check("read log", err)
		}
		end := r.Offset()
		r.Close()
		check("truncate", os.Truncate(l.path, end))
	}
}

type zxidFile struct {
	path string
	zxid int64
}

func zxidFiles(dir, prefix string) []zxidFile {
	entries, err := os.ReadDir(dir)
	check("read dir", err)
	var out []zxidFile
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		hex := strings.Split(strings.TrimPrefix(e.Name(), prefix), ".")[0]
		z, err := strconv.ParseInt(hex, 16, 64)
		if err != nil {
			continue
		}
		out = append(out, zxidFile{filepath.Join(dir, e.Name()), z})
	}
	return out
}
