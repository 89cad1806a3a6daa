#!/usr/bin/env bash
# Everything that needs a GPU, in one call: the GPU tests (the honest and adversarial suites'
# CUDA cases included), every example's CUDA solution through the judge, the demo, and the judge
# benchmarks (repeatability and KernelBench's timer side by side, timing methods, latency, group judging, workload scaling,
# SOL-ExecBench's examples here and through their harness, timing
# fidelity, guard overhead), the agent's GPU episode and overhead
# benchmark, and `cuda-agent bench` over a KernelBench checkout ($KERNELBENCH, default
# ./.kernelbench) with the hand-written solutions of examples/kernelbench, and its throughput
# (THROUGHPUT_FLAGS="--jobs 1,2,4" for one row per judges-per-GPU; "--pools local,ray,local"
# where Ray is installed), and honest judges refused under load. Named only, not in "all": the
# verify stage with outputs compared on the GPU and on the host (compare), and every KernelBench
# reference timed and compared with KernelBench's files (baselines, resumable).
# Results go to $OUT (default ./gpu-results).
#
#   scripts/gpu_check.sh            # all
#   scripts/gpu_check.sh tests examples
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export CUDA_AGENT_CACHE=${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}
# Wheels the machine lacks (KernelBench's evaluator needs pydantic, the agent's tests the openai
# SDK, the MCP server's the mcp SDK, the tests' schemas jsonschema), carried in .whl/ and .whl-*/
# folders if present.
wheels=$(compgen -G ".whl*/*.whl")
if [ -n "$wheels" ]; then
  python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site $wheels 2>"$OUT/pip.log" \
    && export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
parts=${*:-tests examples demo repeatability methods bench group workloads sol_execbench single_file staged guards agent kernelbench throughput refusals synth}
status=0

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  nvcc --version | tail -1
} 2>&1 | tee "$OUT/device.txt"

