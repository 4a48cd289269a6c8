// Command abtime times two commands in turn, A B A B, and prints each one's wall time, CPU
// time (user + system) and peak RSS as min, median and max, with the ratio A/B taken pair by
// pair: the way perflab's docs quote a change measured on a shared machine, where the speed
// drifts during the runs and only alternated pairs and medians mean much.
//
//	go run ./internal/cmd/abtime -n 5 -vs 'perflab-before analyze -o /dev/null T' -- perflab analyze -o /dev/null T
//
// Each command runs without a shell, its output discarded, after one warm-up run that is not
// counted. CPU time and peak RSS are the kernel's accounting of the finished child (its
// rusage); peak RSS is that of the largest process the command waited for.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	n := flag.Int("n", 5, "timed runs of each command")
	vs := flag.String("vs", "", "the second command B, one string split as a shell splits words (quotes kept together)")
	flag.Parse()
	if err := run(os.Stdout, *n, *vs, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "abtime:", err)
		os.Exit(2)
	}
}
