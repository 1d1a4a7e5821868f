package raftsm

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

const importedSession = 0x0100000960cd0001

// sampleState is a small tree as a ZooKeeper data directory gives it: a
// stored cversion above the child count, an ephemeral, a container, a TTL
// node, null and empty data, and a zxid in epoch 0.
func sampleState() *ImportedState {
	node := func(czxid int64, cversion int32, data []byte, owner int64) *znode.Node {
		return &znode.Node{Data: data, ACL: znode.OpenACL, Czxid: czxid, Mzxid: czxid, Pzxid: czxid,
			Ctime: 1700000000000, Mtime: 1700000000000, Cversion: cversion, EphemeralOwner: owner, NumChildren: 99}
	}
	root := node(0, 2, []byte("root"), 0)
	root.Czxid, root.Mzxid = 0, 0
	return &ImportedState{
		Zxid: 0x1db,
		Nodes: []ImportedNode{
			{"/", root},
			{"/zookeeper", node(0, 0, []byte{}, 0)},
			{"/zookeeper/config", &znode.Node{Data: []byte{}, ACL: znode.ReadACLUnsafe, Aversion: -1}},
			{"/zookeeper/quota", node(0, 0, []byte{}, 0)},
			{"/app", node(5, 7, nil, 0)},
			{"/app/cont", node(6, 1, []byte{}, znode.ContainerOwner)},
			{"/app/eph", node(7, 0, []byte("e"), importedSession)},
			{"/app/ttl", node(8, 0, []byte("t"), znode.TTLOwner(3600000))},
		},
		Sessions: []SessionInfo{{ID: importedSession, Timeout: 30000}},
	}
}

