package auth

import (
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"strings"
	"unicode/utf8"
)

// X509ID is the id ZooKeeper's X509AuthenticationProvider gives a client
// certificate: getSubjectX500Principal().getName(), which is Java's
// X500Principal RFC 2253 form. ACLs written on ZooKeeper for a certificate
// hold this string, and x509 ids match by string equality, so it must be
// Java's to the byte. rawSubject is the certificate's DER subject (a Name:
// SEQUENCE OF RelativeDistinguishedName, each a SET OF
// AttributeTypeAndValue). What Java prints:
//
//   - the RDNs from the last encoded to the first, joined by ","; the
//     values of a multi-valued RDN in their encoded order, joined by "+";
//   - a type by its RFC 2253 keyword (CN, C, L, ST, O, OU, STREET, DC, UID)
//     and any other by its dotted OID (emailAddress is
//     1.2.840.113549.1.9.1, serialNumber 2.5.4.5);
//   - the value of a dotted-OID type, or of a type that is not one of the
//     strings PrintableString, T61String, IA5String, GeneralString,
//     BMPString, UTF8String, as "#" and the lowercase hex of its DER
//     encoding (tag and length included);
//   - any other value as its content bytes read as UTF-8 whatever the
//     string type (so a BMPString shows NULs, and Latin-1 in a T61String
//     U+FFFD, see javaUTF8), with each of , = + < > # ; " and \ escaped by
//     a backslash, a NUL as \00, and a backslash before each leading and
//     trailing space or CR.
func X509ID(rawSubject []byte) (string, error) {
	var name []rdnSET
	rest, err := asn1.Unmarshal(rawSubject, &name)
	if err != nil {
		return "", err
	}
	if len(rest) != 0 {
		return "", errors.New("auth: trailing bytes after the certificate subject")
	}
	var b strings.Builder
	for i := len(name) - 1; i >= 0; i-- {
		if i < len(name)-1 {
			b.WriteByte(',')
		}
		for j, atv := range name[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			writeATV(&b, atv)
		}
	}
	return b.String(), nil
}

// rdnSET is a RelativeDistinguishedName; encoding/asn1 takes a slice type
// whose name ends in SET for a SET OF.
type rdnSET []rawATV

// rawATV is an AttributeTypeAndValue with its value as encoded.
type rawATV struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rfc2253Keywords are the types Java names in RFC 2253 form
// (sun.security.x509.AVAKeyword entries marked RFC 2253 compliant).
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// stringTags are the identifier octets of the value types Java prints as
// text: UTF8String, PrintableString, T61String, IA5String, GeneralString
// and BMPString (universal, primitive).
var stringTags = map[byte]bool{0x0c: true, 0x13: true, 0x14: true, 0x16: true, 0x1b: true, 0x1e: true}

func writeATV(b *strings.Builder, atv rawATV) {
	oid := atv.Type.String()
	keyword, ok := rfc2253Keywords[oid]
	if !ok {
		keyword = oid
	}
	b.WriteString(keyword)
	b.WriteByte('=')
	full := atv.Value.FullBytes
	if !ok || len(full) == 0 || !stringTags[full[0]] {
		b.WriteByte('#')
		b.WriteString(hex.EncodeToString(full))
		return
	}
	// Escape, then mark the leading and trailing spaces and CRs of the
	// escaped text (an escape's backslash is neither, so they are the
	// value's own).
	var esc []rune
	for _, r := range javaUTF8(atv.Value.Bytes) {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, r):
			esc = append(esc, '\\', r)
		case r == 0:
			esc = append(esc, '\\', '0', '0')
		default:
			esc = append(esc, r)
		}
	}
	blank := func(r rune) bool { return r == ' ' || r == '\r' }
	lead := 0
	for lead < len(esc) && blank(esc[lead]) {
		lead++
	}
	trail := len(esc) - 1
	for trail >= 0 && blank(esc[trail]) {
		trail--
	}
	for i, r := range esc {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
}

// javaUTF8 decodes b as Java's new String(b, UTF_8) does (JDK 17): well-formed
// UTF-8 as it is, and each malformed piece as one U+FFFD, where Java's
// pieces are not quite Go's (utf8.DecodeRune gives one U+FFFD per byte):
//
//   - a 3- or 4-byte lead followed by continuation bytes that stop short is
//     one piece with them (E2 82 41 is U+FFFD "A"); the bytes an overlong or
//     out-of-range form rules out (E0 80, F0 80, F4 90) are not: they stand
//     alone;
//   - a well-formed 3-byte encoding of a surrogate (ED A0 80) is one piece;
//   - a sequence cut off by the end of b is one piece, and ends the input
//     (F0 9F 98 at the end is one U+FFFD).
//
// A lead byte with no room left is the end: C3 at the end is one U+FFFD.
func javaUTF8(b []byte) []rune {
	const repl = utf8.RuneError
	cont := func(i int) bool { return i < len(b) && b[i]&0xc0 == 0x80 }
	out := make([]rune, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c < 0x80:
			out = append(out, rune(c))
			i++
		case c >= 0xc2 && c <= 0xdf:
			switch {
			case i+1 >= len(b):
				return append(out, repl)
			case !cont(i + 1):
				out = append(out, repl)
				i++
			default:
				out = append(out, rune(c&0x1f)<<6|rune(b[i+1]&0x3f))
				i += 2
			}
		case c&0xf0 == 0xe0:
			// E0 must be followed by A0..BF (shorter forms are overlong).
			bad2 := func() bool { return !cont(i+1) || c == 0xe0 && b[i+1] < 0xa0 }
			switch {
			case i+2 < len(b) && bad2():
				out = append(out, repl)
				i++
			case i+2 < len(b) && !cont(i+2):
				out = append(out, repl)
				i += 2
			case i+2 < len(b):
				r := rune(c&0x0f)<<12 | rune(b[i+1]&0x3f)<<6 | rune(b[i+2]&0x3f)
				if r >= 0xd800 && r <= 0xdfff {
					r = repl
				}
				out = append(out, r)
				i += 3
			case i+1 < len(b) && bad2():
				out = append(out, repl)
				i++
			default:
				return append(out, repl)
			}
		case c&0xf8 == 0xf0:
			// F0 must be followed by 90..BF, F4 by 80..8F; F5..F7 never fit.
			bad2 := func() bool {
				return c > 0xf4 || !cont(i+1) || c == 0xf0 && b[i+1] < 0x90 || c == 0xf4 && b[i+1] > 0x8f
			}
			if i+3 < len(b) {
				r := rune(c&0x07)<<18 | rune(b[i+1]&0x3f)<<12 | rune(b[i+2]&0x3f)<<6 | rune(b[i+3]&0x3f)
				switch {
				case cont(i+1) && cont(i+2) && cont(i+3) && r >= 0x10000 && r <= 0x10ffff:
					out = append(out, r)
					i += 4
				case bad2():
					out = append(out, repl)
					i++
				case !cont(i + 2):
					out = append(out, repl)
					i += 2
				default:
					out = append(out, repl)
					i += 3
				}
				continue
			}
			if c > 0xf4 || i+1 < len(b) && bad2() {
				out = append(out, repl)
				i++
				continue
			}
			out = append(out, repl)
			i += 2
			if i < len(b) && !cont(i) {
				continue
			}
			return out
		default:
			out = append(out, repl)
			i++
		}
	}
	return out
}
