package auth

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode"
)

// LoadSASLUsers reads the users (user_<name>="<password>") of the
// DigestLoginModules of section in the JAAS login configuration jaasFile
// (none when jaasFile is ""), as ZooKeeper's SaslServerCallbackHandler
// does, and adds extra. It fails for a file that cannot be read or
// parsed, has no such section or no user in it.
func LoadSASLUsers(jaasFile, section string, extra map[string]string) (map[string]string, error) {
	users := map[string]string{}
	if jaasFile != "" {
		b, err := os.ReadFile(jaasFile)
		if err != nil {
			return nil, fmt.Errorf("JAAS config: %w", err)
		}
		sections, err := parseJAAS(string(b))
		if err != nil {
			return nil, fmt.Errorf("JAAS config %s: %w", jaasFile, err)
		}
		entries, ok := sections[section]
		if !ok {
			return nil, fmt.Errorf("JAAS config %s has no %s section", jaasFile, section)
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
			return nil, fmt.Errorf("JAAS config %s: no user_<name> in a DigestLoginModule of %s", jaasFile, section)
		}
	}
	for u, p := range extra {
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
