package auth

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// DER building blocks for certificate subjects, so that a test controls
// what Go's pkix.Name would not write: the string type of each value, the
// order inside a multi-valued RDN, control characters.

func derTLV(tag byte, content []byte) []byte {
	out := []byte{tag}
	switch n := len(content); {
	case n < 0x80:
		out = append(out, byte(n))
	case n < 0x100:
		out = append(out, 0x81, byte(n))
	default:
		out = append(out, 0x82, byte(n>>8), byte(n))
	}
	return append(out, content...)
}

// atv is one AttributeTypeAndValue: its type and its value's tag and content.
type atv struct {
	oid   asn1.ObjectIdentifier
	tag   byte
	value string
}

// Value tags.
const (
	tagInteger   = 0x02
	tagUTF8      = 0x0c
	tagNumeric   = 0x12
	tagPrintable = 0x13
	tagT61       = 0x14
	tagIA5       = 0x16
	tagGeneral   = 0x1b
	tagUniversal = 0x1c
	tagBMP       = 0x1e
)

var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidSerial = asn1.ObjectIdentifier{2, 5, 4, 5}
	oidC      = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidL      = asn1.ObjectIdentifier{2, 5, 4, 7}
	oidST     = asn1.ObjectIdentifier{2, 5, 4, 8}
	oidStreet = asn1.ObjectIdentifier{2, 5, 4, 9}
	oidO      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU     = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidTitle  = asn1.ObjectIdentifier{2, 5, 4, 12}
	oidPostal = asn1.ObjectIdentifier{2, 5, 4, 17}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
)

// derName encodes RDNs, first encoded first, each a SET of its values in
// the order given (not sorted: Java prints them as encoded).
func derName(rdns ...[]atv) []byte {
	var seq []byte
	for _, rdn := range rdns {
		var set []byte
		for _, a := range rdn {
			oid, err := asn1.Marshal(a.oid)
			if err != nil {
				panic(err)
			}
			set = append(set, derTLV(0x30, append(oid, derTLV(a.tag, []byte(a.value))...))...)
		}
		seq = append(seq, derTLV(0x31, set)...)
	}
	return derTLV(0x30, seq)
}

func one(oid asn1.ObjectIdentifier, tag byte, value string) []atv { return []atv{{oid, tag, value}} }

// bmp is s as a BMPString's content (UTF-16 big-endian, BMP only).
func bmp(s string) string {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r>>8), byte(r))
	}
	return string(b)
}

