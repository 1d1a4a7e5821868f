package znode

import (
	"strings"
	"unicode/utf8"
)

// ValidatePath applies ZooKeeper's PathUtils.validatePath rules. ZooKeeper
// checks Java UTF-16 chars, so every code point outside the Basic
// Multilingual Plane (a surrogate pair in Java) is rejected, and so is a
// byte sequence that is not valid UTF-8 (Java decodes it to U+FFFD, which is
// in the rejected U+FFF0–U+FFFF range).
func ValidatePath(path string) error {
	if len(path) == 0 || path[0] != '/' {
		return ErrBadPath
	}
	if len(path) == 1 {
		return nil
	}
	if path[len(path)-1] == '/' {
		return ErrBadPath
	}
	// Segment by segment without strings.Split, which made a slice per
	// path on every write's apply.
	for rest := path[1:]; ; {
		seg, tail, more := strings.Cut(rest, "/")
		if seg == "" || seg == "." || seg == ".." {
			return ErrBadPath
		}
		if !more {
			break
		}
		rest = tail
	}
	for i := 0; i < len(path); {
		r, size := utf8.DecodeRuneInString(path[i:])
		if r == utf8.RuneError && size <= 1 {
			return ErrBadPath
		}
		if r == 0 || (r >= 0x01 && r <= 0x1f) || (r >= 0x7f && r <= 0x9f) ||
			(r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) || r > 0xffff {
			return ErrBadPath
		}
		i += size
	}
	return nil
}

// Parent returns the parent of path as ZooKeeper computes it: everything
// before the last '/', with "" meaning the root. ok is false when path has
// no '/'.
func Parent(path string) (parent string, ok bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", false
	}
	if i == 0 {
		return "/", true
	}
	return path[:i], true
}

// Base returns the last segment of path.
func Base(path string) string {
	return path[strings.LastIndexByte(path, '/')+1:]
}

// Join returns parent/child for a validated parent.
func Join(parent, child string) string {
	if parent == "/" {
		return "/" + child
	}
	return parent + "/" + child
}

// IsSpecial reports whether path is one of the nodes ZooKeeper refuses to
// delete.
func IsSpecial(path string) bool {
	switch path {
	case "/", ZooKeeperPath, QuotaPath, ConfigPath, FeaturesPath:
		return true
	}
	return false
}

// The reserved subtree.
const (
	ZooKeeperPath = "/zookeeper"
	QuotaPath     = "/zookeeper/quota"
	ConfigPath    = "/zookeeper/config"
	// FeaturesPath is where clients discover zkraft's extensions; standard
	// ZooKeeper has no such node.
	FeaturesPath = "/zookeeper/zkraft"
)

// Features is the data of FeaturesPath: one extension per line.
const Features = "watchFrom=1\n"
