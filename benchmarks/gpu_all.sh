#!/usr/bin/env bash
# The GPU session's one command (prepare first, here: bash benchmarks/gpu_prepare.sh). On the GPU machine:
#   1. benchmarks/serve.py --device cuda --sections 12: throughput of harvest serve vs the naive server and
#      shared-prefix scoring, both with a Qwen3-4B-shaped bf16 value model (bounded by SERVE_S, default 270 s);
#   2. benchmarks/gpu_check.py: the training check of the qwen3-4b recipe (bounded by CHECK_S, default 210 s).
# Each part is cut by `timeout` and prints (and writes) its rows as it measures them, so a part that runs
# out of time still reports what it did. Results go to $OUT (serve.md, serve.json, serve.log,
# gpu_check.md, gpu_check.json, nvidia-smi.txt); without $OUT to ./gpu-results. Worst case about 8.5 min.
# Neither part needs polars, deltalake, MLflow or faiss, which the GPU machine lacks (the tests check this:
# tests/reranker_service/test_without_lake_packages.py). CPU rehearsal of the same path, with tiny models:
#   OUT=/tmp/gpu-smoke PYTHON=.venv/bin/python INSTALL_WHEELS=0 \
#   SERVE_ARGS="--device cpu --model qwen3-4b --tiny" CHECK_ARGS="--tiny --steps 1" bash benchmarks/gpu_all.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-./gpu-results}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
started=$(date +%s)
if [ "${INSTALL_WHEELS:-1}" = 1 ] && ls .gpu/wheels/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/harvest-site \
        .gpu/wheels/*.whl || exit 1
    export PYTHONPATH=/tmp/harvest-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
data=.gpu/swebench-lite
[ -d "$data" ] || data=../shared/data/swebench-lite
tokenizer=()
[ -d .gpu/tokenizer ] && tokenizer=(--tokenizer .gpu/tokenizer)
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1

echo "== serve.py (limit ${SERVE_S:-270} s)"
timeout -k 20 "${SERVE_S:-270}" "$PY" benchmarks/serve.py --device cuda --sections 12 --data "$data" \
    "${tokenizer[@]}" --json "$OUT/serve.json" ${SERVE_ARGS:-} >"$OUT/serve.md" 2>"$OUT/serve.log"
serve=$?
grep -v -E "Loading weights|Writing model|it/s\]" "$OUT/serve.log" | tail -40
cat "$OUT/serve.md"
echo "serve.py exit status $serve ($(($(date +%s) - started)) s so far)"

echo "== gpu_check.py (limit ${CHECK_S:-210} s)"
timeout -k 20 "${CHECK_S:-210}" "$PY" benchmarks/gpu_check.py --json "$OUT/gpu_check.json" ${CHECK_ARGS:-} \
    2>&1 | tee "$OUT/gpu_check.md"
check=${PIPESTATUS[0]}
echo "gpu_check.py exit status $check; $(($(date +%s) - started)) s in all"
[ "$serve" -eq 0 ] && [ "$check" -eq 0 ]
