package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/internal/testlog"
	"github.com/zkraft/zkraft/server"
	"github.com/zkraft/zkraft/znode"
)

// The browser tests drive Debian's chromium (headless, over the DevTools
// protocol) against a real member. Screenshots go to the directory in
// ZKRAFT_CONSOLE_SCREENSHOTS, or to the test's temporary directory.

const superPass = "super:secret"

func startMember(t *testing.T, audit io.Writer) *server.Server {
	t.Helper()
	srv, err := server.New(server.Config{
		DataDir:       t.TempDir(),
		ClientAddr:    "127.0.0.1:0",
		RaftAddr:      fmt.Sprintf("127.0.0.1:%d", freeport.Port(t)),
		TickTime:      200 * time.Millisecond,
		SuperDigest:   znode.DigestID(superPass),
		ExtendedTypes: true,
		Admin:         server.AdminConfig{Enabled: true, Addr: "127.0.0.1:0"},
		AuditLog:      audit,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func connect(t *testing.T, addr string, auth string) *zk.Conn {
	t.Helper()
	c, ev, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	deadline := time.After(15 * time.Second)
	for c.State() != zk.StateHasSession {
		select {
		case <-ev:
		case <-deadline:
			t.Fatalf("no session with %s", addr)
		}
	}
	if auth != "" {
		if err := c.AddAuth("digest", []byte(auth)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: install Debian's chromium (apt-get install chromium); .ci/run does")
	return ""
}

// browser starts a headless chromium for the test, bounded by limit.
func browser(t *testing.T, limit time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // the tests run as root on CI
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

func shotDir(t *testing.T) string {
	if d := os.Getenv("ZKRAFT_CONSOLE_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval runs a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits (15 s at most) until the JavaScript expression cond holds.
func waitJS(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: %v\npage:\n%.2000s", what, err, page)
	}
}

func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return eval[string](t, ctx, fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel))
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// openActions opens the tree view's actions.
func openActions() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#actions").open = true`))
		return err
	})
}

func hexZxid(z int64) string { return "0x" + strconv.FormatInt(z, 16) }

// TestConsoleInBrowser: every view renders in chromium and shows what a
// go-zookeeper client reads; a client's change appears without a reload;
// actions are refused without authentication and work, audited, for the
// super user.
func TestConsoleInBrowser(t *testing.T) {
	audit := &testlog.Buffer{}
	srv := startMember(t, audit)
	addr := srv.Addr().String()
	base := "http://" + srv.AdminAddr().String() + "/console/"
	c := connect(t, addr, superPass)
	open := zk.WorldACL(zk.PermAll)
	must := func(_ string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	config := `{"replicas":3,"name":"orders","tags":["a","b"],"limits":{"cpu":2}}`
	must(c.Create("/app", []byte("hello"), 0, open))
	must(c.Create("/app/config", []byte(config), 0, open))
	bin := []byte{0, 1, 2, 0xfe, 0xff, 'z', 'k'}
	must(c.Create("/app/bin", bin, 0, open))
	must(c.Create("/secret", []byte("top"), 0, zk.DigestACL(zk.PermAll, "alice", "pw")))
	must(c.Create("/big", nil, 0, open))
	const bigN = 450 // more than two pages of 200
	names := make([]string, 0, bigN)
	for i := 0; i < bigN; i++ {
		name := fmt.Sprintf("n-%04d", (i*7919)%10000) // created out of order
		names = append(names, name)
	}
	for i := 0; i < bigN; i += 50 {
		var ops []any
		for _, n := range names[i:min(i+50, bigN)] {
			ops = append(ops, &zk.CreateRequest{Path: "/big/" + n, Acl: open})
		}
		if _, err := c.Multi(ops...); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(names)
	// A second client with an ephemeral and a watch, for the sessions view.
	other := connect(t, addr, "")
	must(other.Create("/app/eph", []byte("mine"), zk.FlagEphemeral, open))
	if _, _, _, err := other.GetW("/app"); err != nil {
		t.Fatal(err)
	}
	// A quota on /app, as zkCli's setquota writes it.
	must(c.Create("/zookeeper/quota/app", nil, 0, open))
	must(c.Create("/zookeeper/quota/app/zookeeper_limits", []byte("count=10,bytes=1000"), 0, open))

	ctx := browser(t, 55*time.Second)
	shots := shotDir(t)

	// The tree: /app/config's data, Stat and ACL as the client reads them.
	data, st, err := c.Get("/app/config")
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open the console", chromedp.Navigate(base+"#tree:/app/config"))
	waitJS(t, ctx, "the node's Stat", `(document.querySelector("#stat-czxid")||{}).textContent === `+strconv.Quote(hexZxid(st.Czxid)))
	if got := textOf(t, ctx, "#data"); got != string(data) {
		t.Errorf("data as text: %q, want %q", got, data)
	}
	if got, want := textOf(t, ctx, "#stat-mzxid"), hexZxid(st.Mzxid); got != want {
		t.Errorf("mzxid %q, want %q", got, want)
	}
	if got, want := textOf(t, ctx, "#stat-version"), strconv.Itoa(int(st.Version)); got != want {
		t.Errorf("version %q, want %q", got, want)
	}
	if got := textOf(t, ctx, "#acl tbody"); got != "worldanyonecdrwa" {
		t.Errorf("ACL row %q, want world anyone cdrwa", got)
	}
	run(t, ctx, "JSON view", chromedp.Click(chromedp.CSS(`input[name=fmt][value=json]`)))
	pretty := textOf(t, ctx, "#data")
	var a, b any
	if json.Unmarshal([]byte(pretty), &a) != nil || json.Unmarshal(data, &b) != nil || !reflect.DeepEqual(a, b) || !strings.Contains(pretty, "\n  \"replicas\": 3") {
		t.Errorf("data as JSON:\n%s", pretty)
	}
	screenshot(t, ctx, shots, "console-json.png")

	// Hex.
	run(t, ctx, "open /app/bin", chromedp.Navigate(base+"#tree:/app/bin"), chromedp.Click(chromedp.CSS(`input[name=fmt][value=hex]`)))
	waitJS(t, ctx, "/app/bin in hex", `document.querySelector("#node-path").textContent === "/app/bin" && document.querySelector("#data").textContent.startsWith("00000000")`)
	if got, want := textOf(t, ctx, "#data"), "00000000  00 01 02 fe ff 7a 6b"; got != want {
		t.Errorf("data as hex %q, want %q", got, want)
	}
	run(t, ctx, "text view", chromedp.Click(chromedp.CSS(`input[name=fmt][value=text]`)))

	// A change made by a client appears without a reload.
	run(t, ctx, "back to /app/config", chromedp.Navigate(base+"#tree:/app/config"))
	waitJS(t, ctx, "config shown", `document.querySelector("#data").textContent.includes("orders")`)
	st2, err := c.Set("/app/config", []byte(`{"replicas":5}`), -1)
	if err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the client's set shown without a reload", `document.querySelector("#data").textContent === '{"replicas":5}' && document.querySelector("#stat-mzxid").textContent === `+strconv.Quote(hexZxid(st2.Mzxid)))

	// The parent lists its children (the ephemeral included) and its quota.
	run(t, ctx, "open /app", chromedp.Navigate(base+"#tree:/app"))
	kids, _, err := c.Children("/app")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(kids)
	waitJS(t, ctx, "/app's children", `document.querySelector("#children-total").textContent === "`+strconv.Itoa(len(kids))+`"`)
	if got, want := textOf(t, ctx, "#children"), strings.Join(kids, ""); got != want {
		t.Errorf("children %q, want %q", got, want)
	}
	if got := textOf(t, ctx, "#quota-limits"); got != "count=10,bytes=1000" {
		t.Errorf("quota limits %q", got)
	}
	screenshot(t, ctx, shots, "console-tree.png")
	if usage, _, err := c.Get("/zookeeper/quota/app/zookeeper_stats"); err == nil {
		if got := textOf(t, ctx, "#quota-usage"); got != string(usage) {
			t.Errorf("quota usage %q, want %q", got, usage)
		}
	}

	// A directory larger than a page, a page at a time, in byte order.
	run(t, ctx, "open /big", chromedp.Navigate(base+"#tree:/big"))
	waitJS(t, ctx, "/big's first page", `document.querySelector("#children-total").textContent === "`+strconv.Itoa(bigN)+`" && document.querySelectorAll("#children li").length === 200`)
	if got := textOf(t, ctx, "#children li"); got != names[0] {
		t.Errorf("first child %q, want %q", got, names[0])
	}
	run(t, ctx, "next page", chromedp.Click(chromedp.CSS("#next-page")))
	waitJS(t, ctx, "/big's second page", `document.querySelector("#children li").textContent === `+strconv.Quote(names[200]))
	run(t, ctx, "next page", chromedp.Click(chromedp.CSS("#next-page")))
	waitJS(t, ctx, "/big's last page", `document.querySelectorAll("#children li").length === `+strconv.Itoa(bigN-400)+` && document.querySelector("#next-page").disabled`)

	// A znode the viewer may not read: NoAuth, as for a client.
	run(t, ctx, "open /secret", chromedp.Navigate(base+"#tree:/secret"))
	waitJS(t, ctx, "/secret refused", `document.querySelector("#node-error").textContent !== "" && document.querySelector("#node-path").textContent === "/secret"`)
	if got := textOf(t, ctx, "#data"); got != "" {
		t.Errorf("/secret's data shown to a viewer: %q", got)
	}

	// Sessions and watches: the other client's ephemeral and watch.
	sid := "0x" + strconv.FormatInt(other.SessionID(), 16)
	run(t, ctx, "sessions", chromedp.Navigate(base+"#sessions"))
	row := `document.querySelector('#sessions tr[data-session="` + sid + `"]')`
	waitJS(t, ctx, "the other session's row", row+` !== null && `+row+`.textContent.includes("/app/eph")`)
	cells := eval[[]string](t, ctx, `Array.from(`+row+`.cells, c => c.textContent)`)
	if len(cells) < 6 || cells[0] != sid || !strings.HasPrefix(cells[1], "127.0.0.1:") || cells[4] != "/app/eph" || cells[5] != "/app" {
		t.Errorf("session row %q", cells)
	}
	screenshot(t, ctx, shots, "console-sessions.png")
	run(t, ctx, "watches", chromedp.Navigate(base+"#watches"))
	waitJS(t, ctx, "the watch on /app", `Array.from(document.querySelectorAll("#watches tbody tr")).some(r => r.cells[0].textContent === "/app" && r.cells[1].textContent.includes("`+sid+`"))`)

	// Members and Raft.
	run(t, ctx, "members", chromedp.Navigate(base+"#members"))
	waitJS(t, ctx, "the Raft table", `(document.querySelector("#raft-role")||{}).textContent === "standalone" && Number(document.querySelector("#raft-applied").textContent) > 0`)
	screenshot(t, ctx, shots, "console-members.png")

	// Actions without authentication: refused, nothing changed.
	run(t, ctx, "tree /app", chromedp.Navigate(base+"#tree:/app"))
	waitJS(t, ctx, "/app shown", `document.querySelector("#node-path").textContent === "/app" && document.querySelector("#data").textContent === "hello"`)
	run(t, ctx, "try to create",
		openActions(),
		chromedp.SendKeys(chromedp.CSS("#create-name"), "made"),
		chromedp.Click(chromedp.CSS("#create")))
	waitJS(t, ctx, "the refusal", `document.querySelector("#action-result").textContent.includes("401") && document.querySelector("#action-result").textContent.includes("Auth info is missing")`)
	if ok, _, _ := c.Exists("/app/made"); ok {
		t.Fatal("/app/made was created without authentication")
	}
	for _, action := range []string{"create", "set", "delete", "kill"} {
		resp, err := http.Post(base+"api/"+action, "application/json", strings.NewReader(`{"path":"/app","session":"`+sid+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without Authorization: %d, want 401", action, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, base+"api/delete", strings.NewReader(`{"path":"/app/bin"}`))
	req.Header.Set("Authorization", "sasl whoever")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("delete with an unusable scheme: %v %v, want 401", resp, err)
	}
	if ok, _, _ := c.Exists("/app/bin"); !ok {
		t.Fatal("/app/bin deleted without authentication")
	}
	if strings.Contains(audit.String(), "\tip=127.0.0.1\toperation=create\tznode=/app/made") {
		t.Error("a refused action was audited as a change")
	}

	// Signed in as the super user: create, set, delete, kill a session.
	run(t, ctx, "sign in",
		chromedp.SendKeys(chromedp.CSS("#auth-info"), "digest "+superPass),
		chromedp.Click(chromedp.CSS("#auth-set")))
	waitJS(t, ctx, "signed in", `document.querySelector("#whoami").textContent.startsWith("admin")`)
	run(t, ctx, "create",
		chromedp.SetValue(chromedp.CSS("#create-data"), "from the console"),
		chromedp.Click(chromedp.CSS("#create")))
	waitJS(t, ctx, "created", `document.querySelector("#action-result").textContent.startsWith("create: done")`)
	if got, _, err := c.Get("/app/made"); err != nil || string(got) != "from the console" {
		t.Fatalf("/app/made as the client reads it: %q %v", got, err)
	}
	run(t, ctx, "open /app/made", chromedp.Navigate(base+"#tree:/app/made"))
	waitJS(t, ctx, "/app/made shown", `document.querySelector("#data").textContent === "from the console"`)
	run(t, ctx, "set",
		openActions(),
		chromedp.SetValue(chromedp.CSS("#set-data"), "changed"),
		chromedp.SetValue(chromedp.CSS("#set-version"), "0"),
		chromedp.Click(chromedp.CSS("#set")))
	waitJS(t, ctx, "set shown", `document.querySelector("#data").textContent === "changed"`)
	if got, st, err := c.Get("/app/made"); err != nil || string(got) != "changed" || st.Version != 1 {
		t.Fatalf("/app/made after set: %q %+v %v", got, st, err)
	}
	run(t, ctx, "set with a stale version",
		chromedp.SetValue(chromedp.CSS("#set-data"), "stale"),
		chromedp.SetValue(chromedp.CSS("#set-version"), "0"),
		chromedp.Click(chromedp.CSS("#set")))
	waitJS(t, ctx, "BadVersion", `document.querySelector("#action-result").textContent.includes("refused (200)")`)
	run(t, ctx, "delete", chromedp.Click(chromedp.CSS("#delete")))
	waitJS(t, ctx, "back at /app", `document.querySelector("#node-path").textContent === "/app"`)
	if ok, _, _ := c.Exists("/app/made"); ok {
		t.Fatal("/app/made still there after the console's delete")
	}
	run(t, ctx, "sessions", chromedp.Navigate(base+"#sessions"))
	waitJS(t, ctx, "the other session's row", row+` !== null`)
	run(t, ctx, "kill", chromedp.Click(chromedp.CSS(`button.kill[data-session="`+sid+`"]`)))
	waitJS(t, ctx, "killed", row+` === null`)
	if ok, _, _ := c.Exists("/app/eph"); ok {
		t.Error("the killed session's ephemeral is still there")
	}

	// Every action in the audit log, as the super user from the browser.
	log := audit.String()
	for _, want := range []string{
		"INFO audit.Slf4jAuditLogger: user=super,127.0.0.1\tip=127.0.0.1\toperation=create\tznode=/app/made\tznode_type=persistent\tresult=success",
		"INFO audit.Slf4jAuditLogger: user=super,127.0.0.1\tip=127.0.0.1\toperation=setData\tznode=/app/made\tresult=success",
		"ERROR audit.Slf4jAuditLogger: user=super,127.0.0.1\tip=127.0.0.1\toperation=setData\tznode=/app/made\tresult=failure",
		"INFO audit.Slf4jAuditLogger: user=super,127.0.0.1\tip=127.0.0.1\toperation=delete\tznode=/app/made\tresult=success",
		"INFO audit.Slf4jAuditLogger: session=" + sid + "\tuser=super,127.0.0.1\tip=127.0.0.1\toperation=killSession\tresult=success",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("audit log lacks %q:\n%s", want, log)
		}
	}

	// Live charts from the member's figures.
	for i := 0; i < 20; i++ {
		c.Get("/app")
	}
	run(t, ctx, "charts", chromedp.Navigate(base+"#charts"))
	waitJS(t, ctx, "charts drawn", `document.querySelectorAll("#chart-requests polyline").length > 0 && document.querySelectorAll("#chart-znodes polyline").length === 1`)
	znodes := textOf(t, ctx, `#chart-znodes .legend`)
	if !strings.HasPrefix(znodes, "znodes ") {
		t.Errorf("znode legend %q", znodes)
	}
	screenshot(t, ctx, shots, "console-charts.png")
}
