#!/usr/bin/env bash
# The Ray judge pool across the GPUs of one machine, in one call: a local Ray instance per size
# with one judge actor per GPU, KernelBench baselines and the hand-written solutions judged on 1,
# 2 and 4 GPUs (those the machine has), candidates and baselines per minute with the scaling
# efficiency, verdicts compared with the one-GPU run, and one busy actor killed mid-run at the
# largest size (every verdict must still arrive, once). Results go to $OUT (default
# ./gpu-results): multi_gpu_scaling.json and .txt.
#
#   scripts/multi_gpu_check.sh                      # levels 1 and 2's hand-written solutions
#   SIZES=1,2 COPIES=2 JOBS=4 scripts/multi_gpu_check.sh   # fewer sizes and copies; judges per GPU
#
# A throughput figure needs at least two candidates per judge slot at the largest size: 7 x COPIES
# >= 2 x GPUs x JOBS (COPIES=8 for 4 GPUs at JOBS=4; runs below that are flagged latency-bound).
#
# Needs ray (pip install 'cuda-agent[ray]'; wheels in .whl/ and .whl-*/ folders are installed first if
# present) and a KernelBench checkout ($KERNELBENCH, default ./.kernelbench). The JSON is written
# after every run; RESUME=1 with that JSON in $OUT keeps its finished runs and does the rest.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
wheels=$(compgen -G ".whl*/*.whl")
if [ -n "$wheels" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $wheels \
    && export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>&1 | tee "$OUT/multi-gpu-device.txt"
python3 benchmarks/multi_gpu_scaling.py --kernelbench "${KERNELBENCH:-.kernelbench}" --solutions examples/kernelbench \
  --levels 1,2 --problems "${KB_PROBLEMS_L1:-1:12,40,88}" --problems "${KB_PROBLEMS_L2:-2:12,76,86}" \
  --copies "${COPIES:-3}" --sizes "${SIZES:-1,2,4}" --jobs "${JOBS:-4}" --kill-after "${KILL_AFTER:-3}" \
  ${RESUME:+--resume} --json "$OUT/multi_gpu_scaling.json" 2>&1 | tee "$OUT/multi_gpu_scaling.txt"
