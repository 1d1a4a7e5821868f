package jute

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoders chosen by an op code: the
// op's request and response records from the table, plus MultiRequest,
// MultiResponse, ConnectRequest, ConnectResponse and the headers. For every
// record it checks that decoding never panics and, when decoding succeeds:
//
//   - Marshal(decoded) has exactly the length of the consumed prefix;
//   - Marshal(decoded) equals the consumed prefix byte for byte, unless the
//     Reader marked the input as non-canonical (Reader.lossy). The accepted
//     non-canonical forms are: a null ustring (length -1), which decodes to ""
//     and re-encodes with length 0; a boolean byte other than 0 or 1, which
//     decodes to true and re-encodes as 1; in multi requests the err field of
//     op headers (ZooKeeper ignores it, we write -1) and the type/err of the
//     Done header (we write -1/-1); in multi responses an OpError result whose
//     header err differs from its ErrorResponse body (the body wins, as in the
//     Java client). All of these keep the encoded length.
//   - decoding Marshal(decoded) again succeeds, consumes it exactly, is
//     canonical, and gives an equal value.
//
// Seeds are the golden frames of testdata/golden (bodies after the header)
// plus the samples of records_test.go.
func FuzzDecode(f *testing.F) {
	for _, g := range loadGolden(f) {
		body := g.frame[4:]
		switch {
		case g.op == OpCreateSession:
		case g.response:
			body = body[16:]
		default:
			body = body[8:]
		}
		f.Add(int32(g.op), body)
		f.Add(int32(g.op), g.frame[4:])
	}
	for _, rec := range sampleRecords() {
		f.Add(int32(OpMulti), Marshal(rec))
	}
	for _, c := range nonCanonical {
		f.Add(int32(c.op), unhex(f, c.in))
	}
	f.Add(int32(OpGetChildren), []byte{0x7f, 0xff, 0xff, 0xff})
	f.Add(int32(OpCreate), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, op int32, data []byte) {
		for _, rec := range fuzzRecords(OpCode(op)) {
			checkDecode(t, rec, data)
		}
	})
}

func fuzzRecords(op OpCode) []Record {
	recs := []Record{
		&MultiRequest{}, &MultiResponse{}, &ConnectRequest{}, &ConnectResponse{},
		&RequestHeader{}, &ReplyHeader{}, &MultiHeader{},
	}
	if rec, ok := NewRequest(op); ok {
		recs = append(recs, rec)
	}
	if rec, ok := NewResponse(op); ok {
		recs = append(recs, rec)
	}
	return recs
}

func checkDecode(t *testing.T, rec Record, data []byte) {
	r := NewReader(data)
	rec.Decode(r)
	if r.Err() != nil {
		return
	}
	consumed := r.Offset()
	m := Marshal(rec)
	if len(m) != consumed {
		t.Fatalf("%T: consumed %d bytes, re-encodes to %d\nin  %x\nout %x", rec, consumed, len(m), data[:consumed], m)
	}
	if !r.lossy && !bytes.Equal(m, data[:consumed]) {
		t.Fatalf("%T: canonical input re-encodes differently\nin  %x\nout %x", rec, data[:consumed], m)
	}
	again := reflect.New(reflect.TypeOf(rec).Elem()).Interface().(Record)
	r2 := NewReader(m)
	again.Decode(r2)
	if r2.Err() != nil {
		t.Fatalf("%T: re-decode: %v\n%x", rec, r2.Err(), m)
	}
	if r2.Remaining() != 0 || r2.lossy {
		t.Fatalf("%T: re-decode left %d bytes, lossy=%v", rec, r2.Remaining(), r2.lossy)
	}
	if !reflect.DeepEqual(rec, again) {
		t.Fatalf("%T: values differ after re-encoding\n1st %s\n2nd %s", rec, dump(rec), dump(again))
	}
}

func dump(rec Record) string { return fmt.Sprintf("%+v", rec) }

// nonCanonical lists inputs that decode but do not re-encode byte for byte,
// one per documented exception in FuzzDecode.
var nonCanonical = []struct {
	name string
	op   OpCode
	rec  Record
	in   string
}{
	{"null ustring", OpSync, &SyncRequest{}, "ffffffff"},
	{"boolean 2", OpExists, &ExistsRequest{}, "00000001 2f 02"},
	{"multi op header err", OpMulti, &MultiRequest{}, "00000002 00 00000000 00000001 2f ffffffff ffffffff 01 ffffffff"},
	{"multi done header type/err", OpMulti, &MultiRequest{}, "00000001 01 00000000"},
	{"multi done header type", OpMulti, &MultiResponse{}, "0000000e 01 ffffffff"},
	{"multi error header/body mismatch", OpMulti, &MultiResponse{}, "ffffffff 00 00000000 ffffff99 ffffffff 01 ffffffff"},
}

func TestNonCanonicalInputs(t *testing.T) {
	for _, c := range nonCanonical {
		t.Run(c.name, func(t *testing.T) {
			in := unhex(t, c.in)
			r := NewReader(in)
			c.rec.Decode(r)
			if r.Err() != nil || r.Remaining() != 0 {
				t.Fatalf("decode: %v, %d left", r.Err(), r.Remaining())
			}
			if !r.lossy {
				t.Fatal("not marked lossy")
			}
			if m := Marshal(c.rec); bytes.Equal(m, in) || len(m) != len(in) {
				t.Fatalf("re-encoding %x", m)
			}
			checkDecode(t, c.rec, in)
		})
	}
	var m MultiResponse
	if err := Unmarshal(unhex(t, nonCanonical[5].in), &m); err != nil || m.Results[0].Err != ErrBadVersion {
		t.Fatalf("error body must win: %v %+v", err, m.Results)
	}
}
