package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"testing"

	"github.com/go-zookeeper/zk"
)

// TestChildrenPagesOfAHugeDirectory: a directory of 100,000 children is
// listed a page at a time, in byte order, every child once, each answer a
// page and not the directory.
func TestChildrenPagesOfAHugeDirectory(t *testing.T) {
	srv := startMember(t, nil)
	c := connect(t, srv.Addr().String(), superPass)
	open := zk.WorldACL(zk.PermAll)
	if _, err := c.Create("/huge", nil, 0, open); err != nil {
		t.Fatal(err)
	}
	const n, batch = 100000, 2000
	want := make([]string, 0, n)
	for i := 0; i < n; i += batch {
		ops := make([]any, 0, batch)
		for j := i; j < i+batch; j++ {
			name := fmt.Sprintf("c%d", j) // not in byte order as numbers
			want = append(want, name)
			ops = append(ops, &zk.CreateRequest{Path: "/huge/" + name, Acl: open})
		}
		if _, err := c.Multi(ops...); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(want)
	base := "http://" + srv.AdminAddr().String() + "/console/api/children"
	type page struct {
		Total    int      `json:"total"`
		Children []string `json:"children"`
		Next     string   `json:"next"`
	}
	get := func(after string, limit int) page {
		t.Helper()
		q := url.Values{"path": {"/huge"}, "after": {after}}
		if limit > 0 {
			q.Set("limit", fmt.Sprint(limit))
		}
		resp, err := http.Get(base + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p page
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, err)
		}
		return p
	}
	first := get("", 0)
	if first.Total != n || len(first.Children) != 200 || first.Children[0] != want[0] || first.Next != want[199] {
		t.Fatalf("first page: total %d, %d children, first %q, next %q", first.Total, len(first.Children), first.Children[0], first.Next)
	}
	var got []string
	pages := 0
	for after := ""; ; pages++ {
		p := get(after, 5000)
		if len(p.Children) > 5000 {
			t.Fatalf("a page of %d", len(p.Children))
		}
		got = append(got, p.Children...)
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if len(got) != n || pages != n/5000-1 {
		t.Fatalf("%d children in %d pages", len(got), pages+1)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("child %d: %q, want %q", i, got[i], want[i])
		}
	}
	// A larger page than allowed is cut to the maximum.
	if p := get("", 1<<20); len(p.Children) != 5000 {
		t.Errorf("limit 1<<20 gave %d children", len(p.Children))
	}
}
