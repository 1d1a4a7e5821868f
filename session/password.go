package session

import "crypto/subtle"

// PasswordLen is the length of a ZooKeeper session password.
const PasswordLen = 16

// passwordSeedMask is XORed into the session id to seed java.util.Random
// (ZooKeeperServer.superSecret).
const passwordSeedMask = 0xB3415C00

// java.util.Random's linear congruential generator constants.
const (
	javaRandMultiplier = 0x5DEECE66D
	javaRandAddend     = 0xB
	javaRandMask       = 1<<48 - 1
)

// Password returns ZooKeeper's password for a session id:
// new java.util.Random(sessionID ^ 0xB3415C00).nextBytes(16).
//
// It is deterministic so that clients of a migrated ZooKeeper ensemble can
// reconnect with the passwords they already hold.
func Password(sessionID int64) []byte {
	seed := (uint64(sessionID^passwordSeedMask) ^ javaRandMultiplier) & javaRandMask
	out := make([]byte, PasswordLen)
	for i := 0; i < len(out); {
		// nextInt() == next(32): advance the LCG, take bits 16..47.
		seed = (seed*javaRandMultiplier + javaRandAddend) & javaRandMask
		rnd := uint32(seed >> 16)
		// nextBytes fills little-endian, up to four bytes per int.
		for n := min(len(out)-i, 4); n > 0; n-- {
			out[i] = byte(rnd)
			rnd >>= 8
			i++
		}
	}
	return out
}

// CheckPassword reports whether passwd is the password of sessionID
// (constant-time compare).
func CheckPassword(sessionID int64, passwd []byte) bool {
	return subtle.ConstantTimeCompare(passwd, Password(sessionID)) == 1
}
