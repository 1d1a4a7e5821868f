package layout

import (
	"bufio"
	"errors"
	"fmt"
	"go/build"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// rule is one row of the table: what the package (or the tree of
// packages) pkg may import. Paths are relative to the module; "x/..."
// names x and every package below it, "..." every package.
type rule struct {
	pkg string
	// zk lists the zkraft packages its files may import (a package may
	// always import itself: its external tests do).
	zk []string
	// testZK lists the zkraft packages its _test.go files may import
	// besides zk.
	testZK []string
	// fileZK lists zkraft packages only the named file may import.
	fileZK map[string][]string
	// stdOnly: nothing from outside the module but the standard library.
	stdOnly bool
	// noSockets: no net (net/netip, plain address values, is fine), no
	// net/http or other net/..., no crypto/tls.
	noSockets bool
	// noRaft: neither Dragonboat nor Pebble.
	noRaft bool
	// noPebble: no Pebble (the store is raftsm's).
	noPebble bool
	// why is said with every violation of the row.
	why string
}

// The arrows (jute <- znode/session <- raftsm <- server <- cmd), and the
// rules the packages beside them keep. Below the server nothing knows
// sockets (net/netip, for the ip ACL scheme, holds only address values);
// below raftsm nothing knows Dragonboat or Pebble. Test files are checked
// like the package's own, with testZK added: a package's tests may start a
// server or use the harness under internal/, the package itself may not.
var rules = []rule{
	{pkg: "jute", stdOnly: true, noSockets: true, noRaft: true,
		why: "jute is the wire codec: standard library only"},
	{pkg: "znode", zk: []string{"jute"}, stdOnly: true, noSockets: true, noRaft: true,
		why: "znode's rules are pure functions over a small store interface"},
	{pkg: "session", zk: []string{"jute"}, stdOnly: true, noSockets: true, noRaft: true,
		why: "session knows ids, timeouts and expiry, not the tree, Raft or sockets"},
	{pkg: "raftsm", zk: []string{"jute", "znode", "session"}, testZK: []string{"internal/smtest"}, noSockets: true,
		why: "raftsm is the state machine under the server; it knows no sockets"},
	{pkg: "fleet", zk: []string{"jute"}, testZK: []string{"internal/freeport", "internal/smtest"}, noSockets: true,
		why: "fleet is the system shard's state machine (the cell map) under the server; it knows no sockets"},
	// internal/storecheck, which checks a data directory's files with
	// Pebble alone before Dragonboat opens them, is coming with the
	// damaged-files work; the server calls it.
	{pkg: "proxy/wire", zk: []string{"jute"}, stdOnly: true, noSockets: true, noRaft: true,
		why: "proxy/wire is the upstream protocol's codec, shared by the member and the proxy"},
	// Authentication as ZooKeeper's providers do it: credentials in, ids
	// out, no connection.
	{pkg: "auth", zk: []string{"jute", "znode"}, noSockets: true, noRaft: true,
		why: "auth turns credentials into ids; it knows no connection, socket, Raft or store"},
	// The operator surfaces (four-letter words, AdminServer, mntr and
	// Prometheus figures) over a Member interface: the server implements
	// it, and so can the proxy, so it must pull in neither.
	{pkg: "operator", noRaft: true,
		why: "operator reaches a member only through its Member and Host interfaces; the server and the proxy implement them"},
	// internal/epollwake is system calls only (an epoll set with an
	// eventfd), shared with scripts/proxyscale's load loop.
	{pkg: "proxy", zk: []string{"jute", "session", "proxy/wire", "operator", "internal/epollwake"}, testZK: []string{"internal/...", "server", "client/..."}, noRaft: true,
		why: "a proxy holds no data: it reaches the cell only over the network, never through server or raftsm"},
	{pkg: "server", zk: []string{"raftsm", "fleet", "znode", "session", "jute", "internal/storecheck", "auth", "console", "operator", "proxy/wire"},
		testZK: []string{"internal/...", "client/...", "bench"}, noPebble: true,
		why: "the server stands on raftsm, fleet, znode, session and jute; cmd/zkraft wires the rest in; " +
			"it reaches the store only through raftsm (its views, figures and checks)"},
	// The web console is pages and JSON over a Backend the server
	// implements: it sees no server internals, no Raft and no Pebble. Its
	// tests drive a real member in a real browser.
	{pkg: "console", zk: []string{"jute"}, testZK: []string{"server", "znode", "internal/..."}, noRaft: true,
		why: "the console sees the member only through its Backend interface; the server imports it, never the reverse"},
	{pkg: "zkdata", zk: []string{"jute", "znode"}, testZK: []string{"internal/zktest"}, noSockets: true, noRaft: true,
		why: "zkdata reads and writes ZooKeeper's files; cmd/zkraft moves its Tree into raftsm"},
	{pkg: "client/...", zk: []string{"jute", "client/..."}, testZK: []string{"internal/...", "server"}, noRaft: true,
		why: "the client tree speaks the wire protocol, it must not pull in the server"},
	{pkg: "bench", zk: []string{"jute"}, testZK: []string{"internal/...", "server"}, noRaft: true,
		why: "bench is a load client: it reaches servers over TCP"},
	{pkg: "conformance", testZK: []string{"jute", "internal/...", "client/..."},
		fileZK: map[string][]string{"embedded_test.go": {"server"}}, noRaft: true,
		why: "the conformance suite reaches a server only over TCP; embedded_test.go alone starts an in-process one"},
	{pkg: "faulttest", testZK: []string{"internal/..."}, noRaft: true,
		why: "the fault tests drive member processes, not packages"},
	{pkg: "cmd/...", zk: []string{"..."}},
	{pkg: "internal/zktest", zk: []string{"internal/freeport", "internal/fourlw", "internal/logtail"},
		why: "the real-ZooKeeper harness reports what ZooKeeper does, untouched by zkraft's code"},
	{pkg: "internal/...", zk: []string{"..."}},
	{pkg: "scripts/...", zk: []string{"..."}},
}

// file is one Go file of a package and its imports.
type file struct {
	name    string // base name
	test    bool   // a _test.go file
	imports []imp
}

type imp struct {
	path string
	line int
}

// pkg is one package directory, rel its path relative to the module.
type pkg struct {
	rel   string
	files []file
}

// TestImportsFollowTheArrows fails for every import against the table.
func TestImportsFollowTheArrows(t *testing.T) {
	root, module := moduleRoot(t)
	pkgs := readPackages(t, root)
	if !imports(pkgs, "server", module+"/raftsm") || !imports(pkgs, "conformance", module+"/server") {
		t.Fatalf("the walk of %s (%d packages) did not see server import raftsm and conformance's tests import server: it reads no imports", root, len(pkgs))
	}
	for _, p := range pkgs {
		for _, v := range check(module, p) {
			t.Error(v)
		}
	}
}

// imports reports whether a file of package rel imports path.
func imports(pkgs []pkg, rel, path string) bool {
	for _, p := range pkgs {
		if p.rel != rel {
			continue
		}
		for _, f := range p.files {
			for _, i := range f.imports {
				if i.path == path {
					return true
				}
			}
		}
	}
	return false
}

// TestEveryRowNamesAPackage keeps the table honest: a row for a package
// that moved or was renamed checks nothing.
func TestEveryRowNamesAPackage(t *testing.T) {
	root, _ := moduleRoot(t)
	pkgs := readPackages(t, root)
	for _, r := range rules {
		found := false
		for _, p := range pkgs {
			if match(r.pkg, p.rel) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("the row for %s matches no package", r.pkg)
		}
	}
}

// TestCheckRefuses shows that check finds each kind of violation, on
// packages made up for the purpose.
func TestCheckRefuses(t *testing.T) {
	const m = "example.com/zk"
	one := func(rel, name string, test bool, imports ...string) pkg {
		f := file{name: name, test: test}
		for i, p := range imports {
			f.imports = append(f.imports, imp{path: p, line: 3 + i})
		}
		return pkg{rel: rel, files: []file{f}}
	}
	for _, c := range []struct {
		p    pkg
		want string // substring of the one violation; "" for none
	}{
		{one("znode", "tree.go", false, "fmt", m+"/jute"), ""},
		{one("znode", "tree.go", false, m+"/raftsm"), "znode/tree.go:3: znode imports example.com/zk/raftsm"},
		{one("jute", "codec.go", false, "github.com/pkg/errors"), "jute/codec.go:3: jute imports github.com/pkg/errors: the standard library only"},
		{one("znode", "acl.go", false, "net/netip"), ""},
		{one("session", "id.go", false, "net"), "session/id.go:3: session imports net: no sockets"},
		{one("raftsm", "sm.go", false, "net/http"), "raftsm/sm.go:3: raftsm imports net/http: no sockets"},
		{one("raftsm", "sm.go", false, "crypto/tls"), "raftsm imports crypto/tls: no sockets"},
		{one("raftsm", "sm.go", false, "github.com/lni/dragonboat/v4/statemachine"), ""},
		{one("raftsm", "sm.go", false, m+"/server"), "raftsm imports example.com/zk/server"},
		{one("session", "tracker.go", false, "github.com/lni/dragonboat/v4"), "no Dragonboat or Pebble"},
		{one("zkdata", "restore.go", false, "github.com/cockroachdb/pebble"), "zkdata imports github.com/cockroachdb/pebble: no Dragonboat or Pebble"},
		{one("zkdata", "restore.go", false, m+"/raftsm"), "zkdata imports example.com/zk/raftsm"},
		{one("zkdata", "restore_test.go", true, m+"/internal/zktest"), ""},
		{one("zkdata", "restore.go", false, m+"/internal/zktest"), "zkdata imports example.com/zk/internal/zktest"},
		{one("client/resumable", "client.go", false, m+"/server"), "client/resumable imports example.com/zk/server"},
		{one("client/resumable", "client_test.go", true, m+"/server", m+"/client/resumable"), ""},
		{one("client/recipes", "lock.go", false, m+"/client/resumable"), ""},
		{one("server", "conn.go", false, m+"/zkdata"), "server imports example.com/zk/zkdata"},
		{one("server", "figures.go", false, "github.com/cockroachdb/pebble"), "server imports github.com/cockroachdb/pebble: no Pebble"},
		{one("server", "raft.go", false, "github.com/lni/dragonboat/v4", m+"/raftsm"), ""},
		{one("server", "conn.go", false, m+"/client/resumable"), "server imports example.com/zk/client/resumable"},
		{one("server", "cluster_test.go", true, m+"/client/resumable"), ""},
		{one("internal/zktest", "dump.go", false, m+"/zkdata"), "internal/zktest imports example.com/zk/zkdata"},
		{one("internal/zkfixture", "main.go", false, m+"/zkdata", m+"/internal/zktest"), ""},
		{one("conformance", "embedded_test.go", true, m+"/server"), ""},
		{one("conformance", "watch_test.go", true, m+"/server"), "conformance/watch_test.go:3: conformance imports example.com/zk/server"},
		{one("conformance", "watch_test.go", true, m+"/jute", m+"/internal/tcpproxy"), ""},
		{one("conformance", "watch_test.go", true, m+"/znode"), "conformance imports example.com/zk/znode"},
		{one("cmd/zkraft", "main.go", false, m+"/server", m+"/zkdata", "net"), ""},
		{one("fleet", "sm.go", false, "github.com/lni/dragonboat/v4/statemachine", "github.com/cockroachdb/pebble", m+"/jute", "net/netip"), ""},
		{one("fleet", "sm.go", false, m+"/server"), "fleet imports example.com/zk/server"},
		{one("fleet", "sm.go", false, m+"/raftsm"), "fleet imports example.com/zk/raftsm"},
		{one("fleet", "sm.go", false, "net"), "fleet imports net: no sockets"},
		{one("fleet", "sm.go", false, m+"/cmd/zkraft"), "fleet imports example.com/zk/cmd/zkraft"},
		{one("fleet", "cluster_test.go", true, "github.com/lni/dragonboat/v4", m+"/internal/freeport"), ""},
		{one("fleet", "cluster_test.go", true, m+"/internal/testserver"), "fleet imports example.com/zk/internal/testserver"},
		{one("operator", "commands.go", false, "net/http", "github.com/prometheus/client_golang/prometheus"), ""},
		{one("operator", "commands.go", false, m+"/server"), "operator imports example.com/zk/server"},
		{one("operator", "figures.go", false, m+"/raftsm"), "operator imports example.com/zk/raftsm"},
		{one("operator", "figures.go", false, "github.com/cockroachdb/pebble"), "no Dragonboat or Pebble"},
		{one("proxy", "ops.go", false, m+"/operator"), ""},
		{one("auth", "provider.go", false, m+"/jute", m+"/znode", "crypto/md5", "encoding/asn1"), ""},
		{one("auth", "provider.go", false, "net/http"), "auth imports net/http: no sockets"},
		{one("auth", "provider.go", false, m+"/server"), "auth imports example.com/zk/server"},
		{one("server", "operator.go", false, m+"/operator"), ""},
		{one("gateway", "gateway.go", false, m+"/server"), "gateway has no row in the table"},
	} {
		got := check(m, c.p)
		switch {
		case c.want == "" && len(got) != 0:
			t.Errorf("%s/%s: unexpected %q", c.p.rel, c.p.files[0].name, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s/%s: got %q, want one violation containing %q", c.p.rel, c.p.files[0].name, got, c.want)
		}
	}
}

// check returns one line per import of p against its row.
func check(module string, p pkg) []string {
	r, ok := ruleFor(p.rel)
	if !ok {
		return []string{fmt.Sprintf("%s has no row in the table of internal/layout/layout_test.go: add one saying what it may import", p.rel)}
	}
	var out []string
	for _, f := range p.files {
		for _, i := range f.imports {
			if why := refuse(module, r, p.rel, f, i.path); why != "" {
				msg := fmt.Sprintf("%s:%d: %s imports %s: %s", filepath.ToSlash(filepath.Join(p.rel, f.name)), i.line, p.rel, i.path, why)
				if r.why != "" {
					msg += " (" + r.why + ")"
				}
				out = append(out, msg)
			}
		}
	}
	return out
}

// refuse says why f of package rel may not import path, or "" if it may.
func refuse(module string, r rule, rel string, f file, path string) string {
	if path == module || strings.HasPrefix(path, module+"/") {
		target := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
		if target == rel {
			return ""
		}
		allowed := append([]string(nil), r.zk...) // never append to the table's own slices
		if f.test {
			allowed = append(allowed, r.testZK...)
		}
		allowed = append(allowed, r.fileZK[f.name]...)
		for _, a := range allowed {
			if match(a, target) {
				return ""
			}
		}
		if len(allowed) == 0 {
			return fmt.Sprintf("against the arrows: %s may import no zkraft package here", rel)
		}
		return fmt.Sprintf("against the arrows: %s may import only %s here", rel, strings.Join(allowed, ", "))
	}
	std := !strings.Contains(strings.SplitN(path, "/", 2)[0], ".")
	switch {
	case r.noSockets && std && (path == "net" || path == "crypto/tls" || strings.HasPrefix(path, "net/") && path != "net/netip"):
		return "no sockets in this package"
	case r.noRaft && (inTree("github.com/lni/dragonboat", path) || inTree("github.com/cockroachdb/pebble", path)):
		return "no Dragonboat or Pebble in this package"
	case r.noPebble && inTree("github.com/cockroachdb/pebble", path):
		return "no Pebble in this package"
	case r.stdOnly && !std:
		return "the standard library only"
	}
	return ""
}

// inTree reports whether path is root or below it (a major-version suffix
// such as /v4 is below it).
func inTree(root, path string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

// ruleFor is the row for rel: its own, or the nearest tree's.
func ruleFor(rel string) (rule, bool) {
	best, bestLen := rule{}, -1
	for _, r := range rules {
		if match(r.pkg, rel) && len(r.pkg) > bestLen {
			best, bestLen = r, len(r.pkg)
		}
	}
	return best, bestLen >= 0
}

// match reports whether pattern ("x", "x/..." or "...") names rel.
func match(pattern, rel string) bool {
	if pattern == "..." {
		return true
	}
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == tree || strings.HasPrefix(rel, tree+"/")
	}
	return rel == pattern
}

// moduleRoot finds go.mod above the test's directory and returns its
// directory and module path.
func moduleRoot(t *testing.T) (string, string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(m), `"`)
				}
			}
			t.Fatalf("%s/go.mod has no module line", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// readPackages reads the imports of every package under root the way
// `go list ./...` finds them: directories named testdata or vendor, or
// starting with . or _, are not walked, and files excluded by build
// constraints for this platform are not read.
func readPackages(t *testing.T, root string) []pkg {
	t.Helper()
	var pkgs []pkg
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		bp, err := build.Default.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		p := pkg{rel: filepath.ToSlash(rel)}
		add := func(names []string, test bool, pos map[string][]token.Position) {
			for _, n := range names {
				f := file{name: n, test: test}
				for ip, ps := range pos {
					for _, q := range ps {
						if filepath.Base(q.Filename) == n {
							f.imports = append(f.imports, imp{path: ip, line: q.Line})
						}
					}
				}
				sort.Slice(f.imports, func(i, j int) bool { return f.imports[i].line < f.imports[j].line })
				p.files = append(p.files, f)
			}
		}
		add(bp.GoFiles, false, bp.ImportPos)
		add(bp.TestGoFiles, true, bp.TestImportPos)
		add(bp.XTestGoFiles, true, bp.XTestImportPos)
		pkgs = append(pkgs, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
