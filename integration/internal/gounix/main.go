// Command gounix is an HTTP server on a unix socket (argv[1]) and a client
// of it in one program: Go's net package (nonblocking sockets, epoll after
// connect) for the integration suite's TestDockerUnixSockets, built once
// on the host (DSH_IT_BIN in the VM) rather than in each test.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
)

func main() {
	l, err := net.Listen("unix", os.Args[1])
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "go-served "+r.URL.Path) }))
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", os.Args[1])
	}}
	c := http.Client{Transport: tr}
	for i := 0; i < 3; i++ {
		resp, err := c.Get(fmt.Sprintf("http://unix/%d", i))
		if err != nil {
			fmt.Println("get:", err)
			os.Exit(1)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(string(b))
	}
	l.Close()
}
