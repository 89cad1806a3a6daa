"""The ``cuda-agent`` command."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from . import paper
from .errors import CudaAgentError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Judge, optimise and benchmark CUDA kernels written for PyTorch programs.")
err = Console(stderr=True)
out = Console()

DeviceOpt = typer.Option(None, "--device", "-d", help="Backend: cuda or cpu (default: cuda when a GPU is visible).")
JsonOpt = typer.Option(False, "--json", help="Print the verdict as JSON, as the last thing on stdout.")
CacheOpt = typer.Option(None, "--cache-dir", help="Build and baseline cache (default: ~/.cache/cuda-agent).")
TimingSecondsOpt = typer.Option(None, "--timing-seconds", help="Target length of each timing session, in seconds (default 2; shorter is faster and less steady, as on a CPU).")
PoolOpt = typer.Option("local", "--pool", help="Where judges run: local (processes on this machine) or ray (every GPU of a Ray cluster; pip install 'cuda-agent\\[ray]').")
TimingFileOpt = typer.Option(None, "--timing", help="A JSON or TOML file of the judge's timing settings (TimingConfig's fields: calls, sessions, cache flush); --timing-seconds overrides its target.")
RayAddressOpt = typer.Option(None, "--ray-address", help="With --pool ray: the cluster's HOST:PORT, or auto (default: start a Ray instance on this machine).")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("cuda-agent")
        except PackageNotFoundError:  # run from a source tree that was never installed
            installed = "not installed (source tree)"
        out.print(f"cuda-agent {installed}")
        raise typer.Exit()


@app.callback()
def _main(show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                            help="Print the installed version and exit.")) -> None:
    """Judge, optimise and benchmark CUDA kernels written for PyTorch programs."""


# The judge's settings the commands' flags set, for naming the flag when a value is refused.
FLAGS = {"num_checks": "--checks", "atol": "--atol", "rtol": "--rtol", "target_seconds": "--timing-seconds"}


def _config(device: Optional[str], cache_dir: Optional[Path], timing_seconds: Optional[float] = None,
            timing_file: Optional[Path] = None, **overrides):
    from dataclasses import replace

    from .errors import ConfigError
    from .judge.config import JudgeConfig, TimingConfig

    kwargs = {k: v for k, v in overrides.items() if v is not None}
    if cache_dir is not None:
        kwargs["cache_dir"] = cache_dir
    try:
        if timing_file is not None:
            try:
                kwargs["timing"] = TimingConfig.from_file(timing_file)
            except ConfigError as exc:  # a field's own error: say which file it came from
                raise CudaAgentError(f"--{exc}" if exc.setting == "timing" else f"--timing {timing_file}: {exc}") from None
        config = JudgeConfig(backend=device, **kwargs)
        if timing_seconds is not None:
            config = replace(config, timing=replace(config.timing, target_seconds=timing_seconds))
    except ConfigError as exc:
        raise CudaAgentError(f"{FLAGS.get(exc.setting, exc.setting)} {exc.detail}") from None
    return config


def _run(task, solution, stage: str, config, as_json: bool, title: str = "") -> int:
    from .judge.judge import Judge
    from .render import verdict_panel

    if as_json:
        judge = Judge(config, progress=lambda m: err.print(f"[dim]{m}[/]"))
        verdict = judge.evaluate(task, solution, stage)
    else:
        from .render import JudgeProgress

        started = time.monotonic()
        with JudgeProgress(err, {"compile": "build", "verify": "verify"}.get(stage, "time")) as progress:
            verdict = Judge(config, progress=progress).evaluate(task, solution, stage)
        err.print(f"[dim]judged in {time.monotonic() - started:.0f} s[/]")
    if as_json:
        sys.stdout.write(verdict.to_json() + "\n")
    else:
        out.print(verdict_panel(verdict, title))
    ok = verdict.status == "ok" and (verdict.correct or stage == "compile")
    return 0 if ok else 1


@app.command()
def judge(
    task: str = typer.Argument(..., help="Task: a .py file, DATASET.jsonl:N / DATASET.parquet:N, or a SOL-ExecBench problem folder."),
    solution: Path = typer.Argument(..., help="A workspace directory, a single-file model_new.py, or (for a SOL-ExecBench problem) its solution JSON."),
    device: Optional[str] = DeviceOpt,
    as_json: bool = JsonOpt,
    checks: Optional[int] = typer.Option(None, "--checks", help="Number of correctness checks (default 5)."),
    atol: Optional[float] = typer.Option(None, "--atol", help="Absolute tolerance (default 1e-2)."),
    rtol: Optional[float] = typer.Option(None, "--rtol", help="Relative tolerance (default 1e-2)."),
    no_baseline_cache: bool = typer.Option(False, "--no-baseline-cache", help="Re-time eager and torch.compile."),
    timing_seconds: Optional[float] = TimingSecondsOpt,
    timing_file: Optional[Path] = TimingFileOpt,
    cache_dir: Optional[Path] = CacheOpt,
) -> None:
    """Build, verify and time SOLUTION against TASK; print the verdict. Exit 0 only when correct."""
    from .solution import load_solution
    from .task import load_task

    config = _config(device, cache_dir, timing_seconds, timing_file, num_checks=checks, atol=atol, rtol=rtol,
                     use_baseline_cache=False if no_baseline_cache else None)
    candidate = _sol_execbench_solution(task, solution) if solution.suffix == ".json" else load_solution(solution)
    raise typer.Exit(_run(load_task(task), candidate, "profile", config, as_json))


def _sol_execbench_solution(task_spec: str, path: Path):
    """A SOL-ExecBench solution JSON as the single-file solution it converts to, for the problem
    folder ``task_spec`` names (its definition says how to call the entry point)."""
    import tempfile
    from dataclasses import replace

    from . import sol_execbench
    from .errors import SolutionFormatError
    from .solution import load_solution

    folder = Path(task_spec)
    if not sol_execbench.is_problem(folder):
        raise SolutionFormatError(f"{path} is a solution JSON, read as SOL-ExecBench's: give its problem folder "
                                  f"(the one with {sol_execbench.DEFINITION_FILE}) as the task, not {task_spec}")
    with tempfile.TemporaryDirectory(prefix="cuda-agent-sol-") as out:
        converted = load_solution(sol_execbench.solution_from_json(path, folder, Path(out)))
    return replace(converted, origin=str(path))


def _workspace_stage(stage: str, workspace: Path, task_spec: Optional[str], device: Optional[str],
                     cache_dir: Optional[Path], as_json: bool) -> int:
    from .judge.config import default_cache_dir
    from .solution import load_solution
    from .task import load_task
    from .workspace import find_workspace

    if task_spec:
        task, backend, root = load_task(task_spec), device, workspace
    else:
        record = find_workspace(workspace, cache_dir or default_cache_dir())
        task, backend, root = record.task, device or record.backend, record.root
    return _run(task, load_solution(root), stage, _config(backend, cache_dir), as_json, title=f"{stage}: {task.name}")


WorkspaceOpt = typer.Option(Path("."), "--workspace", "-w", help="The workspace (default: the current directory).")
TaskOpt = typer.Option(None, "--task", help="The task, when the workspace was not made by `cuda-agent workspace`.")


@app.command("compile")
def compile_(workspace: Path = WorkspaceOpt, task: Optional[str] = TaskOpt, device: Optional[str] = DeviceOpt,
             cache_dir: Optional[Path] = CacheOpt, as_json: bool = JsonOpt) -> None:
    """Build the workspace's kernels with the judge's infrastructure and flags."""
    raise typer.Exit(_workspace_stage("compile", workspace, task, device, cache_dir, as_json))


@app.command()
def verify(workspace: Path = WorkspaceOpt, task: Optional[str] = TaskOpt, device: Optional[str] = DeviceOpt,
           cache_dir: Optional[Path] = CacheOpt, as_json: bool = JsonOpt) -> None:
    """Build, then check ModelNew against the reference on fresh random inputs and weights."""
    raise typer.Exit(_workspace_stage("verify", workspace, task, device, cache_dir, as_json))


@app.command()
def profile(workspace: Path = WorkspaceOpt, task: Optional[str] = TaskOpt, device: Optional[str] = DeviceOpt,
            cache_dir: Optional[Path] = CacheOpt, as_json: bool = JsonOpt) -> None:
    """Build, verify, and time ModelNew against eager and torch.compile (the full judge)."""
    raise typer.Exit(_workspace_stage("profile", workspace, task, device, cache_dir, as_json))


@app.command()
def workspace(
    task: str = typer.Argument(..., help="Task: a .py file, or DATASET.jsonl:N / DATASET.parquet:N."),
    directory: Path = typer.Argument(..., help="Where to create the workspace."),
    device: Optional[str] = DeviceOpt,
    force: bool = typer.Option(False, "--force", help="Write into a non-empty directory."),
    cache_dir: Optional[Path] = CacheOpt,
) -> None:
    """Create an agent workspace: model.py, model_new.py to fill in, kernels/, SKILL.md."""
    from .device import probe_device, resolve_backend
    from .judge.config import default_cache_dir
    from .task import load_task
    from .workspace import create_workspace

    backend = resolve_backend(device)
    root = create_workspace(load_task(task), directory, backend, probe_device(backend), force=force,
                            cache_dir=cache_dir or default_cache_dir())
    out.print(f"workspace for [bold]{load_task(task).name}[/] ({backend}) created at {root}")
    out.print("read SKILL.md there; then `cuda-agent compile`, `cuda-agent verify`, `cuda-agent profile` inside it")


@app.command()
def optimize(
    task: str = typer.Argument(..., help="Task: a .py file, a directory of them, or a JSONL/Parquet dataset (or DATASET:N)."),
    model: str = typer.Option(..., "--model", "-m", help="The model's name as its server knows it, or a local path for --provider hf."),
    provider: str = typer.Option("openai", "--provider", help="openai (any OpenAI-compatible server), anthropic, or hf (local transformers)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="An OpenAI-compatible server, e.g. http://localhost:8000/v1 for vLLM or SGLang."),
    tool_protocol: str = typer.Option("native", "--tool-protocol", help="native tool calls, or text for models without them."),
    out: Path = typer.Option(Path("agent-runs"), "--out", "-o", help="Where episodes are written; rerun with the same --out to resume."),
    episodes: int = typer.Option(1, "--episodes", "-n", help="Episodes per task."),
    concurrency: int = typer.Option(8, "--concurrency", help="Episodes running at once."),
    judge_concurrency: Optional[int] = typer.Option(None, "--judge-concurrency", help="Judge runs at once (default: one per two cores; with --pool ray: per GPU, or in all on the CPU)."),
    pool_kind: str = PoolOpt,
    ray_address: Optional[str] = RayAddressOpt,
    max_turns: int = typer.Option(paper.TRAINING_TURNS, "--max-turns", help="Turns per episode (the paper: 150 in training, 200 at evaluation)."),
    max_wall: float = typer.Option(8 * 3600.0, "--max-wall-time", help="Seconds per episode."),
    context_tokens: int = typer.Option(paper.CONTEXT_TOKENS, "--context-tokens", help="The model's context window."),
    max_output_tokens: Optional[int] = typer.Option(None, "--max-output-tokens", help="Tokens per reply."),
    temperature: Optional[float] = typer.Option(None, "--temperature"),
    device: Optional[str] = DeviceOpt,
    cache_dir: Optional[Path] = CacheOpt,
    quiet: bool = typer.Option(False, "--quiet", help="No live table; print only the summary."),
) -> None:
    """Let a model optimise TASK in a workspace, with the judge behind compile/verify/profile."""
    import asyncio

    from .llm import make_client
    from .agent.context import ContextBudget
    from .agent.env import EnvSettings
    from .agent.loop import AgentSettings
    from .agent.runner import plan_episodes, run_episodes, summary_table, write_summary
    from .cluster import make_pool
    from .device import probe_device
    from .task import load_tasks

    if episodes < 1 or concurrency < 1 or max_turns < 1:
        raise CudaAgentError("--episodes, --concurrency and --max-turns must be at least 1")
    tasks = load_tasks(task)
    options = {k: v for k, v in {"temperature": temperature}.items() if v is not None}
    if max_output_tokens is not None:
        options["max_new_tokens" if provider == "hf" else "max_tokens"] = max_output_tokens
    client = make_client(provider, model, base_url=base_url, tool_protocol=tool_protocol, **options)
    settings = AgentSettings(env=EnvSettings(max_turns=max_turns, max_wall_s=max_wall),
                             context=ContextBudget(window=context_tokens))
    specs = plan_episodes(tasks, out.resolve(), episodes)

    async def main() -> list:
        try:
            return await run_episodes(specs, client, pool, settings=settings, provider=provider, device=info,
                                      concurrency=concurrency, hidden=[out.resolve()], console=err, live=not quiet)
        finally:
            await client.aclose()

    with make_pool(pool_kind, _config(device, cache_dir), judge_concurrency, ray_address) as pool:
        info = probe_device(pool.backend)
        err.print(f"{len(specs)} episode(s) of {model} on {len(tasks)} task(s), {pool.backend} backend, writing to {out}")
        results = asyncio.run(main())
    summary = write_summary(out, results)
    out_console = Console()
    out_console.print(summary_table(results))
    out_console.print(f"{summary['correct']}/{summary['episodes']} episodes found a correct solution; "
                      f"summary in {out / 'summary.json'}")
    crashed = [r for r in results if r.stop_reason in ("crashed", "llm_error", "llm_unavailable")]
    raise typer.Exit(1 if crashed and len(crashed) == len(results) else 0)


@app.command()
def bench(
    kernelbench: Path = typer.Option(..., "--kernelbench", help="A KernelBench checkout (or its KernelBench/ folder), or SOL-ExecBench problems: a folder of problem folders (level 1) or of subsets L1, L2, ..."),
    levels: str = typer.Option("1,2,3", "--levels", help="Levels to run, e.g. 1,2,3."),
    problems: Optional[list[str]] = typer.Option(None, "--problems", help="Problem ids, e.g. 1-10,19 (every level) or 2:1-10 (level 2; other levels: all); repeatable."),
    solutions: Optional[Path] = typer.Option(None, "--solutions", help="Solutions: level{N}/{id}_{Name}/ folders, agent output, or KernelBench generations."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Run the agent with this model instead of judging given solutions."),
    provider: str = typer.Option("openai", "--provider", help="With --model: openai, anthropic or hf."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="With --model: an OpenAI-compatible server."),
    tool_protocol: str = typer.Option("native", "--tool-protocol", help="With --model: native tool calls, or text."),
    episodes: int = typer.Option(1, "--episodes", help="With --model: episodes per problem (the best one is scored)."),
    concurrency: int = typer.Option(8, "--concurrency", help="With --model: episodes running at once."),
    max_turns: int = typer.Option(200, "--max-turns", help="With --model: turns per episode (the paper evaluates with 200)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Results and report (default: bench-runs/LABEL); rerun to resume."),
    label: Optional[str] = typer.Option(None, "--label", help="Our row's name in the report (default: the solutions folder or model)."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="GPUs to use (default: all visible)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", help="Evaluations at once per GPU (default: cores / 2 / GPUs; 1 on the CPU)."),
    timing_seconds: Optional[float] = TimingSecondsOpt,
    timing_file: Optional[Path] = TimingFileOpt,
    exclusive_timing: bool = typer.Option(False, "--exclusive-timing", help="Other evaluations' checks wait while one is timed on its GPU (steadier times under load, fewer a minute)."),
    min_baseline_ms: float = typer.Option(0.1, "--min-baseline-ms", help="Eager times below this are flagged too fast to time."),
    baselines: Optional[Path] = typer.Option(None, "--baselines", help="Import baselines from a KernelBench results/timing/HW folder."),
    export_baselines: Optional[Path] = typer.Option(None, "--export-baselines", help="Write our baselines in KernelBench's layout to this folder."),
    compare_baselines: Optional[Path] = typer.Option(None, "--compare-baselines", help="Compare our baselines, problem by problem, with a KernelBench results/timing/HW folder."),
    baselines_only: bool = typer.Option(False, "--baselines-only", help="Check and time the references alone (eager and torch.compile): no solutions."),
    report_only: bool = typer.Option(False, "--report-only", help="Judge nothing; rebuild the report from recorded results."),
    pool_kind: str = PoolOpt,
    ray_address: Optional[str] = RayAddressOpt,
    device: Optional[str] = DeviceOpt,
    cache_dir: Optional[Path] = CacheOpt,
) -> None:
    """Judge solutions (or run the agent) on KernelBench (or SOL-ExecBench problems) and report the paper's metrics."""
    from .bench.kernelbench import check_root, parse_levels, parse_selection
    from .bench.benchmark import BenchOptions, run_benchmark

    if not report_only:
        check_root(kernelbench)  # a wrong path is the first thing to say, before the other options
    # run_benchmark refuses a wrong combination of --solutions, --model and --baselines-only.
    name = label or (model.replace("/", "_") if model else Path(solutions).resolve().name if solutions else "baselines")
    config = _config(device, cache_dir, timing_seconds, timing_file, exclusive_timing=exclusive_timing or None)
    agent = None
    if model is not None:
        agent = _bench_agent(model, provider, base_url, tool_protocol, episodes, concurrency, max_turns)
    options = BenchOptions(kernelbench=kernelbench, out=out_dir or Path("bench-runs") / name,
                           levels=parse_levels(levels), problem_ids=parse_selection(problems), solutions=solutions,
                           agent=agent, label=name, judge=config, gpus=gpus, jobs_per_gpu=jobs,
                           min_baseline_ms=min_baseline_ms, import_baselines=baselines,
                           export_baselines=export_baselines, compare_baselines=compare_baselines,
                           baselines_only=baselines_only, report_only=report_only, pool=pool_kind,
                           ray_address=ray_address)
    report, written = run_benchmark(options, console=err)
    out.print(_baselines_summary(report) if baselines_only else _bench_summary(report))
    for what, path in written.items():
        out.print(f"{what}: {path}")


