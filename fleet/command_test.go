package fleet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"
)

// oneOfEach is a command of every kind, with every field set.
func oneOfEach() []Command {
	p := Placement{Voters: []uint64{1, 2, 3}, Observers: []uint64{4}}
	l := Limits{MaxZnodes: 1, MaxDataBytes: 2, MaxSessions: 3, MaxWatches: 4, MaxRequestRate: 5}
	return []Command{
		&AddMember{Member: MemberSpec{ID: 7, RaftAddr: "h:1", ClientHost: "h"}},
		&MarkLeaving{ID: 7, Expect: 9},
		&RemoveMember{ID: 7, Expect: 10},
		&CreateCell{Name: "kafka", Placement: p, ClientPort: 2182, TLSPort: 65535, Limits: l},
		&ActivateCell{Name: "kafka", Expect: 11},
		&BeginMove{Name: "kafka", Expect: 12, Target: p},
		&FinishMove{Name: "kafka", Expect: 13},
		&AbortMove{Name: "kafka", Expect: 14},
		&SetLimits{Name: "kafka", Expect: 15, Limits: l},
		&DeleteCell{Name: "kafka", Expect: 16, Force: true, Empty: &Emptiness{ShardID: 2, Zxid: 3, Znodes: 4, Sessions: 5}},
		&DeleteCell{Name: "kafka", Expect: AnyVersion},
		&PurgeCell{Name: "kafka", Expect: 17},
		&ImportCell{Name: "kafka", Placement: p, ClientPort: 2182, TLSPort: 65535, Limits: l},
		&ReleaseCell{Name: "kafka", Expect: 18},
		&ImportDefault{ShardID: 1, Members: []MemberSpec{{ID: 1, RaftAddr: "a:1", ClientHost: "a"}, {ID: 2, RaftAddr: "b:1", ClientHost: "b"}},
			Placement: p, ClientPort: 2181, TLSPort: 2281},
	}
}

func TestCommandRoundTrip(t *testing.T) {
	seen := map[Kind]bool{}
	for _, c := range oneOfEach() {
		b := Encode(c, 12345)
		e, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", c.Kind(), err)
		}
		if e.Kind != c.Kind() || e.Time != 12345 || e.Version != versionOf(c.Kind()) || !reflect.DeepEqual(e.Cmd, c) {
			t.Errorf("%s: decoded %+v %+v", c.Kind(), e, e.Cmd)
		}
		if again := Encode(e.Cmd, e.Time); !bytes.Equal(again, b) {
			t.Errorf("%s: re-encoding differs", c.Kind())
		}
		// Every prefix is malformed, never a panic and never another command.
		for n := 0; n < len(b); n++ {
			if _, err := Decode(b[:n]); !errors.Is(err, ErrBadCommand) {
				t.Errorf("%s cut at %d: %v", c.Kind(), n, err)
			}
		}
		if _, err := Decode(append(b, 0)); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%s with a trailing byte: %v", c.Kind(), err)
		}
		seen[c.Kind()] = true
	}
	// The registry: every kind is in it, named, and covered above.
	for _, k := range kinds {
		if !seen[k.kind] || k.zero().Kind() != k.kind || strings.HasPrefix(k.kind.String(), "Kind(") || k.version > CommandVersion {
			t.Errorf("kind %d (%s): registry row or round trip missing", k.kind, k.kind)
		}
	}
	for c := CodeOK; c <= CodeExhausted; c++ {
		if strings.HasPrefix(c.String(), "Code(") {
			t.Errorf("code %d has no name", c)
		}
	}
}

// header builds the start of an entry by hand.
func header(version, kind int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(version))
	b = binary.BigEndian.AppendUint32(b, uint32(kind))
	return binary.BigEndian.AppendUint64(b, 1)
}

// TestUnknownCommands: what every replica of a version refuses the same
// way is a result and changes nothing; a newer version stops the replica.
func TestUnknownCommands(t *testing.T) {
	h := newFleet(t, 1)
	before := h.status()
	body := Encode(&PurgeCell{Name: "kafka", Expect: 1}, 1)[16:]
	replies := h.batch(
		append(header(1, 99), body...),                       // no such kind
		append(header(1, 0), body...),                        // kind 0
		append(header(0, int32(KindPurgeCell)), body...),     // version 0
		[]byte{1, 2, 3},                                      // no header
		append(header(1, int32(KindCreateCell)), 0, 0, 0, 1), // truncated body
		append(Encode(&MarkLeaving{ID: 1, Expect: 1}, 1), 9), // trailing bytes
		[]byte{}, // an empty entry
	)
	want := []Code{CodeUnknownKind, CodeUnknownKind, CodeMalformed, CodeMalformed, CodeMalformed, CodeMalformed, CodeOK}
	for i, r := range replies {
		if r.Code != want[i] || r.Changed || r.Version != before.Version {
			t.Errorf("entry %d: %v, want %s and no change", i, r, want[i])
		}
	}
	after := h.status()
	if after.Digest != before.Digest || after.Version != before.Version || after.Applied != before.Applied+uint64(len(replies)) {
		t.Errorf("status %+v after refusals, was %+v", after, before)
	}
	// A bad port in a create is malformed, not truncated to 16 bits.
	c := Encode(&CreateCell{Name: "kafka", Placement: voters(1), ClientPort: 2182}, 1)
	bad := bytes.Replace(c, binary.BigEndian.AppendUint32(nil, 2182), binary.BigEndian.AppendUint32(nil, 0x10000+2182), 1)
	if r := h.batch(bad)[0]; r.Code != CodeMalformed {
		t.Errorf("port 67718: %v", r)
	}
	if r := h.batch(c)[0]; r.Code != CodeOK {
		t.Errorf("the same create with a good port: %v", r)
	}

	// A newer version: Update fails (the replica stops) and applies none
	// of its batch.
	st := h.status()
	h.index++
	_, err := h.sm.Update([]sm.Entry{
		{Index: h.index, Cmd: Encode(&AddMember{Member: member(2)}, 1)},
		{Index: h.index + 1, Cmd: append(header(CommandVersion+1, int32(KindAddMember)), body...)},
	})
	if !errors.Is(err, ErrNewerCommand) {
		t.Fatalf("newer command: %v", err)
	}
	if got := h.status(); got != st {
		t.Errorf("a failed Update changed the status: %+v, was %+v", got, st)
	}
	h.reopen()
	if got := h.status(); got != st {
		t.Errorf("a failed Update reached the store: %+v, was %+v", got, st)
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range oneOfEach() {
		f.Add(Encode(c, 1))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadCommand) && !errors.Is(err, ErrNewerCommand) {
				t.Fatalf("error %v wraps neither sentinel", err)
			}
			return
		}
		// jute reads some values in more than one form (a boolean byte
		// other than 1, a null string), so the bytes need not come back;
		// the command must.
		again, err := Decode(Encode(e.Cmd, e.Time))
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("decoded %+v, re-encoded and decoded %+v (%v)", e, again, err)
		}
	})
}
