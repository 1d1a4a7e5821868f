package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/zkraft/zkraft/jute"
)

// TestHelloBytes pins the bytes of version 1's hello, as docs/proxy.md
// describes them: length, kind 1, channel 0, magic "zkrp", version 1, the
// name as a Jute ustring.
func TestHelloBytes(t *testing.T) {
	got := AppendRecord(nil, KindHello, 0, &Hello{Magic: Magic, Version: 1, Name: "p1"})
	want := "0000001a" + "00000001" + "0000000000000000" + "7a6b7270" + "00000001" + "00000002" + "7031"
	if hex.EncodeToString(got) != want {
		t.Fatalf("hello = %x, want %s", got, want)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	var buf []byte
	buf = AppendRecord(buf, KindOpen, 7, &Open{ClientAddr: "127.0.0.1:5000", Connect: []byte{1, 2, 3}})
	buf = AppendFrame(buf, KindData, 7, []byte("abc"), []byte("de"))
	buf = AppendFrame(buf, KindClose, 7)
	buf = AppendRecord(buf, KindOpen, 8, &Open{ClientAddr: "[::1]:5", Word: "srvr"})
	buf = AppendRecord(buf, KindKeepAlive, 0, &KeepAlive{Sessions: []int64{1, 1 << 40, -5}})
	r := bytes.NewReader(buf)

	k, ch, p, err := ReadFrame(r, 1<<20)
	o := new(Open)
	if err != nil || k != KindOpen || ch != 7 || jute.Unmarshal(p, o) != nil || o.ClientAddr != "127.0.0.1:5000" || !bytes.Equal(o.Connect, []byte{1, 2, 3}) {
		t.Fatalf("open: %v %d %+v %v", k, ch, o, err)
	}
	k, ch, p, err = ReadFrame(r, 1<<20)
	if err != nil || k != KindData || ch != 7 || string(p) != "abcde" {
		t.Fatalf("data: %v %d %q %v", k, ch, p, err)
	}
	k, ch, p, err = ReadFrame(r, 1<<20)
	if err != nil || k != KindClose || ch != 7 || len(p) != 0 {
		t.Fatalf("close: %v %d %q %v", k, ch, p, err)
	}
	k, ch, p, err = ReadFrame(r, 1<<20)
	o = new(Open)
	if err != nil || k != KindOpen || ch != 8 || jute.Unmarshal(p, o) != nil || o.Word != "srvr" || o.Connect != nil {
		t.Fatalf("open a word: %v %d %+v %v", k, ch, o, err)
	}
	k, _, p, err = ReadFrame(r, 1<<20)
	ka := new(KeepAlive)
	if err != nil || k != KindKeepAlive || jute.Unmarshal(p, ka) != nil || len(ka.Sessions) != 3 || ka.Sessions[1] != 1<<40 || ka.Sessions[2] != -5 {
		t.Fatalf("keepAlive: %v %+v %v", k, ka, err)
	}
	if _, _, _, err := ReadFrame(r, 1<<20); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func TestReadFrameBounds(t *testing.T) {
	for name, b := range map[string][]byte{
		"negative":     {0xff, 0xff, 0xff, 0xf0},
		"below header": {0, 0, 0, 11},
		"beyond max":   AppendFrame(nil, KindData, 1, make([]byte, 101)),
	} {
		if _, _, _, err := ReadFrame(bytes.NewReader(b), 100); !errors.Is(err, ErrFrameLength) {
			t.Errorf("%s: %v, want ErrFrameLength", name, err)
		}
	}
	short := AppendFrame(nil, KindData, 1, []byte("hello"))
	if _, _, _, err := ReadFrame(bytes.NewReader(short[:len(short)-1]), 100); err != io.ErrUnexpectedEOF {
		t.Errorf("cut frame: %v, want ErrUnexpectedEOF", err)
	}
}

func TestAccept(t *testing.T) {
	enc := func(h *Hello) []byte { w := jute.NewWriter(0); h.Encode(w); return w.Bytes() }

	for _, v := range []int32{MinVersion, Version} {
		rep, err := Accept(enc(&Hello{Magic: Magic, Version: v, Name: "p"}), MinVersion, Version)
		if err != nil || rep.Err != HelloOK || rep.Version != v {
			t.Fatalf("version %d: %+v %v", v, rep, err)
		}
		frame := AppendRecord(nil, KindHelloReply, 0, rep)
		k, _, p, _ := ReadFrame(bytes.NewReader(frame), 1<<10)
		if got, _, err := CheckReply(k, p); err != nil || got != v {
			t.Fatalf("CheckReply(ok) = %d %v, want version %d", got, err, v)
		}
	}

	// A version 1 member and a version 2 proxy: refused, with the version
	// the member speaks, so that the proxy can say hello again in it.
	rep, err := Accept(enc(&Hello{Magic: Magic, Version: 2, Name: "p"}), 1, 1)
	if !errors.Is(err, ErrRefused) || rep == nil || rep.Err != HelloVersionRefused || rep.Version != 1 ||
		!strings.Contains(rep.Message, "version 2") || !strings.Contains(rep.Message, "speaks 1") {
		t.Fatalf("other version: %+v %v", rep, err)
	}
	frame := AppendRecord(nil, KindHelloReply, 0, rep)
	k, _, p, _ := ReadFrame(bytes.NewReader(frame), 1<<10)
	var refused *RefusedError
	if _, _, err := CheckReply(k, p); !errors.As(err, &refused) || !errors.Is(err, ErrRefused) || refused.Version != 1 || !strings.Contains(err.Error(), "speaks 1") {
		t.Fatalf("CheckReply(refused) = %v", err)
	}
	if rep, err := Accept(enc(&Hello{Magic: Magic, Version: 3, Name: "p"}), MinVersion, Version); !errors.Is(err, ErrRefused) ||
		!strings.Contains(rep.Message, "speaks 1 to 2") {
		t.Fatalf("version 3: %+v %v", rep, err)
	}

	for name, b := range map[string][]byte{
		"bad magic": enc(&Hello{Magic: 1, Version: Version}),
		"short":     {0x7a, 0x6b},
		"client":    jute.Marshal(&jute.ConnectRequest{TimeOut: 1000, Passwd: make([]byte, 16)}),
	} {
		if rep, err := Accept(b, MinVersion, Version); !errors.Is(err, ErrBadMagic) || rep != nil {
			t.Errorf("%s: %+v %v, want ErrBadMagic and no reply", name, rep, err)
		}
	}
}

func TestKeepAliveDecodeBounded(t *testing.T) {
	w := jute.NewWriter(0)
	w.Int(1 << 30) // a billion sessions in no bytes
	if err := jute.Unmarshal(w.Bytes(), new(KeepAlive)); err == nil {
		t.Fatal("a keep-alive longer than its frame decoded")
	}
}

func TestOpenCarriesOneThing(t *testing.T) {
	for name, o := range map[string]*Open{
		"neither":    {ClientAddr: "a:1"},
		"both":       {ClientAddr: "a:1", Connect: []byte{1}, Word: "ruok"},
		"short word": {ClientAddr: "a:1", Word: "ok"},
	} {
		w := jute.NewWriter(0)
		o.Encode(w)
		if err := jute.Unmarshal(w.Bytes(), new(Open)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestSharedWatchRecords: version 2's records round-trip, and a watch of
// an unknown table or mode, or a count longer than its frame, does not
// decode.
func TestSharedWatchRecords(t *testing.T) {
	w := Watching{Xid: 7, Zxid: 1 << 33, Watches: []Watch{{WatchTableData, WatchStandard, "/a"}, {WatchTableData, WatchRecursive, "/"}}}
	var got Watching
	if err := jute.Unmarshal(jute.Marshal(&w), &got); err != nil || got.Xid != 7 || got.Zxid != 1<<33 || len(got.Watches) != 2 || got.Watches[1] != w.Watches[1] {
		t.Fatalf("watching: %+v %v", got, err)
	}
	e := Event{Zxid: 9, Type: int32(jute.EventNodeDeleted), Path: "/a/b", Denied: []int64{3, 4}}
	var ge Event
	if err := jute.Unmarshal(jute.Marshal(&e), &ge); err != nil || ge.Path != "/a/b" || len(ge.Denied) != 2 || ge.Denied[1] != 4 {
		t.Fatalf("event: %+v %v", ge, err)
	}
	d := DataShared{Gen: 5, Request: []byte{1, 2, 3}}
	var gd DataShared
	if err := jute.Unmarshal(jute.Marshal(&d), &gd); err != nil || gd.Gen != 5 || !bytes.Equal(gd.Request, d.Request) {
		t.Fatalf("dataShared: %+v %v", gd, err)
	}
	u := Unwatch{Gen: 11, Watch: Watch{WatchTableChild, WatchPersistent, "/c"}}
	var gu Unwatch
	if err := jute.Unmarshal(jute.Marshal(&u), &gu); err != nil || gu != u {
		t.Fatalf("unwatch: %+v %v", gu, err)
	}
	for name, bad := range map[string]jute.Record{
		"child recursive": &Watch{WatchTableChild, WatchRecursive, "/"},
		"table 2":         &Watch{2, WatchStandard, "/"},
		"mode 3":          &Watch{WatchTableData, 3, "/"},
	} {
		if err := jute.Unmarshal(jute.Marshal(bad), new(Watch)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	long := jute.NewWriter(0)
	long.Int(1)
	long.Long(2)
	long.Int(1 << 30)
	if err := jute.Unmarshal(long.Bytes(), new(Watching)); err == nil {
		t.Error("a watching longer than its frame decoded")
	}
}
