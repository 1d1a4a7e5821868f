package session_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/client/session"
	"github.com/zkraft/zkraft/internal/clienttest"
)

// servers are the addresses of the ensemble: the examples run against an
// in-process zkraft that TestMain starts.
var servers []string

func TestMain(m *testing.M) { os.Exit(clienttest.Main(m, &servers)) }

// Open a session, log its transitions, and use its connection. Work that
// depends on the session pauses with WaitSafe while it is in jeopardy and
// stops when it is lost.
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session.Open(ctx, session.Config{
		Servers:        servers,
		SessionTimeout: 10 * time.Second,
		OnEvent: func(e session.Event) {
			// safe, jeopardy (pause), lost (stop; a new session follows)
			log.Printf("session 0x%x: %v (%v)", e.SessionID, e.State, e.Err)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	fmt.Println(s.State())
	// An ephemeral node lives as long as this session.
	if _, err := s.Conn().Create("/example-session-owned", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		log.Fatal(err)
	}
	// s.Context() ends when this session is lost; its cause says why.
	work := s.Context()
	if err := s.WaitSafe(work); err != nil {
		log.Fatal(err)
	}
	fmt.Println("safe to work")
	// Output:
	// safe
	// safe to work
}
