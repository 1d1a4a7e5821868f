package server

import (
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// waitConnCount waits until the server holds n connections and reports
// how long that took; it fails the test after limit.
func waitConnCount(t *testing.T, s *Server, n int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for s.connCount() != n {
		if time.Since(start) > limit {
			t.Fatalf("the server holds %d connections after %v, want %d", s.connCount(), limit, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// TestFourLetterWordClientNeverCloses: a client that sends "ruok\n" and then
// neither reads nor closes holds the server's connection for the linger
// only; the answer and the end of the stream wait for it in its socket.
func TestFourLetterWordClientNeverCloses(t *testing.T) {
	old := fourLetterLinger
	fourLetterLinger = 300 * time.Millisecond
	t.Cleanup(func() { fourLetterLinger = old })
	s := startStandalone(t, nil)

	nc, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	waitConnCount(t, s, 1, 5*time.Second) // accepted
	if _, err := nc.Write([]byte("ruok\n")); err != nil {
		t.Fatal(err)
	}
	// The server waits for the client's end of the stream for the
	// linger, then gives up on it.
	took := waitConnCount(t, s, 0, 5*time.Second)
	if took < fourLetterLinger/2 {
		t.Errorf("the server closed after %v, before its linger of %v", took, fourLetterLinger)
	}

	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	out, err := io.ReadAll(nc)
	if string(out) != "imok" {
		t.Fatalf("read %q (%v), want imok", out, err)
	}
}

// TestFourLetterWordClientKeepsSending: what follows a word is drained for a
// bounded number of bytes, not for ever: a client that keeps writing after
// "ruok" is closed long before a (here, long) linger ends.
func TestFourLetterWordClientKeepsSending(t *testing.T) {
	old := fourLetterLinger
	fourLetterLinger = time.Minute
	t.Cleanup(func() { fourLetterLinger = old })
	s := startStandalone(t, nil)

	nc, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	waitConnCount(t, s, 1, 5*time.Second) // accepted
	writerDone := make(chan error, 1)
	go func() {
		nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := nc.Write([]byte("ruok")); err != nil {
			writerDone <- err
			return
		}
		junk := make([]byte, 16<<10)
		for i := 0; i < 1024; i++ { // 16 MiB at most
			if _, err := nc.Write(junk); err != nil {
				writerDone <- err
				return
			}
		}
		writerDone <- nil
	}()
	took := waitConnCount(t, s, 0, 20*time.Second)
	t.Logf("connection closed after %v of writes", took)
	select {
	case err := <-writerDone:
		if err == nil {
			t.Error("the server took 16 MiB after ruok")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the client's writes neither failed nor ended")
	}
}

// TestFourLetterWordTLSNewline: on the secure port a word with a newline
// gets its answer, the TLS close_notify and a clean end of stream.
func TestFourLetterWordTLSNewline(t *testing.T) {
	pki := newTestPKI(t)
	s := startStandalone(t, func(c *Config) {
		c.TLS = TLSConfig{SecureClientAddr: "127.0.0.1:0", CertFile: pki.serverPEM, CAFile: pki.caFile}
	})
	for _, word := range []string{"ruok", "srvr", "mntr"} {
		for _, suffix := range []string{"", "\n"} {
			tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.SecureAddr().String(), pki.clientConfig(true))
			if err != nil {
				t.Fatal(err)
			}
			tc.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := tc.Write([]byte(word + suffix)); err != nil {
				t.Fatal(err)
			}
			out, err := io.ReadAll(tc) // nil at close_notify, an error at a bare FIN or a reset
			tc.Close()
			if err != nil {
				t.Errorf("%s%q over TLS: read %d bytes, then %v", word, suffix, len(out), err)
				continue
			}
			want := map[string]string{"ruok": "imok", "srvr": "Node count: ", "mntr": "zk_server_state\tstandalone\n"}[word]
			if !strings.Contains(string(out), want) {
				t.Errorf("%s%q over TLS answered %q", word, suffix, out)
			}
		}
	}
	waitConnCount(t, s, 0, 5*time.Second)
}
