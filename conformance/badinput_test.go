package conformance

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"net"
	"testing"
	"time"
)

// Bad input over raw sockets. Each case is followed by a check that a fresh
// client still works and that stored data is intact (zookeeper-facts.md §2).

func TestBadInput(t *testing.T) {
	base := uniquePath(t)
	sentinel := base + "/sentinel"
	sentinelData := []byte("must survive")
	mustCreate(t, admin, sentinel, sentinelData, 0)

	lengthOnly := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

	for _, tc := range []struct {
		name string
		// handshake: establish a session first.
		handshake bool
		run       func(t *testing.T, c *rawConn)
	}{
		{"OversizedLengthBeforeHandshake", false, func(t *testing.T, c *rawConn) {
			c.writeRaw(lengthOnly(maxFrame + 1))
			c.expectClosedSilently(rawIOTimeout)
		}},
		{"OversizedLengthAfterHandshake", true, func(t *testing.T, c *rawConn) {
			c.writeRaw(lengthOnly(maxFrame + 1))
			c.expectClosedSilently(rawIOTimeout)
		}},
		{"HugeLength", true, func(t *testing.T, c *rawConn) {
			c.writeRaw(lengthOnly(0x7fffffff))
			c.expectClosedSilently(rawIOTimeout)
		}},
		{"NegativeLengthBeforeHandshake", false, func(t *testing.T, c *rawConn) {
			c.writeRaw(lengthOnly(0xfffffff0))
			c.expectClosedSilently(rawIOTimeout)
		}},
		{"NegativeLengthAfterHandshake", true, func(t *testing.T, c *rawConn) {
			c.writeRaw(lengthOnly(0xffffffff))
			c.expectClosedSilently(rawIOTimeout)
		}},
		{"TruncatedFrameThenHalfClose", true, func(t *testing.T, c *rawConn) {
			// A frame announcing 100 bytes, 7 sent, then the client's side
			// of the stream ends: the server closes without a reply.
			c.writeRaw(append(lengthOnly(100), 0, 0, 0, 1, 0, 0, 0))
			c.nc.(*net.TCPConn).CloseWrite()
			c.expectClosedSilently(rawIOTimeout)
		}},
		{"TruncatedConnectRequest", false, func(t *testing.T, c *rawConn) {
			full := frame(newSessionRequest(10000).encode())
			c.writeRaw(full[:20])
			c.nc.(*net.TCPConn).CloseWrite()
			c.expectClosedSilently(rawIOTimeout)
		}},
		{"ShortConnectRequest", false, func(t *testing.T, c *rawConn) {
			// A complete frame too short to be a ConnectRequest.
			b := make([]byte, 20)
			rand.New(rand.NewSource(7)).Read(b)
			c.writeFrame(b)
			c.expectClosedSilently(rawIOTimeout)
		}},
		{"RequestBeforeConnect", false, func(t *testing.T, c *rawConn) {
			// A getData request where the ConnectRequest should be.
			c.writeFrame(append(new(jw).i32(1).i32(opGetData).bytes(), pathWatchReq(sentinel, false)...))
			c.expectClosedSilently(rawIOTimeout)
		}},
		{"UnknownOpCode", true, func(t *testing.T, c *rawConn) {
			// ZooKeeper 3.8 answers an unknown op with UNIMPLEMENTED (zxid -1,
			// header only), then closes the connection.
			c.sendXid(5, opUnknownForTest, nil)
			frames, err := c.readUntilClosed(rawIOTimeout)
			if err != nil {
				t.Fatalf("unknown op: %v", err)
			}
			want := frameBody(5, -1, errUnimplemented)
			if len(frames) != 1 || !bytes.Equal(frames[0], want) {
				t.Fatalf("unknown op: frames % x, want one frame % x then close", frames, want)
			}
		}},
		{"RandomFrameAfterHandshake", true, func(t *testing.T, c *rawConn) {
			// 64 random bytes (fixed seed): the "type" is no op code, so the
			// answer is UNIMPLEMENTED for the "xid" in the first 4 bytes, and
			// the connection is closed.
			b := make([]byte, 64)
			rand.New(rand.NewSource(1)).Read(b)
			xid := int32(binary.BigEndian.Uint32(b))
			if typ := int32(binary.BigEndian.Uint32(b[4:])); typ >= -11 && typ <= 200 {
				t.Fatalf("test bug: random type %d is too close to real op codes", typ)
			}
			c.writeFrame(b)
			frames, err := c.readUntilClosed(rawIOTimeout)
			if err != nil {
				t.Fatalf("random frame: %v", err)
			}
			want := frameBody(xid, -1, errUnimplemented)
			if len(frames) != 1 || !bytes.Equal(frames[0], want) {
				t.Fatalf("random frame: frames % x, want one frame % x then close", frames, want)
			}
		}},
		{"OversizedSetData", true, func(t *testing.T, c *rawConn) {
			// A setData whose frame is over jute.maxbuffer: closed, no reply,
			// nothing written.
			c.writeFrame(append(new(jw).i32(1).i32(opSetData).bytes(), setDataReq(sentinel, make([]byte, maxFrame), -1)...))
			c.expectClosedSilently(rawIOTimeout)
		}},
		{"GarbageBody", true, func(t *testing.T, c *rawConn) {
			// A known op with an undecodable body: MARSHALLINGERROR, header
			// only, and the connection stays usable.
			for _, op := range []int32{opCreate, opSetData, opDelete, opGetData, opExists, opGetChildren2} {
				rep := c.call(op, []byte{0xff, 0xff, 0, 0, 1, 2})
				if rep.Err != errMarshallingError || rep.Len != 16 {
					t.Fatalf("op %d with a garbage body: %v, want MARSHALLINGERROR, header only", op, rep)
				}
			}
			if _, data, _ := c.getData(sentinel, false); !bytes.Equal(data, sentinelData) {
				t.Fatalf("connection after marshalling errors: getData = %q", data)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *rawConn
			if tc.handshake {
				c = rawSession(t, 10000)
			} else {
				c = dialRaw(t)
			}
			tc.run(t, c)
			checkServerHealthy(t, sentinel, sentinelData)
		})
	}
}

// frameBody is a ReplyHeader alone.
func frameBody(xid int32, zxid int64, err int32) []byte {
	return new(jw).i32(xid).i64(zxid).i32(err).bytes()
}

func TestFrameAtLimitAccepted(t *testing.T) {
	// A frame of exactly jute.maxbuffer (0xfffff) bytes is accepted: a setData
	// of almost 1 MiB succeeds and reads back intact.
	base := uniquePath(t)
	c := rawSession(t, 10000)
	p := base + "/big"
	c.callOK(opCreate, createReq(p, nil, 0))
	n := maxFrame - 8 - (4 + len(p)) - 4 - 4 // header, path, data length, version
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i)
	}
	body := append(new(jw).i32(100).i32(opSetData).bytes(), setDataReq(p, data, 0)...)
	if len(body) != maxFrame {
		t.Fatalf("test bug: frame is %d bytes", len(body))
	}
	if err := c.writeFrame(body); err != nil {
		t.Fatal(err)
	}
	rep := c.await(100)
	if rep.Err != errOK {
		t.Fatalf("setData in a 0xfffff-byte frame: %v", rep)
	}
	_, got, st := c.getData(p, false)
	if !bytes.Equal(got, data) || st.DataLength != int32(n) || st.Version != 1 {
		t.Fatalf("read back %d bytes (dataLength %d, version %d), want %d bytes", len(got), st.DataLength, st.Version, n)
	}
}

func TestFourLetterWordRuok(t *testing.T) {
	// "ruok" as the first 4 bytes of a connection: "imok", then close.
	c := dialRaw(t)
	if err := c.writeRaw([]byte("ruok")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	b := make([]byte, 64)
	for {
		c.nc.SetReadDeadline(time.Now().Add(rawIOTimeout))
		n, err := c.nc.Read(b)
		buf.Write(b[:n])
		if err != nil {
			if !isClosedErr(err) {
				t.Fatalf("ruok: %v", err)
			}
			break
		}
	}
	if buf.String() != "imok" {
		t.Fatalf("ruok answered %q, want \"imok\"", buf.String())
	}
}
