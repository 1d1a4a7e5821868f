package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/iotest"
	"time"
)

// countingReader counts Read calls.
type countingReader struct {
	r     io.Reader
	calls int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.calls++
	return c.r.Read(p)
}

func frames(sizes ...int) ([]byte, [][]byte) {
	var stream bytes.Buffer
	var bodies [][]byte
	for i, n := range sizes {
		body := bytes.Repeat([]byte{byte(i + 1)}, n)
		binary.Write(&stream, binary.BigEndian, int32(n))
		stream.Write(body)
		bodies = append(bodies, body)
	}
	return stream.Bytes(), bodies
}

func readFrames(t *testing.T, f *frameReader, want [][]byte) {
	t.Helper()
	for i, w := range want {
		var l [4]byte
		if err := f.readFull(l[:]); err != nil {
			t.Fatalf("frame %d length: %v", i, err)
		}
		got := make([]byte, binary.BigEndian.Uint32(l[:]))
		if err := f.readFull(got); err != nil {
			t.Fatalf("frame %d body: %v", i, err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("frame %d: %d bytes %x..., want %d bytes of %x", i, len(got), got[:min(4, len(got))], len(w), w[0])
		}
	}
}

func TestFrameReader(t *testing.T) {
	sizes := []int{12, 1, 1030, readBufSize - 3, readBufSize, 3 * readBufSize, 40, 2, 7000}
	stream, bodies := frames(sizes...)
	for name, src := range map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(stream) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"halves":   func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
	} {
		t.Run(name, func(t *testing.T) {
			f := &frameReader{src: src()}
			readFrames(t, f, bodies)
			if f.buf != nil {
				t.Error("a buffer is held after the stream was drained")
			}
			if err := f.readFull(make([]byte, 4)); err != io.EOF {
				t.Errorf("after the last frame: %v, want EOF", err)
			}
		})
	}
}

// TestFrameReaderBatchesPipelinedFrames: frames queued together are read
// with a few calls, not two each.
func TestFrameReaderBatchesPipelinedFrames(t *testing.T) {
	sizes := make([]int, 100)
	for i := range sizes {
		sizes[i] = 60
	}
	stream, bodies := frames(sizes...)
	src := &countingReader{r: bytes.NewReader(stream)}
	f := &frameReader{src: src}
	readFrames(t, f, bodies)
	if src.calls > 4 {
		t.Fatalf("%d read calls for 100 queued frames", src.calls)
	}
}

func TestFrameReaderShortBody(t *testing.T) {
	stream, _ := frames(100)
	f := &frameReader{src: bytes.NewReader(stream[:50])}
	var l [4]byte
	if err := f.readFull(l[:]); err != nil {
		t.Fatal(err)
	}
	err := f.readFull(make([]byte, 100))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated body: %v, want ErrUnexpectedEOF", err)
	}
	if f.buf != nil {
		t.Error("buffer held after the error")
	}
}

// TestFrameReaderRawSocket: over a TCP socket the reader waits for data
// with no buffer held, reads frames written in pieces and together, keeps
// the read deadline, and ends with EOF.
func TestFrameReaderRawSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	raw, err := server.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	f := &frameReader{src: server, raw: raw}

	// Nothing sent: the deadline ends the wait, with no buffer taken.
	server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if err := f.readFull(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("idle read: %v, want a deadline error", err)
	}
	if f.buf != nil {
		t.Fatal("a buffer is held while waiting")
	}
	server.SetReadDeadline(time.Time{})

	sizes := []int{12, 1, 1030, readBufSize - 3, readBufSize, 3 * readBufSize, 40, 2, 7000}
	stream, bodies := frames(sizes...)
	go func() {
		// Pieces of every size, with pauses, then the rest at once.
		for i, step := 0, 1; i < len(stream); step = step*3 + 1 {
			n := min(step, len(stream)-i)
			client.Write(stream[i : i+n])
			i += n
			time.Sleep(time.Millisecond)
		}
		client.(*net.TCPConn).CloseWrite()
	}()
	readFrames(t, f, bodies)
	if f.buf != nil {
		t.Error("a buffer is held after the stream was drained")
	}
	if err := f.readFull(make([]byte, 4)); err != io.EOF {
		t.Errorf("after the last frame: %v, want EOF", err)
	}
}
