#!/usr/bin/env bash
# Training on one GPU, in one call of under eight minutes: the TRL engine (the demo: RFT, then GRPO
# against the CUDA judge, the model on the GPU), the training throughput benchmark at reward
# concurrency 1, 4 and 16, and the training GPU tests. Results go to $OUT (default ./gpu-results).
#
# TRL and datasets are not on the GPU machine: their wheels travel in .whl/ (docs/training.md
# lists them and the command that downloads them) and install to /tmp/site without the network.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
python3 -m pip install --quiet --no-index --no-deps --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH="/tmp/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
export CUDA_AGENT_CACHE=${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}
status=0

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch, transformers, trl, datasets; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__)"
} 2>&1 | tee "$OUT/train-device.txt"

started=$(date +%s)
timeout 270 python3 -m cuda_agent.cli train demo --device cuda --out "$OUT/train-demo" 2>&1 \
  | grep -v "^{'loss'" | tee "$OUT/train-demo.txt" || status=1
echo "demo: $(( $(date +%s) - started )) s" | tee -a "$OUT/train-demo.txt"
cp "$OUT/train-demo/demo.json" "$OUT/train-demo/reward_curve.png" "$OUT/" 2>/dev/null

timeout 140 python3 benchmarks/train_throughput.py --device cuda --steps 1 --prompts 1 --concurrency 1,4,16 \
  --demo "$OUT/train-demo" --work /tmp/train-throughput --out "$OUT/train_throughput.json" 2>&1 | tee "$OUT/train_throughput.txt" || status=1

timeout 60 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/train 2>&1 \
  | tee "$OUT/train-gpu-tests.log" || status=1

# keep what comes back small: the models and workspaces stay behind
rm -rf "$OUT/train-demo/models" "$OUT/train-demo/experts" "$OUT/train-demo/agent/"*/*/workspace
exit $status
