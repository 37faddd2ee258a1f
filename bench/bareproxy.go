package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/breakwater-dev/breakwater/bench/internal/proc"
	"github.com/breakwater-dev/breakwater/internal/bareproxy"
	"github.com/breakwater-dev/breakwater/internal/pprofserve"
)

// bareProxyCommand is the hidden first argument that makes this binary
// run the bare proxy (the floor of every table) instead of the benchmark.
const bareProxyCommand = proc.BareProxyCommand

// runBareProxy serves the bare proxy until SIGTERM or SIGINT:
// `bench bareproxy -listen ADDR -upstream HOST:PORT [-local IP] [-pprof
// ADDR]`. It prints
// "bare proxy listening on http://ADDR" once it accepts connections.
func runBareProxy(args []string) int {
	fs := flag.NewFlagSet(bareProxyCommand, flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := fs.String("upstream", "", "upstream host:port (plain HTTP)")
	local := fs.String("local", "", "source address of the upstream connections (default: the system's choice)")
	pprofAddr := fs.String("pprof", "", "serve the Go runtime profiles on this loopback address (the benchmark's -profile)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *upstream == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bench bareproxy: -upstream HOST:PORT is required, and nothing else")
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench bareproxy:", err)
		return 1
	}
	var src net.IP
	if *local != "" {
		if src = net.ParseIP(*local); src == nil {
			fmt.Fprintf(os.Stderr, "bench bareproxy: -local %q is not an IP address\n", *local)
			return 2
		}
	}
	if *pprofAddr != "" {
		stop, err := pprofserve.Start(*pprofAddr, hclog.New(&hclog.LoggerOptions{Name: "bareproxy.pprof", Output: os.Stderr}))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench bareproxy:", err)
			return 1
		}
		defer stop()
	}
	p := bareproxy.New(*upstream, src)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = p.Shutdown()
	}()
	fmt.Printf("bare proxy listening on http://%s\n", ln.Addr())
	if err := p.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "bench bareproxy:", err)
		return 1
	}
	return 0
}