for part in $parts; do
  case $part in
    tests)
      # GPU_TESTS picks paths (default: all); -v so that a run cut short still says which test failed.
      python3 -m pytest -m gpu -v -rfEs -p no:cacheprovider -o addopts="" --junitxml="$OUT/gpu-tests.xml" ${GPU_TESTS:-tests} 2>&1 \
        | tee "$OUT/gpu-tests.log" || status=1 ;;
    examples)
      for ex in examples/*/; do
        name=$(basename "$ex")
        [ -f "$ex/model.py" ] || continue
        python3 -m cuda_agent.cli judge "$ex/model.py" "$ex/cuda" --device cuda --json \
          > "$OUT/example-$name.json" 2> "$OUT/example-$name.err" || status=1
        python3 - "$OUT/example-$name.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
t = v["timings"]
ms = lambda k: f"{t[k]['median_ms']:.4f}" if t.get(k) else "-"
print(f"{v['task']:<20} {v['status']:<14} reward {v['reward']:>2}  cand {ms('candidate')} ms  eager {ms('eager')} ms  "
      f"compile {ms('compile')} ms  x_eager {v['speedup_vs_eager']}  x_compile {v['speedup_vs_compile']}")
PY
      done 2>&1 | tee "$OUT/examples.txt" ;;
    demo)
      # Its wall time, as a newcomer sees it: cold the first time on a fresh machine.
      started=$SECONDS
      python3 -m cuda_agent.cli demo 2>&1 | tee "$OUT/demo.txt" || status=1
      echo "demo took $((SECONDS - started)) s" | tee -a "$OUT/demo.txt" ;;
    repeatability)
      # The same solutions judged $REPEATS times from fresh processes, baselines re-timed each
      # time, and KernelBench's own timer on its few-shot pairs beside them (RPT_EXAMPLES= or
      # RPT_PAIRS= set empty skips those; RPT_FLAGS=--no-null skips the null kernel).
      python3 benchmarks/timing_repeatability.py --device cuda --repeats "${REPEATS:-5}" \
        --examples "${RPT_EXAMPLES-fused_elementwise,rmsnorm,gemm_epilogue}" --pairs "${RPT_PAIRS-fuse_gelu,tiled_matmul,add}" \
        --kernelbench "${KERNELBENCH:-.kernelbench}" ${RPT_FLAGS:-} --out "$OUT/timing_repeatability.json" 2>&1 \
        | tee "$OUT/timing_repeatability.txt" || status=1 ;;
    methods)
      python3 benchmarks/timing_methods.py --processes "${REPEATS:-5}" --kernelbench "${KERNELBENCH:-.kernelbench}" \
        --out "$OUT/timing_methods.json" 2>&1 | tee "$OUT/timing_methods.txt" || status=1 ;;
    fidelity)
      python3 benchmarks/timing_fidelity.py --device cuda --out "$OUT/timing_fidelity.json" 2>&1 \
        | tee "$OUT/timing_fidelity.txt" || status=1 ;;
    bench|latency)
      # Workers forked from the fork server (the default), then exec'd afresh, side by side.
      python3 benchmarks/judge_latency.py --device cuda --out "$OUT/judge_latency.json" 2>&1 \
        | tee "$OUT/judge_latency.txt" || status=1
      python3 benchmarks/judge_latency.py --device cuda --exec-workers --out "$OUT/judge_latency-exec.json" 2>&1 \
        | tee -a "$OUT/judge_latency.txt" || status=1 ;;
    workloads)
      # A task's judge time by its number of declared workloads (builds and baselines cached).
      python3 benchmarks/workload_scaling.py --device cuda --repeats "${REPEATS:-5}" --out "$OUT/workload_scaling.json" 2>&1 \
        | tee "$OUT/workload_scaling.txt" || status=1 ;;
    sol_execbench)
      # SOL-ExecBench's example solutions judged here and by their own harness, side by side, over a
      # checkout in $SOL_EXECBENCH (default ./.sol-execbench; its harness needs its wheels carried);
      # SOL_FLAGS adds options (--only cuda_cpp,triton).
      sol=${SOL_EXECBENCH:-.sol-execbench}
      CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")} \
        python3 benchmarks/sol_execbench_examples.py "$sol/examples" --device cuda --harness-src "$sol/src" \
        --max-workloads "${SOL_WORKLOADS:-3}" --harness-timeout "${SOL_HARNESS_TIMEOUT:-300}" ${SOL_FLAGS:-} \
        --out "$OUT/sol_execbench_examples.json" --markdown "$OUT/sol_execbench_examples.md" 2>&1 \
        | tee "$OUT/sol_execbench_examples.txt" || status=1 ;;
    group)
      # One task's candidates as one group run (one reference run for all) and as separate judges.
      python3 benchmarks/group_judging.py --device cuda --sizes "${GROUP_SIZES:-4,16}" --out "$OUT/group_judging.json" 2>&1 \
        | tee "$OUT/group_judging.txt" || status=1 ;;
    single_file)
      # KernelBench's load_inline format against the workspace format, both built by the judge.
      python3 benchmarks/single_file_latency.py --device cuda --out "$OUT/single_file_latency.json" 2>&1 \
        | tee "$OUT/single_file_latency.txt" || status=1 ;;
    agent)
      python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" tests/agent 2>&1 | tee "$OUT/agent-tests.log" || status=1
      python3 benchmarks/agent_overhead.py --device cuda --out "$OUT/agent_overhead.json" 2>&1 \
        | tee "$OUT/agent_overhead.txt" || status=1 ;;
    staged)
      # The attack that computes while its inputs are made, and an honest solution, with the
      # timed calls' inputs staged by the judge and made by the candidate.
      python3 benchmarks/staged_inputs.py --device cuda --out "$OUT/staged_inputs.json" 2>&1 \
        | tee "$OUT/staged_inputs.txt" || status=1 ;;
    guards)
      # GUARD_FLAGS=--each also judges with each guard group off alone.
      python3 benchmarks/guard_overhead.py --device cuda --examples "${GUARD_EXAMPLES:-fused_elementwise,rmsnorm,gemm_epilogue}" \
        --repeats "${GUARD_REPEATS:-3}" ${GUARD_FLAGS:-} --out "$OUT/guard_overhead.json" 2>&1 \
        | tee "$OUT/guard_overhead.txt" || status=1 ;;
    kernelbench)
      # The run's folder (results, verdicts, report, baselines in KernelBench's layout) comes back
      # as one archive, kernelbench.tgz, beside the report.
      run=${BENCH_RUN:-/tmp/kernelbench-run}
      python3 -m cuda_agent.cli bench --kernelbench "${KERNELBENCH:-.kernelbench}" --solutions examples/kernelbench \
        --levels 1,2 --problems "${KB_PROBLEMS_L1:-1:12,40,88}" --problems "${KB_PROBLEMS_L2:-2:12,63,76,86}" \
        --label hand-written --device cuda --out "$run" --export-baselines "$run/timing" 2>&1 \
        | tee "$OUT/kernelbench.txt" || status=1
      tar -czf "$OUT/kernelbench.tgz" -C "$run" . && cp "$run/report.md" "$OUT/kernelbench-report.md" ;;
    compare)
      # The verify stage on outputs of 512 MB and 2 GB, compared on the GPU and on the host.
      python3 benchmarks/device_compare.py --rows "${COMPARE_ROWS:-19,21}" --modes "${COMPARE_MODES:-gpu,host}" \
        --out "$OUT/device_compare.json" 2>&1 | tee "$OUT/device_compare.txt" || status=1 ;;
    baselines)
      # Every KernelBench reference checked and timed (eager, torch.compile) and written in
      # KernelBench's timing layout, then compared problem by problem with its published files
      # ($KB_BASELINES, default its H100_Modal folder). Time-boxed (BASELINES_SECONDS) and
      # resumable: the run folder ($BASELINES_RUN) comes back as baselines-run.tgz; unpack it
      # there and call again to go on. BASELINES_JOBS checks at once (the largest problems hold
      # about 26 GB of GPU memory each while checked); BASELINES_FLAGS adds options
      # (--exclusive-timing: other checks wait while one is timed).
      run=${BASELINES_RUN:-.baselines-run}
      compare=${KB_BASELINES:-${KERNELBENCH:-.kernelbench}/results/timing/H100_Modal}
      recorded=docs/kernelbench/baselines-h100/results.jsonl
      if [ -z "${BASELINES_FRESH:-}" ] && [ ! -s "$run/results.jsonl" ] \
          && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100; then
        # A fresh checkout goes on from the recorded H100 run (its checks are kept, not redone);
        # BASELINES_FRESH=1 times everything asked again, e.g. to compare judge settings.
        mkdir -p "$run" && cp "$recorded" "$run/results.jsonl"
      fi
      timeout "${BASELINES_SECONDS:-520}" python3 -m cuda_agent.cli bench --kernelbench "${KERNELBENCH:-.kernelbench}" \
        --baselines-only --levels "${BASELINES_LEVELS:-1,2,3}" --jobs "${BASELINES_JOBS:-4}" --device cuda --out "$run" \
        ${BASELINES_FLAGS:-} --export-baselines "$run/timing" --compare-baselines "$compare" 2>&1 | tee "$OUT/baselines.txt"
      if [ "${PIPESTATUS[0]}" != 0 ]; then  # cut short or some checks failed: the report of what is recorded
        python3 -m cuda_agent.cli bench --kernelbench "${KERNELBENCH:-.kernelbench}" --baselines-only \
          --levels "${BASELINES_LEVELS:-1,2,3}" --device cuda --out "$run" --report-only \
          --export-baselines "$run/timing" --compare-baselines "$compare" 2>&1 | tail -20 | tee -a "$OUT/baselines.txt"
      fi
      tar -czf "$OUT/baselines-run.tgz" -C "$run" . ;;
    throughput)
      python3 benchmarks/bench_throughput.py --kernelbench "${KERNELBENCH:-.kernelbench}" --solutions examples/kernelbench \
        --levels 1,2 --problems "${KB_PROBLEMS_L1:-1:12,40,88}" --problems "${KB_PROBLEMS_L2:-2:12,63,76,86}" \
        --copies "${COPIES:-3}" --device cuda --cache-dir "$CUDA_AGENT_CACHE" --json "$OUT/bench_throughput.json" \
        ${THROUGHPUT_FLAGS:-} 2>&1 | tee "$OUT/bench_throughput.txt" || status=1 ;;
    refusals)
      # Honest judges refused by the timing integrity checks under the pool's default load
      # (REFUSAL_MINUTES: start no judge after that long, so that the JSON is written in time;
      # REFUSAL_FLAGS adds options: --concurrency N, --exclusive-timing).
      python3 benchmarks/false_refusals.py --device cuda --n "${REFUSAL_N:-100}" ${REFUSAL_FLAGS:-} \
        ${REFUSAL_MINUTES:+--max-minutes "$REFUSAL_MINUTES"} --out "$OUT/false_refusals.json" 2>&1 \
        | tee "$OUT/false_refusals.txt" || status=1 ;;
    synth)
      # A time-boxed, resumable synthesis run: call again (same SYNTH_RUN) to go on where it
      # stopped. The run folder comes back as synth-run.tgz.
      run=${SYNTH_RUN:-.synth-run}
      python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" tests/synth 2>&1 | tee "$OUT/synth-tests.log" || status=1
      python3 benchmarks/bench_synth.py --out "$run" -n "${SYNTH_N:-600}" --device cuda \
        --kernelbench "${KERNELBENCH:-.kernelbench}" --workers "${SYNTH_WORKERS:-6}" \
        --max-minutes "${SYNTH_MINUTES:-8}" --json "$OUT/bench_synth.json" 2>&1 | tee "$OUT/synth.txt" || status=1
      tar -czf "$OUT/synth-run.tgz" -C "$run" . ;;
    *) echo "unknown part: $part" >&2; status=2 ;;
  esac
done
exit $status
