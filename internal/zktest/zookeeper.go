package zktest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkraft/zkraft/internal/freeport"
	"github.com/zkraft/zkraft/internal/logtail"
)

// Jar is the Apache ZooKeeper 3.8 jar of the Debian package.
const Jar = "/usr/share/java/zookeeper.jar"

// SkipEnv, when set to a non-empty value, lets tests that need a real
// ZooKeeper skip when it is not installed. Without it they fail.
const SkipEnv = "ZKRAFT_NO_ZOOKEEPER"

// SuperDigest is the super user's digest for the password "secret"
// (zookeeper.DigestAuthenticationProvider.superDigest).
const SuperDigest = "super:lK75jTNcA+U9vtVEw5vB51mj/w4="

// Available says whether java and the ZooKeeper jar are installed.
func Available() error {
	if _, err := os.Stat(Jar); err != nil {
		return fmt.Errorf("no Apache ZooKeeper here: %s is missing (apt-get install zookeeper)", Jar)
	}
	if _, err := exec.LookPath(javaBin()); err != nil {
		return fmt.Errorf("java is not on PATH: %v", err)
	}
	return nil
}

func javaBin() string {
	if j := os.Getenv("JAVA"); j != "" {
		return j
	}
	return "java"
}

// Require fails t when ZooKeeper is not installed, or skips it if the
// environment variable SkipEnv says so.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv(SkipEnv) != "" {
			t.Skipf("%v (%s is set)", err, SkipEnv)
		}
		t.Fatalf("%v; set %s=1 to skip the tests that need it", err, SkipEnv)
	}
}

// Server is a running Apache ZooKeeper.
type Server struct {
	Addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Config of a ZooKeeper started by Start.
type Config struct {
	DataDir    string
	DataLogDir string            // "" for the data dir
	Port       int               // client port; 0 picks a free one
	Props      map[string]string // extra -D system properties
}

// FreePort returns a loopback port nobody listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	return freeport.Port(t)
}

// Start starts a standalone ZooKeeper on a free loopback port and waits
// until it serves. It is stopped when the test ends.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	Require(t)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(t, cfg)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	t.Fatalf("start ZooKeeper: %v", lastErr)
	return nil
}

func start(t testing.TB, cfg Config) (*Server, error) {
	dir := t.TempDir()
	port := cfg.Port
	if port == 0 {
		port = FreePort(t)
	}
	conf := fmt.Sprintf("tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n",
		cfg.DataDir, port)
	if cfg.DataLogDir != "" {
		conf += "dataLogDir=" + cfg.DataLogDir + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	s, err := launch(dir, "org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(dir, "zoo.cfg"), fmt.Sprintf("127.0.0.1:%d", port), cfg.Props)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("ZooKeeper exited during startup:\n%s", s.Log(40))
		default:
		}
		if w, err := FourLetter(s.Addr, "conf"); err == nil && strings.Contains(w, "dataDir="+cfg.DataDir) {
			return s, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("ZooKeeper did not answer within 30s:\n%s", s.Log(40))
}

// launch starts java with ZooKeeper's mainClass on cfgPath, logging into
// dir (which also holds the log4j configuration); clients reach it at addr.
func launch(dir, mainClass, cfgPath, addr string, props map[string]string) (*Server, error) {
	log4j := fmt.Sprintf("log4j.rootLogger=INFO, FILE\nlog4j.appender.FILE=org.apache.log4j.FileAppender\nlog4j.appender.FILE.File=%s\nlog4j.appender.FILE.layout=org.apache.log4j.PatternLayout\nlog4j.appender.FILE.layout.ConversionPattern=%%d{ISO8601} %%-5p [%%t:%%C{1}@%%L] - %%m%%n\n",
		filepath.Join(dir, "zookeeper.log"))
	if err := os.WriteFile(filepath.Join(dir, "log4j.properties"), []byte(log4j), 0o644); err != nil {
		return nil, err
	}
	cp := dir + ":" + Jar
	for _, j := range []string{"slf4j-log4j12.jar", "log4j-1.2.jar"} {
		if _, err := os.Stat("/usr/share/java/" + j); err == nil {
			cp += ":/usr/share/java/" + j
		}
	}
	args := []string{"-Xmx256m",
		"-Dlog4j.configuration=file:" + filepath.Join(dir, "log4j.properties"),
		"-Dzookeeper.log.dir=" + dir,
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.extendedTypesEnabled=true",
		"-Dzookeeper.DigestAuthenticationProvider.superDigest=" + SuperDigest,
	}
	for k, v := range props {
		args = append(args, "-D"+k+"="+v)
	}
	args = append(args, "-cp", cp, mainClass, cfgPath)
	cmd := exec.Command(javaBin(), args...)
	out, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, err
	}
	s := &Server{Addr: addr, dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		out.Close()
		close(s.done)
	}()
	return s, nil
}

// Stop stops the server (SIGTERM, then SIGKILL after 5s) and waits.
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// Kill stops the server with SIGKILL and waits.
func (s *Server) Kill() {
	s.cmd.Process.Kill()
	<-s.done
}

// Log returns the last n lines of the server's log.
func (s *Server) Log(n int) string { return logtail.Tail(s.dir, n, "stdout.log", "zookeeper.log") }

// LogContains reports whether the server's log has a line containing s.
func (s *Server) LogContains(sub string) bool {
	b, _ := os.ReadFile(filepath.Join(s.dir, "zookeeper.log"))
	return strings.Contains(string(b), sub)
}

// FourLetter sends a four-letter word and returns the answer.
func FourLetter(addr, word string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, io.EOF) {
		return string(b), err
	}
	return string(b), nil
}

// Connect opens a client session authenticated as the super user.
func Connect(t testing.TB, addr string) *zk.Conn {
	t.Helper()
	c, ev, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	timeout := time.After(15 * time.Second)
	for c.State() != zk.StateHasSession {
		select {
		case <-ev:
		case <-timeout:
			t.Fatalf("no session with %s", addr)
		}
	}
	if err := c.AddAuth("digest", []byte("super:secret")); err != nil {
		t.Fatal(err)
	}
	return c
}
