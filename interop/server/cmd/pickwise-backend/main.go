// Command pickwise-backend runs one interop/server backend for the
// load-balancing lab: a gRPC server whose latency, capacity, failures and
// ORCA load reports can be changed while it runs, through the
// pickwise.interop.Admin service on the same port. It also answers
// pickwise_prequal's load probes and reports its load on every call, with
// the serverload package.
//
// Usage:
//
//	pickwise-backend -listen 127.0.0.1:0 -name b0 -latency 20ms -capacity 4 \
//	    -behavior '{"latencySpread":0.3,"orca":{"perCall":true}}'
//
// It prints "listening on ADDR" once it accepts calls, and serves until
// SIGINT or SIGTERM. The starting behavior is -behavior (a JSON patch over
// the zero Behavior), then any of -latency, -capacity and -error-rate given
// explicitly on the command line, which win over the JSON.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/pickwise/pickwise/interop/server"
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	err := run(os.Args[1:])
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		// -h: the flag package has printed the usage.
	case errors.Is(err, errUsage):
		// The flag package has printed the error and the usage.
		os.Exit(2)
	default:
		// The server package's errors already say where they come from.
		msg := err.Error()
		if !strings.HasPrefix(msg, prefix) {
			msg = prefix + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

const prefix = "pickwise-backend: "

// errUsage marks a command-line error that has been reported already.
var errUsage = errors.New("usage error")

func run(args []string) error {
	fs := flag.NewFlagSet("pickwise-backend", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	name := fs.String("name", "", "server name, sent in replies and the x-backend trailer (default: the bound address)")
	latency := fs.Duration("latency", 0, "median service time of a successful call")
	capacity := fs.Int("capacity", 0, "calls served at once, the rest queue (0: unlimited)")
	errorRate := fs.Float64("error-rate", 0, "fraction of calls, in [0,1], that fail")
	behavior := fs.String("behavior", "", `starting behavior as JSON, e.g. '{"errorCode":"RESOURCE_EXHAUSTED"}'`)
	verbose := fs.Bool("v", false, "log every call and behavior change to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	b, err := server.Behavior{}.Patch(*behavior)
	if err != nil {
		return fmt.Errorf("%s-behavior: %s", prefix, strings.TrimPrefix(err.Error(), prefix))
	}
	// Only flags the user typed override the JSON; their zero defaults
	// must not erase what -behavior set.
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "latency":
			b.Latency = server.Duration(*latency)
		case "capacity":
			b.Capacity = *capacity
		case "error-rate":
			b.ErrorRate = *errorRate
		}
	})

	// Listen before New so that the default name can be the real address,
	// which is what a lab with many backends on port 0 needs to tell them
	// apart.
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if *name == "" {
		*name = lis.Addr().String()
	}
	var opts []server.Option
	if *verbose {
		opts = append(opts, server.WithLogger(log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)))
		// The server logs changes, not its starting point.
		if js, err := json.Marshal(b); err == nil {
			log.Printf("pickwise-backend: %s: starting with %s", *name, js)
		}
	}
	srv, err := server.New(*name, b, opts...)
	if err != nil {
		lis.Close()
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	// Printed after Serve is under way; connections that arrive before
	// Serve accepts them wait in the listen backlog, so the line is true.
	fmt.Printf("listening on %s\n", lis.Addr())

	select {
	case err := <-served:
		srv.Stop()
		return err
	case <-ctx.Done():
	}
	log.Printf("pickwise-backend: %s: stopping", *name)
	start := time.Now()
	srv.Stop()
	<-served
	log.Printf("pickwise-backend: %s: stopped in %v", *name, time.Since(start).Round(time.Millisecond))
	return nil
}
