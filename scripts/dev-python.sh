#!/usr/bin/env bash
# Development-only Python tooling (goldens, training scripts, plots) in .venv.
# The product never links or runs any of it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q --index-url https://download.pytorch.org/whl/cpu torch 2>/dev/null \
  || .venv/bin/pip install -q torch
.venv/bin/pip install -q numpy safetensors tokenizers transformers pillow matplotlib
# The OpenAI SDK drives the HTTP API in tests/serving/openai_sdk_test.cc (skipped without it).
.venv/bin/pip install -q openai
