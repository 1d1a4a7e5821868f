package jute

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// goldenFrame is one frame captured from Apache ZooKeeper 3.8.0 (see
// testdata/golden/README.md).
type goldenFrame struct {
	name     string // file name without .hex
	op       OpCode
	response bool   // server-to-client
	frame    []byte // including the 4-byte length prefix
}

func opByName(name string) (OpCode, bool) {
	for _, op := range AllOpCodes {
		if op.String() == name {
			return op, true
		}
	}
	return 0, false
}

func loadGolden(tb testing.TB) []goldenFrame {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.hex"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden files: %v", err)
	}
	sort.Strings(files)
	var out []goldenFrame
	for _, fn := range files {
		f, err := os.Open(fn)
		if err != nil {
			tb.Fatal(err)
		}
		g := goldenFrame{name: strings.TrimSuffix(filepath.Base(fn), ".hex")}
		var hx strings.Builder
		var haveOp bool
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(line, "#") {
				hx.WriteString(line)
				continue
			}
			for _, kv := range strings.Fields(strings.TrimPrefix(line, "#")) {
				k, v, ok := strings.Cut(kv, "=")
				switch {
				case ok && k == "op":
					g.op, haveOp = opByName(v)
					if !haveOp {
						tb.Fatalf("%s: unknown op %q", fn, v)
					}
				case ok && k == "dir":
					g.response = v == "response"
				}
			}
		}
		f.Close()
		if !haveOp {
			tb.Fatalf("%s: no op= line", fn)
		}
		if g.frame, err = hex.DecodeString(hx.String()); err != nil {
			tb.Fatalf("%s: %v", fn, err)
		}
		out = append(out, g)
	}
	return out
}

