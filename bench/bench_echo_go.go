// The Go peer of bench_echo.c: an echo server on 127.0.0.1 with a goroutine per
// connection, built offline from Go's standard library only. Usage:
//
//	bench_echo_go --workers=N --buffer=N
//
// Listens on a port the kernel chooses and prints "port P"; each connection's goroutine
// reads up to --buffer bytes at a time and writes them back until the peer hangs up
// (Go's net package waits in its poller, and sets TCP_NODELAY, as the C servers do).
// On SIGTERM it stops accepting, waits for the connections to end and exits with 0.
package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

func option(name string, def int) int {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, name) {
			v, err := strconv.Atoi(a[len(name):])
			if err != nil || v < 1 {
				fmt.Fprintf(os.Stderr, "bad option %s\n", a)
				os.Exit(2)
			}
			return v
		}
	}
	return def
}

func serve(c net.Conn, size int, live *sync.WaitGroup) {
	defer live.Done()
	defer c.Close()
	buf := make([]byte, size)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF: the peer hung up
		}
	}
}

func main() {
	runtime.GOMAXPROCS(option("--workers=", runtime.NumCPU()))
	size := option("--buffer=", 4096)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("port %d\n", ln.Addr().(*net.TCPAddr).Port)
	var live sync.WaitGroup
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed: stopping
			}
			live.Add(1)
			go serve(c, size, &live)
		}
	}()
	<-stop
	ln.Close()
	<-accepting
	live.Wait()
}
