#!/usr/bin/env bash
# Training checks on one GPU: the TRL engine's demo on cuda (RFT, then GRPO against the CUDA judge,
# the model on the GPU), the training throughput benchmark at reward concurrency 1, 4 and 16, the
# training GPU tests, and verl's tests (its parts that run without a rollout engine, the CUDA
# judge paying them) in an environment of their own. Each part's output goes to $OUT (default
# ./gpu-results). On a machine with two GPUs or more, the throughput benchmark runs twice: the
# judges on the training GPU, then on GPU 1.
#
#   OUT=DIR             where the results go
#   WHEELS=DIR          a folder of wheels to install first, offline (default: every .whl* folder):
#                       for a machine without TRL and datasets and without a network
#                       (docs/training.md lists the wheels and how to download them)
#   SITE=DIR            where those wheels are installed (default: a temporary folder)
#   SKIP_THROUGHPUT=1   leave out the throughput benchmark
#   SKIP_TESTS=1        leave out the training GPU tests
#   VERL_WHEELS=DIR     the wheels verl's tests install, apart from the others (default .verl-wheels,
#                       made by scripts/verl_gpu_wheels.sh; its *.tar.xz archives are unpacked there too)
#   SKIP_VERL=1         leave out verl's tests
#   SKIP_DEMO=1         leave out the demo (the throughput benchmark then trains its own RFT model)
#   GRPO_STEPS=N        the demo's GRPO steps (default 16)
#   DEMO_TIMEOUT=S, THROUGHPUT_TIMEOUT=S   seconds each part may take (default 1800)
#
# Exits non-zero if any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
wheels=$(compgen -G "${WHEELS:-.whl*}/*.whl")
if [ -n "$wheels" ]; then
  SITE=${SITE:-$(mktemp -d)}
  python3 -m pip install --quiet --no-index --no-deps --target "$SITE" $wheels 2>&1 | tail -2
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
WORK=$(mktemp -d)
export CUDA_AGENT_CACHE=${CUDA_AGENT_CACHE:-$WORK/cache}
status=0

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch, transformers, trl, datasets; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__)"
} 2>&1 | tee "$OUT/train-device.txt"

started=$(date +%s)
[ "${SKIP_DEMO:-0}" = 1 ] || timeout "${DEMO_TIMEOUT:-1800}" python3 -m cuda_agent.cli train demo --device cuda --grpo-steps "${GRPO_STEPS:-16}" \
  --out "$OUT/train-demo" 2>&1 \
  | grep -v "^{'loss'" | tee "$OUT/train-demo.txt" || status=1
echo "demo: $(( $(date +%s) - started )) s" | tee -a "$OUT/train-demo.txt"
cp "$OUT/train-demo/demo.json" "$OUT/train-demo/reward_curve.png" "$OUT/" 2>/dev/null

if [ "${SKIP_THROUGHPUT:-0}" != 1 ]; then
  timeout "${THROUGHPUT_TIMEOUT:-1800}" python3 benchmarks/train_throughput.py --device cuda --steps 1 --prompts 1 --concurrency 1,4,16 \
    $([ "${SKIP_DEMO:-0}" = 1 ] || echo --demo "$OUT/train-demo") --work "$WORK/train-throughput" --out "$OUT/train_throughput.json" 2>&1 \
    | tee "$OUT/train_throughput.txt" || status=1
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    timeout "${THROUGHPUT_TIMEOUT:-1800}" python3 benchmarks/train_throughput.py --device cuda --steps 1 --prompts 1 --concurrency 1,4,16 \
      --judge-gpus 1 $([ "${SKIP_DEMO:-0}" = 1 ] || echo --demo "$OUT/train-demo") --work "$WORK/train-throughput" \
      --out "$OUT/train_throughput-judges-on-gpu1.json" 2>&1 | tee "$OUT/train_throughput-judges-on-gpu1.txt" || status=1
  fi
else
  echo "throughput benchmark skipped (SKIP_THROUGHPUT=1)" | tee "$OUT/train_throughput.txt"
fi

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 1800 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/train 2>&1 \
    | tee "$OUT/train-gpu-tests.log" || status=1
fi

if [ "${SKIP_VERL:-0}" != 1 ]; then
  VERL_WHEELS=${VERL_WHEELS:-.verl-wheels}
  if compgen -G "$VERL_WHEELS/*.whl" > /dev/null; then
    # verl pins transformers below 5.11: its packages go first on the path, for these tests alone
    VSITE=$(mktemp -d)
    python3 -m pip install --quiet --no-index --no-deps --target "$VSITE" "$VERL_WHEELS"/*.whl 2>&1 | tail -2
    for archive in "$VERL_WHEELS"/*.tar.xz; do [ ! -e "$archive" ] || tar xJf "$archive" -C "$VSITE"; done
    PYTHONPATH="$VSITE:$PYTHONPATH" timeout 1800 python3 -m pytest -q -p no:cacheprovider -o addopts="-ra" \
      tests/train/test_verl.py tests/train/test_rft.py tests/train/test_verl_gpu.py 2>&1 \
      | tee "$OUT/verl-tests.log" || status=1
    rm -rf "$VSITE"
  else
    echo "verl's tests skipped: no wheels in $VERL_WHEELS (scripts/verl_gpu_wheels.sh makes them)" \
      | tee "$OUT/verl-tests.log"
  fi
fi

# keep the results folder small: the models, expert runs and workspaces are not results
rm -rf "$OUT/train-demo/models" "$OUT/train-demo/experts" "$OUT/train-demo/agent/"*/*/workspace "$WORK"
exit $status
