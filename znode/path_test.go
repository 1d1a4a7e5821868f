package znode

import (
	"testing"

	"github.com/zkraft/zkraft/jute"
)

// TestValidatePath follows PathUtils.validatePath char by char: Java checks
// UTF-16 chars, and a '.' or ".." is rejected only as a whole segment.
func TestValidatePath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"", false},
		{"a", false},
		{"a/b", false},
		{"/", true},
		{"/a", true},
		{"/a/b/c", true},
		{"/a/", false},
		{"//", false},
		{"//a", false},
		{"/a//b", false},
		{"/.", false},
		{"/..", false},
		{"/./a", false},
		{"/../a", false},
		{"/a/.", false},
		{"/a/..", false},
		{"/a/./b", false},
		{"/a/../b", false},
		{"/...", true},
		{"/a/.../b", true},
		{"/.a", true},
		{"/a.", true},
		{"/..a", true},
		{"/a..", true},
		{"/a.b", true},
		{"/a..b", true},
		{"/zookeeper", true},
		{"/a b", true},           // space is fine
		{"/\u00a0", true},        // U+00A0 is just past U+009F
		{"/\u00e9t\u00e9", true}, // é
		{"/\ud7ff", true},        // U+D7FF, just below the surrogates
		{"/\uf900", true},        // just past U+F8FF
		{"/\uffef", true},        // just below U+FFF0
		{"/a\x00b", false},
		{"/\x00", false},
		{"/a\x01", false},
		{"/a\x1f", false},
		{"/a\x20", true},
		{"/a\x7e", true},
		{"/a\x7f", false},
		{"/a\u0080", false},
		{"/a\u009f", false},
		{"/a\ue000", false},
		{"/a\uf8ff", false},
		{"/a\ufff0", false},
		{"/a\ufffd", false},
		{"/a\uffff", false},
		{"/a\U0001F600", false}, // a surrogate pair in Java
		{"/a\U00010000", false},
		{"/a\xff", false},         // not UTF-8: Java decodes U+FFFD
		{"/a\xc3", false},         // truncated sequence
		{"/a\xed\xa0\x80", false}, // an encoded surrogate
	} {
		err := ValidatePath(tc.path)
		if tc.ok && err != nil {
			t.Errorf("ValidatePath(%q) = %v, want ok", tc.path, err)
		}
		if !tc.ok {
			if err == nil {
				t.Errorf("ValidatePath(%q) = ok, want BADARGUMENTS", tc.path)
			} else if code(err) != jute.ErrBadArguments {
				t.Errorf("ValidatePath(%q) code = %v, want BADARGUMENTS", tc.path, code(err))
			}
		}
	}
}

func TestParentBaseJoin(t *testing.T) {
	for _, tc := range []struct {
		path, parent, base string
		ok                 bool
	}{
		{"/", "/", "", true},
		{"/a", "/", "a", true},
		{"/a/b", "/a", "b", true},
		{"/a/", "/a", "", true},
		{"a", "", "a", false},
		{"", "", "", false},
	} {
		parent, ok := Parent(tc.path)
		if parent != tc.parent || ok != tc.ok {
			t.Errorf("Parent(%q) = %q, %v; want %q, %v", tc.path, parent, ok, tc.parent, tc.ok)
		}
		if b := Base(tc.path); b != tc.base {
			t.Errorf("Base(%q) = %q, want %q", tc.path, b, tc.base)
		}
	}
	if got := Join("/", "a"); got != "/a" {
		t.Errorf(`Join("/", "a") = %q`, got)
	}
	if got := Join("/a", "b"); got != "/a/b" {
		t.Errorf(`Join("/a", "b") = %q`, got)
	}
	for _, p := range []string{"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		if !IsSpecial(p) {
			t.Errorf("IsSpecial(%q) = false", p)
		}
	}
	for _, p := range []string{"/a", "/zookeeper/x", "/zookeeper/quota/a", ""} {
		if IsSpecial(p) {
			t.Errorf("IsSpecial(%q) = true", p)
		}
	}
}

// TestSequenceSuffix: String.format(Locale.ENGLISH, "%010d", int).
func TestSequenceSuffix(t *testing.T) {
	for _, tc := range []struct {
		cversion int32
		want     string
	}{
		{0, "0000000000"},
		{1, "0000000001"},
		{122, "0000000122"},
		{2147483647, "2147483647"},
		{-1, "-000000001"},
		{-123, "-000000123"},
		{-2147483648, "-2147483648"},
	} {
		if got := SequenceSuffix(tc.cversion); got != tc.want {
			t.Errorf("SequenceSuffix(%d) = %q, want %q", tc.cversion, got, tc.want)
		}
	}
}
