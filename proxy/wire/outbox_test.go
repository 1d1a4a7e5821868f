package wire

import (
	"errors"
	"testing"
	"time"
)

// TestOutboxOrderBackpressureClose: frames come out in order and all at
// once; a blocking Send waits while the queue is over its limit and goes
// on once the writer takes it; Close wakes both sides.
func TestOutboxOrderBackpressureClose(t *testing.T) {
	o := NewOutbox(4)
	if err := o.Send(true, []byte("ab"), []byte("cd")); err != nil {
		t.Fatal(err)
	}
	if err := o.Send(false, []byte("e")); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() { sent <- o.Send(true, []byte("f")) }() // 5 bytes queued > 4: waits
	select {
	case err := <-sent:
		t.Fatalf("a blocking send over the limit did not wait (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	frames, ok := o.Take()
	if !ok || len(frames) != 3 || string(frames[0]) != "ab" || string(frames[1]) != "cd" || string(frames[2]) != "e" {
		t.Fatalf("Take = %q %v", frames, ok)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if frames, ok := o.Take(); !ok || len(frames) != 1 || string(frames[0]) != "f" {
		t.Fatalf("second Take = %q %v", frames, ok)
	}
	took := make(chan bool, 1)
	go func() { _, ok := o.Take(); took <- ok }()
	time.Sleep(20 * time.Millisecond)
	o.Close()
	if <-took {
		t.Fatal("Take after Close reported ok")
	}
	if err := o.Send(false, []byte("g")); !errors.Is(err, ErrOutboxClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}
