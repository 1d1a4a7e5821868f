package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

const usageCell = `usage: zkraft cell list             [flags]
       zkraft cell show   NAME        [flags]
       zkraft cell create NAME --voters 1,2,3 --port P [--observers 4] [--tls-port P] [--max-znodes N ...] [--import] [flags]
       zkraft cell release NAME       [flags]
       zkraft cell limits NAME [--max-znodes N ...] [flags]
       zkraft cell move   NAME --voters 2,3,4 [--observers 5] [flags]
       zkraft cell abort  NAME        [flags]
       zkraft cell delete NAME [--force] [flags]
       zkraft cell purge  NAME        [flags]

Manages the fleet's cells (docs/cells.md) through a member's AdminServer,
as the super user (Authorization: digest, ZooKeeper 3.9's form): --super
user:password, or $ZKRAFT_SUPER. A delete without --force is refused unless
the cell is empty, read on the member asked, which must host the cell.
A cell created with --import is not started until cell release: fill it
first with zkraft import --cell on each of its stopped members. A move
that does not finish (a new member down, or not catching up) is undone
with cell abort: the cell keeps its placement.
Flags:
`

// runCell runs a cell subcommand against a member's AdminServer.
func runCell(args []string, stdout io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(os.Stderr, usageCell)
		return errors.New("cell: want a subcommand: list, show, create, release, limits, move, abort, delete or purge")
	}
	sub, args := args[0], args[1:]
	var name string
	if sub != "list" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			return fmt.Errorf("cell %s: want the cell's name", sub)
		}
		name, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("cell "+sub, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usageCell); fs.PrintDefaults() }
	var (
		admin    = fs.String("admin", "http://127.0.0.1:8080/commands", "a member's AdminServer command URL")
		super    = fs.String("super", "", "the super user's user:password (default $ZKRAFT_SUPER)")
		voters   = fs.String("voters", "", "create, move: member ids of the voters, comma-separated")
		obs      = fs.String("observers", "", "create, move: member ids of the observers, comma-separated")
		port     = fs.Uint("port", 0, "create: the cell's client port (the same on every member that hosts it)")
		tlsPort  = fs.Uint("tls-port", 0, "create: the cell's TLS client port (0: none)")
		force    = fs.Bool("force", false, "delete: even if the cell holds data")
		imp      = fs.Bool("import", false, "create: the cell is to be filled by zkraft import --cell: its members start it at cell release")
		timeout  = fs.Duration("timeout", 30*time.Second, "how long to wait for the member")
		maxZn    = fs.Int64("max-znodes", -1, "limit: znodes (0: unlimited)")
		maxBytes = fs.Int64("max-data-bytes", -1, "limit: bytes of data (0: unlimited)")
		maxSess  = fs.Int64("max-sessions", -1, "limit: sessions (0: unlimited)")
		maxWatch = fs.Int64("max-watches", -1, "limit: watches (0: unlimited)")
		maxRate  = fs.Int64("max-request-rate", -1, "limit: requests per second (0: unlimited)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("cell %s: unexpected %q", sub, fs.Arg(0))
	}
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	limits := func() {
		for key, v := range map[string]int64{"max_znodes": *maxZn, "max_data_bytes": *maxBytes, "max_sessions": *maxSess,
			"max_watches": *maxWatch, "max_request_rate": *maxRate} {
			if v >= 0 {
				q.Set(key, fmt.Sprint(v))
			}
		}
	}
	var cmd string
	switch sub {
	case "list":
		cmd = "cells"
	case "show":
		cmd = "cell_show"
	case "create":
		cmd = "cell_create"
		q.Set("voters", *voters)
		q.Set("observers", *obs)
		q.Set("port", fmt.Sprint(*port))
		q.Set("tls_port", fmt.Sprint(*tlsPort))
		if *imp {
			q.Set("import", "true")
		}
		limits()
	case "release":
		cmd = "cell_release"
	case "limits":
		cmd = "cell_limits"
		limits()
	case "move":
		cmd = "cell_move"
		q.Set("voters", *voters)
		q.Set("observers", *obs)
	case "abort":
		cmd = "cell_abort"
	case "delete":
		cmd = "cell_delete"
		if *force {
			q.Set("force", "true")
		}
	case "purge":
		cmd = "cell_purge"
	default:
		return fmt.Errorf("cell: unknown subcommand %q (list, show, create, release, limits, move, abort, delete, purge)", sub)
	}
	// The commands that change the map answer POST, the others GET.
	method := http.MethodPost
	if sub == "list" || sub == "show" {
		method = http.MethodGet
	}
	return adminCommand("cell "+sub, method, *admin, cmd, q, *super, *timeout, stdout)
}

