package server

import (
	"fmt"
	"strings"

	"github.com/zkraft/zkraft/raftsm"
	"github.com/zkraft/zkraft/znode"
)

// Version is what zkraft reports as its ZooKeeper version.
const Version = "3.9.3-zkraft, built on unknown"

var fourLetterWords = map[string]bool{
	"conf": true, "cons": true, "crst": true, "dirs": true, "dump": true, "envi": true, "gtmk": true,
	"ruok": true, "stmk": true, "srvr": true, "srst": true, "stat": true, "wchc": true, "wchp": true,
	"wchs": true, "mntr": true, "isro": true, "hash": true,
}

func isFourLetterWord(w string) bool { return fourLetterWords[w] }

func (s *Server) fourLetterWordEnabled(w string) bool {
	for _, e := range s.cfg.FourLetterWords {
		if e == "*" || e == w {
			return true
		}
	}
	return false
}

// fourLetterWord answers a four-letter word and closes the connection.
func (c *conn) fourLetterWord(w string) {
	s := c.srv
	var out string
	switch {
	case !s.fourLetterWordEnabled(w):
		out = w + " is not executed because it is not in the whitelist.\n"
	case w != "ruok" && w != "isro" && !c.cell.serving():
		out = "This ZooKeeper instance is not currently serving requests\n"
	case w == "ruok":
		out = "imok"
	case w == "isro":
		out = "rw"
	case w == "srvr":
		out = s.srvr()
	case w == "wchs":
		watches, paths, conns := c.cell.watches.count()
		out = fmt.Sprintf("%d connections watching %d paths\nTotal watches:%d\n", conns, paths, watches)
	default:
		out = w + " is not supported by zkraft yet.\n"
	}
	c.enqueue([]byte(out))
	c.closeAfterFlush()
}

func (s *Server) nodeCount() int {
	v, err := s.nh.StaleRead(s.cell.shardID, raftsm.ReadFunc(func(v raftsm.View) (any, error) {
		return znode.Reader{KV: v.Tree(), Auth: superAuth}.CountDescendants("/")
	}))
	if err != nil {
		return 0
	}
	// ZooKeeper's node count holds the root twice ("" and "/").
	return int(v.(int32)) + 2
}

func (s *Server) srvr() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Zookeeper version: %s\n", Version)
	fmt.Fprintf(&b, "Latency min/avg/max: 0/0.0/0\n")
	fmt.Fprintf(&b, "Received: %d\n", s.stats.received.Load())
	fmt.Fprintf(&b, "Sent: %d\n", s.stats.sent.Load())
	fmt.Fprintf(&b, "Connections: %d\n", s.connCount())
	fmt.Fprintf(&b, "Outstanding: 0\n")
	fmt.Fprintf(&b, "Zxid: 0x%x\n", s.lastZxid())
	fmt.Fprintf(&b, "Mode: %s\n", s.mode())
	fmt.Fprintf(&b, "Node count: %d\n", s.nodeCount())
	return b.String()
}
