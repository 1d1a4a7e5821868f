package zkdata

import (
	"path/filepath"
	"testing"

	"github.com/zkraft/zkraft/internal/zktest"
)

// fixture is a data directory made by scripts/make-zk-fixtures.sh.
type fixture struct {
	name    string
	dataDir string
	logDir  string
	want    *zktest.Dump
}

var fixtureNames = []string{"plain", "gz", "snappy"}

func loadFixture(t testing.TB, name string) fixture {
	t.Helper()
	dir := filepath.Join("testdata", "zk", name)
	f := fixture{name: name, dataDir: filepath.Join(dir, "data")}
	if name == "snappy" {
		f.logDir = filepath.Join(dir, "datalog")
	}
	d, err := zktest.ReadDump(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	f.want = d
	return f
}
