package operator

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
)

// oneCell is the Host of an implementer with one cell.
type oneCell struct{ m Member }

func (h oneCell) Cell(name string) (Member, string) {
	if name != "" && name != "default" {
		return nil, "cell " + name + " has no replica on this member"
	}
	return h.m, ""
}

func (oneCell) Authorize(*http.Request, Auth) (int, string, bool) {
	return http.StatusUnauthorized, "Not authenticated", false
}

// An implementer (here with the figures of still, this package's test
// Member) builds its registry with its own commands, answers words on its
// client port and serves the AdminServer.
func ExampleNewRegistry() {
	reg := NewRegistry(Command{Name: "hello", JSON: func(Member, url.Values) (Object, string) {
		return Object{{"hello", "world"}}, ""
	}})
	m := still{}
	out, _ := reg.Word("ruok", []string{"ruok", "srvr"}, strings.NewReader(""), m)
	fmt.Printf("%s\n", out)
	out, _ = reg.Word("mntr", []string{"ruok", "srvr"}, strings.NewReader(""), m)
	fmt.Printf("%s", out)

	srv := httptest.NewServer(Admin(reg, oneCell{m}, "/commands", nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/commands/hello")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	io.Copy(&b, resp.Body)
	fmt.Print(b.String())
	// Output:
	// imok
	// mntr is not executed because it is not in the whitelist.
	// {
	//   "hello" : "world",
	//   "command" : "hello",
	//   "error" : null
	// }
}
