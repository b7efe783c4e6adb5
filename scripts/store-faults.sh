#!/usr/bin/env bash
# More kill -9 trials of `ember store put` than CTest runs (docs/store.md, "Faults"): against a
# redis-server this script starts on a free loopback port (and a dir: store), each trial kills
# a put at a random point, then checks that the state is whole or absent (`store get` + diff),
# that `store verify` names nothing but orphan chunks / stale markers / a dead put's
# temporary files, and that `store gc --grace 0` leaves a store that verifies clean.
#   scripts/store-faults.sh build/ember [trials=100]
set -euo pipefail
EMBER=${1:-build/ember}
TRIALS=${2:-100}
work=$(mktemp -d /tmp/ember-store-faults-XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --logfile "$work/redis.log" &
rpid=$!
trap 'kill $rpid 2>/dev/null; wait $rpid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
"$EMBER" model synth --arch qwen2 --layers 8 --hidden 256 --heads 4 --kv-heads 4 --ffn 256 --vocab 512 \
  --qkv-bias --type q8_0 --seed 3 -o "$work/m.gguf" >/dev/null
"$EMBER" kv export --model "$work/m.gguf" --prompt "$(printf 'kill -9 at a random point %.0s' $(seq 12))" \
  -o "$work/snap" >/dev/null
for uri in "redis://127.0.0.1:$port" "dir:$work/store"; do
  whole=0; none=0
  # One whole put, timed: kills land uniformly in [0, 1.2 x its duration].
  t0=$(date +%s%N)
  "$EMBER" store put "$uri" "$work/snap" --chunk-bytes 4096 >/dev/null
  full_us=$(( ($(date +%s%N) - t0) / 1000 ))
  "$EMBER" store rm "$uri" "$("$EMBER" store ls "$uri" --json | sed -n 's/.*"seal": "\(.*\)".*/\1/p')" >/dev/null
  for i in $(seq "$TRIALS"); do
    "$EMBER" store put "$uri" "$work/snap" --chunk-bytes 4096 >/dev/null 2>&1 &
    pid=$!
    delay_us=$(( (RANDOM * 32768 + RANDOM) % (full_us * 12 / 10 + 1) ))
    sleep "$(printf '%d.%06d' $((delay_us / 1000000)) $((delay_us % 1000000)))"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    findings=$("$EMBER" store verify "$uri" 2>/dev/null | grep -v -E '^(orphan-chunks|stale-pending|stale-temporary) |states ok' || true)
    if [ -n "$findings" ]; then echo "trial $i ($uri): $findings" >&2; exit 1; fi
    "$EMBER" store gc "$uri" --grace 0 >/dev/null
    "$EMBER" store verify "$uri" >/dev/null
    seal=$("$EMBER" store ls "$uri" --json | sed -n 's/.*"seal": "\(.*\)".*/\1/p')
    if [ -n "$seal" ]; then
      rm -rf "$work/got"
      "$EMBER" store get "$uri" "$seal" -o "$work/got" >/dev/null
      diff -r "$work/snap" "$work/got" >/dev/null
      "$EMBER" store rm "$uri" "$seal" >/dev/null
      whole=$((whole + 1))
    else
      none=$((none + 1))
    fi
  done
  echo "store-faults: $uri: $TRIALS kills (a whole put: $((full_us / 1000)) ms): $whole whole, $none absent, nothing partial"
done