// x509NameCases: each subject and the id ZooKeeper gives it, as Java 17's
// X500Principal.getName() prints it (cross-checked by TestX509IDMatchesJava
// when java is installed; testdata/X500Name.java). cert marks the subjects
// Go's certificate parser accepts, which are tested inside a certificate;
// the others (value types a TLS client certificate cannot carry to a Go
// server) as a bare Name.
var x509NameCases = []struct {
	name string
	der  []byte
	cert bool
	want string
}{
	{"last RDN first", derName(
		one(oidC, tagPrintable, "DE"), one(oidO, tagUTF8, "zkraft"), one(oidCN, tagUTF8, "alice")),
		true, "CN=alice,O=zkraft,C=DE"},
	{"multi-valued RDNs in encoded order", derName(
		one(oidO, tagPrintable, "Acme"),
		[]atv{{oidOU, tagUTF8, "b"}, {oidOU, tagUTF8, "a"}},
		[]atv{{oidCN, tagUTF8, "alice"}, {oidUID, tagUTF8, "a1"}}),
		true, "CN=alice+UID=a1,OU=b+OU=a,O=Acme"},
	{"special characters", derName(
		one(oidCN, tagUTF8, `a,b+c"d\e<f>g;h=i#j`),
		one(oidO, tagUTF8, "#hash"),
		one(oidOU, tagUTF8, " lead"),
		one(oidL, tagUTF8, "trail "),
		one(oidST, tagUTF8, "  "),
		one(oidStreet, tagUTF8, "  in side  ")),
		true, `STREET=\ \ in side\ \ ,ST=\ \ ,L=trail\ ,OU=\ lead,O=\#hash,CN=a\,b\+c\"d\\e\<f\>g\;h\=i\#j`},
	{"control characters", derName(
		one(oidCN, tagUTF8, "a\x00b"),
		one(oidO, tagUTF8, "\rcr\r"),
		one(oidOU, tagUTF8, "in\rside\ttab")),
		true, "OU=in\rside\ttab,O=\\\rcr\\\r,CN=a\\00b"},
	{"types without an RFC 2253 keyword", derName(
		one(oidDC, tagIA5, "org"), one(oidDC, tagIA5, "example"),
		one(oidEmail, tagIA5, "alice@example.com"),
		one(oidSerial, tagPrintable, "1234"),
		one(oidTitle, tagUTF8, "Dr."),
		one(oidPostal, tagUTF8, "10115"),
		one(oidCN, tagUTF8, "alice")),
		true, "CN=alice,2.5.4.17=#0c053130313135,2.5.4.12=#0c0344722e,2.5.4.5=#130431323334," +
			"1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d,DC=example,DC=org"},
	{"non-ASCII UTF-8", derName(
		one(oidC, tagPrintable, "PL"),
		one(oidO, tagUTF8, "Łódź"),
		one(oidOU, tagUTF8, "日本語"),
		one(oidL, tagUTF8, "😀"),
		one(oidCN, tagUTF8, "Jürgen Müller, Jr.")),
		true, `CN=Jürgen Müller\, Jr.,L=😀,OU=日本語,O=Łódź,C=PL`},
	{"string types read as UTF-8", derName(
		one(oidCN, tagBMP, bmp("Zoë")),
		one(oidO, tagT61, "caf\xe9"),
		one(oidOU, tagT61, "\xe9!"),
		one(oidL, tagIA5, "ia5"),
		one(oidST, tagNumeric, "123")),
		true, "ST=#1203313233,L=ia5,OU=\uFFFD!,O=caf\uFFFD,CN=\\00Z\\00o\\00\uFFFD"},
	{"malformed UTF-8 replaced as Java replaces it", derName(
		one(oidCN, tagT61, "\xe2\x82"),
		one(oidCN, tagT61, "\xe2\x82A"),
		one(oidCN, tagT61, "\xed\xa0\x80"),
		one(oidCN, tagT61, "\xc0\xaf"),
		one(oidCN, tagT61, "\xf0\x9f\x98"),
		one(oidCN, tagT61, "\xf0\x9f\x98A"),
		one(oidCN, tagT61, "\xf4\x90\x80\x80"),
		one(oidCN, tagT61, "\xe0\x80\x80"),
		one(oidCN, tagT61, "a\xc3")),
		true, "CN=a\uFFFD,CN=\uFFFD\uFFFD\uFFFD,CN=\uFFFD\uFFFD\uFFFD\uFFFD,CN=\uFFFDA,CN=\uFFFD," +
			"CN=\uFFFD\uFFFD,CN=\uFFFD,CN=\uFFFDA,CN=\uFFFD"},
	{"value types Go's certificate parser refuses", derName(
		one(oidCN, tagGeneral, "general"),
		one(oidO, tagUniversal, "\x00\x00\x00u"),
		one(oidOU, tagInteger, "\x05")),
		false, "OU=#020105,O=#1c0400000075,CN=general"},
	{"empty subject", derName(), true, ""},
	{"a client: email, a multi-valued RDN, an escaped comma", derName(
		one(oidC, tagPrintable, "DE"),
		one(oidO, tagUTF8, "Acme, Inc."),
		[]atv{{oidCN, tagUTF8, "Zoë"}, {oidUID, tagUTF8, "z1"}},
		one(oidEmail, tagIA5, "zoe@example.com")),
		true, `1.2.840.113549.1.9.1=#160f7a6f65406578616d706c652e636f6d,CN=Zoë+UID=z1,O=Acme\, Inc.,C=DE`},
}

