package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/testlog"
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

// TestActionsNeedALLOnRoot: with an ACL on "/" that gives ALL to the super
// user only, an authenticated digest user may view but is refused every
// action (403, ZooKeeper's "Not authorized"), the super user is not, and
// a write still obeys the znode's own ACL.
func TestActionsNeedALLOnRoot(t *testing.T) {
	audit := &testlog.Buffer{}
	srv := startMember(t, audit)
	c := connect(t, srv.Addr().String(), superPass)
	if _, err := c.Create("/locked", []byte("x"), 0, zk.DigestACL(zk.PermRead, "alice", "pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetACL("/", append(zk.DigestACL(zk.PermAll, "super", "secret"), zk.ACL{Perms: zk.PermRead, Scheme: "world", ID: "anyone"}), -1); err != nil {
		t.Fatal(err)
	}
	base := "http://" + srv.AdminAddr().String() + "/console/api/"
	post := func(action, auth, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+action, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, action := range []string{"create", "set", "delete"} {
		code, out := post(action, "digest alice:pw", `{"path":"/locked/x"}`)
		if code != http.StatusForbidden || out["error"] != "Not authorized" {
			t.Errorf("%s as alice: %d %v, want 403 Not authorized", action, code, out)
		}
	}
	if code, out := post("create", "digest super:wrong", `{"path":"/x"}`); code != http.StatusForbidden {
		t.Errorf("create with a wrong password: %d %v, want 403", code, out)
	}
	// The super user passes, and the znode's ACL is the super user's to skip.
	if code, out := post("create", "digest "+superPass, `{"path":"/locked/child","data":"c"}`); code != 200 || out["path"] != "/locked/child" {
		t.Errorf("create as super: %d %v", code, out)
	}
	// Bad input is a 400, not a change.
	for _, body := range []string{`{"path":"relative"}`, `{"path":"/a/"}`, `not json`, `{"path":"/a","unknown":1}`, `{"path":"/a","data":"zz","data_hex":true}`} {
		if code, out := post("create", "digest "+superPass, body); code != http.StatusBadRequest {
			t.Errorf("create %s: %d %v, want 400", body, code, out)
		}
	}
	if code, _ := post("delete", "digest "+superPass, `{"path":"/zookeeper/quota"}`); code != http.StatusBadRequest {
		t.Errorf("delete /zookeeper/quota: %d, want 400", code)
	}
	if strings.Contains(audit.String(), "user=127.0.0.1,alice") {
		t.Errorf("a refused action was audited:\n%s", audit.String())
	}
	// Viewing needs no admin: alice reads /locked, which the world cannot.
	req, _ := http.NewRequest(http.MethodGet, base+"node?path=/locked", nil)
	req.Header.Set("Authorization", "digest alice:pw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var node map[string]any
	json.NewDecoder(resp.Body).Decode(&node)
	resp.Body.Close()
	if node["data"] != "eA==" { // "x"
		t.Errorf("alice's view of /locked: %v", node)
	}
	resp, err = http.Get(base + "node?path=/locked")
	if err != nil {
		t.Fatal(err)
	}
	node = nil
	json.NewDecoder(resp.Body).Decode(&node)
	resp.Body.Close()
	if node["code"] != float64(-102) { // NOAUTH
		t.Errorf("the world's view of /locked: %v", node)
	}
}
