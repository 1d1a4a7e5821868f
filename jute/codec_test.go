package jute

import "testing"

func TestSharedReaderAliases(t *testing.T) {
	w := NewWriter(0)
	w.Buffer([]byte("abc"))
	w.Buffer(nil)
	w.Buffer([]byte{})
	w.Buffer([]byte("de"))
	b := w.Bytes()
	for _, shared := range []bool{false, true} {
		r := NewReader(b)
		if shared {
			r = NewSharedReader(b)
		}
		first, null, empty, last := r.Buffer(), r.Buffer(), r.Buffer(), r.Buffer()
		if r.Err() != nil || string(first) != "abc" || null != nil || empty == nil || len(empty) != 0 || string(last) != "de" {
			t.Fatalf("shared=%v: %q %v %v %q %v", shared, first, null, empty, last, r.Err())
		}
		aliased := &first[0] == &b[4]
		if aliased != shared {
			t.Fatalf("shared=%v: buffer aliases the input: %v", shared, aliased)
		}
		if shared {
			// An append must not write over the bytes that follow.
			_ = append(first, 'X')
			if r2 := NewReader(b); string(r2.Buffer()) != "abc" || r2.Buffer() != nil || string(append(r2.Buffer(), r2.Buffer()...)) != "de" {
				t.Fatal("an append to a shared buffer changed the input")
			}
		}
	}
}
