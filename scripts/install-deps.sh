#!/usr/bin/env bash
# Installs the Debian 12 packages ember builds and tests with. Idempotent: installs only
# what is missing, and does nothing (no network) when everything is present.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config  # toolchain
  clang                                         # libFuzzer targets
  libssl-dev          # SHA-256 (OpenSSL EVP)
  nlohmann-json3-dev  # manifests, receipts, tokenizer.json
  libcli11-dev        # command line
  libpcre2-dev        # Unicode pre-tokenizer regexes
  libicu-dev          # NFC normalization (the Qwen tokenizers normalize input to NFC)
  libeigen3-dev       # f64 ridge/affine solves
  libgtest-dev        # tests
  libbenchmark-dev    # bench/
  python3 python3-numpy python3-jsonschema  # python/ package, schema validation
  python3-venv python3-pip  # `pip install ./python` into a venv, offline (README; python/tests/test_packaging.py)
  time                # /usr/bin/time: peak RSS in scripts/hostile-limits.sh
  libhiredis-dev redis-server  # the shared KV store (ember store): client, and the real server its tests start
  python3-torch       # the PyTorch side of python/ember_kv (HF layouts, the torch parity gate)
  libcpp-httplib-dev  # ember serve's HTTP server (what llama-server uses)
  curl                # a real client in the server tests
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run the official OpenAI client in the server tests. Debian's packages unless
# a Node.js is already there (NodeSource's nodejs bundles npm and conflicts with Debian's npm).
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The official OpenAI Node client for the server tests (tests/serve_http), pinned by its
# package-lock.json; test-only, never shipped. Installed once (network only then).
clients="$(dirname "$0")/../tests/serve_http"
if [ ! -d "$clients/node_modules/openai" ]; then
  echo "installing: npm openai (tests/serve_http)"
  npm ci --prefix "$clients" --no-audit --no-fund --loglevel=error
fi