// issueWithSubject makes a certificate whose subject is the given DER Name,
// issued by a CA of its own, as a client would present it. (A self-signed
// one would carry the name as its issuer too, and Java refuses an empty
// issuer.) With an empty subject the subjectAltName it carries is critical,
// as RFC 5280 (and Java) require.
func issueWithSubject(t *testing.T, subject []byte) *x509.Certificate {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x509 id test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), RawSubject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"client.example"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse the certificate: %v", err)
	}
	if !bytes.Equal(cert.RawSubject, subject) {
		t.Fatalf("certificate subject % x, want % x", cert.RawSubject, subject)
	}
	return cert
}

func TestX509ID(t *testing.T) {
	for _, tc := range x509NameCases {
		raw := tc.der
		if tc.cert {
			raw = issueWithSubject(t, tc.der).RawSubject
		}
		got, err := X509ID(raw)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	// Go's own formatting differs from Java's on these (which is why the
	// id is not pkix.Name.String()).
	cert := issueWithSubject(t, x509NameCases[4].der)
	if s := cert.Subject.String(); s == x509NameCases[4].want {
		t.Errorf("pkix.Name.String() %q agrees with Java; the case no longer shows the difference", s)
	}
	if _, err := X509ID([]byte{0x30, 0x03, 0x31, 0x01}); err == nil {
		t.Error("a truncated subject was accepted")
	}
}

// TestX509IDMatchesJava runs the JDK's X500Principal on the same DER
// (testdata/X500Name.java) when java is installed: the expected strings of
// x509NameCases are the JDK's, and X509ID agrees with it on 2000 names of
// random bytes too.
func TestX509IDMatchesJava(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		t.Logf("java is not installed: x509NameCases are checked against their recorded strings only (%v)", err)
		return
	}
	random := randomT61Names(2000)
	var in bytes.Buffer
	for _, tc := range x509NameCases {
		if tc.cert {
			fmt.Fprintf(&in, "cert %s\n", hex.EncodeToString(issueWithSubject(t, tc.der).Raw))
		} else {
			fmt.Fprintf(&in, "name %s\n", hex.EncodeToString(tc.der))
		}
	}
	for _, der := range random {
		fmt.Fprintf(&in, "name %s\n", hex.EncodeToString(der))
	}
	cmd := exec.Command(java, "testdata/X500Name.java")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan struct{})
	timer := time.AfterFunc(2*time.Minute, func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
		close(done)
	})
	out, err := cmd.Output()
	if !timer.Stop() {
		<-done
	}
	if err != nil {
		t.Fatalf("java X500Name.java: %v\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	next := func(what string) (string, bool) {
		if !sc.Scan() {
			t.Fatalf("java answered %d lines for %d names:\n%s", strings.Count(string(out), "\n"), len(x509NameCases)+len(random), out)
		}
		b, err := hex.DecodeString(sc.Text())
		if err != nil {
			t.Errorf("%s: java: %s", what, sc.Text())
			return "", false
		}
		return string(b), true
	}
	for _, tc := range x509NameCases {
		if got, ok := next(tc.name); ok && got != tc.want {
			t.Errorf("%s: Java prints %q, the case records %q", tc.name, got, tc.want)
		}
	}
	for _, der := range random {
		want, ok := next(fmt.Sprintf("name % x", der))
		if !ok {
			continue
		}
		if got, err := X509ID(der); err != nil || got != want {
			t.Errorf("name % x: X509ID %q (%v), Java prints %q", der, got, err, want)
		}
	}
}

// randomT61Names are one-value names whose T61String holds random bytes
// drawn mostly from the ones that start, continue or break UTF-8
// sequences, for the check of javaUTF8 against the JDK.
func randomT61Names(n int) [][]byte {
	alphabet := []byte{0x00, ' ', 'A', ',', '#', 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1,
		0xc2, 0xc3, 0xdf, 0xe0, 0xe2, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xf8, 0xff}
	rng := mrand.New(mrand.NewPCG(12, 4))
	out := make([][]byte, n)
	for i := range out {
		v := make([]byte, 1+rng.IntN(7))
		for j := range v {
			v[j] = alphabet[rng.IntN(len(alphabet))]
		}
		out[i] = derName(one(oidCN, tagT61, string(v)))
	}
	return out
}