def _bench_summary(report: dict):
    from rich.table import Table

    from .bench.report import percent, times

    table = Table(title=f"{report['label']} on KernelBench")
    for column in ("subset", "problems", "pass", "faster vs eager", "faster vs compile",
                   "speed-up vs eager", "speed-up vs compile"):
        table.add_column(column)
    rows = [report["levels"][k] for k in sorted(report["levels"], key=int)] + [report["overall"]]
    for m in rows:
        table.add_row(m["subset"], str(m["problems"]), percent(m["pass_rate"]), percent(m["faster_vs_eager"]),
                      percent(m["faster_vs_compile"]), times(m["speedup_vs_eager"]), times(m["speedup_vs_compile"]))
    return table


def _baselines_summary(report: dict):
    from rich.table import Table

    from .bench.report import gigabytes

    table = Table(title="KernelBench baselines (means over timed calls)")
    for column in ("subset", "problems", "timed", "failed", "flagged", "eager total", "compile total", "check time",
                   "largest worker"):
        table.add_column(column)
    for subset, b in report["baselines"].items():
        table.add_row(subset if subset == "all" else f"level {subset}", str(b["problems"]), str(b["timed"]),
                      str(len(b["failed"])), str(b["flagged"]), f"{b['eager_ms_total']:.1f} ms",
                      f"{b['compile_ms_total']:.1f} ms", f"{b['check_seconds']:.0f} s",
                      gigabytes(b.get("worker_peak_bytes")))
    return table


