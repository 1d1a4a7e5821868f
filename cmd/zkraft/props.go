package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// property is one key=value pair of a Java properties file, with the line
// it came from (for messages).
type property struct {
	key, value string
	line       int
}

// readProperties reads r as java.util.Properties.load does, which is how
// ZooKeeper reads zoo.cfg and its dynamic configuration file: '#' and '!'
// comment lines; the key ends at the first unescaped '=', ':' or blank;
// a line ending in an odd number of backslashes continues on the next one;
// \t \n \r \f \uXXXX escapes. ZooKeeper trims keys and values. A later
// line for the same key replaces an earlier one, as in a Properties map.
func readProperties(r io.Reader) ([]property, error) {
	var out []property
	index := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		start := line
		s := strings.TrimLeft(sc.Text(), " \t\f")
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		for continues(s) {
			s = s[:len(s)-1]
			if !sc.Scan() {
				break
			}
			line++
			s += strings.TrimLeft(sc.Text(), " \t\f")
		}
		k, v, err := splitProperty(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if i, ok := index[k]; ok {
			out[i] = property{k, v, start}
			continue
		}
		index[k] = len(out)
		out = append(out, property{k, v, start})
	}
	return out, sc.Err()
}

// continues reports whether a natural line ends in an odd number of
// backslashes.
func continues(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line into its unescaped key and value.
func splitProperty(s string) (key, value string, err error) {
	end := len(s)
	valueAt := len(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			j := i
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\f') {
				j++
			}
			if j < len(s) && (s[j] == '=' || s[j] == ':') && (c == ' ' || c == '\t' || c == '\f') {
				j++
			} else if c == '=' || c == ':' {
				j = i + 1
			}
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\f') {
				j++
			}
			valueAt = j
			break
		}
	}
	if key, err = unescapeProperty(s[:end]); err != nil {
		return "", "", err
	}
	if value, err = unescapeProperty(s[valueAt:]); err != nil {
		return "", "", err
	}
	return key, value, nil
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uxxxx escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uxxxx escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// jvmFlags are the Java system properties a ZooKeeper started by
// zkServer.sh would have: the -Dname=value words of
// "$SERVER_JVMFLAGS $JVMFLAGS" (later words win, as in java), where the
// variables start from the environment and are then changed by the files
// zkEnv.sh sources from the configuration directory. On Debian that
// directory's "environment" file is zkEnv.sh itself.
type jvmFlags struct {
	props map[string]propValue
	// unread names what could not be read (a line assigning the flags
	// that is not a plain assignment), for the start-up log.
	unread []string
	// autocreateOff is set when ZOO_DATADIR_AUTOCREATE_DISABLE is: then
	// zkServer.sh passes -Dzookeeper.datadir.autocreate=false.
	autocreateOff bool
}

// propValue is one system property and where it was set.
type propValue struct {
	value string
	from  string // "zoo.cfg line 12", "JVMFLAGS in /etc/zookeeper/conf/java.env", ...
	key   string // the zoo.cfg key that set it, if any
}

// envFiles are the files zkEnv.sh sources from the configuration
// directory, in its order (Debian's zkEnv.sh is the "environment" file).
var envFiles = []string{"environment", "zookeeper-env.sh", "java.env"}

// jvmVars are the variables whose -D words reach the server.
var jvmVars = []string{"SERVER_JVMFLAGS", "JVMFLAGS"}

// readJVMFlags reads the JVM flags of a server started with the
// configuration in confDir, given the environment getenv.
func readJVMFlags(confDir string, getenv func(string) string) (*jvmFlags, error) {
	vars := map[string]string{}
	from := map[string]string{}
	for _, v := range append(append([]string(nil), jvmVars...), "ZOO_DATADIR_AUTOCREATE_DISABLE") {
		if x := getenv(v); x != "" {
			vars[v], from[v] = x, v+" (environment)"
		}
	}
	jf := &jvmFlags{props: map[string]propValue{}}
	if confDir != "" {
		for _, name := range envFiles {
			path := filepath.Join(confDir, name)
			b, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			readShellAssignments(string(b), path, vars, from, getenv, &jf.unread)
		}
	}
	jf.autocreateOff = vars["ZOO_DATADIR_AUTOCREATE_DISABLE"] != ""
	if jf.autocreateOff {
		jf.props["zookeeper.datadir.autocreate"] = propValue{value: "false", from: "ZOO_DATADIR_AUTOCREATE_DISABLE (zkServer.sh)"}
	}
	for _, v := range jvmVars {
		// zkServer.sh expands $JVMFLAGS unquoted: split on blanks, quotes
		// kept as they are.
		for _, w := range strings.Fields(vars[v]) {
			d, ok := strings.CutPrefix(w, "-D")
			if !ok || d == "" {
				continue
			}
			k, val, _ := strings.Cut(d, "=")
			jf.props[k] = propValue{value: val, from: from[v]}
		}
	}
	return jf, nil
}

