"""``cuda-agent train``: data builders, the four stages on verl or TRL, and the CPU demo.

Every command checks its inputs (tasks load, datasets are not empty, the model path exists, a
GPU is there for a GPU engine, the engine is installed) before any long work starts, and every
stage writes as it goes, so the same command run again resumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from .extras import TrainError, check_loggers

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Train a model the CUDA Agent way: data, the four stages (verl or TRL), a CPU demo.")
err = Console(stderr=True)
out = Console()

ENGINES = ("verl", "trl")
NO_VALUE_ON_TRL = ("TRL has no critic, so there is no value stage on the trl engine: value pretraining is "
                   "verl's (--engine verl). On TRL go from rft straight to agentic, whose GRPO needs no critic.")


@app.command("data")
def data(
    tasks: str = typer.Argument(..., help="Tasks: a synthesis Parquet/JSONL, a KernelBench level folder, or a folder of .py tasks."),
    out_path: Path = typer.Option(..., "--out", "-o", help="The Parquet file to write (verl's RLHFDataset layout)."),
    mode: str = typer.Option("single_turn", "--mode", help="single_turn (the warm-up) or agentic (the agent loop)."),
    response_format: str = typer.Option("files", "--format", help="single_turn: files (code blocks after their paths) or tool_calls (the agent's write calls)."),
    backend: str = typer.Option("cuda", "--backend", help="The judge backend the rows are for: cuda or cpu."),
    data_source: str = typer.Option("cuda_agent/tasks", "--data-source", help="The rows' data_source (verl logs per source)."),
) -> None:
    """Build RL rows from tasks."""
    from .rows import load_task_set, rl_rows, write_parquet

    rows = rl_rows(load_task_set(tasks), mode=mode, backend=backend, data_source=data_source,
                   response_format=response_format)
    out.print(f"{len(rows)} {mode} rows written to {write_parquet(rows, out_path)}")


@app.command("rft-data")
def rft_data(
    trajectories: list[Path] = typer.Argument(..., help="Trajectory files, or folders holding agent runs (searched for trajectory.jsonl)."),
    out_path: Path = typer.Option(..., "--out", "-o", help="The Parquet file to write (verl's MultiTurnSFTDataset layout)."),
    min_reward: float = typer.Option(0.0, "--min-reward", help="Outcome rule: keep trajectories whose best reward is above this."),
    max_repeats: int = typer.Option(3, "--max-repeats", help="Pattern rule: drop a trajectory with this many identical calls in a row."),
) -> None:
    """Filter agent trajectories (outcome and pattern rules) into RFT rows, with a report."""
    import json

    from ..files import write_atomic
    from .rft import RFTFilter, find_trajectories, rft_rows
    from .rows import DatasetError, write_parquet

    rows, report = rft_rows(find_trajectories(trajectories), RFTFilter(min_reward, max_repeats))
    report_path = out_path.with_suffix(".report.json")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(report_path, json.dumps(report.to_dict(), indent=2))
    dropped = ", ".join(f"{rule} {n}" for rule, n in report.dropped.items() if n) or "none"
    out.print(f"{report.kept} of {report.trajectories} trajectories kept; dropped: {dropped}; report {report_path}")
    if not rows:
        raise DatasetError("no trajectory passed the filters, so there are no RFT rows; see the report")
    out.print(f"RFT rows written to {write_parquet(rows, out_path)}")


@app.command("demo")
def demo(
    out_dir: Path = typer.Option(Path("train-demo"), "--out", "-o", help="Where everything goes; rerun to resume."),
    grpo_steps: int = typer.Option(16, "--grpo-steps", help="GRPO steps against the judge."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda: the model trains there and the judge runs CUDA kernels."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="The judge's build and baseline cache."),
) -> None:
    """A tiny model learns on the CPU: RFT on expert trajectories, then GRPO against the real CPU judge."""
    from dataclasses import replace

    from ..cluster import LocalJudgePool
    from .demo.run import DemoSettings, demo_judge_config, run_demo
    from .models import resolve_device

    device = resolve_device(device)
    with LocalJudgePool(demo_judge_config(cache_dir, device), max_concurrent=2) as pool:
        summary = run_demo(out_dir, pool, replace(DemoSettings(), grpo_steps=grpo_steps, device=device),
                           say=lambda m: err.print(f"[dim]{m}[/]"))
    e = summary["evaluations"]
    out.print(f"mean judge reward: untrained {e['base']['mean']:.2f}, after RFT {e['rft']['mean']:.2f}, "
              f"after GRPO {e['grpo']['mean']:.2f} (p = {summary['grpo_vs_rft']['p_value']:.3g} that GRPO "
              "did not raise it)")
    best = summary["agent_episode"]["best"]
    out.print(f"the trained model as the agent: {'reward ' + str(best['reward']) if best else 'no correct solution'}")
    out.print(f"reward curve: {summary['reward_curve']['png']}; summary: {Path(out_dir) / 'demo.json'}")


def _stage_command(stage: str):
    def command(
        model: str = typer.Option(..., "--model", "-m", help="The starting model: a Hugging Face directory or hub id."),
        data_path: Optional[Path] = typer.Option(None, "--data", help="Rows: RL rows (train data), or RFT rows for rft."),
        engine: str = typer.Option("verl", "--engine", help="verl (the paper's PPO, GPUs over Ray) or trl (one machine, GRPO)."),
        out_dir: Path = typer.Option(Path("train-runs"), "--out", "-o", help="Runs go to OUT/STAGE; rerun to resume."),
        dry_run: bool = typer.Option(False, "--dry-run", help="verl: check and print the command and config, run nothing."),
        critic: Optional[str] = typer.Option(None, "--critic", help="verl: the critic's starting model (default: --model)."),
        resume_from: Optional[str] = typer.Option(None, "--resume-from", help="verl agentic: the value stage's checkpoint."),
        batch_size: int = typer.Option(1024, "--batch-size", help="verl: prompts per PPO step (the paper: 1024)."),
        rollout_n: int = typer.Option(1, "--rollout-n", help="verl: samples per prompt."),
        profile: Optional[str] = typer.Option(None, "--profile", help="verl: a launch profile that sets the layout below for a 7B model at 128k tokens: node8 (one 8-GPU node) or nodes4 (four, judges on nodes of their own); flags given win (docs/training.md)."),
        gpus: Optional[int] = typer.Option(None, "--gpus", help="verl: GPUs per node (default 8)."),
        nodes: Optional[int] = typer.Option(None, "--nodes", help="verl: nodes in the Ray cluster (default 1)."),
        rollout: str = typer.Option("vllm", "--rollout", help="verl: the rollout server, vllm or sglang."),
        tool_format: Optional[str] = typer.Option(None, "--tool-format", help="verl: the model's tool-call format, as verl's parsers name it: hermes (default; Qwen2.5, Qwen3), qwen3_coder, gpt-oss, glm, kimi, minimax, seed, deepseek_v4, gemma4. trl rft: native (default: the model's own tool template, as trl's agentic GRPO uses) or text (the agent's text protocol, as the hf client speaks)."),
        sequence_parallel: Optional[int] = typer.Option(None, "--sequence-parallel", help="verl: Ulysses sequence-parallel size (GPUs sharing one long sequence; default 1)."),
        steps: int = typer.Option(100, "--steps", help="trl: GRPO steps."),
        epochs: float = typer.Option(2.0, "--epochs", help="trl rft: epochs."),
        learning_rate: Optional[float] = typer.Option(None, "--lr", help="trl: learning rate (default: the paper's 3e-6 actor rate for GRPO, 1e-5 for RFT)."),
        generations: int = typer.Option(8, "--generations", help="trl: samples per prompt."),
        max_completion: int = typer.Option(8192, "--max-completion-tokens", help="trl: tokens per completion."),
        episodes: int = typer.Option(8, "--episodes", help="collect: trajectories per task."),
        device: Optional[str] = typer.Option(None, "--device", help="trl: cuda or cpu (default: cuda when visible); also the judge's backend."),
        reward_kind: str = typer.Option("milestone", "--reward", help="What the judge's reward pays: milestone (the paper's Eq. 1: -1, 1, 2, 3), continuous (t_compile / t) or sol (the SOL score against torch.compile, 0.5 at its time and 1 at the device's limit; cuda only). docs/training.md."),
        judge_concurrency: Optional[int] = typer.Option(None, "--judge-concurrency", help="Judge runs at once."),
        cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="The judge's cache."),
        judge_pool: Optional[str] = typer.Option(None, "--judge-pool", help="Where the reward's judges run: local (default), or ray (actors across the Ray cluster's GPUs; pip install 'cuda-agent\\[ray]')."),
        ray_address: Optional[str] = typer.Option(None, "--ray-address", help="trl with --judge-pool ray: the cluster's HOST:PORT (default: start one here). verl joins its own cluster."),
        ray_resource: Optional[str] = typer.Option(None, "--judge-ray-resource", help="With --judge-pool ray: a custom resource only judge nodes carry, keeping judges off the trainer's GPUs."),
        judge_gpus: Optional[str] = typer.Option(None, "--judge-gpus", help="trl with the local pool: the GPUs the judges time kernels on, e.g. 1 or 1,2 (default: every visible GPU but GPU 0, where the model trains; GPU 0 itself only on a one-GPU machine, with a warning). --judge-concurrency is then per GPU."),
        val_data: Optional[Path] = typer.Option(None, "--val-data", help="verl: held-out RL rows, validated before training and every --val-every steps (none without them)."),
        val_every: int = typer.Option(10, "--val-every", help="verl: steps between validations (with --val-data)."),
        gpu_memory: float = typer.Option(80.0, "--gpu-memory", help="verl: GiB of memory each GPU has, for the memory estimate (80: an H100)."),
        keep_checkpoints: int = typer.Option(3, "--keep-checkpoints", help="Newest checkpoints kept (verl: actor and critic each)."),
        logger: Optional[list[str]] = typer.Option(None, "--logger", help="Where training metrics go, besides the run's files: console (default), tensorboard, wandb; repeat for several."),
        extra: Optional[list[str]] = typer.Argument(None, help="verl: further Hydra overrides, passed through."),
    ) -> None:
        if engine not in ENGINES:
            raise TrainError(f"unknown engine {engine!r}; choose verl or trl")
        if keep_checkpoints < 1 or val_every < 1:
            raise TrainError("--keep-checkpoints and --val-every must be at least 1")
        from .pools import parse_gpus

        kept = {"keep_checkpoints": keep_checkpoints, "loggers": check_loggers(logger)}
        _check_reward(reward_kind, stage, device)
        judge_gpu_list = parse_gpus(judge_gpus)
        layout = _layout(profile, stage, engine, gpus, nodes, sequence_parallel, judge_pool, ray_resource)
        if chosen := layout["profile"]:
            err.print(f"[dim]launch profile {chosen.name}: {chosen.summary}; the judges run {chosen.judges}[/]")
        judge_pool, ray_resource = layout["judge_pool"], layout["judge_ray_resource"]
        judge = {"pool": judge_pool, "ray_address": ray_address, "ray_resource": ray_resource}
        if judge_pool not in ("local", "ray") or ((ray_address or ray_resource) and judge_pool != "ray"):
            raise TrainError(f"--judge-pool takes local or ray (--ray-address and --judge-ray-resource need ray); "
                             f"got {judge_pool!r}")
        if engine == "verl":
            if ray_address:
                raise TrainError("verl runs in its own Ray cluster and its judges join it: leave --ray-address out")
            if judge_gpu_list:
                raise TrainError("--judge-gpus places the trl engine's judges on one machine; verl's judges go where "
                                 "Ray puts them: --judge-pool ray --judge-ray-resource judge (docs/cluster.md)")
            _run_verl(stage, model, data_path, out_dir, dry_run, critic, resume_from, batch_size, rollout_n,
                      layout["gpus"], layout["nodes"], rollout, tool_format or "hermes", layout["sequence_parallel"], episodes,
                      device, judge_concurrency, cache_dir, layout["overrides"] + list(extra or []), judge,
                      {**kept, "val_every": val_every, "val_data": val_data, "reward_kind": reward_kind}, gpu_memory)
        else:
            if val_data is not None:
                raise TrainError("--val-data is verl's: the trl engine does not validate during training")
            if judge_gpu_list and judge_pool != "local":
                raise TrainError("--judge-gpus places the local pool's judges; a Ray pool's go where its resources say")
            _run_trl(stage, model, data_path, out_dir, steps, epochs, learning_rate, generations, max_completion,
                     episodes, device, judge_concurrency, cache_dir, {**judge, "gpus": judge_gpu_list},
                     {**kept, "tool_format": tool_format}, reward_kind)

    command.__doc__ = {
        "warmup": "Stage 1: single-turn RL on the judge's reward (verl: PPO with a critic; trl: GRPO).",
        "collect": "Stage 2a: run the warm-up model in the agent loop and keep its trajectories for RFT.",
        "rft": "Stage 2b: rejection fine-tuning on the filtered trajectories (assistant tokens only).",
        "value": "Stage 3: value pretraining, the critic alone learning on the RFT policy's rollouts (verl only).",
        "agentic": "Stage 4: agentic RL in the sandbox (verl: PPO continuing the value run; trl: multi-turn GRPO).",
    }[stage]
    return command


def _layout(profile: Optional[str], stage: str, engine: str, gpus: Optional[int], nodes: Optional[int],
            sequence_parallel: Optional[int], judge_pool: Optional[str], ray_resource: Optional[str]) -> dict:
    """The verl layout: each flag given, else the launch profile's value, else the default; the
    profile's Hydra overrides, which overrides given after the options follow (and so win); and
    the profile itself (None without one)."""
    from .profiles import get_profile

    chosen = get_profile(profile) if profile else None
    if chosen and engine != "verl":
        raise TrainError("--profile sets a verl layout (GPUs, nodes, sequence parallelism, offload); the trl engine "
                         "trains on one machine: leave --profile out")

    def pick(given, attribute, default):
        return given if given is not None else getattr(chosen, attribute) if chosen else default

    return {"gpus": pick(gpus, "gpus_per_node", 8), "nodes": pick(nodes, "nodes", 1),
            "sequence_parallel": pick(sequence_parallel, "sequence_parallel", 1),
            "judge_pool": pick(judge_pool, "judge_pool", "local"),
            # --judge-pool local given plainly: the profile's judge nodes are not wanted
            "judge_ray_resource": ray_resource if ray_resource is not None or judge_pool == "local"
            else (chosen.judge_ray_resource if chosen else None),
            "overrides": chosen.hydra_overrides(stage) if chosen else [], "profile": chosen}


JUDGES_SHARE_TRAINING_GPUS = (
    "[yellow]The judges will time kernels on the GPUs that hold the rollout engine and the FSDP workers: "
    "their timings are slowed and vary with training's load, and a kernel the judge cannot time steadily is "
    "paid no speedup. To keep them apart, start the judge nodes with `ray start --address HEAD:6379 "
    "--resources '{\"judge\": GPUS}'` and pass --judge-pool ray --judge-ray-resource judge "
    "(docs/cluster.md).[/]")


def _run_verl(stage, model, data_path, out_dir, dry_run, critic, resume_from, batch_size, rollout_n, gpus, nodes,
              rollout, tool_format, sequence_parallel, episodes, device, judge_concurrency, cache_dir, extra,
              judge, kept, gpu_memory) -> None:
    from . import stages
    from .models import check_model_path
    from .rows import read_parquet

    for rows_path in (data_path, kept["val_data"]):
        if rows_path is not None:
            read_parquet(rows_path)  # exists and is not empty
    val_data = kept.pop("val_data")
    options = stages.StageOptions(
        stage=stage, model=check_model_path(model) if not dry_run else model,
        data=str(data_path.resolve()) if data_path else None, out=out_dir, critic=critic, resume_from=resume_from,
        batch_size=batch_size, rollout_n=rollout_n, collect_samples=episodes, gpus_per_node=gpus, nodes=nodes,
        rollout=rollout, tool_format=tool_format, sequence_parallel=sequence_parallel, judge_backend=device or "cuda",
        judge_concurrency=judge_concurrency or 4, judge_cache_dir=str(cache_dir) if cache_dir else None,
        judge_pool=judge["pool"], judge_ray_resource=judge["ray_resource"], extra=extra,
        val_data=str(val_data.resolve()) if val_data else None, **kept)
    if options.judge_backend == "cuda" and not (options.judge_pool == "ray" and options.judge_ray_resource):
        err.print(JUDGES_SHARE_TRAINING_GPUS)
    if dry_run and not stages.verl_installed():
        argv, _ = stages.command(options)
        out.print(" \\\n  ".join(argv))
        err.print("[yellow]verl is not installed here, so this command was not checked against verl's own config "
                  "and no config file was written (pip install 'cuda-agent[verl]' to check it).[/]")
        return
    argv, directory = stages.prepare(options)
    out.print(" \\\n  ".join(argv))
    out.print(f"config: {directory / 'config.yaml'}")
    _check_memory(options.model, stage, directory, gpu_memory)
    if dry_run:
        return
    if stages.gpu_count() == 0:
        raise TrainError("the verl engine trains on GPUs (FSDP, vLLM or SGLang) and none is visible here; run it on "
                         "a GPU machine or Ray cluster, use --dry-run to check the config, or --engine trl")
    code = stages.run(argv, directory)
    if code != 0:
        raise TrainError(f"verl exited with {code}; its output is in {directory / 'run.log'}. Rerun the same command "
                         "to resume from the last checkpoint.")


def _check_memory(model: str, stage: str, directory: Path, gpu_memory_gib: float) -> None:
    """Print the per-GPU memory estimate of the composed stage (``memory_plan``), and refuse a
    layout that cannot fit, with what to change."""
    from omegaconf import OmegaConf
    from rich.table import Table

    from . import memory_plan

    shape, why = memory_plan.read_shape(model)
    if shape is None:
        err.print(f"[yellow]memory not estimated: {why}[/]")
        return
    config = OmegaConf.load(directory / "config.yaml")
    estimate = memory_plan.plan(shape, config, int(gpu_memory_gib * memory_plan.GIB), sft=stage == "rft")
    table = Table(title=f"memory per GPU, estimated: {shape.parameters / 1e9:.2f}B parameters, "
                        f"{gpu_memory_gib:.0f} GiB GPUs (memory_plan)")
    for column in ("phase", "part", "GiB"):
        table.add_column(column)
    for phase, part, gib in estimate.rows():
        table.add_row(phase, part, f"{gib:.1f}")
    out.print(table)
    if problems := estimate.problems():
        raise TrainError("this layout does not fit: " + "; ".join(problems))


def _check_reward(kind: str, stage: str, device: str | None) -> None:
    """Refuse a reward kind the stage or the judge's backend cannot pay."""
    from ..agent.env import REWARD_KINDS

    if kind not in REWARD_KINDS:
        raise TrainError(f"--reward takes {', '.join(REWARD_KINDS)}, not {kind!r}")
    if kind != "milestone" and stage in ("rft", "collect"):
        raise TrainError(f"--reward {kind} is for the RL stages: {stage} keeps trajectories by the milestone reward "
                         "(--min-reward of rft-data)")
    if kind == "sol" and device == "cpu":
        raise TrainError("--reward sol pays the SOL score, which needs the roofline the judge draws only on CUDA "
                         "devices: use --reward milestone (or continuous) with the cpu backend")


