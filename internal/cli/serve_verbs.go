package cli

// The verbs that run venusd, the bundled workload (venus, bench): their names and usage are
// here, built everywhere, so that on other systems they are listed and say that they need Linux
// (venus_other.go); their code is in venus.go and bench.go, built on Linux only.

// venusCommand describes perflab venus; its Run is set where it is built.
func venusCommand() *Command {
	return &Command{
		Name:        "venus",
		Summary:     "run the bundled Venus-style server or client workload (serve | run)",
		Subcommands: []string{"serve", "run"},
		LinuxOnly:   true,
		Usage: "serve [--listen tcp://127.0.0.1:5556|unix:///PATH|shm:///NAME] [--allow-remote] [--loop conn|batch] [--shm-spin N] [--trace FILE] [--stats]\n" +
			"       perflab venus run --connect ADDR [--workload llm|ping] [--tokens N] [--mode baseline|coalesce|pipeline|coalesce+pipeline] [--depth D] [--delay D] [--trace FILE] [--json]",
	}
}

// benchCommand describes perflab bench; its Run is set where it is built.
func benchCommand() *Command {
	return &Command{
		Name:      "bench",
		LinuxOnly: true,
		Summary:   "load sweep: closed-loop clients against a venusd it starts, then Little's law, the batch model and RTT populations",
		Usage: "[--transports tcp,unix,shm] [--modes baseline,...] [--clients 1,2,4,8,16] [--depth 1,...] [--duration D] " +
			"[--loop batch|conn] [--delay D] [--shm-spin N] [--request-bytes N] [--server-in-process] [--format table|markdown] [--json] [--progress] [-o DIR]\n" +
			"       perflab bench (--server-pid PID[,PID...] | --server-cmd CMD) --client 'CMD ... {clients} ...' [--client-format auto|redis-benchmark|memtier|json] " +
			"[--client-test NAME] [--protocol P] [--clients 1,2,4,8,16] [--server-wait D] [--format table|markdown] [--json] [--progress] [-o DIR]",
	}
}
