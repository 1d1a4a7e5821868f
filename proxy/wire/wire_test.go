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
	got := AppendRecord(nil, KindHello, 0, &Hello{Magic: Magic, Version: Version, Name: "p1"})
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

	rep, err := Accept(enc(&Hello{Magic: Magic, Version: Version, Name: "p"}))
	if err != nil || rep.Err != HelloOK {
		t.Fatalf("same version: %+v %v", rep, err)
	}
	frame := AppendRecord(nil, KindHelloReply, 0, rep)
	k, _, p, _ := ReadFrame(bytes.NewReader(frame), 1<<10)
	if _, err := CheckReply(k, p); err != nil {
		t.Fatalf("CheckReply(ok) = %v", err)
	}

	rep, err = Accept(enc(&Hello{Magic: Magic, Version: Version + 1, Name: "p"}))
	if !errors.Is(err, ErrRefused) || rep == nil || rep.Err != HelloVersionRefused ||
		!strings.Contains(rep.Message, "version 2") || !strings.Contains(rep.Message, "speaks 1") {
		t.Fatalf("other version: %+v %v", rep, err)
	}
	frame = AppendRecord(nil, KindHelloReply, 0, rep)
	k, _, p, _ = ReadFrame(bytes.NewReader(frame), 1<<10)
	if _, err := CheckReply(k, p); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "speaks 1") {
		t.Fatalf("CheckReply(refused) = %v", err)
	}

	for name, b := range map[string][]byte{
		"bad magic": enc(&Hello{Magic: 1, Version: Version}),
		"short":     {0x7a, 0x6b},
		"client":    jute.Marshal(&jute.ConnectRequest{TimeOut: 1000, Passwd: make([]byte, 16)}),
	} {
		if rep, err := Accept(b); !errors.Is(err, ErrBadMagic) || rep != nil {
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