// readShellAssignments applies the plain assignments in a sourced shell
// file: NAME=word, export NAME=word and NAME+=word, the word made of
// unquoted, '...' and "..." parts with $NAME, ${NAME} and ${NAME:-word}
// expanded. Any other line that mentions one of the JVM flag variables
// (a conditional, a command substitution) is recorded in unread.
func readShellAssignments(text, path string, vars, from map[string]string, getenv func(string) string, unread *[]string) {
	lookup := func(name string) string {
		if v, ok := vars[name]; ok {
			return v
		}
		return getenv(name)
	}
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' {
			continue
		}
		name, val, ok := shellAssignment(line, lookup)
		if !ok {
			for _, v := range jvmVars {
				if strings.Contains(line, v) {
					*unread = append(*unread, fmt.Sprintf("%s:%d", path, i+1))
					break
				}
			}
			continue
		}
		if name == "" {
			continue // export NAME
		}
		vars[name] = val
		from[name] = fmt.Sprintf("%s in %s", name, path)
	}
}

// shellAssignment parses one line as [export] NAME[+]=word. name is empty
// for "export NAME" alone.
func shellAssignment(line string, lookup func(string) string) (name, val string, ok bool) {
	s := line
	if rest, found := strings.CutPrefix(s, "export"); found && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
		s = strings.TrimLeft(rest, " \t")
		if isShellName(s) {
			return "", "", true
		}
	}
	eq := strings.IndexByte(s, '=')
	if eq <= 0 {
		return "", "", false
	}
	name, appendTo := s[:eq], false
	if strings.HasSuffix(name, "+") {
		name, appendTo = name[:len(name)-1], true
	}
	if !isShellName(name) {
		return "", "", false
	}
	val, rest, ok := shellWord(s[eq+1:], lookup)
	if !ok {
		return "", "", false
	}
	if rest = strings.TrimSpace(rest); rest != "" && rest[0] != '#' && rest[0] != ';' {
		return "", "", false // NAME=word command: the assignment is the command's only
	}
	if appendTo {
		val = lookup(name) + val
	}
	return name, val, true
}

func isShellName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// shellWord reads one shell word from the start of s and returns its
// value and what follows it. ok is false for what it does not evaluate:
// command substitution, arithmetic, backquotes, an unterminated quote.
func shellWord(s string, lookup func(string) string) (word, rest string, ok bool) {
	var b strings.Builder
	i := 0
	inDouble := false
	for i < len(s) {
		c := s[i]
		switch {
		case !inDouble && (c == ' ' || c == '\t'):
			return b.String(), s[i:], true
		case !inDouble && c == ';':
			return b.String(), s[i:], true
		case c == '`':
			return "", "", false
		case !inDouble && c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", "", false
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 2
			continue
		case c == '"':
			inDouble = !inDouble
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case c == '$':
			v, n, good := shellExpand(s[i:], lookup)
			if !good {
				return "", "", false
			}
			b.WriteString(v)
			i += n
			continue
		default:
			b.WriteByte(c)
		}
		i++
	}
	if inDouble {
		return "", "", false
	}
	return b.String(), "", true
}

// shellExpand expands the parameter at the start of s ($NAME, ${NAME},
// ${NAME:-word}, ${NAME-word}) and returns its value and length.
func shellExpand(s string, lookup func(string) string) (string, int, bool) {
	if len(s) < 2 {
		return "$", 1, true
	}
	if s[1] == '{' {
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return "", 0, false
		}
		body := s[2:end]
		name, dflt, hasDefault := body, "", false
		if j := strings.Index(body, ":-"); j >= 0 {
			name, dflt, hasDefault = body[:j], body[j+2:], true
		} else if j := strings.IndexByte(body, '-'); j >= 0 {
			name, dflt, hasDefault = body[:j], body[j+1:], true
		}
		if !isShellName(name) || strings.ContainsAny(dflt, "$`") {
			return "", 0, false
		}
		v := lookup(name)
		if hasDefault && v == "" {
			v = dflt
		}
		return v, end + 1, true
	}
	if s[1] == '(' {
		return "", 0, false
	}
	j := 1
	for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
		j++
	}
	if j == 1 {
		return "$", 1, true
	}
	return lookup(s[1:j]), j, true
}
