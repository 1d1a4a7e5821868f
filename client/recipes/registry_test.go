package recipes_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zkraft/zkraft/client/cache"
	"github.com/zkraft/zkraft/client/recipes"
	"github.com/zkraft/zkraft/client/session"
	"github.com/zkraft/zkraft/internal/clienttest"
)

// Instances register and deregister; a view follows them; an instance
// whose session is lost is registered again on the next session.
func testRegistry(t *testing.T, tg *clienttest.Target) {
	d := dir(t) + "/api"
	ctx := within(t, 60*time.Second)
	var mu sync.Mutex
	var aChanges []string // what the view reported for instance a
	view, err := recipes.NewView(ctx, open(t, tg.Addr()), d, recipes.OnViewChange(func(c cache.Change) {
		if c.Path == d+"/a" {
			mu.Lock()
			aChanges = append(aChanges, c.Type.String())
			mu.Unlock()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	waitView := func(want string) {
		t.Helper()
		deadline := time.After(4 * timeout)
		for {
			ch := view.Changed()
			got := fmt.Sprint(view.Instances())
			if got == want {
				return
			}
			select {
			case <-ch:
			case <-deadline:
				t.Fatalf("view %s, want %s", got, want)
			}
		}
	}
	waitView("[]")
	creds := new(clienttest.Creds)
	sa, err := session.Open(ctx, session.Config{Servers: []string{tg.Addr()}, SessionTimeout: timeout, Dialer: creds.Dial})
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	ra, err := recipes.Register(ctx, sa, d, recipes.Instance{ID: "a", Address: "10.0.0.1:80"})
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	rb, err := recipes.Register(ctx, open(t, tg.Addr()), d, recipes.Instance{ID: "b", Address: "10.0.0.2:80", Meta: map[string]string{"zone": "z1"}})
	if err != nil {
		t.Fatal(err)
	}
	waitView("[{a 10.0.0.1:80 map[]} {b 10.0.0.2:80 map[zone:z1]}]")
	if err := rb.Close(); err != nil {
		t.Fatal(err)
	}
	waitView("[{a 10.0.0.1:80 map[]}]")
	// a's session ends: its instance goes, and comes back on a's next
	// session.
	id, passwd := creds.Session()
	if err := clienttest.KillSession(tg.Addr(), id, passwd); err != nil {
		t.Fatal(err)
	}
	waitView("[{a 10.0.0.1:80 map[]}]")
	deadline := time.Now().Add(4 * timeout)
	for {
		mu.Lock()
		got := fmt.Sprint(aChanges)
		mu.Unlock()
		if got == "[created deleted created]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the view reported %s for a, want it created, gone with its session, and created again", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if sa.SessionID() == id {
		t.Fatal("the instance came back on the killed session")
	}
	c := dial(t, tg.Addr())
	if _, st, err := c.Get(d + "/a"); err != nil || st.EphemeralOwner != sa.SessionID() {
		t.Fatalf("a's node: %+v %v, want owned by 0x%x", st, err, sa.SessionID())
	}
}
