package jute

import "testing"

// Codec benchmarks: a getData reply (the hottest reply) and a create
// request, encoded into a frame and decoded back.

func BenchmarkEncodeGetDataReply(b *testing.B) {
	resp := &GetDataResponse{Data: make([]byte, 1024), Stat: Stat{Czxid: 7, Mzxid: 9, Version: 3}}
	hdr := &ReplyHeader{Xid: 12, Zxid: 9}
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = AppendFrame(buf[:0], hdr, resp)
	}
}

func BenchmarkDecodeCreateRequest(b *testing.B) {
	body := Marshal(&CreateRequest{Path: "/app/locks/lock-0000000042", Data: make([]byte, 128),
		ACL: []ACL{{Perms: PermAll, ID: ID{Scheme: "world", ID: "anyone"}}}})
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for i := 0; i < b.N; i++ {
		var req CreateRequest
		if err := Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}