def _run_trl(stage, model, data_path, out_dir, steps, epochs, learning_rate, generations, max_completion, episodes,
             device, judge_concurrency, cache_dir, judge, kept, reward_kind="milestone") -> None:
    from .extras import require
    from .models import check_model_path, resolve_device
    from .rows import read_parquet

    if stage == "value":
        raise TrainError(NO_VALUE_ON_TRL)
    tool_format = trl_tool_format(stage, kept.pop("tool_format"))
    require("trl")
    device = resolve_device(device)
    _check_reward(reward_kind, stage, device)  # the backend is known only now
    model = check_model_path(model)
    if data_path is None:
        raise TrainError(f"the {stage} stage needs --data (cuda-agent train data / rft-data builds it)")
    rows = read_parquet(data_path)
    directory = out_dir.resolve() / stage
    if stage == "rft":
        from .trl_sft import SFTSettings, run_sft

        final = run_sft(model, rows, directory, SFTSettings(epochs=epochs, learning_rate=learning_rate or 1e-5,
                                                            tool_format=tool_format, **kept), device=device)
        out.print(f"RFT model: {final}")
        return
    from .pools import make_judge_pool

    if device == "cuda" and judge["pool"] == "local":
        import torch

        from .pools import place_judges

        judge["gpus"], warning = place_judges(judge["gpus"], torch.cuda.device_count())
        err.print(f"[yellow]{warning}[/]" if warning else
                  f"[dim]the model trains on GPU 0; the judges time kernels on GPU {', '.join(map(str, judge['gpus']))}[/]")
    elif judge["gpus"]:
        raise TrainError("--judge-gpus places judges that time on GPUs: it needs --device cuda and the local pool")
    with make_judge_pool({"backend": device, "cache_dir": cache_dir, "concurrency": judge_concurrency, **judge}) as pool:
        if stage == "collect":
            _collect(model, rows, directory, pool, episodes, device)
            return
        from .trl_grpo import GRPOSettings, run_agentic_grpo, run_grpo

        settings = GRPOSettings(steps=steps, learning_rate=learning_rate or 3e-6, num_generations=generations,
                                max_completion_length=max_completion, reward_kind=reward_kind, **kept)
        if stage == "warmup":
            from .reward import JudgeReward

            reward = JudgeReward(pool, kind=reward_kind, log_path=directory / "rewards.jsonl")
            final = run_grpo(model, rows, directory, reward, settings, device=device)
        else:
            final = run_agentic_grpo(model, rows, directory, pool, settings, device=device)
    out.print(f"{stage} model: {final}")