def _bench_agent(model: str, provider: str, base_url: Optional[str], tool_protocol: str, episodes: int,
                 concurrency: int, max_turns: int):
    """The agent as the benchmark runs it: every problem's episodes under OUT/agent/level{N}/."""

    def run(problems: dict, directory: Path, pool) -> None:
        import asyncio

        from .llm import make_client
        from .agent.env import EnvSettings
        from .agent.loop import AgentSettings
        from .agent.runner import EpisodeSpec, run_episodes
        from .device import probe_device

        client = make_client(provider, model, base_url=base_url, tool_protocol=tool_protocol)
        # Named by the problem's file, as the bench looks for them (level{N}/{id}_{Name}/{NN}/best).
        specs = [EpisodeSpec(problem.task(), directory.resolve() / f"level{level}" / problem.stem / f"{i:02d}",
                             f"L{level}-{problem.stem}-{i:02d}")
                 for level, items in sorted(problems.items()) for problem in items for i in range(episodes)]

        async def main() -> None:
            try:
                await run_episodes(specs, client, pool, settings=AgentSettings(EnvSettings(max_turns=max_turns)),
                                   provider=provider, device=probe_device(pool.backend), concurrency=concurrency,
                                   hidden=[directory.resolve()], console=err, live=True)
            finally:
                await client.aclose()

        asyncio.run(main())

    return run


