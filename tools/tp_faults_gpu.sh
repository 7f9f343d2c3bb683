#!/usr/bin/env bash
# Tensor-parallel faults on real GPUs (tests/tp/ checks the same on the CPU in CI):
#   a worker killed mid-run makes rank 0 fail naming rank 1 within 10 s; rank 0 killed (SIGKILL) or
#   signalled (SIGTERM, SIGINT) takes its worker with it; nothing is left in /dev/shm.
#   tools/tp_faults_gpu.sh MINIVLLM_BIN MODEL_DIR
set -uo pipefail
bin="${1:?minivllm binary}"; model="${2:?model dir}"
fail=0
shm_before=$(ls /dev/shm | sort)
prompts=$(python3 -c "print([[1 + i % 50, 2, 3, 4, 5, 6, 7, 8] for i in range(256)])" | tr -d ' ')
start() {  # a long run at world_size 2 (about a minute of decode); sets pid and worker
  "$bin" generate --model "$model" --tensor-parallel-size 2 --prompt-ids "$prompts" --max-tokens 3000 --ignore-eos \
    --temperature 0 --max-model-len 4096 --json >/tmp/tpf.out 2>/tmp/tpf.err &
  pid=$!
  for _ in $(seq 100); do
    worker=$(python3 -c "import os,sys
for p in os.listdir('/proc'):
    try:
        st = open('/proc/%s/stat' % p).read()
    except Exception:
        continue
    if st[st.rfind(')') + 2:].split()[1] == '$pid': print(p)" | head -n 1)
    [ -n "$worker" ] && break; sleep 0.1
  done
  sleep "${1:-15}"  # loading, warm-up, graphs: then mid-run
}
gone() { for _ in $(seq 100); do [ -d /proc/$1 ] && [ "$(awk '{print $3}' /proc/$1/stat 2>/dev/null)" != Z ] || return 0; sleep 0.05; done; return 1; }

start 20
t0=$(date +%s.%N); kill -9 "$worker"; wait $pid; rc=$?; t1=$(date +%s.%N)
secs=$(python3 -c "print(round($t1 - $t0, 2))")
echo "worker SIGKILL: rank 0 exit $rc after ${secs}s: $(head -c 400 /tmp/tpf.err)"
{ [ $rc -ne 0 ] && grep -q "rank 1" /tmp/tpf.err && python3 -c "import sys; sys.exit(0 if $secs < 10 else 1)"; } || { echo FAIL; cat /tmp/tpf.err; fail=1; }

for sig in KILL TERM INT; do
  start 20
  kill -s $sig $pid; wait $pid
  if gone "$worker"; then echo "rank 0 SIG$sig: worker $worker gone"; else echo "FAIL: worker outlived rank 0 (SIG$sig)"; fail=1; fi
done
sleep 1
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
[ "$(ls /dev/shm | sort)" = "$shm_before" ] && echo "/dev/shm unchanged" || { echo "FAIL: /dev/shm changed"; ls -la /dev/shm; fail=1; }
exit $fail
