package venusd_test

import (
	"context"
	"fmt"
	"log"

	"github.com/perflab/perflab/venusd"
)

// A server on a free loopback port, and the llm workload run against it in two modes.
func ExampleRunWorkload() {
	srv, err := venusd.NewServer(venusd.ServerConfig{Listen: "tcp://127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()

	env := func(string) string { return "" } // ignore VENUS_* variables of the caller
	var sums []string
	for _, mode := range []venusd.Mode{venusd.ModeBaseline, venusd.ModeCoalescePipeline} {
		res, err := venusd.RunWorkload(context.Background(), venusd.ClientConfig{
			Connect: srv.Addr(), Workload: "llm", Mode: mode, Getenv: env,
			LLM: venusd.LLMConfig{Tokens: 2, LogitsBytes: 16384},
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: output ok=%v, %.0f frames and %.0f blocking round trips per token\n",
			res.Mode, res.ChecksumOK, res.PerToken.Frames, res.PerToken.SyncWaits)
		sums = append(sums, res.Checksum)
	}
	fmt.Println("same checksum:", sums[0] == sums[1])
	stop()
	if err := <-served; err != nil {
		log.Fatal(err)
	}
	// Output:
	// baseline: output ok=true, 66 frames and 33 blocking round trips per token
	// coalesce+pipeline: output ok=true, 12 frames and 2 blocking round trips per token
	// same checksum: true
}