const usageMember = `usage: zkraft member promote ID [flags]
       zkraft member leave   ID [flags]
       zkraft member remove  ID [flags]

Changes a member of the fleet (docs/cells.md) through a member's
AdminServer, as the super user (--super user:password or $ZKRAFT_SUPER):
promote makes its replica of the system shard (non-voting for a member
added after the bootstrap) a voter of the fleet's map; leave marks it
leaving (no new replica is placed on it); remove takes a leaving member
that hosts no replica of any cell out of the map and the system shard.
Flags:
`

// runMember runs a member subcommand against a member's AdminServer.
func runMember(args []string, stdout io.Writer) error {
	cmds := map[string]string{"promote": "member_promote", "leave": "member_leave", "remove": "member_remove"}
	if len(args) < 2 || cmds[args[0]] == "" || strings.HasPrefix(args[1], "-") {
		fmt.Fprint(os.Stderr, usageMember)
		return errors.New("member: want promote, leave or remove and the member's id")
	}
	sub, id, args := args[0], args[1], args[2:]
	fs := flag.NewFlagSet("member "+sub, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usageMember); fs.PrintDefaults() }
	var (
		admin   = fs.String("admin", "http://127.0.0.1:8080/commands", "a member's AdminServer command URL")
		super   = fs.String("super", "", "the super user's user:password (default $ZKRAFT_SUPER)")
		timeout = fs.Duration("timeout", 30*time.Second, "how long to wait for the member")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("member %s: unexpected %q", sub, fs.Arg(0))
	}
	return adminCommand("member "+sub, http.MethodPost, *admin, cmds[sub], url.Values{"id": {id}}, *super, *timeout, stdout)
}

// adminCommand runs an AdminServer command as the super user (cred, or
// $ZKRAFT_SUPER), prints its JSON, and fails when the JSON carries an
// error.
func adminCommand(what, method, admin, cmd string, q url.Values, cred string, timeout time.Duration, stdout io.Writer) error {
	if cred == "" {
		cred = os.Getenv("ZKRAFT_SUPER")
	}
	if cred == "" {
		return fmt.Errorf("%s: the AdminServer's fleet commands need the super user: --super user:password or $ZKRAFT_SUPER", what)
	}
	body, err := adminRequest(method, strings.TrimRight(admin, "/")+"/"+cmd, q, cred, timeout)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, body)
	var out struct {
		Error *string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		return fmt.Errorf("%s: the member's answer is not JSON: %w", what, err)
	}
	if out.Error != nil {
		return fmt.Errorf("%s: %s", what, *out.Error)
	}
	return nil
}

// adminRequest runs an AdminServer command with the super user's
// credentials: a GET with q as its query, or a POST with q as its form.
func adminRequest(method, u string, q url.Values, cred string, timeout time.Duration) (string, error) {
	var req *http.Request
	var err error
	if method == http.MethodGet {
		req, err = http.NewRequest(method, u+"?"+q.Encode(), nil)
	} else {
		req, err = http.NewRequest(method, u, strings.NewReader(q.Encode()))
	}
	if err != nil {
		return "", err
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Authorization", "digest "+cred)
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return "", fmt.Errorf("cell: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("cell: %w", err)
	}
	if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized {
		return "", fmt.Errorf("cell: the member refused the credentials (%d): %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("cell: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}
