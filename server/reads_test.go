package server

import (
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"
)

// TestStandaloneReadsLocallyAfterRestart: a standalone member reads
// without a ReadIndex once it has caught up at start, and a restart on the
// same data serves every acknowledged write to the first read.
func TestStandaloneReadsLocallyAfterRestart(t *testing.T) {
	restart := restartable(t)
	start := func() *Server {
		s := restart()
		if !s.cell.localReads.Load() {
			t.Fatal("a standalone member that has caught up still reads through ReadIndex")
		}
		return s
	}
	connect := func(s *Server) *zk.Conn { return connectZK(t, s.Addr().String()) }
	s := start()
	c := connect(s)
	const n = 250
	for i := range n {
		if _, err := c.Create(fmt.Sprintf("/n%03d", i), []byte{byte(i)}, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	s.Close()

	s = start()
	defer s.Close()
	c = connect(s)
	defer c.Close()
	data, _, err := c.Get(fmt.Sprintf("/n%03d", n-1))
	if err != nil || len(data) != 1 || data[0] != byte(n-1) {
		t.Fatalf("last acknowledged write after the restart: %v %v", data, err)
	}
	kids, _, err := c.Children("/")
	if err != nil || len(kids) != n+1 {
		t.Fatalf("children of / after the restart: %d (%v), want %d", len(kids), err, n+1)
	}
}
