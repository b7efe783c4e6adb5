#!/usr/bin/env bash
# `make demo`, the README's first command, as a test: scripts/demo.sh runs in a scratch
# directory and passes only when it exits 0 and its last line counts all 7 checks (the
# real-model ones need ../shared beside the checkout, as in CI; fewer is a failure, not a skip).
# Usage: demo_test.sh SCRIPTS/demo.sh BUILD/ember
set -u
demo=$1 ember=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
DEMO_DIR="$dir" bash "$demo" "$ember" > "$dir/out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || ! grep -q '^demo: OK (7 checks)' "$dir/out"; then
  cat "$dir/out"
  echo "demo_test: demo.sh exited $rc; expected 0 and 'demo: OK (7 checks)'"
  exit 1
fi
tail -n 1 "$dir/out"
