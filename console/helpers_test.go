package console

import (
	"reflect"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

func TestPage(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	for _, c := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 2, []string{"a", "b"}},
		{"b", 2, []string{"c", "d"}},
		{"d", 2, []string{"e"}},
		{"e", 2, []string{}},
		{"bb", 10, []string{"c", "d", "e"}}, // a name that is gone: the page goes on after it
		{"z", 3, []string{}},
	} {
		if got := page(names, c.after, c.limit); !reflect.DeepEqual(append([]string{}, got...), c.want) {
			t.Errorf("page after %q limit %d: %q, want %q", c.after, c.limit, got, c.want)
		}
	}
}

func TestHistQuantile(t *testing.T) {
	u := func(v float64) *float64 { return &v }
	n := func(v uint64) *uint64 { return &v }
	// 100 samples: 50 up to 1, 40 in (1, 2], 10 in (2, 4].
	h := &dto.Histogram{SampleCount: n(100), Bucket: []*dto.Bucket{
		{UpperBound: u(1), CumulativeCount: n(50)},
		{UpperBound: u(2), CumulativeCount: n(90)},
		{UpperBound: u(4), CumulativeCount: n(100)},
	}}
	for q, want := range map[float64]float64{0.5: 1, 0.7: 1.5, 0.95: 3, 0.25: 0.5} {
		if got := histQuantile(h, q); got != want {
			t.Errorf("q %v: %v, want %v", q, got, want)
		}
	}
	if got := histQuantile(&dto.Histogram{SampleCount: n(0)}, 0.5); got != 0 {
		t.Errorf("empty histogram: %v", got)
	}
}

func TestValidPathAndHex(t *testing.T) {
	for p, ok := range map[string]bool{"/": true, "/a/b": true, "": false, "a": false, "/a/": false, "/a//b": false, "/a\x00": false} {
		if (validPath(p) == nil) != ok {
			t.Errorf("validPath(%q): %v", p, validPath(p))
		}
	}
	if b, err := decodeHex("00 ff 7a\n6b"); err != nil || string(b) != "\x00\xffzk" {
		t.Errorf("decodeHex: %q %v", b, err)
	}
	for _, bad := range []string{"0", "zz", "0g"} {
		if _, err := decodeHex(bad); err == nil {
			t.Errorf("decodeHex(%q) accepted", bad)
		}
	}
}
