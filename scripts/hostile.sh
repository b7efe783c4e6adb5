#!/usr/bin/env bash
# Hostile classes of issue 12, replayed end to end against a built `ember`.
#
#   scripts/hostile.sh [--long] path/to/ember
#
# One function per class; each prints "ok: ..." per promise kept and "BROKEN: ..." per promise
# broken. Exit status: 0 when every promise held, 1 otherwise, 2 on a usage or setup error.
# Every ember call runs under `timeout`, so a hang is a broken promise, not a stuck script.
# The short form takes well under a minute on two cores; --long runs more trials.
# Works in a private temporary directory, removed at exit. Models are synthesized
# (`ember model synth`), so nothing outside the checkout is needed.
set -u -o pipefail

LONG=0
if [[ "${1:-}" == "--long" ]]; then
  LONG=1
  shift
fi
if [[ $# -ne 1 || ! -x "$1" ]]; then
  echo "usage: $0 [--long] path/to/ember" >&2
  exit 2
fi
EMBER="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ember-hostile-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
BROKEN=0
T=60  # seconds any single ember call may take

ok() { echo "ok: $*"; }
broken() {
  echo "BROKEN: $*" >&2
  BROKEN=$((BROKEN + 1))
}
ember() { timeout "$T" "$EMBER" "$@"; }
# Number of hidden temporaries (".<name>.tmp-*") left in a directory.
temps_in() { find "$1" -maxdepth 1 -name '.*.tmp-*' | wc -l; }
# A random delay in seconds below $1 milliseconds.
rand_delay() { printf '0.%03d' $((RANDOM % $1)); }

setup() {
  cd "$WORK" || exit 2
  ember model synth --arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 300 \
    --seed 7 -o small.gguf >/dev/null || { echo "setup: synth failed" >&2; exit 2; }
  # Big enough that a kill lands mid-write: ~13 MB of payload in the KVC1 file.
  ember model synth --arch llama --layers 8 --hidden 256 --heads 8 --kv-heads 8 --ffn 512 --vocab 300 \
    --seed 7 -o big.gguf >/dev/null || { echo "setup: synth failed" >&2; exit 2; }
  printf 'the quick brown fox jumps over the lazy dog %.0s' $(seq 36) >prompt-long.txt
  printf 'the quick brown fox jumps over the lazy dog %.0s' $(seq 6) >prompt-short.txt
  ember kv export --model small.gguf --prompt-file prompt-short.txt --output small-snap >/dev/null &&
    ember kv export --model big.gguf --prompt-file prompt-long.txt --output big-snap >/dev/null &&
    ember kvc pack small-snap small.kvc >/dev/null ||
    { echo "setup: export/pack failed" >&2; exit 2; }
}

# Defect 1: two `kv export` to one --output at once give exactly one complete snapshot; the
# other writer fails saying the path exists; no temporary is left.
hostile_concurrent_exports() {
  local trials=$((LONG ? 50 : 10)) bad=0 t
  for ((t = 0; t < trials; t++)); do
    local dir="$WORK/conc/$t"
    mkdir -p "$dir"
    ember kv export --model small.gguf --prompt-file prompt-short.txt --output "$dir/snap" >"$dir/a.log" 2>&1 &
    local a=$!
    ember kv export --model small.gguf --prompt-file prompt-short.txt --output "$dir/snap" >"$dir/b.log" 2>&1 &
    local b=$!
    wait $a
    local ra=$?
    wait $b
    local rb=$?
    local wins=$(((ra == 0) + (rb == 0)))
    local loser_log="$dir/b.log"
    ((rb == 0)) && loser_log="$dir/a.log"
    if ((wins != 1)); then
      broken "concurrent exports, trial $t: $wins writers succeeded (exit $ra, $rb), expected 1"
      bad=1
    elif ! grep -q "snap: already exists" "$loser_log"; then
      broken "concurrent exports, trial $t: the losing writer did not say the path exists: $(tail -1 "$loser_log")"
      bad=1
    elif ! ember kv verify "$dir/snap" >/dev/null 2>&1; then
      broken "concurrent exports, trial $t: the published snapshot fails kv verify"
      bad=1
    elif (($(temps_in "$dir") != 0)); then
      broken "concurrent exports, trial $t: $(temps_in "$dir") temporaries left"
      bad=1
    fi
  done
  ((bad)) || ok "concurrent exports: $trials trials of 2 writers, one complete snapshot and one 'already exists' each"
}

# Defects 1 and 10: kill -9 at random moments of forced rewrites. After every kill the path
# holds the old or the new complete artifact (never nothing, never a partial one); the next
# write leaves no temporary behind.
# kill_loop NAME MAX_DELAY_MS VERIFY_CMD... -- WRITE_CMD...
kill_loop() {
  local name=$1 max_ms=$2
  shift 2
  local verify=() write=()
  while [[ $1 != -- ]]; do verify+=("$1"); shift; done
  shift
  write=("$@")
  local kills=$((LONG ? 50 : 12)) bad=0 i mid=0
  for ((i = 0; i < kills; i++)); do
    "$EMBER" "${write[@]}" --force >/dev/null 2>&1 &
    local pid=$!
    sleep "$(rand_delay "$max_ms")"
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    (($(temps_in "$WORK/kill") > 0)) && mid=$((mid + 1))
    if ! ember "${verify[@]}" >/dev/null 2>&1; then
      broken "$name: after kill $i the output is missing or fails verification"
      bad=1
      break
    fi
  done
  ember "${write[@]}" --force >/dev/null 2>&1 || { broken "$name: the write after the kills failed"; bad=1; }
  local left
  left=$(temps_in "$WORK/kill")
  if ((left != 0)); then
    broken "$name: $left temporaries left after $kills kills and one more write"
    bad=1
  fi
  ((bad)) || ok "$name: $kills kill -9s ($mid of them mid-write), the output complete after each, none left after the next write"
}

hostile_kill_loops() {
  mkdir -p "$WORK/kill"
  ember kvc pack big-snap kill/out.kvc >/dev/null || { broken "kill loops: first pack failed"; return; }
  kill_loop "kill -9 of kvc pack --force" 150 kvc verify kill/out.kvc -- kvc pack big-snap kill/out.kvc
  ember kv export --model small.gguf --prompt-file prompt-short.txt --output kill/snap >/dev/null ||
    { broken "kill loops: first export failed"; return; }
  kill_loop "kill -9 of kv export --force" 150 kv verify kill/snap -- \
    kv export --model small.gguf --prompt-file prompt-short.txt --output kill/snap
}

# Defect 2: a FIFO as any input is refused at once, naming it (no writer ever appears).
# fifo_case DESCRIPTION FIFO_PATH CMD...
fifo_case() {
  local what=$1 fifo=$2
  shift 2
  local out rc
  out=$(timeout 10 "$EMBER" "$@" 2>&1)
  rc=$?
  if ((rc == 124 || rc == 137)); then
    broken "FIFO as $what: hung (killed after 10 s): ember $*"
  elif ((rc == 0)); then
    broken "FIFO as $what: exit 0: ember $*"
  elif [[ $out != *"$fifo"* ]]; then
    broken "FIFO as $what: the message does not name the FIFO: $(tail -1 <<<"$out")"
  else
    ok "FIFO as $what refused (exit $rc)"
  fi
}

hostile_fifo_inputs() {
  local d="$WORK/fifo"
  mkdir -p "$d"
  mkfifo "$d/model.gguf" "$d/tokenizer.json" "$d/prompt.txt" "$d/state.kvc"
  for part in keys.f16le values.f16le manifest.json; do
    cp -r small-snap "$d/snap-$part"
    rm "$d/snap-$part/$part"
    mkfifo "$d/snap-$part/$part"
  done
  fifo_case "GGUF (model inspect)" "$d/model.gguf" model inspect "$d/model.gguf"
  fifo_case "GGUF (kv export --model)" "$d/model.gguf" kv export --model "$d/model.gguf" --prompt hi --output "$d/o1"
  fifo_case "tokenizer.json" "$d/tokenizer.json" kv export --model small.gguf --tokenizer "$d/tokenizer.json" \
    --prompt hi --output "$d/o2"
  fifo_case "--prompt-file" "$d/prompt.txt" kv export --model small.gguf --prompt-file "$d/prompt.txt" --output "$d/o3"
  fifo_case ".kvc (kvc verify)" "$d/state.kvc" kvc verify "$d/state.kvc"
  fifo_case ".kvc (kv replay --snapshot)" "$d/state.kvc" kv replay --model small.gguf --snapshot "$d/state.kvc" -n 1
  for part in keys.f16le values.f16le manifest.json; do
    fifo_case "snapshot $part (kv verify)" "$d/snap-$part/$part" kv verify "$d/snap-$part"
    fifo_case "snapshot $part (kvc pack)" "$d/snap-$part/$part" kvc pack "$d/snap-$part" "$d/p-$part.kvc"
  done
}

# Sealed manifests: an edit that breaks no rule (the resume token moved by one, the two payloads
# swapped with their hashes, a mapped cache relabelled native) is refused by kv verify and
# kv replay, naming the seal; --expect catches an edit that recomputed the seal too.
hostile_manifest_edits() {
  local d="$WORK/edits"
  mkdir -p "$d"
  local seal
  seal=$(ember kv verify small-snap | sed -n 's/^seal //p')
  [[ ${#seal} -eq 64 ]] || { broken "kv verify printed no seal"; return; }
  edit() {  # edit NAME PYTHON-STATEMENT [reseal]: a copy of small-snap with its manifest edited
    rm -rf "$d/$1"; cp -r small-snap "$d/$1"
    python3 - "$d/$1/manifest.json" "$2" "${3:-}" <<'PY'
import hashlib, json, sys
path, stmt, reseal = sys.argv[1:]
j = json.load(open(path))
exec(stmt)
if reseal:
    body = {k: v for k, v in j.items() if k not in ("seal", "signature")}
    j["seal"] = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
open(path, "w").write(json.dumps(j, indent=2) + "\n")
PY
  }
  expect_refused() {  # expect_refused WHAT DIR NEEDLE [verify flags...]
    local what=$1 dir=$2 needle=$3 out rc
    shift 3
    out=$(ember kv verify "$dir" "$@" 2>&1); rc=$?
    if [[ $rc -ne 0 && "$out" == *"$needle"* ]]; then ok "manifest edit refused: $what"; else broken "manifest edit accepted or misnamed ($what): rc $rc: $(echo "$out" | tail -1)"; fi
  }
  edit resume 'j["resume"]["token"] += 1; j["proof"]["witness_tokens"][0] = j["resume"]["token"]'
  expect_refused "resume token + 1" "$d/resume" "seal: expected"
  out=$(ember kv replay --model small.gguf --snapshot "$d/resume" -n 1 2>&1) && broken "kv replay used an edited manifest" || ok "kv replay refuses the edited manifest"
  edit swap 'j["payload"]["keys"]["sha256"], j["payload"]["values"]["sha256"] = j["payload"]["values"]["sha256"], j["payload"]["keys"]["sha256"]'
  mv "$d/swap/keys.f16le" "$d/swap/x"; mv "$d/swap/values.f16le" "$d/swap/keys.f16le"; mv "$d/swap/x" "$d/swap/values.f16le"
  expect_refused "payloads swapped with their hashes" "$d/swap" "seal: expected"
  edit resealed 'j["resume"]["token"] += 1; j["proof"]["witness_tokens"][0] = j["resume"]["token"]' reseal
  expect_refused "re-sealed edit against --expect" "$d/resealed" "(--expect)" --expect "$seal"
  # The version 2 proof (docs/formats/kv-snapshot-v1.md): each edit re-sealed, so its own rule
  # (or the payload pass) names it.
  edit proof-hex 'j["proof"]["blocks"][0] = "X" * 64' reseal
  expect_refused "proof block not hex" "$d/proof-hex" "proof.blocks[0]: expected 64 lowercase hex"
  edit proof-count 'j["proof"]["blocks"].append(j["proof"]["blocks"][0])' reseal
  expect_refused "proof with a block too many" "$d/proof-count" "proof.blocks: expected"
  edit proof-block 'j["proof"]["blocks"][0] = "0" * 64' reseal
  expect_refused "proof block of other rows" "$d/proof-block" "proof.blocks[0]: expected 0000"
  edit proof-size 'j["proof"]["block_positions"] = 8' reseal
  expect_refused "proof block size" "$d/proof-size" "proof.block_positions: expected 16"
  edit proof-logits 'j["proof"]["boundary_logits_sha256"] = "abc"' reseal
  expect_refused "boundary logits hash not hex" "$d/proof-logits" "proof.boundary_logits_sha256: expected 64 lowercase hex"
  edit proof-v1 'j["version"] = 1' reseal
  expect_refused "a proof in a version 1 manifest" "$d/proof-v1" "proof: expected no such key"
  edit proof-none 'del j["proof"]' reseal
  expect_refused "no proof in a version 2 manifest" "$d/proof-none" "proof"
  edit version4 'j["version"] = 4' reseal
  expect_refused "version 4" "$d/version4" "version: expected 1..3 (this reader), found 4"
  # The version 3 witness (kv/witness.h): all of it or none, from the resume token, one hash a
  # layer; and a resealed witness of other values is caught by the spot check, naming the layer.
  edit witness-first 'j["proof"]["witness_tokens"][0] = (j["resume"]["token"] + 1) % j["model"]["vocab_size"]' reseal
  expect_refused "witness not starting at the resume token" "$d/witness-first" "proof.witness_tokens[0]: expected"
  edit witness-v2 'j["version"] = 2' reseal
  expect_refused "a witness in a version 2 manifest" "$d/witness-v2" "expected no such key"
  edit witness-partial 'del j["proof"]["witness_logits_sha256"]' reseal
  expect_refused "a witness without its logits hash" "$d/witness-partial" "proof.witness_logits_sha256: expected"
  edit witness-layers 'j["proof"]["witness_attention_sha256"].pop()' reseal
  expect_refused "a witness missing a layer" "$d/witness-layers" "proof.witness_attention_sha256: expected"
  edit witness-length 'j["proof"]["witness_length"] = 100000' reseal
  expect_refused "a witness too long" "$d/witness-length" "proof.witness_length: expected"
  edit witness-other 'j["proof"]["witness_attention_sha256"][1] = "0" * 64' reseal
  expect_refused "a resealed witness of other values (--spot)" "$d/witness-other" \
    "first in the attention scores or output of layer 1" --model small.gguf --spot 1
  out=$(ember kv verify small-snap --spot 2 2>&1); rc=$?
  if [[ $rc -eq 2 && "$out" == *"--spot: expected --model"* ]]; then ok "kv verify --spot without --model: exit 2"
  else broken "kv verify --spot without --model: rc $rc: $out"; fi
}

# Strings from files never reach the terminal raw: an ESC sequence and a NUL in a manifest
# field come back escaped, on one line.
hostile_terminal_injection() {
  local d="$WORK/tty"
  rm -rf "$d"; cp -r small-snap "$d"
  python3 - "$d/manifest.json" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p)); j["model"]["architecture"] = "\u001b[2J\u0000x\ny"
open(p, "w").write(json.dumps(j, indent=2))
PY
  local out
  out=$(ember kv verify "$d" 2>&1)
  if [[ "$out" == *$'\e'* || "$out" != *'\x1b[2J'* ]]; then broken "terminal injection: raw ESC or unescaped field: $out"
  else ok "terminal injection: ESC/NUL/newline from a manifest field are escaped"; fi
}

# llama.cpp state files (docs/formats/llamacpp-state.md): export -> import keeps the K/V bits;
# a truncated, extended or FIFO state is refused naming the field (nothing written, no
# blocking); a foreign cache is never accepted as native.
hostile_llamacpp_state() {
  local d="$WORK/llamacpp" out
  mkdir -p "$d"
  ember kv export-llamacpp small-snap -o "$d/s.seq" >/dev/null || { broken "export-llamacpp failed"; return; }
  ember kv import-llamacpp "$d/s.seq" --model small.gguf -o "$d/back" >/dev/null || { broken "import-llamacpp failed"; return; }
  if [[ "$(sed -n 's/.*"sha256": "\(.*\)".*/\1/p' small-snap/manifest.json | tail -2)" == \
        "$(sed -n 's/.*"sha256": "\(.*\)".*/\1/p' "$d/back/manifest.json" | tail -2)" ]]; then
    ok "llamacpp: export -> import keeps the K/V payload hashes"
  else broken "llamacpp: round trip changed K/V"; fi
  head -c 300 "$d/s.seq" >"$d/cut.seq"
  cp "$d/s.seq" "$d/long.seq"; printf 'x' >>"$d/long.seq"
  mkfifo "$d/fifo.seq"
  for c in "cut.seq:truncated" "long.seq:trailing bytes" "fifo.seq:FIFO"; do
    out=$(ember kv import-llamacpp "$d/${c%%:*}" --model small.gguf -o "$d/out-${c%%:*}" 2>&1)
    if [[ $? -eq 2 && "$out" == *"${c#*:}"* && ! -e "$d/out-${c%%:*}" ]]; then ok "llamacpp: ${c%%:*} refused (${c#*:})"
    else broken "llamacpp: ${c%%:*} not refused as expected: $(echo "$out" | tail -1)"; fi
  done
  out=$(ember kv replay --model small.gguf --snapshot "$d/back" -n 1 2>&1) && broken "kv replay took a foreign cache without --allow-foreign" ||
    { [[ "$out" == *"--allow-foreign"* ]] && ok "llamacpp: kv replay refuses a foreign cache, naming --allow-foreign" || broken "llamacpp: replay refusal unnamed: $out"; }
  ember kv verify "$d/back" >/dev/null 2>&1 && broken "kv verify accepted a foreign cache as native" || ok "llamacpp: kv verify (native) refuses a foreign cache"
}

# kv doctor (issue 31): every bad input ends with a verdict (exit 1) or a named refusal (exit
# 2), never a hang or an allocation the file cannot back; a sidecar FIFO is not waited on.
hostile_kv_doctor() {
  local d="$WORK/doctor" out rc
  mkdir -p "$d"
  ember kv export-llamacpp small-snap -o "$d/s.seq" >/dev/null || { broken "doctor: export-llamacpp failed"; return; }
  head -c 300 "$d/s.seq" >"$d/cut.seq"
  mkfifo "$d/fifo.seq"
  ln -s s.seq "$d/link.seq"
  # n_token_count 0xffffffff in an otherwise tiny file.
  printf 'qsgg\x03\x00\x00\x00\xff\xff\xff\xff' >"$d/huge.seq"
  printf 'qsgX\x03\x00\x00\x00' >"$d/junk.seq"
  cp "$d/s.seq" "$d/side.seq"; mkfifo "$d/side.seq.ember.json"
  cp "$d/s.seq" "$d/bad.seq"; printf '{"format": 1, "format": 2}' >"$d/bad.seq.ember.json"
  for c in "s.seq:0:compatible" "link.seq:0:compatible" "side.seq:0:compatible" "cut.seq:1:truncated" \
           "huge.seq:1:n_token_count" "fifo.seq:2:FIFO" "junk.seq:2:magic" "bad.seq:2:bad.seq.ember.json"; do
    IFS=: read -r f want needle <<<"$c"
    out=$(ember kv doctor "$d/$f" --model small.gguf 2>&1); rc=$?
    if [[ $rc -eq $want && "$out" == *"$needle"* ]]; then ok "doctor: $f exits $want ($needle)"
    else broken "doctor: $f: exit $rc, expected $want with '$needle': $(echo "$out" | head -1)"; fi
  done
}

# The store, issue 35 (docs/store.md): a FIFO planted as a state's hit counter neither blocks
# nor fails a read (`store get`, `kv replay --store`); hit counting is best effort.
hostile_store_fifo_hits() {
  local d="$WORK/store-fifo" out rc seal
  mkdir -p "$d"
  ember store put "dir:$d/s" small-snap >/dev/null || { broken "store: put failed"; return; }
  seal=$(ember kv verify small-snap | sed -n 's/^seal //p')
  rm -f "$d/s/ember/v1/s/{$seal}/hits"
  mkfifo "$d/s/ember/v1/s/{$seal}/hits"
  out=$(timeout 10 "$EMBER" store get "dir:$d/s" "$seal" -o "$d/got" 2>&1); rc=$?
  if ((rc == 124)); then broken "store: get hung on a FIFO hits counter"
  elif ((rc != 0)); then broken "store: get failed on a FIFO hits counter: $(tail -1 <<<"$out")"
  else ok "store: get served a state whose hits counter is a FIFO"; fi
  # The same prompt as small-snap: kv replay --store finds it (a hit, not a recompute).
  out=$(timeout 20 "$EMBER" kv replay --model small.gguf --store "dir:$d/s" --prompt-file prompt-short.txt -n 1 \
    --on-bad-state recompute 2>&1); rc=$?
  if ((rc == 124)); then broken "store: kv replay --store hung on a FIFO hits counter"
  elif ((rc != 0)) || [[ "$out" != *"store hit"* ]]; then broken "store: kv replay --store did not hit: $(tail -1 <<<"$out")"
  else ok "store: kv replay --store restored from a state whose hits counter is a FIFO"; fi
}

# The store, issue 35: a name in one model's namespace that holds another model's seal is
# refused by get (naming both namespaces), reported by verify, removed by gc.
hostile_store_cross_namespace() {
  local d="$WORK/store-ns" out rc ns_a ns_b seal_b
  mkdir -p "$d"
  ns_a=$(ember store put "dir:$d/s" small-snap --name a | sed -n 's|^name \(.*\)/a$|\1|p')
  out=$(ember store put "dir:$d/s" big-snap --name b) || { broken "store: put failed"; return; }
  ns_b=$(sed -n 's|^name \(.*\)/b$|\1|p' <<<"$out")
  seal_b=$(sed -n 's/^seal //p' <<<"$out")
  [[ ${#ns_a} -eq 32 && ${#ns_b} -eq 32 && "$ns_a" != "$ns_b" ]] || { broken "store: namespaces not printed"; return; }
  mkdir -p "$d/s/ember/v1/n/{$ns_a}/name"
  printf '%s' "$seal_b" >"$d/s/ember/v1/n/{$ns_a}/name/evil"
  out=$(ember store get "dir:$d/s" "$ns_a/evil" -o "$d/got" 2>&1); rc=$?
  if ((rc != 0)) && [[ "$out" == *"$ns_a"* && "$out" == *"$ns_b"* && ! -e "$d/got" ]]; then
    ok "store: a name is not followed into another model's namespace"
  else broken "store: get followed a name across namespaces (rc $rc): $(tail -1 <<<"$out")"; fi
  out=$(ember store verify "dir:$d/s" 2>&1); rc=$?
  if ((rc == 1)) && [[ "$out" == *"misplaced-name"* ]]; then ok "store: verify reports the misplaced name"
  else broken "store: verify missed the misplaced name (rc $rc): $(tail -1 <<<"$out")"; fi
  if ember store gc "dir:$d/s" >/dev/null && ember store verify "dir:$d/s" >/dev/null; then
    ok "store: gc removes the misplaced name"
  else broken "store: gc left the misplaced name"; fi
}

# The store, issue 35: a file as a dir: store and negative gc ages and sizes are refused, one
# line naming the path or flag.
hostile_store_bad_paths() {
  local out rc args
  out=$(ember store ls "dir:$WORK/small.gguf" 2>&1); rc=$?
  if ((rc == 2)) && [[ "$out" == *"expected a directory"* ]]; then ok "store: ls of dir:FILE refused"
  else broken "store: ls of dir:FILE (rc $rc): $out"; fi
  for args in "--older-than -5" "--max-bytes -1"; do
    # shellcheck disable=SC2086
    out=$(ember store gc "dir:$WORK/store-none" $args 2>&1); rc=$?
    if ((rc == 2)) && [[ "$out" == *"${args% *}"* && $(wc -l <<<"$out") -eq 1 ]]; then ok "store: gc $args refused"
    else broken "store: gc $args (rc $rc): $out"; fi
  done
}

# Issue 35 (round 2), the non-store classes, short: --force on a directory that is not an ember
# artifact, or on the working directory's parent; a writer past `ulimit -f`; an 83 MiB
# safetensors header; config.json values that overflow f32; a perturbation that overflows f16;
# numeric flags out of range; a control character in an echoed output path.
hostile_round2() {
  local d="$WORK/round2" out rc
  mkdir -p "$d/vd/sub" && echo a >"$d/vd/a.txt"
  out=$(ember kv export --model small.gguf --prompt hi --output "$d/vd" --force 2>&1); rc=$?
  if [[ $rc -eq 2 && "$out" == *"--force: expected an ember snapshot"*"found 'a.txt', 'sub' (a directory)"* && -f "$d/vd/a.txt" && -d "$d/vd/sub" ]]; then
    ok "round2: kv export --force refuses a foreign directory by name and leaves it"
  else broken "round2: kv export --force on a foreign directory: exit $rc: $out"; fi
  out=$(ember kv export-safetensors small-snap --layout vllm -o "$d/vd" --force 2>&1); rc=$?
  [[ $rc -eq 2 && -f "$d/vd/a.txt" ]] && ok "round2: export-safetensors --layout vllm --force refuses it too" ||
    broken "round2: export-safetensors --force on a foreign directory: exit $rc: $out"
  mkdir -p "$d/up/here"
  out=$(cd "$d/up/here" && timeout "$T" "$EMBER" kv export --model "$WORK/small.gguf" --prompt hi --output "$d/up" --force 2>&1); rc=$?
  [[ $rc -eq 2 && "$out" == *"never the working directory or one of its ancestors"* && -d "$d/up/here" ]] &&
    ok "round2: --force never replaces an ancestor of the working directory" ||
    broken "round2: --force on the working directory's parent: exit $rc: $out"
  # ulimit -f (1 KiB blocks in bash): 16 KiB, less than the big snapshot's first payload.
  out=$( (ulimit -f 16; exec timeout "$T" "$EMBER" kv export --model big.gguf --prompt-file prompt-long.txt --output "$d/fsz") 2>&1); rc=$?
  [[ $rc -eq 2 && "$out" == *"file size limit"* && $(find "$d" -maxdepth 1 -name '*fsz*' | wc -l) -eq 0 ]] &&
    ok "round2: a writer past ulimit -f says so on one line and leaves nothing" ||
    broken "round2: ulimit -f: exit $rc: $out"
  # 83 MiB of header ("{"a":[{},{},...") under the 100 MiB length bound: refused fast, small.
  { printf '\x00\x00\x30\x05\x00\x00\x00\x00{"a":['; yes '{},' | tr -d '\n' | head -c $((0x05300000 - 6)); } >"$d/big.safetensors"
  /usr/bin/time -f '%M %e' -o "$d/st.time" timeout "$T" "$EMBER" kv import-safetensors "$d/big.safetensors" \
    --model small.gguf --prompt hi -o "$d/st" >"$d/st.log" 2>&1; rc=$?
  local rss secs
  rss=$(tail -1 "$d/st.time" | cut -d' ' -f1); secs=$(tail -1 "$d/st.time" | cut -d' ' -f2)
  [[ $rc -eq 2 && $(grep -c "at most 1048576 values" "$d/st.log") -eq 1 && $rss -lt 409600 ]] &&
    ok "round2: an 83 MiB safetensors header is refused in ${secs} s, peak RSS ${rss} KiB" ||
    broken "round2: 83 MiB safetensors header: exit $rc, ${rss} KiB, ${secs} s: $(tail -1 "$d/st.log")"
  rm -f "$d/big.safetensors"
  mkdir -p "$d/hf"
  for c in 'rope_theta:1e39' 'rms_norm_eps:1e-50'; do
    printf '{"model_type":"llama","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":128,"vocab_size":300,"rms_norm_eps":1e-5,"%s":%s}\n' \
      "${c%%:*}" "${c#*:}" | sed 's/"rms_norm_eps":1e-5,"rms_norm_eps"/"rms_norm_eps"/' >"$d/hf/config.json"
    out=$(ember model import-hf "$d/hf" -o "$d/hf.gguf" 2>&1); rc=$?
    [[ $rc -eq 2 && "$out" == *"config.json: ${c%%:*}: expected"*"as f32"* && ! -e "$d/hf.gguf" ]] &&
      ok "round2: import-hf refuses ${c/:/ } (checked as the f32 the GGUF stores)" ||
      broken "round2: import-hf ${c/:/ }: exit $rc: $out"
  done
  out=$(ember kv perturb --snapshot small-snap --layer 0 --head 0 --part k --scale 65536 --receipt "$d/p.json" 2>&1); rc=$?
  [[ $rc -eq 2 && "$out" == *"inf from"* && ! -e "$d/p.json" ]] && ok "round2: kv perturb refuses a scale that overflows f16" ||
    broken "round2: kv perturb --scale 65536: exit $rc: $out"
  for f in '--temp -1' '--temp nan' '--seed 18446744073709551616' '--seed -1'; do
    # shellcheck disable=SC2086
    out=$(ember run --model small.gguf --prompt hi -n 1 $f 2>&1); rc=$?
    [[ $rc -eq 2 && "$out" == "ember: ${f%% *}: expected"*", found ${f#* }"* ]] && ok "round2: run $f refused by flag" ||
      broken "round2: run $f: exit $rc: $out"
  done
  out=$(ember kv export --model small.gguf --prompt hi --output "$d/o"$'\e[2J' 2>&1); rc=$?
  [[ $rc -eq 0 && "$out" != *$'\e'* && "$out" == *'o\x1b[2J'* ]] && ok "round2: kv export echoes a control character in its output path escaped" ||
    broken "round2: kv export echoed a control character raw (exit $rc)"
}

# Issue 34: `model synth --outliers` and `study sweep --ttft-case` refuse a bad value in one
# line naming the flag, before anything is written or read; a spec's control characters are
# escaped; the same command writes the same bytes.
hostile_synth_outliers() {
  local d="$WORK/outliers" out rc spec
  mkdir -p "$d"
  local geo=(model synth --arch qwen2 --qkv-bias --layers 1 --hidden 64 --heads 2 --kv-heads 1 --ffn 64 --vocab 300 --seed 3)
  for spec in 'pairs=2' 'scale=9' 'pairs=0,scale=2' 'pairs=2,scale=1' 'sink=-1' 'sink=nan' 'pairs=2,pairs=3,scale=2' \
    'channels=4' '' 'pairs=99,scale=2' $'sink=1\e[2J'; do
    out=$(ember "${geo[@]}" --outliers "$spec" -o "$d/x.gguf" 2>&1); rc=$?
    if ((rc == 2)) && [[ "$out" == "ember: synth: --outliers: expected "* && $(wc -l <<<"$out") -eq 1 &&
      "$out" != *$'\e'* && ! -e "$d/x.gguf" ]]; then ok "outliers: '${spec//$'\e'/ESC}' refused in one line"
    else broken "outliers: '${spec//$'\e'/ESC}' (rc $rc): $out"; fi
  done
  ember "${geo[@]}" --outliers pairs=2,scale=20,sink=8 -o "$d/a.gguf" >/dev/null &&
    ember "${geo[@]}" --outliers sink=8,scale=20,pairs=2 -o "$d/b.gguf" >/dev/null && cmp -s "$d/a.gguf" "$d/b.gguf" &&
    ok "outliers: the same spec in another order writes the same bytes" || broken "outliers: not byte-identical"
  for spec in fast stored; do
    local extra=()
    [[ $spec == stored ]] && extra=(--no-stored-timing)
    out=$(ember study sweep --source "$d/nope.gguf" --target "$d/nope.gguf" --prompts "$d/nope.txt" \
      --fidelity-budget 'kl<=0.1' --ttft-case "$spec" "${extra[@]}" 2>&1); rc=$?
    if ((rc == 2)) && [[ "$out" == "ember: study sweep: --ttft-case: expected "* && $(wc -l <<<"$out") -eq 1 ]]; then
      ok "sweep: --ttft-case $spec ${extra[*]} refused before any model is read"
    else broken "sweep: --ttft-case $spec (rc $rc): $out"; fi
  done
}

# Issue 34: study kv-quant's new flags refused with exit 2, one line naming the flag; its
# certificate validates, and an edited one (a figure changed, the seal not recomputed) does not.
hostile_kv_quant() {
  local out rc flag
  printf 'the quick brown fox jumps over the lazy dog\nthe lazy dog sleeps under the brown tree all day\n' >kvq-prompts.txt
  for flag in "--budget kl<0.1" "--budget kl<=0.1,top1>=2" "--mode inloop" "--groups all" "--chunks 2" \
    "--certificate kvq-none.json"; do
    # shellcheck disable=SC2086
    out=$(ember study kv-quant --model small.gguf --prompts kvq-prompts.txt --continuation 2 $flag 2>&1); rc=$?
    if ((rc == 2)) && [[ "$out" == *"${flag%% *}"* && $(wc -l <<<"$out") -eq 1 ]]; then ok "kv-quant: $flag refused"
    else broken "kv-quant: $flag (rc $rc): $out"; fi
  done
  if ember study kv-quant --model small.gguf --prompts kvq-prompts.txt --continuation 2 --types q8_0 \
    --budget "kl<=10" --certificate kvq-cert.json >/dev/null 2>&1 && ember contract validate kvq-cert.json >/dev/null 2>&1; then
    ok "kv-quant: certificate written and valid"
  else broken "kv-quant: certificate not written or not valid"; fi
  python3 -c "import json; d = json.load(open('kvq-cert.json')); d['measured']['held_out']['kl_mean'] = 0.0; json.dump(d, open('kvq-cert-edited.json', 'w'))"
  out=$(ember contract validate kvq-cert-edited.json 2>&1); rc=$?
  if ((rc == 1)) && [[ "$out" == *"/seal: expected"* ]]; then ok "kv-quant: edited certificate refused by its seal"
  else broken "kv-quant: edited certificate (rc $rc): $out"; fi
}

main() {
  local start=$SECONDS
  setup
  hostile_concurrent_exports
  hostile_kill_loops
  hostile_fifo_inputs
  hostile_manifest_edits
  hostile_terminal_injection
  hostile_llamacpp_state
  hostile_kv_doctor
  hostile_store_fifo_hits
  hostile_store_cross_namespace
  hostile_store_bad_paths
  hostile_round2
  hostile_synth_outliers
  hostile_kv_quant
  # Resource limits (threads, positions, huge -n): their own script, same contract.
  if bash "$HERE/hostile-limits.sh" "$EMBER" "$HERE/../../shared/models" "$WORK/limits"; then ok "hostile-limits.sh"; else broken "hostile-limits.sh"; fi
  echo "hostile.sh: $BROKEN broken promise(s), $((SECONDS - start)) s"
  ((BROKEN == 0))
}

main