func TestImportState(t *testing.T) {
	dir := t.TempDir()
	st := sampleState()
	if err := ImportState(dir, 1, 1, st); err != nil {
		t.Fatal(err)
	}
	if err := ImportState(dir, 1, 1, st); !errors.Is(err, ErrStoreExists) {
		t.Fatalf("second import: %v, want ErrStoreExists", err)
	}

	// Read back while stopped: everything, NumChildren counted.
	got, err := ExportState(dir, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Zxid != 1<<32 {
		t.Errorf("zxid %#x, want %#x", got.Zxid, int64(1)<<32)
	}
	if !reflect.DeepEqual(got.Sessions, st.Sessions) {
		t.Errorf("sessions %+v, want %+v", got.Sessions, st.Sessions)
	}
	if len(got.Nodes) != len(st.Nodes)+1 {
		t.Fatalf("%d nodes, want %d and the feature node", len(got.Nodes), len(st.Nodes))
	}
	want := map[string]*znode.Node{
		znode.FeaturesPath: {Data: []byte(znode.Features), ACL: znode.ReadACLUnsafe},
	}
	for _, n := range st.Nodes {
		want[n.Path] = n.Node
	}
	counts := map[string]int32{"/": 2, "/zookeeper": 3, "/app": 3}
	for _, n := range got.Nodes {
		w := want[n.Path].Clone()
		w.NumChildren = counts[n.Path]
		if !reflect.DeepEqual(n.Node, w) {
			t.Errorf("%s: %+v, want %+v", n.Path, n.Node, w)
		}
	}
	if got.Nodes[1].Path != "/app" || got.Nodes[1].Node.Data != nil {
		t.Errorf("second node %s with data %q, want /app with null data", got.Nodes[1].Path, got.Nodes[1].Node.Data)
	}

	// Open it as Dragonboat would: applied index 0, the tree visible, the
	// first entry applies at index 1 with a zxid in the next epoch.
	h := newHarness(t, dir)
	if h.index != 0 {
		t.Fatalf("Open returned applied index %d, want 0", h.index)
	}
	if f := h.view(func(v View) (any, error) { return v.HistoryFloor() }).(int64); f != 1<<32 {
		t.Errorf("history floor %#x, want %#x", f, int64(1)<<32)
	}
	if n := h.node("/app"); n == nil || n.Stat().Cversion != 2*7-3 {
		t.Fatalf("/app: %+v", n)
	}
	cands := h.view(func(v View) (any, error) { return v.SweepCandidates(1700000000000+7200000, 10) }).([]string)
	if !reflect.DeepEqual(cands, []string{"/app/cont", "/app/ttl"}) {
		t.Errorf("sweep candidates %v", cands)
	}
	r := h.apply1(create(importedSession, "/app/new", jute.FlagPersistentSequential))
	if r.Err != jute.ErrOK || r.Zxid != 1<<32+1 {
		t.Fatalf("create: %+v", r)
	}
	if n := h.node("/app/new0000000007"); n == nil || n.Czxid != 1<<32+1 {
		t.Errorf("sequential create after import: %+v", n)
	}
	// The imported session owns its ephemeral: closing it deletes it.
	if r := h.apply1(closeSession(importedSession)); r.Err != jute.ErrOK {
		t.Fatalf("closeSession: %+v", r)
	}
	if n := h.node("/app/eph"); n != nil {
		t.Errorf("/app/eph survived its session")
	}
	if err := h.sm.Close(); err != nil {
		t.Fatal(err)
	}
	got, err = ExportState(dir, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Zxid != 1<<32+2 || len(got.Sessions) != 0 || len(got.Nodes) != len(st.Nodes)+1 {
		t.Errorf("after two writes: zxid %#x, %d sessions, %d nodes", got.Zxid, len(got.Sessions), len(got.Nodes))
	}
}

func TestImportStateRefusesBadStates(t *testing.T) {
	cases := map[string]func(st *ImportedState){
		"root not first":    func(st *ImportedState) { st.Nodes[0], st.Nodes[1] = st.Nodes[1], st.Nodes[0] },
		"child first":       func(st *ImportedState) { st.Nodes[4], st.Nodes[5] = st.Nodes[5], st.Nodes[4] },
		"twice":             func(st *ImportedState) { st.Nodes = append(st.Nodes, st.Nodes[4]) },
		"orphan ephemeral":  func(st *ImportedState) { st.Sessions = nil },
		"bad path":          func(st *ImportedState) { st.Nodes[7].Path = "/app/ttl/" },
		"no /zookeeper":     func(st *ImportedState) { st.Nodes = append(st.Nodes[:1], st.Nodes[4:]...) },
		"zero timeout":      func(st *ImportedState) { st.Sessions[0].Timeout = 0 },
		"nil node":          func(st *ImportedState) { st.Nodes[5].Node = nil },
		"no nodes":          func(st *ImportedState) { st.Nodes = nil },
		"missing /zk/quota": func(st *ImportedState) { st.Nodes = append(st.Nodes[:3], st.Nodes[4:]...) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			st := sampleState()
			mutate(st)
			if err := ImportState(dir, 1, 1, st); !errors.Is(err, ErrBadImport) {
				t.Fatalf("got %v, want ErrBadImport", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a refused import left %v behind", entries)
			}
		})
	}
}

func TestExportStateWithoutStore(t *testing.T) {
	if _, err := ExportState(t.TempDir(), 1, 1); !errors.Is(err, ErrNoStore) {
		t.Fatalf("got %v, want ErrNoStore", err)
	}
}

func TestImportStateBatches(t *testing.T) {
	old := importBatchBytes
	importBatchBytes = 512
	defer func() { importBatchBytes = old }()
	st := sampleState()
	for i := 0; i < 200; i++ {
		st.Nodes = append(st.Nodes, ImportedNode{Path: "/app/cont/n" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Node: &znode.Node{Data: []byte("x"), ACL: znode.OpenACL}})
	}
	dir := t.TempDir()
	if err := ImportState(dir, 3, 2, st); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "shard-3-replica-2")); err != nil {
		t.Fatal(err)
	}
	got, err := ExportState(dir, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != len(st.Nodes)+1 {
		t.Errorf("%d nodes, want %d and the feature node", len(got.Nodes), len(st.Nodes))
	}
}
