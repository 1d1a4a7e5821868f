package proxy

import (
	"net"
	"time"
)

// answerWord is the proxy's own answer to the four-letter word w on
// client c; ok false forwards the word to the member, which answers it
// with its registry.
func (p *Proxy) answerWord(c *client, w string) (out []byte, ok bool) {
	return nil, false
}

// answerOwn writes a word's answer the proxy gave itself and ends the
// connection as a member does: the answer, a half-close, then what the
// client still sends is read and dropped (at most wordDrainLimit bytes,
// for at most wordLinger) so that closing does not reset the connection
// under the answer.
func (c *client) answerOwn(out []byte) {
	c.p.stats.wordsAnswered.Add(1)
	c.nc.SetWriteDeadline(time.Now().Add(stallTimeout))
	if _, err := c.nc.Write(out); err != nil {
		return
	}
	tc, ok := c.nc.(*net.TCPConn)
	if !ok || tc.CloseWrite() != nil {
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(wordLinger))
	buf := make([]byte, 4<<10)
	for drained := 0; drained < wordDrainLimit; {
		n, err := c.nc.Read(buf)
		drained += n
		if err != nil {
			return
		}
	}
}
