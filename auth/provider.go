package auth

import (
	"slices"
	"strings"

	"github.com/zkraft/zkraft/jute"
	"github.com/zkraft/zkraft/znode"
)

// The authentication providers: what ids a credential gives, as
// ZooKeeper's AuthenticationProviders decide it. The ip scheme's id is the
// peer's address, which the caller knows; x509's is X509ID of the client
// certificate's subject; sasl's comes from a completed DIGEST-MD5 exchange.

// Digest is the ids of addAuth("digest", "user:password") (ZooKeeper's
// DigestAuthenticationProvider: the user is everything before the first
// ':', all of it when there is none), and super as well when its digest
// is superDigest (zookeeper.DigestAuthenticationProvider.superDigest; ""
// for none).
func Digest(userPassword, superDigest string) []jute.ID {
	digest := znode.DigestID(userPassword)
	ids := []jute.ID{{Scheme: "digest", ID: digest}}
	if superDigest != "" && digest == superDigest {
		ids = append(ids, jute.ID{Scheme: "super", ID: ""})
	}
	return ids
}

// SASL is the ids of a user a SASL exchange authenticated: sasl:<user>,
// and super as well when the user is superUser (zookeeper.superUser; ""
// for none).
func SASL(user, superUser string) []jute.ID {
	ids := []jute.ID{{Scheme: "sasl", ID: user}}
	if superUser != "" && user == superUser {
		ids = append(ids, jute.ID{Scheme: "super", ID: ""})
	}
	return ids
}

// Merge is held and the ids of add it does not hold yet, in order; held is
// not changed.
func Merge(held, add []jute.ID) []jute.ID {
	out := append([]jute.ID(nil), held...)
	for _, id := range add {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// Refusal is a request refused by an authentication provider; its text is
// ZooKeeper's sentence.
type Refusal string

func (r Refusal) Error() string { return string(r) }

// The refusals of an AdminServer request's Authorization header, with
// ZooKeeper's sentences (its Commands.handleAuthorization).
const (
	ErrAuthMissing      Refusal = "Auth info is missing for the command"
	ErrNotAuthenticated Refusal = "Not authenticated"
)

// headerSeparator splits the Authorization header's scheme from its
// credentials (ZooKeeper's Commands.AUTH_INFO_SEPARATOR).
const headerSeparator = " "

// Header is the ids of an AdminServer request's Authorization header,
// "<scheme> <auth>" ("digest alice:secret", or "ip" alone), as the
// scheme's provider gives them for a client's addAuth; remoteIP is the
// request's peer address, superDigest as for Digest. The schemes over HTTP
// are ZooKeeper's providers that can read an HTTP request: digest and ip.
// x509 needs the AdminServer over TLS, which zkraft's does not speak, and
// SASL has no HTTP exchange: both are ErrNotAuthenticated, as an unknown
// scheme is; no header is ErrAuthMissing.
func Header(header, remoteIP, superDigest string) ([]jute.ID, error) {
	if header == "" {
		return nil, ErrAuthMissing
	}
	parts := strings.Split(header, headerSeparator)
	if len(parts) != 1 && len(parts) != 2 {
		return nil, ErrNotAuthenticated
	}
	switch parts[0] {
	case "digest":
		if len(parts) != 2 {
			return nil, ErrNotAuthenticated
		}
		d := Digest(parts[1], superDigest)
		// The super id first, as the AdminServer has listed them.
		slices.Reverse(d)
		return d, nil
	case "ip":
		return []jute.ID{{Scheme: "ip", ID: remoteIP}}, nil
	}
	return nil, ErrNotAuthenticated
}
