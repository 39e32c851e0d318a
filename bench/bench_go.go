// The Go peer of bench_blocked.c, bench_yield.c and bench_echo.c, built offline from Go's
// standard library only. Usage:
//
//	bench_go blocked --tasks=N --workers=N
//	    N goroutines each start, report that they run, and block on a receive from one
//	    channel; closing the channel releases them all. Runs the test twice (cold, then
//	    warm) and prints, per round, the milliseconds until all have blocked, the
//	    milliseconds from the release until all have ended, and the growth of the
//	    resident set per goroutine: the lines bench_blocked reads.
//	bench_go yield --n=N
//	    two goroutines on one thread (GOMAXPROCS 1) each call runtime.Gosched N times;
//	    prints nanoseconds per yield.
//	bench_go pingpong --n=N
//	    two goroutines on one thread hand a token back and forth N times through two
//	    unbuffered channels; prints nanoseconds per hand-off.
//	bench_go echo --workers=N --buffer=N
//	    an echo server on 127.0.0.1 with a goroutine per connection: listens on a port
//	    the kernel chooses and prints "port P"; each connection's goroutine reads up to
//	    --buffer bytes at a time and writes them back until the peer hangs up (Go's net
//	    package waits in its poller, and sets TCP_NODELAY, as the C servers do). On
//	    SIGTERM it stops accepting, waits for the connections to end and exits with 0.
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
	"sync/atomic"
	"syscall"
	"time"
)

func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	v, _ := strconv.ParseInt(f[1], 10, 64)
	return v * int64(os.Getpagesize())
}

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

func blockedRound(tasks int) {
	var started, ended sync.WaitGroup
	var ran int64
	release := make(chan struct{})
	rss0 := residentBytes()
	t0 := time.Now()
	started.Add(tasks)
	ended.Add(tasks)
	for i := 0; i < tasks; i++ {
		go func() {
			started.Done()
			<-release
			atomic.AddInt64(&ran, 1)
			ended.Done()
		}()
	}
	started.Wait()
	t1 := time.Now()
	rss1 := residentBytes()
	close(release)
	ended.Wait()
	t2 := time.Now()
	if atomic.LoadInt64(&ran) != int64(tasks) {
		fmt.Fprintf(os.Stderr, "%d of %d goroutines ended\n", ran, tasks)
		os.Exit(1)
	}
	fmt.Printf("%.3f %.3f %.1f\n", t1.Sub(t0).Seconds()*1e3, t2.Sub(t1).Seconds()*1e3,
		float64(rss1-rss0)/float64(tasks))
}

func blocked() {
	tasks := option("--tasks=", 100000)
	runtime.GOMAXPROCS(option("--workers=", runtime.NumCPU()))
	blockedRound(tasks) // cold
	blockedRound(tasks) // warm
}

// Runs two goroutines on one thread and prints the nanoseconds per step of the pair
// (2n steps in all).
func pair(n int, a, b func()) {
	var done sync.WaitGroup
	runtime.GOMAXPROCS(1)
	done.Add(2)
	t0 := time.Now()
	go func() { a(); done.Done() }()
	go func() { b(); done.Done() }()
	done.Wait()
	fmt.Printf("%.3f\n", float64(time.Since(t0).Nanoseconds())/float64(2*n))
}

func yield() {
	n := option("--n=", 1000000)
	loop := func() {
		for i := 0; i < n; i++ {
			runtime.Gosched()
		}
	}
	pair(n, loop, loop)
}

func pingpong() {
	n := option("--n=", 1000000)
	ping, pong := make(chan int), make(chan int)
	pair(n, func() {
		for i := 0; i < n; i++ {
			ping <- i
			<-pong
		}
	}, func() {
		for i := 0; i < n; i++ {
			if <-ping != i {
				fmt.Fprintln(os.Stderr, "ping-pong out of order")
				os.Exit(1)
			}
			pong <- i
		}
	})
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

func echo() {
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

func main() {
	modes := map[string]func(){"blocked": blocked, "yield": yield, "pingpong": pingpong,
		"echo": echo}
	if len(os.Args) < 2 || modes[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: bench_go blocked|yield|pingpong|echo [--option=N ...]")
		os.Exit(2)
	}
	modes[os.Args[1]]()
}
