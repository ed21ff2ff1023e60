#!/usr/bin/env bash
# Installs every Debian package argen needs to build, test and run.
# Idempotent; used by the README, CI and the container build alike.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libyaml-cpp-dev prometheus-cpp-dev
  libopenblas-dev nlohmann-json3-dev libpng-dev zlib1g-dev
  # HTTP (the OpenAI-compatible API, /metrics; built with OpenSSL) and TLS / API key hashing.
  libcpp-httplib-dev libssl-dev openssl
  # JPEG output of the HTTP API.
  libjpeg62-turbo-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # Command lines (CLI11), logs (spdlog), tokenizer regexes (Oniguruma, as HF
  # tokenizers), the standard gRPC health / reflection protos.
  libcli11-dev libspdlog-dev libonig-dev grpc-proto
  # LlamaGen t2i: T5's SentencePiece tokenizer (spiece.model).
  libsentencepiece-dev
  # Test tooling: the quality-report and scorer tests run tools/sweep/report.py.
  python3-numpy python3-pil python3-matplotlib
  # bench_lab_lint_test: the benchmark lab's shell scripts (bench/gpu) under shellcheck.
  shellcheck
  # The Python client (clients/python) and its test: gRPC and protobuf for
  # Debian's python3, pip + setuptools to install it from the repository.
  python3-grpcio python3-protobuf python3-pip python3-setuptools
  # The playground's browser test (tests/serving/playground_browser_test.py).
  chromium
  # The README quick-start test runs the README's curl lines.
  curl
)
# `install-deps.sh fuzz`: also clang's libFuzzer (scripts/fuzz.sh only; CI fuzzes with gcc).
if [ "${1:-}" = "fuzz" ]; then
  packages+=(clang libclang-rt-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
