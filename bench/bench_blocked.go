// The Go peer of bench_blocked.c: N goroutines each start, report that they run, and
// block on a receive from one channel; closing the channel releases them all. Runs the
// test twice (cold, then warm) and prints, per round, the milliseconds until all have
// blocked, the milliseconds from the release until all have ended, and the growth of the
// resident set per goroutine: the format bench_blocked reads.
// Usage: bench_blocked_go --tasks=N --workers=N
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

func round(tasks int) {
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

func main() {
	tasks := option("--tasks=", 100000)
	runtime.GOMAXPROCS(option("--workers=", runtime.NumCPU()))
	round(tasks) // cold
	round(tasks) // warm
}
