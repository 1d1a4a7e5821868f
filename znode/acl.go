package znode

import (
	"crypto/sha1"
	"encoding/base64"
	"net/netip"
	"strconv"
	"strings"

	"github.com/zkraft/zkraft/jute"
)

// Well-known ACLs.
var (
	OpenACL       = []jute.ACL{{Perms: jute.PermAll, ID: jute.ID{Scheme: "world", ID: "anyone"}}}
	ReadACLUnsafe = []jute.ACL{{Perms: jute.PermRead, ID: jute.ID{Scheme: "world", ID: "anyone"}}}
)

// DigestID returns the digest id for user:password as ZooKeeper computes it:
// user:base64(sha1("user:password")).
func DigestID(userPassword string) string {
	user, _, _ := strings.Cut(userPassword, ":")
	sum := sha1.Sum([]byte(userPassword))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// authenticated reports whether ids of scheme count for the "auth" ACL
// scheme (the provider's isAuthenticated): digest does, ip does not. There
// is no "super" provider in ZooKeeper, so fixupACL skips a super id (the
// super user's digest id is expanded instead).
func authenticated(scheme string) bool {
	switch scheme {
	case "digest", "sasl", "x509":
		return true
	}
	return false
}

// validID is the provider's isValid for scheme; unknown schemes are invalid.
func validID(scheme, id string) bool {
	switch scheme {
	case "digest":
		// Java's id.split(":").length == 2; split drops trailing empty
		// strings, so "a:b:" is valid and "a:" is not.
		parts := strings.Split(id, ":")
		for len(parts) > 1 && parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
		return len(parts) == 2
	case "ip":
		_, ok := parseIPNet(id)
		return ok
	case "sasl", "x509":
		return id != ""
	}
	return false
}

// parseIPNet parses an ip ACL id: an address with an optional /bits.
func parseIPNet(id string) (netip.Prefix, bool) {
	addrStr, bitsStr, hasBits := strings.Cut(id, "/")
	addr, err := netip.ParseAddr(addrStr)
	if err != nil || addr.Zone() != "" {
		return netip.Prefix{}, false
	}
	addr = addr.Unmap()
	bits := addr.BitLen()
	if hasBits {
		b, err := strconv.Atoi(bitsStr)
		if err != nil || b < 0 || b > addr.BitLen() {
			return netip.Prefix{}, false
		}
		bits = b
	}
	p, err := addr.Prefix(bits)
	return p, err == nil
}

// matches is the provider's matches(authId, aclId).
func matches(scheme, authID, aclID string) bool {
	switch scheme {
	case "ip":
		p, ok := parseIPNet(aclID)
		if !ok {
			return false
		}
		ip, err := netip.ParseAddr(authID)
		return err == nil && p.Contains(ip.Unmap())
	case "digest", "sasl", "x509":
		return authID == aclID
	}
	return false
}

// FixupACL validates a client-supplied ACL and expands the "auth" scheme to
// the caller's authenticated ids, as PrepRequestProcessor.fixupACL does:
// duplicates are removed from the request's list before the expansion, not
// after it.
func FixupACL(acl []jute.ACL, auth []jute.ID) ([]jute.ACL, error) {
	if len(acl) == 0 {
		return nil, jute.ErrInvalidACL
	}
	uniq := make([]jute.ACL, 0, len(acl))
	for _, a := range acl {
		dup := false
		for _, b := range uniq {
			if a == b {
				dup = true
				break
			}
		}
		if !dup {
			uniq = append(uniq, a)
		}
	}
	out := make([]jute.ACL, 0, len(uniq))
	add := func(a jute.ACL) { out = append(out, a) }
	for _, a := range uniq {
		switch {
		case a.ID.Scheme == "world" && a.ID.ID == "anyone":
			add(a)
		case a.ID.Scheme == "auth":
			found := false
			for _, id := range auth {
				if authenticated(id.Scheme) {
					add(jute.ACL{Perms: a.Perms, ID: id})
					found = true
				}
			}
			if !found {
				return nil, jute.ErrInvalidACL
			}
		default:
			if !validID(a.ID.Scheme, a.ID.ID) {
				return nil, jute.ErrInvalidACL
			}
			add(a)
		}
	}
	return out, nil
}

// CheckACL reports whether a caller with auth ids holds perm on a node with
// acl (ZooKeeperServer.checkACL). An empty ACL allows everything, and so does
// a super id.
func CheckACL(acl []jute.ACL, perm int32, auth []jute.ID) error {
	if len(acl) == 0 {
		return nil
	}
	for _, id := range auth {
		if id.Scheme == "super" {
			return nil
		}
	}
	for _, a := range acl {
		if a.Perms&perm == 0 {
			continue
		}
		if a.ID.Scheme == "world" && a.ID.ID == "anyone" {
			return nil
		}
		for _, id := range auth {
			if id.Scheme == a.ID.Scheme && matches(id.Scheme, id.ID, a.ID.ID) {
				return nil
			}
		}
	}
	return jute.ErrNoAuth
}
