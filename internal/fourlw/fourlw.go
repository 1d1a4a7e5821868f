// Package fourlw is the client side of a four-letter word, for tests and
// harnesses: send the word, read the answer until the server closes. It
// imports the standard library only, so that the real-ZooKeeper harness
// (internal/zktest) can use it too.
package fourlw

import (
	"errors"
	"io"
	"net"
	"time"
)

// Ask sends word to addr and returns what the server answers before it
// closes the connection, waiting at most timeout to connect and as long
// again for the answer. On a read error it returns what it read with the
// error.
func Ask(addr, word string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, io.EOF) {
		return string(b), err
	}
	return string(b), nil
}
