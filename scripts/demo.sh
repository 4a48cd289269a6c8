#!/usr/bin/env bash
# perflab demo: the whole story on this machine in under two minutes.
#
# It starts the bundled Venus-style server, runs the llm token loop in baseline and in
# coalesce+pipeline under an emulated 2 ms link (1 ms each way), records one extra run of each
# (eBPF when it may, the in-process tracer otherwise, and says which), analyses the recordings,
# compares the unrecorded runs (a run under eBPF is slower, so it stays out of the statistics),
# prints the before/after table and writes the same comparison, and the analyses, as HTML
# under build/demo/.
#
#   scripts/demo.sh                 # PERFLAB=bin/perflab (built when missing), DEMO_DIR=build/demo
#   PERFLAB_DEMO_TRACER=1 scripts/demo.sh   # use the tracer even as root
set -euo pipefail

cd "$(dirname "$0")/.."
PERFLAB=${PERFLAB:-bin/perflab}
DIR=${DEMO_DIR:-build/demo}
RUNS=${DEMO_RUNS:-6}      # runs per side: six give the U test a p-value below 0.01
TOKENS=${DEMO_TOKENS:-16} # tokens per run
DELAY=1ms                 # one-way: a 2 ms round trip, as between two hosts of a LAN with a busy switch

pids=()
cleanup() {
	local code=$?
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n== %s\n' "$*"; }

# x runs a command as a child the cleanup knows about, so that an interrupt or a hung client
# never leaves it behind.
x() {
	"$@" &
	local p=$!
	pids+=("$p")
	local rc=0
	wait "$p" || rc=$?
	unset 'pids[-1]'
	return "$rc"
}

if [[ ! -x $PERFLAB ]]; then
	say "building $PERFLAB"
	command -v go >/dev/null || { echo "demo: Go is needed to build perflab (https://go.dev/dl/)" >&2; exit 2; }
	mkdir -p "$(dirname "$PERFLAB")"
	go build -o "$PERFLAB" ./cmd/perflab
fi
rm -rf "$DIR"
mkdir -p "$DIR"
start=$SECONDS

say "starting venusd (the bundled Venus-style server) on a free loopback port"
"$PERFLAB" venus serve --listen tcp://127.0.0.1:0 2>"$DIR/venusd.log" &
pids+=($!)
addr=
for _ in $(seq 100); do
	addr=$(grep -o 'tcp://127\.0\.0\.1:[0-9]*' "$DIR/venusd.log" || true)
	[[ -n $addr ]] && break
	kill -0 "${pids[0]}" 2>/dev/null || { cat "$DIR/venusd.log" >&2; exit 1; }
	sleep 0.05
done
[[ -n $addr ]] || { echo "demo: venusd did not start:" >&2; cat "$DIR/venusd.log" >&2; exit 1; }
echo "venusd listening on $addr"

# How to record: eBPF sees the client's socket system calls from the kernel and needs root (or
# CAP_BPF+CAP_PERFMON); the in-process tracer needs nothing.
recorder=tracer
if [[ $(id -u) -eq 0 && -z ${PERFLAB_DEMO_TRACER:-} ]]; then
	recorder=ebpf
fi

run() { # run SIDE MODE I: one llm run, its JSON in $DIR/SIDE-I.json; run 0 is the recorded one
	local side=$1 mode=$2 i=$3
	local cmd=("$PERFLAB" venus run --connect "$addr" --workload llm --tokens "$TOKENS" --mode "$mode" --delay "$DELAY" --json)
	if [[ $i -gt 0 ]]; then
		x "${cmd[@]}" >"$DIR/$side-$i.json"
		return
	fi
	# The recorded run always keeps a tracer trace too: its token markers are what `perflab
	# model` reads. It is not one of the runs compared: eBPF slows the program it records.
	cmd+=(--trace "$DIR/$side-tracer.plt")
	if [[ $recorder == ebpf ]]; then
		# record leaves the command's stdout to the command and exits with its status.
		if x "$PERFLAB" record -o "$DIR/$side.plt" --label "mode=$mode" -- "${cmd[@]}" \
			>"$DIR/$side-$i.json" 2>"$DIR/record-$side.log"; then
			return
		fi
		echo "eBPF recording failed ($(tail -n 1 "$DIR/record-$side.log")); using the in-process tracer"
		recorder=tracer
	fi
	x "${cmd[@]}" >"$DIR/$side-$i.json"
	cp "$DIR/$side-tracer.plt" "$DIR/$side.plt"
}

for side in before after; do
	mode=baseline
	[[ $side == after ]] && mode=coalesce+pipeline
	say "$side: 1 recorded + $RUNS runs of the llm token loop ($TOKENS tokens) in $mode over the emulated 2 ms link"
	for i in $(seq 0 "$RUNS"); do
		run "$side" "$mode" "$i"
		printf '.'
	done
	echo
	if [[ $recorder == ebpf ]]; then
		echo "recorded one run with eBPF (perflab record, kernel probes on the client's socket calls): $DIR/$side.plt"
	else
		echo "recorded one run with the in-process tracer (venus run --trace; eBPF needs root): $DIR/$side.plt"
	fi
done

list() { local out=() i; for i in $(seq "$RUNS"); do out+=("$DIR/$1-$i.json"); done; (IFS=,; echo "${out[*]}"); }

say "analyze: the baseline trace (round trips, RTT, Little's law, populations)"
"$PERFLAB" analyze "$DIR/before.plt" >"$DIR/before.txt"
# The round trips and Little's law sections of the report.
awk '/^Round trips/ || /^In flight/ {on=1} on && /^$/ {on=0} on' "$DIR/before.txt"
echo "(full report: $DIR/before.txt)"
if [[ $recorder == ebpf ]]; then
	echo "(the probes time the socket calls: the emulated link's delay is added inside the client, above"
	echo " the socket, so these round trips are loopback's; the tracer's traces include the link)"
fi
"$PERFLAB" analyze --format html -o "$DIR/before.html" "$DIR/before.plt"
"$PERFLAB" analyze --format html -o "$DIR/after.html" "$DIR/after.plt"
"$PERFLAB" analyze --format json -o "$DIR/before.json" "$DIR/before.plt"

say "before/after: $RUNS runs per side, the recorded runs left out (baseline → coalesce+pipeline)"
"$PERFLAB" compare "$(list before)" "$(list after)" | tee "$DIR/compare.txt"
# The page shows the same comparison as the table above.
"$PERFLAB" compare --format html -o "$DIR/compare.html" "$(list before)" "$(list after)"

say "model: what the baseline trace predicts for coalesce+pipeline"
"$PERFLAB" model --from "$DIR/before-tracer.plt" --mode coalesce+pipeline >"$DIR/model.txt"
cat "$DIR/model.txt"

say "done in $((SECONDS - start)) s (recorder: $recorder)"
echo "HTML report: $DIR/compare.html (the comparison above)"
echo "also: $DIR/before.html, $DIR/after.html; traces $DIR/before.plt, $DIR/after.plt"
