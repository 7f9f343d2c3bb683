#!/usr/bin/env bash
# A/B of `minivllm bench` under environment settings, interleaved: each round runs every variant once,
# so that a machine's drift over the call falls on all variants alike (docs/PERFORMANCE.md compares
# variants only within one run). Prints a line per run as it finishes, then each variant's median
# and its difference from the first variant's. Every line is flushed as written, so the output can go
# through a pipe to a device call's log without being held back (a grep between a long run and a time
# limit once lost a whole call's output).
#
#   tools/bench_ab.sh --model DIR [--bin PATH] [--rounds N] [--args "BENCH ARGS"] VARIANT...
#
# VARIANT: NAME or NAME:VAR=VALUE[,VAR=VALUE...], e.g.
#   tools/bench_ab.sh --model /tmp/m --rounds 2 --args "--decode-tokens 0" \
#     base order_off:MINIVLLM_DECODE_SEQ_ORDER=0 one_tile:MINIVLLM_DECODE_MMA_TILES=1,MINIVLLM_DECODE_SEQ_ORDER=0
# bin=PATH in a variant runs another build's binary (e.g. old:bin=/tmp/b/minivllm.old): a knob's A/B
# inside one binary cannot see what the code carrying the knob costs (PERFORMANCE.md, "Stop 103").
# --bin: the minivllm binary (default: minivllm beside this script's build/release, else on PATH).
# --args: extra `minivllm bench` arguments, split on spaces (default "--decode-tokens 0").
# The figure is `throughput_tok_s` of `minivllm bench --json`, or `decode_tok_s` when the run has no
# throughput part (--num-seqs 0).
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin=""; model=""; rounds=1; args="--decode-tokens 0"; variants=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --args) args="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    --*) echo "bench_ab: unknown option $1" >&2; exit 2 ;;
    *) variants+=("$1"); shift ;;
  esac
done
[ -n "$model" ] || { echo "bench_ab: --model is required" >&2; exit 2; }
[ ${#variants[@]} -gt 0 ] || { echo "bench_ab: name at least one variant" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_ab: --rounds $rounds is not a positive integer" >&2; exit 2; }
if [ -z "$bin" ]; then
  bin="$here/build/release/minivllm"
  [ -x "$bin" ] || bin="$(command -v minivllm || true)"
fi
[ -x "$bin" ] || { echo "bench_ab: no minivllm binary (give --bin)" >&2; exit 2; }
for v in "${variants[@]}"; do
  name="${v%%:*}"
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "bench_ab: variant name '$name' must be letters, digits, . _ -" >&2; exit 2; }
  if [[ "$v" == *:* ]]; then
    IFS=',' read -r -a sets <<< "${v#*:}"
    for kv in "${sets[@]}"; do
      [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || { echo "bench_ab: '$kv' in variant $name is not VAR=VALUE" >&2; exit 2; }
      if [[ "$kv" == bin=* ]] && [ ! -x "${kv#bin=}" ]; then
        echo "bench_ab: variant $name: no executable ${kv#bin=}" >&2; exit 2
      fi
    done
  fi
done

read -r -a bench_args <<< "$args"
results=$(mktemp); trap 'rm -f "$results"' EXIT
status=0
for ((r = 1; r <= rounds; ++r)); do
  for v in "${variants[@]}"; do
    name="${v%%:*}"; sets=(); envs=(); run_bin="$bin"
    [[ "$v" == *:* ]] && IFS=',' read -r -a sets <<< "${v#*:}"
    for kv in "${sets[@]}"; do
      if [[ "$kv" == bin=* ]]; then run_bin="${kv#bin=}"; else envs+=("$kv"); fi
    done
    err=$(mktemp)
    json=$(env "${envs[@]}" "$run_bin" bench --model "$model" --json "${bench_args[@]}" 2>"$err" | tail -n 1)
    fig=$(python3 -c 'import json, sys
b = json.loads(sys.argv[1])
v = b.get("throughput_tok_s", b.get("decode_tok_s"))
t = b.get("time_s", b.get("decode_time_s", 0.0))
print("%.1f %.3f" % (v, t))' "$json" 2>/dev/null)
    if [ -z "$fig" ]; then
      echo "$name round $r: failed: $(tail -n 2 "$err" | tr '\n' ' ')"
      status=1
    else
      echo "$name round $r: ${fig% *} tok/s, ${fig#* } s"
      echo "$name ${fig% *}" >> "$results"
    fi
    rm -f "$err"
  done
done
python3 - "$results" "${variants[@]%%:*}" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, value = line.split()
    runs.setdefault(name, []).append(float(value))
names = sys.argv[2:]
base = statistics.median(runs[names[0]]) if names[0] in runs else None
for n in names:
    if n not in runs:
        print("%-20s no result" % n)
        continue
    med = statistics.median(runs[n])
    rel = " (%+.1f%% against %s)" % (100 * (med / base - 1), names[0]) if base and n != names[0] else ""
    print("%-20s median %.1f tok/s over %d run(s): %s%s" % (n, med, len(runs[n]), " / ".join("%.0f" % x for x in runs[n]), rel))
EOF
exit $status
