package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Containers (createContainer, op 19) and TTL nodes (createTTL, op 21),
// which the server deletes by itself (zookeeper-facts.md §1.5, §1.6, §3.5).
// The server checks for them every second (znode.container.checkIntervalMs
// = 1000 / ContainerCheckInterval, see scripts/zk-differential.sh and
// embedded_test.go) and has extended types (TTL) enabled.

// reaperBound bounds how long the server may take to delete a container or
// an expired TTL node: a few check intervals, with slack for a loaded machine.
const reaperBound = 10 * time.Second

func TestContainerLifecycle(t *testing.T) {
	t.Parallel() // slow: waits for the container reaper
	base := uniquePath(t)
	c, _ := connect(t)
	rc := rawSession(t, 10000)

	// createContainer answers with Create2Response; the container marker is
	// hidden from clients (ephemeralOwner 0), as for TTL nodes.
	used := base + "/used"
	rep, p, st := rc.createContainer(used, []byte("c"))
	if rep.Err != errOK || p != used || st.EphemeralOwner != 0 || st.Czxid != rep.Zxid || st.DataLength != 1 {
		t.Fatalf("createContainer: %v %q %+v; want the path and a Stat with ephemeralOwner 0", rep, p, st)
	}
	never, err := c.CreateContainer(base+"/never", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	full, err := c.CreateContainer(base+"/full", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	for _, cp := range []string{used, never, full} {
		if st := mustStat(t, c, cp); st.EphemeralOwner != 0 {
			t.Fatalf("%s ephemeralOwner = %#x, want 0", cp, st.EphemeralOwner)
		}
	}
	mustCreate(t, c, used+"/child", nil, 0)
	mustCreate(t, c, full+"/child", nil, 0)
	_, _, gone, err := c.ExistsW(used)
	if err != nil {
		t.Fatal(err)
	}

	// A container with a child stays, however many check intervals pass.
	time.Sleep(2500 * time.Millisecond)
	mustStat(t, c, used)

	// Once its last child is deleted, the server deletes it (as an ordinary
	// delete: watches fire).
	if err := c.Delete(used+"/child", -1); err != nil {
		t.Fatal(err)
	}
	took := waitGone(t, c, used, reaperBound)
	t.Logf("container deleted %v after its last child", took.Round(100*time.Millisecond))
	wantEvent(t, gone, zk.EventNodeDeleted, used)
	pst := mustStat(t, c, base)
	if pst.NumChildren != 2 {
		t.Fatalf("parent after the container was deleted: numChildren %d, want 2", pst.NumChildren)
	}

	// A container that never had a child is never deleted (cversion 0), and
	// one that still has a child stays.
	if d := 3*time.Second - time.Since(created); d > 0 {
		time.Sleep(d)
	}
	mustStat(t, c, never)
	mustStat(t, c, full)
	// A container can take children like any node, including containers.
	sub, err := c.CreateContainer(never+"/sub", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	// Deleting sub leaves never empty with cversion > 0: now both go, the
	// parent once its only child has gone.
	if err := c.Delete(sub, -1); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, never, reaperBound)
}

func TestTTLNodeExpires(t *testing.T) {
	t.Parallel() // slow: waits for TTLs to pass
	base := uniquePath(t)
	c, _ := connect(t)
	rc := rawSession(t, 10000)

	// createTTL answers with Create2Response; clients see ephemeralOwner 0.
	short := base + "/short"
	rep, p, st := rc.createTTL(short, []byte("t"), flagTTL, 500)
	if rep.Err != errOK || p != short || st.EphemeralOwner != 0 || st.Czxid != rep.Zxid || st.DataLength != 1 {
		t.Fatalf("createTTL: %v %q %+v; want the path and a Stat with ephemeralOwner 0", rep, p, st)
	}
	// PERSISTENT_SEQUENTIAL_WITH_TTL appends the sequence number.
	rep, seq, st := rc.createTTL(base+"/seq-", nil, flagTTLSequential, 500)
	if rep.Err != errOK || seq != base+"/seq-0000000001" || st.EphemeralOwner != 0 {
		t.Fatalf("createTTL sequential: %v %q %+v; want %s/seq-0000000001", rep, seq, st, base)
	}
	// Through go-zookeeper.
	gp, err := c.CreateTTL(base+"/client", nil, zk.FlagTTL, zk.WorldACL(zk.PermAll), 500*time.Millisecond)
	if err != nil || gp != base+"/client" {
		t.Fatalf("CreateTTL = %q, %v", gp, err)
	}
	// A TTL node with a child is not deleted.
	parent := base + "/parent"
	rc.createTTL(parent, nil, flagTTL, 500)
	mustCreate(t, c, parent+"/child", nil, 0)
	// setData renews the TTL (it counts from mtime).
	renewed := base + "/renewed"
	if rep, _, _ := rc.createTTL(renewed, nil, flagTTL, 3000); rep.Err != errOK {
		t.Fatalf("createTTL 3 s: %v", rep)
	}
	createdRenewed := time.Now()

	for _, n := range []string{short, seq, gp} {
		took := waitGone(t, c, n, reaperBound)
		t.Logf("%s (ttl 500 ms) deleted after %v", n, took.Round(100*time.Millisecond))
	}

	time.Sleep(time.Until(createdRenewed.Add(2 * time.Second)))
	// The TTL counts from the mtime the server gives the setData, which is
	// after the call and may be well before its reply on a loaded machine:
	// the bound below is from the call.
	setAt := time.Now()
	if _, err := c.Set(renewed, []byte("renew"), -1); err != nil {
		t.Fatalf("set %s 2 s after its creation: %v", renewed, err)
	}
	// Without the renewal it would have gone 3 s after its creation plus at
	// most one check interval; with it, it must still be there at 4.5 s.
	time.Sleep(time.Until(createdRenewed.Add(4500 * time.Millisecond)))
	if ok, _, err := c.Exists(renewed); err != nil || !ok {
		t.Fatalf("%s gone 4.5 s after its creation although setData renewed it at 2 s (exists %v, %v)", renewed, ok, err)
	}
	waitGone(t, c, renewed, reaperBound)
	if since := time.Since(setAt); since < 3*time.Second-200*time.Millisecond {
		t.Fatalf("%s deleted %v after the setData that renewed it was sent; its ttl is 3 s", renewed, since)
	}

	mustStat(t, c, parent)
	if err := c.Delete(parent+"/child", -1); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, parent, reaperBound)
}

func TestTTLBadArguments(t *testing.T) {
	base := uniquePath(t)
	c := rawSession(t, 10000)
	n := base + "/n"
	const maxTTL = 1<<40 - 1 // about 34.8 years
	for _, tc := range []struct {
		name  string
		op    int32
		flags int32
		ttl   int64
		want  int32
	}{
		{"TTLZero", opCreateTTL, flagTTL, 0, errBadArguments},
		{"TTLNegative", opCreateTTL, flagTTL, -1, errBadArguments},
		{"TTLMin", opCreateTTL, flagTTL, 1, errOK},
		{"TTLMax", opCreateTTL, flagTTL, maxTTL, errOK},
		{"TTLTooLarge", opCreateTTL, flagTTL, maxTTL + 1, errBadArguments},
		{"TTLHuge", opCreateTTL, flagTTL, 1 << 62, errBadArguments},
		{"SequentialTTLZero", opCreateTTL, flagTTLSequential, 0, errBadArguments},
		{"SequentialTTLTooLarge", opCreateTTL, flagTTLSequential, maxTTL + 1, errBadArguments},
		// createTTL with a mode that is not a TTL mode. (Never with a
		// negative ttl: ZooKeeper 3.8.0 accepts that request and then dies
		// applying it.)
		{"PersistentMode", opCreateTTL, flagPersistent, 1000, errBadArguments},
		{"PersistentModeTTLZero", opCreateTTL, flagPersistent, 0, errBadArguments},
		{"EphemeralMode", opCreateTTL, flagEphemeral, 1000, errBadArguments},
		{"SequentialMode", opCreateTTL, flagPersistentSequential, 1000, errBadArguments},
		{"ContainerMode", opCreateTTL, flagContainer, 1000, errBadArguments},
		{"UnknownMode", opCreateTTL, 7, 1000, errBadArguments},
		// A TTL mode with the other create ops: no ttl, so BADARGUMENTS.
		{"Create2WithTTLMode", opCreate2, flagTTL, 0, errBadArguments},
		{"CreateWithTTLMode", opCreate, flagTTLSequential, 0, errBadArguments},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := createTTLReq(n, nil, tc.flags, tc.ttl)
			if tc.op != opCreateTTL {
				body = createReq(n, nil, tc.flags)
			}
			rep := c.call(tc.op, body)
			if rep.Err != tc.want || (tc.want != errOK && rep.Len != 16) {
				t.Fatalf("op %d flags %d ttl %d: %v, want %s", tc.op, tc.flags, tc.ttl, rep, errName(tc.want))
			}
			if tc.want == errOK {
				if _, _, st := c.getData(n, false); st.EphemeralOwner != 0 {
					t.Fatalf("TTL node ephemeralOwner %#x, want 0", st.EphemeralOwner)
				}
				c.callOK(opDelete, deleteReq(n, -1))
			} else if rep := c.call(opExists, pathWatchReq(n, false)); rep.Err != errNoNode {
				t.Fatalf("a refused create left %s behind", n)
			}
		})
	}
	// go-zookeeper refuses a non-TTL flag itself, before sending anything.
	g, _ := connect(t)
	if _, err := g.CreateTTL(n, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll), time.Second); !errors.Is(err, zk.ErrInvalidFlags) {
		t.Fatalf("CreateTTL with FlagPersistent: %v, want go-zookeeper's ErrInvalidFlags", err)
	}
	// A TTL node under an ephemeral: NOCHILDRENFOREPHEMERALS, like any node.
	c.callOK(opCreate, createReq(base+"/e", nil, flagEphemeral))
	if rep, _, _ := c.createTTL(base+"/e/ttl", nil, flagTTL, 1000); rep.Err != errNoChildrenForEphemerals {
		t.Fatalf("createTTL under an ephemeral: %v, want NOCHILDRENFOREPHEMERALS", rep)
	}
}
