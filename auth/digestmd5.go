package auth

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// The DIGEST-MD5 SASL mechanism (RFC 2831) as ZooKeeper's server runs it
// (Java's DigestMD5Server created for protocol "zookeeper" and server name
// "zk-sasl-md5"): one challenge, one response, then rspauth. Only
// qop=auth is offered, as ZooKeeper does by default; there is no integrity
// or confidentiality layer.
const (
	saslProtocol   = "zookeeper"
	saslServerName = "zk-sasl-md5"
)

var (
	errDigestBadResponse = errors.New("DIGEST-MD5: malformed client response")
	errDigestAuthFailed  = errors.New("DIGEST-MD5: authentication failed")
	errDigestComplete    = errors.New("DIGEST-MD5: authentication already complete")
)

// DigestMD5 is one server-side exchange, for one connection: Next with
// each of the client's tokens until Complete, then User is who it
// authenticated. Not safe for concurrent use.
type DigestMD5 struct {
	users    map[string]string // user -> password
	step     int
	nonce    string
	complete bool
	authzID  string
}

// NewDigestMD5 starts an exchange that authenticates the users (user ->
// password; LoadSASLUsers reads them).
func NewDigestMD5(users map[string]string) *DigestMD5 {
	return &DigestMD5{users: users}
}

// Complete reports whether the exchange has authenticated its user.
func (d *DigestMD5) Complete() bool { return d.complete }

// User is the user the completed exchange authenticated.
func (d *DigestMD5) User() string { return d.authzID }

// Next evaluates the client's token and returns the server's. An error
// ends the exchange: the client failed to authenticate.
func (d *DigestMD5) Next(token []byte) ([]byte, error) {
	switch d.step {
	case 0:
		// The client has no initial response: send the challenge.
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		d.nonce = base64.StdEncoding.EncodeToString(b[:])
		d.step = 1
		return []byte(fmt.Sprintf(`realm="%s",nonce="%s",qop="auth",charset=utf-8,algorithm=md5-sess`,
			saslServerName, d.nonce)), nil
	case 1:
		d.step = 2
		return d.verify(token)
	}
	return nil, errDigestComplete
}

func (d *DigestMD5) verify(token []byte) ([]byte, error) {
	f, err := parseDigestDirectives(string(token))
	if err != nil {
		return nil, err
	}
	user, realm, nonce, cnonce := f["username"], f["realm"], f["nonce"], f["cnonce"]
	nc, uri, qop, resp, authz := f["nc"], f["digest-uri"], f["qop"], f["response"], f["authzid"]
	if qop == "" {
		qop = "auth"
	}
	switch {
	case user == "" || cnonce == "" || resp == "" || uri == "":
		return nil, errDigestBadResponse
	case nonce != d.nonce:
		return nil, fmt.Errorf("%w: nonce mismatch", errDigestAuthFailed)
	case nc != "00000001":
		return nil, fmt.Errorf("%w: nonce count %q", errDigestAuthFailed, nc)
	case qop != "auth":
		return nil, fmt.Errorf("%w: qop %q not offered", errDigestAuthFailed, qop)
	case realm != "" && realm != saslServerName:
		return nil, fmt.Errorf("%w: realm %q", errDigestAuthFailed, realm)
	case !strings.HasPrefix(uri, saslProtocol+"/"):
		return nil, fmt.Errorf("%w: digest-uri %q", errDigestAuthFailed, uri)
	}
	pw, ok := d.users[user]
	if !ok {
		return nil, fmt.Errorf("%w: no user %q", errDigestAuthFailed, user)
	}
	want := digestResponse(user, realm, pw, nonce, cnonce, nc, qop, uri, authz, "AUTHENTICATE")
	if subtle.ConstantTimeCompare([]byte(want), []byte(strings.ToLower(resp))) != 1 {
		return nil, fmt.Errorf("%w: wrong password for %q", errDigestAuthFailed, user)
	}
	if authz != "" && authz != user {
		return nil, fmt.Errorf("%w: %q may not act as %q", errDigestAuthFailed, user, authz)
	}
	d.complete = true
	d.authzID = user
	return []byte("rspauth=" + digestResponse(user, realm, pw, nonce, cnonce, nc, qop, uri, authz, "")), nil
}

// digestResponse is RFC 2831's response-value (method "AUTHENTICATE") or
// rspauth (method "") for algorithm md5-sess.
func digestResponse(user, realm, pw, nonce, cnonce, nc, qop, uri, authz, method string) string {
	h := md5.Sum([]byte(user + ":" + realm + ":" + pw))
	a1 := append(h[:], []byte(":"+nonce+":"+cnonce)...)
	if authz != "" {
		a1 = append(a1, []byte(":"+authz)...)
	}
	ha1 := md5.Sum(a1)
	ha2 := md5.Sum([]byte(method + ":" + uri))
	kd := md5.Sum([]byte(hex.EncodeToString(ha1[:]) + ":" + nonce + ":" + nc + ":" + cnonce + ":" + qop + ":" +
		hex.EncodeToString(ha2[:])))
	return hex.EncodeToString(kd[:])
}

// parseDigestDirectives splits name=value pairs separated by commas; a
// value may be a quoted string with backslash escapes.
func parseDigestDirectives(s string) (map[string]string, error) {
	out := map[string]string{}
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			break
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq <= 0 {
			return nil, errDigestBadResponse
		}
		name := strings.ToLower(strings.TrimSpace(s[i : i+eq]))
		i += eq + 1
		var val strings.Builder
		if i < len(s) && s[i] == '"' {
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				i++
				if c == '\\' && i < len(s) {
					val.WriteByte(s[i])
					i++
					continue
				}
				if c == '"' {
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return nil, errDigestBadResponse
			}
		} else {
			j := strings.IndexByte(s[i:], ',')
			if j < 0 {
				j = len(s) - i
			}
			val.WriteString(strings.TrimSpace(s[i : i+j]))
			i += j
		}
		if _, dup := out[name]; dup {
			return nil, errDigestBadResponse
		}
		out[name] = val.String()
	}
	return out, nil
}

// DigestMD5Response is the client's side of the exchange (as Java's
// DigestMD5Client for protocol "zookeeper"): given the server's challenge,
// the response token for user and password with the client nonce cnonce,
// and the rspauth the server must answer with if it knows the password.
func DigestMD5Response(challenge []byte, user, password, cnonce string) (token []byte, rspauth string, err error) {
	f, err := parseDigestDirectives(string(challenge))
	if err != nil {
		return nil, "", err
	}
	if f["algorithm"] != "md5-sess" || f["qop"] != "auth" || f["nonce"] == "" {
		return nil, "", fmt.Errorf("%w: challenge %q", errDigestBadResponse, challenge)
	}
	const nc, uri = "00000001", saslProtocol + "/" + saslServerName
	realm, nonce := f["realm"], f["nonce"]
	resp := digestResponse(user, realm, password, nonce, cnonce, nc, "auth", uri, "", "AUTHENTICATE")
	tok := `charset=utf-8,username="` + user + `",realm="` + realm + `",nonce="` + nonce + `",nc=` + nc +
		`,cnonce="` + cnonce + `",digest-uri="` + uri + `",maxbuf=65536,response=` + resp + `,qop=auth`
	return []byte(tok), "rspauth=" + digestResponse(user, realm, password, nonce, cnonce, nc, "auth", uri, "", ""), nil
}
