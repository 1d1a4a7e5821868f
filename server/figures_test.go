package server

import (
	"testing"
)

// TestFigureTable: each name is shown once per surface, every Prometheus
// figure has a type and help, and every value is of a type that mntr
// prints as ZooKeeper does and Prometheus can take.
func TestFigureTable(t *testing.T) {
	seen := map[shownIn]map[string]bool{inMntr: {}, inProm: {}}
	for _, fg := range figureTable {
		if fg.in&inBoth == 0 || fg.value == nil {
			t.Errorf("%s: shown nowhere, or no value", fg.name)
		}
		for _, in := range []shownIn{inMntr, inProm} {
			if fg.in&in != 0 {
				if seen[in][fg.name] {
					t.Errorf("%s is shown twice on surface %d", fg.name, in)
				}
				seen[in][fg.name] = true
			}
		}
		if prom := fg.in&inProm != 0; prom != (fg.help != "") || prom != (fg.typ == gauge || fg.typ == counter) {
			t.Errorf("%s: in Prometheus %v, help %q, type %v", fg.name, prom, fg.help, fg.typ)
		}
	}
	s := startStandalone(t, nil)
	r := s.view().newReading()
	for _, fg := range figureTable {
		v := fg.value(r)
		switch v.(type) {
		case int, int64, float64:
		case string:
			if fg.in&inProm != 0 {
				t.Errorf("%s: a string in Prometheus", fg.name)
			}
		case nil: // not known now: Prometheus only
			if fg.in&inMntr != 0 {
				t.Errorf("%s: no value for mntr", fg.name)
			}
		case uint64, bool:
			if fg.in&inMntr != 0 {
				t.Errorf("%s: %T in mntr", fg.name, v)
			}
		case []float64:
			if fg.label == "" {
				t.Errorf("%s: several series and no label", fg.name)
			}
		default:
			t.Errorf("%s: value %v of type %T", fg.name, v, v)
		}
	}
}
