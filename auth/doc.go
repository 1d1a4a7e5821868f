// Package auth owns authentication as ZooKeeper's providers do it, apart
// from any connection: what ids a credential gives (provider.go: digest,
// with the super digest; sasl, with the super user; the AdminServer's
// Authorization header; merging ids into those a session holds), the
// DIGEST-MD5 SASL mechanism, server side and client side (digestmd5.go),
// the users of a JAAS login configuration (jaas.go), and the x509 id of a
// client certificate's subject, byte for byte Java's (x509name.go).
//
// It may import jute and znode only of zkraft's packages, and never
// sockets (no net, net/http, crypto/tls), Dragonboat or Pebble
// (internal/layout's test checks it): a caller hands it bytes and strings
// (a token, a header, a certificate's raw subject, the peer's address)
// and gets ids or a refusal back.
//
// Its caller (package server) must:
//
//  1. load the SASL users once, at start (LoadSASLUsers), and refuse to
//     start when they do not load;
//  2. run one DigestMD5 per connection, from one goroutine, and grant the
//     ids of SASL(User(), superUser) only once Complete reports true; a
//     Next error is a failed authentication;
//  3. map a Refusal to its wire or HTTP answer itself (AUTHFAILED, 401):
//     this package knows neither;
//  4. check ACLs with the ids (znode.CheckACL), which is not done here.
package auth
