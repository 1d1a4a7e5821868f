package server

import (
	"errors"
	"fmt"
	"slices"

	"github.com/zkraft/zkraft/auth"
	"github.com/zkraft/zkraft/jute"
)

// saslServer is a connection's SASL exchange (ZooKeeperSaslServer). Only
// the reader goroutine touches it.
type saslServer struct {
	mech *auth.DigestMD5
}

// saslOp answers a sasl request (op 102) as ZooKeeperServer.processSasl
// does: the reply carries zxid 0 and the server's token; once the exchange
// completes the connection gains the id sasl:<user> (and super when the
// user is zookeeper.superUser). A failed exchange is answered AUTHFAILED
// (SESSIONCLOSEDREQUIRESASLAUTH when authentication is enforced) and the
// connection is closed.
func (c *conn) saslOp(p *pending, body []byte) {
	s := c.srv
	req := new(jute.GetSASLRequest)
	if err := jute.Unmarshal(body, req); err != nil {
		p.frame, p.closeAfter = c.saslFailure(p.xid, fmt.Errorf("malformed sasl request: %w", err))
		return
	}
	if c.sasl == nil {
		if len(s.ops.saslUsers) == 0 {
			p.frame, p.closeAfter = c.saslFailure(p.xid, errors.New("no SASL users configured (JAAS Server section)"))
			return
		}
		c.sasl = &saslServer{mech: auth.NewDigestMD5(s.ops.saslUsers)}
	}
	tok, err := c.sasl.mech.Next(req.Token)
	if err != nil {
		p.frame, p.closeAfter = c.saslFailure(p.xid, err)
		return
	}
	if c.sasl.mech.Complete() {
		user := c.sasl.mech.User()
		c.addAuthIDs(auth.SASL(user, s.cfg.SASL.SuperUser))
		c.log().Info("SASL authenticated", "session", hexID(c.sessionID), "mechanism", "DIGEST-MD5", "user", user)
	}
	p.frame = jute.AppendFrame(nil, &jute.ReplyHeader{Xid: p.xid, Zxid: 0, Err: jute.ErrOK}, &jute.SetSASLResponse{Token: tok})
}

func (c *conn) saslFailure(xid int32, err error) ([]byte, bool) {
	s := c.srv
	s.counters.authFailed.Add(1)
	code := jute.ErrAuthFailed
	if s.cfg.SASL.EnforceAuth && slices.Contains(s.cfg.SASL.EnforceAuthSchemes, "sasl") {
		code = jute.ErrSessionClosedRequireSASLAuth
	}
	c.log().Warn("SASL authentication failed: closing the connection", "session", hexID(c.sessionID), "err", err)
	return jute.AppendFrame(nil, &jute.ReplyHeader{Xid: xid, Zxid: 0, Err: code}, &jute.SetSASLResponse{}), true
}

// addAuthIDs adds ids the connection does not hold yet.
func (c *conn) addAuthIDs(add []jute.ID) {
	c.setAuthIDs(auth.Merge(c.authIDs(), add))
}

// authEnforced reports whether a request must be refused because the
// session has not authenticated with a required scheme
// (enforce.auth.enabled; AuthenticationHelper.enforceAuthentication). If
// so it returns the reply: SESSIONCLOSEDREQUIRESASLAUTH, after which the
// connection closes.
func (c *conn) authEnforced(hdr *jute.RequestHeader) ([]byte, bool) {
	s := c.srv
	if !s.cfg.SASL.EnforceAuth || hdr.Type == jute.OpAuth || hdr.Type == jute.OpSASL {
		return nil, false
	}
	for _, id := range c.authIDs() {
		if slices.Contains(s.cfg.SASL.EnforceAuthSchemes, id.Scheme) {
			return nil, false
		}
	}
	s.counters.authFailed.Add(1)
	c.log().Warn("unauthenticated request refused: closing the connection", "session", hexID(c.sessionID),
		"op", hdr.Type.String(), "required", s.cfg.SASL.EnforceAuthSchemes)
	return replyFrame(hdr.Xid, 0, jute.ErrSessionClosedRequireSASLAuth, nil), true
}

// loadSASLUsers reads the DigestLoginModule users of the JAAS file's
// section and adds Users (auth.LoadSASLUsers).
func loadSASLUsers(c SASLConfig) (map[string]string, error) {
	users, err := auth.LoadSASLUsers(c.JAASFile, c.JAASSection, c.Users)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return users, nil
}