// decodeGolden decodes a captured frame into its header (nil for connect) and
// body (nil for a header-only error reply), checking that the frame is
// consumed exactly and was canonical.
func decodeGolden(t *testing.T, g goldenFrame) (hdr, body Record) {
	t.Helper()
	r := NewReader(g.frame)
	n := r.Int()
	if r.Err() != nil || int(n) != r.Remaining() {
		t.Fatalf("length prefix %d, %d bytes follow", n, r.Remaining())
	}
	switch {
	case g.op == OpCreateSession && g.response:
		body = &ConnectResponse{}
	case g.op == OpCreateSession:
		body = &ConnectRequest{}
	case g.response:
		h := &ReplyHeader{}
		h.Decode(r)
		hdr = h
		if h.Err == ErrOK {
			body, _ = NewResponse(g.op)
			if g.op == OpNotification && h.Xid != XidNotification {
				t.Fatalf("notification with xid %d", h.Xid)
			}
		}
	default:
		h := &RequestHeader{}
		h.Decode(r)
		hdr = h
		if h.Type != g.op {
			t.Fatalf("request header type %v, file says %v", h.Type, g.op)
		}
		body, _ = NewRequest(g.op)
	}
	if body != nil {
		body.Decode(r)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if r.Remaining() != 0 {
		t.Fatalf("%d bytes left over", r.Remaining())
	}
	if r.lossy {
		t.Fatal("ZooKeeper's encoding decoded as non-canonical")
	}
	return hdr, body
}

func TestGoldenRoundTrip(t *testing.T) {
	for _, g := range loadGolden(t) {
		t.Run(g.name, func(t *testing.T) {
			hdr, body := decodeGolden(t, g)
			if got := AppendFrame(nil, hdr, body); !bytes.Equal(got, g.frame) {
				t.Fatalf("re-encoding differs\n got %x\nwant %x", got, g.frame)
			}
			// Decoding the re-encoding gives equal values.
			g2 := g
			g2.frame = AppendFrame(nil, hdr, body)
			hdr2, body2 := decodeGolden(t, g2)
			if !reflect.DeepEqual(hdr, hdr2) || !reflect.DeepEqual(body, body2) {
				t.Fatalf("second decode differs: %+v %+v vs %+v %+v", hdr, body, hdr2, body2)
			}
			if check, ok := goldenChecks[g.name]; ok {
				check(t, hdr, body)
			}
		})
	}
}

// goldenChecks pins what the captures mean, not just that they round-trip.
var goldenChecks = map[string]func(t *testing.T, hdr, body Record){
	"01-connect.request": func(t *testing.T, _, body Record) {
		c := body.(*ConnectRequest)
		if !c.HasReadOnly || c.ReadOnly || c.TimeOut != 30000 || c.SessionID != 0 || len(c.Passwd) != 16 {
			t.Errorf("%+v", c)
		}
		if n := len(Marshal(c)); n != 45 {
			t.Errorf("connect request body %d bytes, want 45", n)
		}
	},
	"02-connect.response": func(t *testing.T, _, body Record) {
		c := body.(*ConnectResponse)
		if !c.HasReadOnly || c.TimeOut != 30000 || c.SessionID == 0 || len(c.Passwd) != 16 {
			t.Errorf("%+v", c)
		}
		if n := len(Marshal(c)); n != 37 {
			t.Errorf("connect response body %d bytes, want 37", n)
		}
	},
	"55-connect-oldclient.request": func(t *testing.T, _, body Record) {
		if c := body.(*ConnectRequest); c.HasReadOnly || len(Marshal(c)) != 44 {
			t.Errorf("%+v", c)
		}
	},
	"56-connect-oldclient.response": func(t *testing.T, _, body Record) {
		if c := body.(*ConnectResponse); c.HasReadOnly || len(Marshal(c)) != 36 {
			t.Errorf("%+v", c)
		}
	},
	"03-create.request": func(t *testing.T, _, body Record) {
		c := body.(*CreateRequest)
		want := CreateRequest{Path: "/golden", Data: []byte("hello"), ACL: []ACL{{Perms: PermAll, ID: ID{"world", "anyone"}}}, Flags: FlagPersistent}
		if !reflect.DeepEqual(*c, want) {
			t.Errorf("%+v", c)
		}
	},
	"04-create.response": func(t *testing.T, _, body Record) {
		if c := body.(*CreateResponse); c.Path != "/golden" {
			t.Errorf("%+v", c)
		}
	},
	"06-create2.response": func(t *testing.T, _, body Record) {
		c := body.(*Create2Response)
		if c.Path != "/golden/c2" || c.Stat.EphemeralOwner == 0 || c.Stat.Czxid != c.Stat.Mzxid || c.Stat.DataLength != 0 {
			t.Errorf("%+v", c)
		}
	},
	"08-create-nodeexists.response": func(t *testing.T, hdr, body Record) {
		if h := hdr.(*ReplyHeader); h.Err != ErrNodeExists || body != nil {
			t.Errorf("%+v", h)
		}
	},
	"10-getData.response": func(t *testing.T, _, body Record) {
		if g := body.(*GetDataResponse); string(g.Data) != "hello" || g.Stat.DataLength != 5 || g.Stat.NumChildren != 1 {
			t.Errorf("%+v", g)
		}
	},
	"12-setData-notification.response": func(t *testing.T, hdr, body Record) {
		h := hdr.(*ReplyHeader)
		e := body.(*WatcherEvent)
		if h.Xid != XidNotification || h.Zxid != -1 || *e != (WatcherEvent{EventNodeDataChanged, StateSyncConnected, "/golden"}) {
			t.Errorf("%+v %+v", h, e)
		}
	},
	"13-setData.response": func(t *testing.T, _, body Record) {
		if s := body.(*SetDataResponse); s.Stat.Version != 1 || s.Stat.DataLength != 5 {
			t.Errorf("%+v", s)
		}
	},
	"17-exists-nonode.response": func(t *testing.T, hdr, body Record) {
		if h := hdr.(*ReplyHeader); h.Err != ErrNoNode || body != nil || len(Marshal(h)) != 16 {
			t.Errorf("%+v", h)
		}
	},
	"21-getChildren2.response": func(t *testing.T, _, body Record) {
		if g := body.(*GetChildren2Response); !reflect.DeepEqual(g.Children, []string{"c2"}) || g.Stat.NumChildren != 1 {
			t.Errorf("%+v", g)
		}
	},
	"28-multi.response": func(t *testing.T, hdr, body Record) {
		m := body.(*MultiResponse)
		var types []OpCode
		for _, r := range m.Results {
			types = append(types, r.Type)
			if r.Err != ErrOK {
				t.Errorf("result %+v", r)
			}
		}
		if !reflect.DeepEqual(types, []OpCode{OpCreate, OpCheck, OpSetData, OpDelete}) {
			t.Errorf("types %v", types)
		}
		if c := m.Results[0].Resp.(*CreateResponse); c.Path != "/golden/m1" {
			t.Errorf("%+v", c)
		}
		if m.Results[1].Resp != nil || m.Results[3].Resp != nil {
			t.Error("check/delete results must have no body")
		}
	},
	"30-multi-failure.response": func(t *testing.T, hdr, body Record) {
		if h := hdr.(*ReplyHeader); h.Err != ErrOK {
			t.Errorf("failed multi reply header err %v, want OK", h.Err)
		}
		want := []MultiResult{
			{Type: OpError, Err: ErrOK, Resp: &ErrorResponse{ErrOK}},
			{Type: OpError, Err: ErrBadVersion, Resp: &ErrorResponse{ErrBadVersion}},
			{Type: OpError, Err: ErrRuntimeInconsistency, Resp: &ErrorResponse{ErrRuntimeInconsistency}},
		}
		if m := body.(*MultiResponse); !reflect.DeepEqual(m.Results, want) {
			t.Errorf("%+v", m.Results)
		}
	},
	"32-multiRead.response": func(t *testing.T, _, body Record) {
		m := body.(*MultiResponse)
		if len(m.Results) != 2 || string(m.Results[0].Resp.(*GetDataResponse).Data) != "world" ||
			!reflect.DeepEqual(m.Results[1].Resp.(*GetChildrenResponse).Children, []string{"c2"}) {
			t.Errorf("%+v", m)
		}
	},
	"34-getEphemerals.response": func(t *testing.T, _, body Record) {
		if g := body.(*GetEphemeralsResponse); !reflect.DeepEqual(g.Ephemerals, []string{"/golden/c2"}) {
			t.Errorf("%+v", g)
		}
	},
	"36-getAllChildrenNumber.response": func(t *testing.T, _, body Record) {
		if g := body.(*GetAllChildrenNumberResponse); g.TotalNumber != 1 {
			t.Errorf("%+v", g)
		}
	},
	"38-addWatch.response": func(t *testing.T, _, body Record) {
		if e := body.(*ErrorResponse); e.Err != ErrOK {
			t.Errorf("%+v", e)
		}
	},
	"40-whoAmI.response": func(t *testing.T, _, body Record) {
		if w := body.(*WhoAmIResponse); !reflect.DeepEqual(w.ClientInfo, []ClientInfo{{"ip", "127.0.0.1"}}) {
			t.Errorf("%+v", w)
		}
	},
	"43-setWatches.response": func(t *testing.T, hdr, _ Record) {
		if h := hdr.(*ReplyHeader); h.Xid != XidSetWatches || h.Err != ErrOK {
			t.Errorf("%+v", h)
		}
	},
	"45-delete-notification.response": func(t *testing.T, _, body Record) {
		if e := body.(*WatcherEvent); *e != (WatcherEvent{EventNodeDeleted, StateSyncConnected, "/golden/c2"}) {
			t.Errorf("%+v", e)
		}
	},
	"48-delete-notempty.response": func(t *testing.T, hdr, _ Record) {
		if h := hdr.(*ReplyHeader); h.Err != ErrBadArguments {
			t.Errorf("delete / gave %v", h.Err)
		}
	},
	"50-ping.response": func(t *testing.T, hdr, _ Record) {
		if h := hdr.(*ReplyHeader); h.Xid != XidPing || h.Err != ErrOK || h.Zxid == 0 {
			t.Errorf("%+v", h)
		}
	},
	"52-auth.response": func(t *testing.T, hdr, _ Record) {
		if h := hdr.(*ReplyHeader); *h != (ReplyHeader{Xid: XidAuth, Zxid: 0, Err: ErrOK}) {
			t.Errorf("%+v", h)
		}
	},
	"54-closeSession.response": func(t *testing.T, hdr, _ Record) {
		if h := hdr.(*ReplyHeader); h.Err != ErrOK || h.Xid <= 0 {
			t.Errorf("%+v", h)
		}
	},
}

func TestGoldenChecksExist(t *testing.T) {
	names := map[string]bool{}
	for _, g := range loadGolden(t) {
		names[g.name] = true
	}
	for n := range goldenChecks {
		if !names[n] {
			t.Errorf("check for missing golden file %s", n)
		}
	}
}
