package server

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"unicode"

	"github.com/zkraft/zkraft/jute"
)

// saslServer is a connection's SASL exchange (ZooKeeperSaslServer). Only
// the reader goroutine touches it.
type saslServer struct {
	mech *digestMD5
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
		c.sasl = &saslServer{mech: newDigestMD5(s.ops.saslUsers)}
	}
	tok, err := c.sasl.mech.next(req.Token)
	if err != nil {
		p.frame, p.closeAfter = c.saslFailure(p.xid, err)
		return
	}
	if c.sasl.mech.complete {
		user := c.sasl.mech.authzID
		ids := []jute.ID{{Scheme: "sasl", ID: user}}
		if s.cfg.SASL.SuperUser != "" && user == s.cfg.SASL.SuperUser {
			ids = append(ids, jute.ID{Scheme: "super", ID: ""})
		}
		c.addAuthIDs(ids)
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
	out := append([]jute.ID(nil), c.authIDs()...)
	for _, id := range add {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	c.setAuthIDs(out)
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
// section and adds Users.
func loadSASLUsers(c SASLConfig) (map[string]string, error) {
	users := map[string]string{}
	if c.JAASFile != "" {
		b, err := os.ReadFile(c.JAASFile)
		if err != nil {
			return nil, fmt.Errorf("server: JAAS config: %w", err)
		}
		sections, err := parseJAAS(string(b))
		if err != nil {
			return nil, fmt.Errorf("server: JAAS config %s: %w", c.JAASFile, err)
		}
		entries, ok := sections[c.JAASSection]
		if !ok {
			return nil, fmt.Errorf("server: JAAS config %s has no %s section", c.JAASFile, c.JAASSection)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.module, "DigestLoginModule") {
				continue
			}
			for k, v := range e.options {
				if u, ok := strings.CutPrefix(k, "user_"); ok && u != "" {
					users[u] = v
				}
			}
		}
		if len(users) == 0 {
			return nil, fmt.Errorf("server: JAAS config %s: no user_<name> in a DigestLoginModule of %s", c.JAASFile, c.JAASSection)
		}
	}
	for u, p := range c.Users {
		users[u] = p
	}
	return users, nil
}

// jaasEntry is one login module of a JAAS section.
type jaasEntry struct {
	module, flag string
	options      map[string]string
}

// parseJAAS reads a JAAS login configuration:
//
//	Name { module.Class flag key="value" key=value ; ... };
//
// with // and /* */ comments.
func parseJAAS(src string) (map[string][]jaasEntry, error) {
	toks, err := jaasTokens(src)
	if err != nil {
		return nil, err
	}
	out := map[string][]jaasEntry{}
	i := 0
	next := func() (string, error) {
		if i >= len(toks) {
			return "", errors.New("unexpected end")
		}
		i++
		return toks[i-1], nil
	}
	for i < len(toks) {
		name, _ := next()
		if t, err := next(); err != nil || t != "{" {
			return nil, fmt.Errorf("section %q: want {", name)
		}
		var entries []jaasEntry
		for {
			t, err := next()
			if err != nil {
				return nil, fmt.Errorf("section %q: %w", name, err)
			}
			if t == "}" {
				break
			}
			e := jaasEntry{module: t, options: map[string]string{}}
			if e.flag, err = next(); err != nil {
				return nil, err
			}
			for {
				k, err := next()
				if err != nil {
					return nil, fmt.Errorf("section %q: %w", name, err)
				}
				if k == ";" {
					break
				}
				if eq, err := next(); err != nil || eq != "=" {
					return nil, fmt.Errorf("section %q: option %q: want =", name, k)
				}
				v, err := next()
				if err != nil {
					return nil, err
				}
				e.options[k] = strings.TrimPrefix(v, "\x00")
			}
			entries = append(entries, e)
		}
		if i < len(toks) && toks[i] == ";" {
			i++
		}
		out[name] = entries
	}
	return out, nil
}

// jaasTokens splits a JAAS file into words, punctuation ({ } ; =) and
// quoted strings (marked with a leading NUL so that "=" in quotes is a
// value).
func jaasTokens(src string) ([]string, error) {
	var out []string
	r := []rune(src)
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '/' && i+1 < len(r) && r[i+1] == '/':
			for i < len(r) && r[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(r) && r[i+1] == '*':
			end := strings.Index(string(r[i+2:]), "*/")
			if end < 0 {
				return nil, errors.New("unterminated comment")
			}
			i += 2 + len([]rune(string(r[i+2:])[:end])) + 2
		case c == '{' || c == '}' || c == ';' || c == '=':
			out = append(out, string(c))
			i++
		case c == '"':
			var b strings.Builder
			i++
			for ; i < len(r) && r[i] != '"'; i++ {
				if r[i] == '\\' && i+1 < len(r) {
					i++
				}
				b.WriteRune(r[i])
			}
			if i >= len(r) {
				return nil, errors.New("unterminated string")
			}
			i++
			out = append(out, "\x00"+b.String())
		default:
			j := i
			for j < len(r) && !unicode.IsSpace(r[j]) && !strings.ContainsRune("{};=\"", r[j]) {
				j++
			}
			out = append(out, string(r[i:j]))
			i = j
		}
	}
	return out, nil
}
