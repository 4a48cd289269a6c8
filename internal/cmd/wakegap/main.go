// Command wakegap measures what waking costs after idling, on each side of a round trip: a
// client and an echo server in two processes over a Unix socket, the client waiting a gap
// before each request, as a delayed link makes both peers wait. For each gap it prints the
// median round trip and its two wake-ups, from timestamps both processes take on
// CLOCK_MONOTONIC: the server's (the client's write to the server's read returning) and the
// client's (the server's write to the client's read returning).
//
//	go run ./internal/cmd/wakegap -n 200 -gaps 0,50,100,200,500,1000,5000
//
// The client waits each gap two ways, in turn: "link", as venusd's emulated link waits
// (link.SleepUntil: it sleeps, then spins the last stretch, so the client's CPU is busy when it
// sends), and "sleep", blocked in nanosleep(2) throughout, as a client with nothing to do. On a
// VM whose idle vCPUs halt, a side that idled longer wakes later; a busy machine, whose CPUs
// never halt, shows little of it (docs/venusd.md, "Accuracy").
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if path := os.Getenv(serverEnv); path != "" {
		if err := serve(path, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "wakegap server:", err)
			os.Exit(1)
		}
		return
	}
	n := flag.Int("n", 200, "round trips per gap, way of waiting and round (3 rounds)")
	gaps := flag.String("gaps", "0,25,50,100,200,500,1000,5000", "gaps to wait before each request, µs, comma-separated")
	flag.Parse()
	g, err := parseGaps(*gaps)
	if err == nil && *n < 1 {
		err = fmt.Errorf("-n %d: want 1 or more", *n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wakegap:", err)
		os.Exit(2)
	}
	rows, err := measure(*n, g)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wakegap:", err)
		os.Exit(1)
	}
	writeTable(os.Stdout, rows)
}