def trl_tool_format(stage: str, given: Optional[str]) -> str:
    """How the trl engine's RFT renders tool calls: the model's own tool template by default, the
    one trl's agentic GRPO drives the model through, so that what RFT trains on is what GRPO then
    samples; text (the agent's text protocol) for a model driven by the hf client instead."""
    from .trl_sft import TOOL_FORMATS

    if given is not None and given not in TOOL_FORMATS:
        raise TrainError(f"on the trl engine --tool-format is native or text, not {given!r} (verl's parsers' names "
                         "are for --engine verl)")
    if stage == "agentic" and given == "text":
        raise TrainError("trl's agentic GRPO calls tools through the model's own chat template (native); the text "
                         "protocol is the hf client's. Leave --tool-format out, and train the rft stage native too")
    return given or "native"


def _collect(model, rows, directory, pool, episodes, device) -> None:
    import asyncio

    from ..llm import make_client
    from ..agent.runner import plan_episodes, run_episodes, write_summary
    from .rows import task_of_row

    tasks = [task_of_row(r["extra_info"]) for r in rows]
    client = make_client("hf", model, device=device, temperature=1.0)
    specs = plan_episodes(tasks, directory, episodes)

    async def main():
        try:
            return await run_episodes(specs, client, pool, provider="hf", hidden=[directory], console=err)
        finally:
            await client.aclose()

    summary = write_summary(directory, asyncio.run(main()))
    out.print(f"{summary['episodes']} episodes in {directory}; {summary['correct']} found a correct solution. "
              f"Next: cuda-agent train rft-data {directory} --out rft.parquet")


for _stage in ("warmup", "collect", "rft", "value", "agentic"):
    app.command(_stage)(_stage_command(_stage))
