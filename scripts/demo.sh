#!/usr/bin/env bash
# The whole loop on the embedded defaults: ingest the example rollouts into a local Delta lake, train a
# small value model, register it in the local MLflow store, serve it on localhost, rerank one task.
# Everything lives under $HARVEST_HOME (default: ./.harvest). Run through `make demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
export HARVEST_HOME="${HARVEST_HOME:-$PWD/.harvest}"
PORT="${HARVEST_DEMO_PORT:-8765}"
LAKE="$HARVEST_HOME/lake"
BIN="${HARVEST_BIN:-.venv/bin}"

echo "== 1/4 ingest examples/rollouts into $LAKE"
"$BIN/harvest" ingest examples/rollouts --lake "$LAKE"

echo "== 2/4 train a value model (MiniLM + scalar head, BCE on resolved) and register it"
"$BIN/harvest" train --lake "$LAKE" --config configs/cpu-minilm.toml --register harvest-value \
  --max-length 192 --epochs 3 --val-fraction 0.34 --learning-rate 5e-5

echo "== 3/4 serve models:/harvest-value@champion on 127.0.0.1:$PORT"
"$BIN/harvest" serve --model models:/harvest-value@champion --port "$PORT" --log-level warning &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT

echo "== 4/4 rerank the candidates of one task"
"$BIN/python" scripts/demo_request.py --url "http://127.0.0.1:$PORT" --lake "$LAKE"