@app.command()
def synth(
    n: int = typer.Option(..., "-n", help="Accepted tasks wanted."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Dataset folder; rerun with the same options to resume."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Compose tasks with this LLM (default: the offline composer)."),
    provider: str = typer.Option("openai", "--provider", help="With --model: openai or anthropic."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="With --model: an OpenAI-compatible server."),
    kernelbench: Optional[Path] = typer.Option(None, "--kernelbench", help="A KernelBench checkout to decontaminate against (AST similarity <= 0.9)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", help="Worker processes (default: cores, at most 6, on a GPU; cores / 2 on the CPU)."),
    window_ms: str = typer.Option("1,100", "--window-ms", help="Eager-time window in ms on the target GPU, MIN,MAX (the paper: 1,100)."),
    max_tensor_gb: float = typer.Option(1.0, "--max-tensor-gb", help="No tensor of a composed task grows past this."),
    seed: int = typer.Option(0, "--seed", help="Seed of the composition sequence."),
    no_transformers: bool = typer.Option(False, "--no-transformers", help="Leave transformers building blocks out."),
    timeout_s: float = typer.Option(600.0, "--timeout", help="Seconds allowed for one candidate's checks."),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="Stop after this long, write what was accepted; rerun to go on."),
    seeds_only: bool = typer.Option(False, "--seeds-only", help="Crawl the seed operators, write OUT/seeds.json and stop."),
    multi_shape_share: float = typer.Option(0.0, "--multi-shape-share", help="Share of offline tasks declaring workloads at other batch sizes, held-out ones allowed (docs/workloads.md)."),
    half_share: float = typer.Option(0.0, "--half-share", help="Share of offline tasks computing in bfloat16 or float16."),
    pool_kind: str = PoolOpt,
    ray_address: Optional[str] = RayAddressOpt,
    device: Optional[str] = DeviceOpt,
) -> None:
    """Build a CUDA-Agent-Ops-6K-like dataset of fused-operator tasks, filtered by execution."""
    import os

    from .device import resolve_backend
    from .synth.synthesis import SynthOptions, run_synthesis

    try:
        low, high = (float(v) for v in window_ms.split(","))
    except ValueError:
        raise CudaAgentError(f"--window-ms takes MIN,MAX in milliseconds, e.g. 1,100; got {window_ms!r}") from None
    if pool_kind not in ("local", "ray") or (ray_address and pool_kind != "ray"):
        raise CudaAgentError(f"--pool takes local or ray (and --ray-address needs --pool ray); got {pool_kind!r}")
    # A Ray cluster's driver may have no GPU of its own: --device cuda is then the cluster's.
    backend = device if pool_kind == "ray" and device in ("cuda", "cpu") else resolve_backend(device)
    cpus = os.cpu_count() or 1
    options = SynthOptions(
        n=n, out=out_dir, device=backend,
        workers=workers or (min(cpus, 6) if backend == "cuda" else max(1, cpus // 2)),
        seed=seed, window_ms=(low, high), max_tensor_bytes=int(max_tensor_gb * 2**30),
        kernelbench=str(kernelbench.resolve()) if kernelbench else None, model=model, provider=provider,
        base_url=base_url, include_transformers=not no_transformers, timeout_s=timeout_s,
        max_minutes=max_minutes, pool=pool_kind, ray_address=ray_address, multi_shape_share=multi_shape_share,
        half_share=half_share)
    state, catalogue, written = run_synthesis(options, console=err, seeds_only=seeds_only)
    counts = catalogue.counts()
    out.print("seeds: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if state is not None:
        out.print(f"accepted {len(state.accepted)} of {len(state.outcomes)} candidates")
    for what, path in written.items():
        out.print(f"{what}: {path}")


@app.command("mcp")
def mcp_server(
    http: Optional[int] = typer.Option(None, "--http", help="Serve streamable HTTP on this port, at /mcp (default: stdio)."),
    host: str = typer.Option("127.0.0.1", "--host", help="With --http: the address to listen on."),
    root: Optional[Path] = typer.Option(None, "--root", help="Where sessions' workspaces are kept (default: ~/.local/share/cuda-agent/mcp)."),
    kernelbench: Optional[Path] = typer.Option(None, "--kernelbench", help="A KernelBench checkout, for open_task's LEVEL/ID."),
    tasks_from: Optional[list[Path]] = typer.Option(None, "--tasks-from", help="A folder open_task may take task files and datasets from (repeatable). Default: any the server can read over stdio; none over --http, where anyone reaching the port could make the server run a file's code."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Judge runs at once, shared by every session (default: cores / 2, at least 2)."),
    device: Optional[str] = DeviceOpt,
    timing_seconds: Optional[float] = TimingSecondsOpt,
    timing_file: Optional[Path] = TimingFileOpt,
    cache_dir: Optional[Path] = CacheOpt,
) -> None:
    """Serve the sandbox to coding agents over MCP: open a task, work on its files, compile, verify, profile, judge."""
    from .mcp_server import require_mcp

    require_mcp()
    import signal

    import anyio

    from .cluster import make_pool
    from .device import probe_device
    from .mcp_server.server import HTTP_PATH, build_server, serve_http, serve_stdio
    from .mcp_server.sessions import SessionStore, default_root

    if concurrency is not None and concurrency < 1:
        raise CudaAgentError("--concurrency must be at least 1")
    if kernelbench is not None:
        from .bench.kernelbench import levels_root

        kernelbench = levels_root(kernelbench).resolve()  # a wrong path fails now, not at the first open_task
    # Clients and supervisors stop a server with SIGTERM: unwind, so the judge pool shuts down too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with make_pool("local", _config(device, cache_dir, timing_seconds, timing_file), concurrency) as pool:
        task_dirs = [p.resolve() for p in tasks_from] if tasks_from else ([] if http is not None else None)
        store = SessionStore(root or default_root(), pool, probe_device(pool.backend), kernelbench, task_dirs)
        server = build_server(store)
        err.print(f"cuda-agent MCP server: {pool.backend} backend, sessions in {store.root}")
        if http is None:
            anyio.run(serve_stdio, server)
        else:
            err.print(f"listening on http://{host}:{http}{HTTP_PATH}")
            anyio.run(serve_http, server, host, http)


@app.command()
def replay(
    trajectory: Path = typer.Argument(..., help="An episode's trajectory.jsonl (or its directory)."),
    html: Optional[Path] = typer.Option(None, "--html", help="Where to write the HTML view (default: beside the trajectory)."),
    full: bool = typer.Option(False, "--full", help="Show tool outputs in full."),
) -> None:
    """Show an episode in the terminal and write a self-contained HTML view of it."""
    from .agent.replay import render_trajectory, write_html
    from .agent.trajectory import load_trajectory

    path = trajectory / "trajectory.jsonl" if trajectory.is_dir() else trajectory
    traj = load_trajectory(path)
    target = html or path.with_suffix(".html")
    write_html(traj, target)  # first: a reader that stops early (| head) still gets the file
    err.print(f"HTML view written to {target}")
    try:
        render_trajectory(traj, out, full=full)
        sys.stdout.flush()  # here, where a closed pipe is expected, not at exit
    except BrokenPipeError:  # the reader has seen enough
        _quiet_stdout()
    except SystemExit as exc:  # rich's console exits 1 on a closed pipe; the HTML is written: done
        if not isinstance(exc.__context__, BrokenPipeError):
            raise


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail again on a closed pipe."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def examples_dir() -> Path:
    here = Path(__file__).resolve().parents[2] / "examples"
    if not here.is_dir():
        raise CudaAgentError("the demo uses the examples/ folder of a source checkout; "
                             "install with `pip install -e .` from a clone of the repository")
    return here


@app.command()
def demo(
    example: str = typer.Option("fused_elementwise", "--example", help="Which example under examples/."),
    device: Optional[str] = DeviceOpt,
    as_json: bool = JsonOpt,
    timing_seconds: Optional[float] = TimingSecondsOpt,
    timing_file: Optional[Path] = TimingFileOpt,
    cache_dir: Optional[Path] = CacheOpt,
) -> None:
    """Judge one example solution with the best available backend and show the verdict."""
    from .device import resolve_backend
    from .solution import load_solution
    from .task import task_from_source

    backend = resolve_backend(device)
    root = examples_dir() / example
    if not (root / "model.py").is_file():
        names = sorted(p.name for p in examples_dir().iterdir() if (p / "model.py").is_file())
        raise CudaAgentError(f"no example named {example!r}; choose one of {', '.join(names)}")
    # An example may carry its task sized for a backend (model_cpu.py: the GPU's sizes take minutes to
    # time on a few CPU cores); it keeps the example's name.
    sized = root / f"model_{backend}.py"
    task_file = sized if sized.is_file() else root / "model.py"
    if not as_json:
        out.print(f"judging examples/{example}/{backend} against examples/{example}/{task_file.name} "
                  f"on the {backend} backend")
    task = task_from_source(task_file.read_text(), example, str(task_file))
    solution = load_solution(root / backend)
    raise typer.Exit(_run(task, solution, "profile", _config(backend, cache_dir, timing_seconds, timing_file), as_json,
                          title=f"demo: {example}"))


# -- training (cuda_agent.train) ---------------------------------------------------------------
def _train_app():
    from .train.cli import app as train_app

    return train_app


app.add_typer(_train_app(), name="train")


def main() -> None:
    try:
        app()
    except CudaAgentError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except BrokenPipeError:  # stdout's reader went away (| head): no traceback about it
        _quiet_stdout()
        sys.exit(1)


if __name__ == "__main__":
    main()
