// The Go peer of bench_blocked.c and bench_yield.c, built offline from Go's standard
// library only. Usage:
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
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

func main() {
	modes := map[string]func(){"blocked": blocked, "yield": yield, "pingpong": pingpong}
	if len(os.Args) < 2 || modes[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: bench_go blocked|yield|pingpong [--option=N ...]")
		os.Exit(2)
	}
	modes[os.Args[1]]()
}
