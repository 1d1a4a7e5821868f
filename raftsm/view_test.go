package raftsm

import (
	"reflect"
	"testing"

	"github.com/zkraft/zkraft/znode"
)

// writeMethods are the names of the methods that change a store: Pebble's
// (DB, Batch) and znode.KV's.
var writeMethods = map[string]bool{
	"Set": true, "Delete": true, "DeleteRange": true, "SingleDelete": true, "Merge": true,
	"Apply": true, "Commit": true, "NewBatch": true, "NewIndexedBatch": true, "Ingest": true,
	"Flush": true, "Compact": true, "LogData": true, "SetEphemeral": true,
}

// writeMethodsOf lists the write methods reachable from t: its own (and
// its pointer's) and, for this package's structs, those of every field.
// Other packages' types are judged by their method sets alone.
func writeMethodsOf(t reflect.Type, seen map[reflect.Type]bool) []string {
	if seen[t] {
		return nil
	}
	seen[t] = true
	var out []string
	for _, mt := range []reflect.Type{t, reflect.PointerTo(t)} {
		for i := range mt.NumMethod() {
			if m := mt.Method(i); writeMethods[m.Name] {
				out = append(out, mt.String()+"."+m.Name)
			}
		}
	}
	if t.Kind() == reflect.Pointer {
		out = append(out, writeMethodsOf(t.Elem(), seen)...)
	}
	if t.Kind() == reflect.Struct && t.PkgPath() == reflect.TypeFor[View]().PkgPath() {
		for i := range t.NumField() {
			out = append(out, writeMethodsOf(t.Field(i).Type, seen)...)
		}
	}
	return out
}

// TestViewCannotWrite: nothing a View holds, and nothing its Tree returns,
// has a method that writes, whichever kind of read the View is given to.
func TestViewCannotWrite(t *testing.T) {
	if ms := writeMethodsOf(reflect.TypeFor[View](), map[reflect.Type]bool{}); len(ms) > 0 {
		t.Errorf("a View can write through %v", ms)
	}
	h := newHarness(t, t.TempDir())
	check := func(kind string, v View) {
		if _, ok := v.Tree().(znode.KV); ok {
			t.Errorf("%s: View.Tree() is a znode.KV (%T)", kind, v.Tree())
		}
		if ms := writeMethodsOf(reflect.TypeOf(v.Tree()), map[reflect.Type]bool{}); len(ms) > 0 {
			t.Errorf("%s: View.Tree() can write through %v", kind, ms)
		}
		if n, err := v.Tree().Get("/"); err != nil || n == nil {
			t.Errorf("%s: Get(/) = %v, %v", kind, n, err)
		}
	}
	if _, err := h.sm.Lookup(ReadFunc(func(v View) (any, error) { check("ReadFunc", v); return nil, nil })); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.Lookup(LockedReadFunc(func(v View) (any, error) { check("LockedReadFunc", v); return nil, nil })); err != nil {
		t.Fatal(err)
	}
}
