#!/bin/sh
# gate.sh: perflab's own performance gate. It builds perflab, starts a venusd server on a unix
# socket in a temporary directory, runs the llm workload in baseline and coalesce+pipeline
# modes interleaved (A B A B ...) over an emulated link, and gates the per-pair ratios
# (coalesce+pipeline / baseline) against bench/gate-baseline.json with bench/gate.conf.
#
#   bench/gate.sh                 gate (exit 0 pass or inconclusive, 1 regression, 2 bad input)
#   GATE_UPDATE=1 bench/gate.sh   measure and write a new bench/gate-baseline.json
#
# Knobs: GATE_RUNS (pairs, default 8, at least 6), GATE_TOKENS (default 16), GATE_DELAY (link
# delay each way, default 2ms: long enough that the loop is round-trip bound), GATE_FORMAT
# (table, markdown, json), GATE_MODE (the mode gated against baseline, default
# coalesce+pipeline; GATE_MODE=coalesce shows what a broken pipeline looks like), PERFLAB (a
# perflab binary to use instead of building one).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
runs=${GATE_RUNS:-8}
tokens=${GATE_TOKENS:-16}
delay=${GATE_DELAY:-2ms}
format=${GATE_FORMAT:-table}
mode_b=${GATE_MODE:-coalesce+pipeline}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/perflab-gate.XXXXXX")
srv=""

cleanup() {
	if [ -n "$srv" ]; then
		kill "$srv" 2>/dev/null || true
		wait "$srv" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

if [ -n "${PERFLAB:-}" ]; then
	bin=$PERFLAB
else
	bin=$tmp/perflab
	(cd "$root" && go build -o "$bin" ./cmd/perflab)
fi

sock=$tmp/venus.sock
"$bin" venus serve --listen "unix://$sock" 2>"$tmp/serve.log" &
srv=$!
i=0
while [ ! -S "$sock" ]; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 "$srv" 2>/dev/null; then
		echo "gate.sh: venus server did not start:" >&2
		cat "$tmp/serve.log" >&2
		exit 2
	fi
	sleep 0.05
done

cd "$tmp"
refs=""
cur=""
n=1
while [ $n -le "$runs" ]; do
	for mode in baseline "$mode_b"; do
		out=$(echo "$mode" | tr -c 'a-z\n' '-')$n.json
		[ "$mode" = baseline ] || out=current$n.json
		if ! "$bin" venus run --connect "unix://$sock" --workload llm --tokens "$tokens" \
			--mode "$mode" --delay "$delay" --json >"$out" 2>"$out.err"; then
			echo "gate.sh: venus run --mode $mode failed:" >&2
			cat "$out.err" >&2
			exit 2
		fi
	done
	refs="$refs${refs:+,}baseline$n.json"
	cur="$cur current$n.json"
	n=$((n + 1))
done

if [ "${GATE_UPDATE:-}" = 1 ]; then
	# shellcheck disable=SC2086
	"$bin" gate --update --baseline "$root/bench/gate-baseline.json" --relative-to "$refs" $cur
	exit 0
fi
# shellcheck disable=SC2086
"$bin" gate --baseline "$root/bench/gate-baseline.json" --config "$root/bench/gate.conf" \
	--format "$format" --relative-to "$refs" $cur
