"""A synthesis run: compose candidates, filter them in worker processes, write the dataset.

Everything a run learns goes to ``OUT/candidates.jsonl`` the moment it is known, one outcome per
line, so a crash loses at most the candidates in flight; a rerun with the same ``OUT`` reads the
log back and goes on where it stopped (same settings required, checked against ``OUT/run.json``).
Each candidate's composition depends only on the run's seed and its index, so a resumed run makes
the same candidate for the same index and kind as a straight run.

Which kind of task to compose next (``torch#1`` ... ``torch#5``, ``transformers#1``) is chosen by
deficit against the target mix (the paper's Table 3 by default), counting accepted and in-flight
tasks, so the accepted dataset follows the mix even though the filters pass some kinds less often.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pebble import ProcessExpired

from ..cluster.ray_pool import WorkerLost
from ..errors import SynthesisError
from ..judge.pools import JudgePool
from . import filters
from .compose import ComposeSettings, OfflineComposer
from .filters import FilterSettings
from .probe import ProbeSettings, check_candidate, init_worker
from .records import FILTERS, PAPER_MIX, SEED_KINDS, Candidate, FilterResult, Outcome
from .seeds import CrawlResult, crawl_seeds, load_catalogue, save_catalogue

LOG_NAME = "candidates.jsonl"
COMPOSER_ERRORS = "composer_errors.jsonl"
SESSIONS = "sessions.jsonl"                      # one line per invocation: how long, how much it made


@dataclass
class SynthOptions:
    n: int                                       # accepted tasks wanted
    out: Path
    device: str = "cpu"                          # resolved: "cuda" or "cpu"
    workers: int = 1
    seed: int = 0
    window_ms: tuple[float, float] = (1.0, 100.0)
    max_tensor_bytes: int = 1 << 30
    kernelbench: str | None = None
    model: str | None = None                     # compose with this LLM instead of offline
    provider: str = "openai"
    base_url: str | None = None
    mix: dict[str, float] = field(default_factory=lambda: dict(PAPER_MIX))
    include_transformers: bool = True
    timeout_s: float = 600.0                     # per candidate, every filter included
    max_candidates: int | None = None            # give up after this many (default 50 x n)
    max_minutes: float | None = None             # stop starting candidates after this long
    pool: str = "local"                          # worker processes here, or "ray": a Ray cluster's
    ray_address: str | None = None               # with pool="ray": HOST:PORT, or None to start one here
    multi_shape_share: float = 0.0               # offline tasks declaring workloads at other batch sizes
    half_share: float = 0.0                      # offline tasks in bfloat16 or float16

    def fingerprint(self) -> dict[str, Any]:
        """The settings that change which tasks are made and accepted: a resumed run must match."""
        shares = {name: value for name, value in (("multi_shape_share", self.multi_shape_share),
                                                  ("half_share", self.half_share)) if value}
        return json.loads(json.dumps({"device": self.device, "seed": self.seed, "window_ms": list(self.window_ms),
                "max_tensor_bytes": self.max_tensor_bytes, "kernelbench": self.kernelbench,
                "model": self.model, "mix": self.mix, "include_transformers": self.include_transformers,
                "filters": FilterSettings(window_ms=self.window_ms).to_dict(), **shares}))


@dataclass
class RunState:
    """What the log says so far, kept current as outcomes arrive."""

    outcomes: list[Outcome] = field(default_factory=list)
    next_index: int = 0
    composer_failures: int = 0
    in_flight: dict[str, int] = field(default_factory=dict)   # category -> candidates in flight

    @property
    def accepted(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.accepted]

    def accepted_by_category(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in self.accepted:
            counts[o.candidate.data_source] = counts.get(o.candidate.data_source, 0) + 1
        return counts


def categories_by_deficit(mix: dict[str, float], state: RunState) -> list[str]:
    """Categories from furthest below their share to furthest above, counting accepted and
    in-flight tasks."""
    counts = state.accepted_by_category()
    total = sum(counts.values()) + sum(state.in_flight.values()) + 1
    return sorted(mix, key=lambda c: (mix[c] * total - counts.get(c, 0) - state.in_flight.get(c, 0), mix[c]),
                  reverse=True)


def next_category(mix: dict[str, float], state: RunState) -> str:
    return categories_by_deficit(mix, state)[0]


def read_log(path: Path) -> RunState:
    """Outcomes recorded by earlier runs; a line cut by a crash is skipped."""
    state = RunState()
    if not path.exists():
        return state
    with path.open() as fh:
        for line in fh:
            try:
                outcome = Outcome.from_dict(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue
            state.outcomes.append(outcome)
            state.next_index = max(state.next_index, outcome.candidate.index + 1)
    errors = path.parent / COMPOSER_ERRORS
    if errors.exists():
        for line in errors.read_text().splitlines():
            try:
                state.next_index = max(state.next_index, json.loads(line)["index"] + 1)
                state.composer_failures += 1
            except (ValueError, KeyError, TypeError):
                continue
    return state


def _end_cut_line(path: Path) -> None:
    """A crash can leave the log's last line half written: end it, so new lines stay whole."""
    if path.exists() and path.stat().st_size:
        with path.open("rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")


def _append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def check_settings(out: Path, options: SynthOptions) -> None:
    """Refuse to mix a run's log with tasks made under other settings."""
    path = out / "run.json"
    wanted = options.fingerprint()
    if path.exists():
        try:
            recorded = json.loads(path.read_text()).get("settings")
        except ValueError:
            recorded = None
        if recorded is not None and recorded != wanted:
            changed = sorted(k for k in set(recorded) | set(wanted) if recorded.get(k) != wanted.get(k))
            raise SynthesisError(
                f"{out} holds a run made with other settings ({', '.join(changed)} differ). "
                "Use the same options to resume it, or another --out for a new dataset.")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"settings": wanted}, indent=1))


def load_or_crawl_seeds(out: Path, include_transformers: bool,
                        progress: Callable[[int, int], None] | None = None) -> CrawlResult:
    path = out / "seeds.json"
    if path.exists():
        return load_catalogue(path)
    result = crawl_seeds(include_transformers, progress)
    save_catalogue(result, path)
    return result


def check_options(options: SynthOptions) -> None:
    """Refuse options a run cannot use, before the seeds are crawled or any worker starts."""
    if options.n < 1:
        raise SynthesisError("-n must be at least 1 (the number of accepted tasks wanted)")
    if not (0 < options.window_ms[0] < options.window_ms[1]):
        raise SynthesisError(f"the workload window {options.window_ms} must be 0 < min < max (ms)")
    if options.workers < 1 or options.timeout_s <= 0 or options.max_tensor_bytes <= 0:
        raise SynthesisError("--workers, --timeout and --max-tensor-gb must be more than 0")
    if options.max_minutes is not None and options.max_minutes <= 0:
        raise SynthesisError("--max-minutes must be more than 0")
    if not (0 <= options.multi_shape_share <= 1 and 0 <= options.half_share <= 1):
        raise SynthesisError("--multi-shape-share and --half-share are shares of the tasks, from 0 to 1")
    if options.model and (options.multi_shape_share or options.half_share):
        raise SynthesisError("--multi-shape-share and --half-share set what the offline composer makes; an LLM "
                             "composer (--model) writes its own tasks: leave them out, or --model")
    if options.kernelbench:
        from ..bench.kernelbench import levels_root

        levels_root(options.kernelbench)


class Synthesizer:
    """One run. ``run()`` returns the final state; the dataset and card are written by ``finish``."""

    def __init__(self, options: SynthOptions, catalogue: CrawlResult,
                 on_progress: Callable[[RunState], None] | None = None):
        check_options(options)
        self.options = options
        self.catalogue = catalogue
        self.on_progress = on_progress
        self.composer = OfflineComposer(catalogue.seeds, ComposeSettings(
            options.window_ms, options.max_tensor_bytes, multi_shape_share=options.multi_shape_share,
            half_share=options.half_share))
        # Kinds that cannot be made here (no transformers seeds) leave the mix, which is
        # renormalised; otherwise their deficit would grow for ever and stall the run.
        makeable = {k: v for k, v in options.mix.items()
                    if v > 0 and (not k.startswith("transformers") or self.composer.hf_seeds)}
        if not makeable:
            raise SynthesisError(f"no kind of task in the mix {options.mix} can be made from these seeds")
        total = sum(makeable.values())
        self.mix = {k: v / total for k, v in makeable.items()}
        self.stochastic = {s.name for s in catalogue.seeds if s.stochastic}
        self.deadline = (time.monotonic() + options.max_minutes * 60) if options.max_minutes else None
        self.log = options.out / LOG_NAME
        _end_cut_line(self.log)
        _end_cut_line(options.out / COMPOSER_ERRORS)
        self.state = read_log(self.log)
        from .similarity import DedupIndex

        self.dedup = DedupIndex((o.candidate.code, _task_id(o.candidate.index)) for o in self.state.outcomes
                                if any(f.name == "duplicate" and f.passed for f in o.filters)
                                and not any(f.name == "worker" for f in o.filters))
        self.llm = None
        if options.model:
            from .llm_compose import make_llm_composer

            self.llm = make_llm_composer(options.model, options.provider, options.base_url,
                                         window_ms=options.window_ms)

    # -- composing ------------------------------------------------------------------------------
    async def _compose(self, index: int, category: str) -> Candidate | None:
        rng = random.Random(f"{self.options.seed}:{index}")
        if self.llm is None or category.startswith("transformers"):
            candidate = self.composer.compose(index, category, rng)
            if candidate is None:  # no chain of this kind could be sized into the window
                self._composer_failed(index, category, "no candidate of this kind fits the window and memory bound")
                for other in [c for c in categories_by_deficit(self.mix, self.state) if c != category]:
                    # Rather than insist on a kind that cannot be made, make the next most wanted.
                    candidate = self.composer.compose(index, other, rng)
                    if candidate is not None:
                        break
            return candidate
        from ..llm import LLMError
        from .llm_compose import CompositionError

        n_ops = int(category.split("#")[1])
        pool = self.composer.torch_seeds
        seeds = rng.sample(pool, min(n_ops, len(pool)))
        try:
            return await self.llm.compose(seeds, index, ComposeSettings(self.options.window_ms).draw_target(rng))
        except (CompositionError, LLMError) as exc:  # a model that cannot help now: log it, go on
            self._composer_failed(index, category, f"{type(exc).__name__}: {exc}")
            return None

    def _composer_failed(self, index: int, category: str, why: str) -> None:
        _append(self.options.out / COMPOSER_ERRORS, {"index": index, "category": category, "error": why})
        self.state.composer_failures += 1

    def _static_filters(self, cand: Candidate) -> list[FilterResult]:
        found = [filters.deterministic_ops(cand.code, cand.ops, self.stochastic)]
        if found[-1].passed:
            found.append(filters.duplicate(self.dedup.first_seen(cand.code)))
            if found[-1].passed:
                self.dedup.add(cand.code, _task_id(cand.index))
        return found

    # -- the run --------------------------------------------------------------------------------
    def _limit(self) -> int:
        return self.options.max_candidates or 50 * self.options.n

    def _tried(self) -> int:
        return len(self.state.outcomes) + self.state.composer_failures

    def _done(self) -> bool:
        late = self.deadline is not None and time.monotonic() > self.deadline
        return len(self.state.accepted) >= self.options.n or self._tried() >= self._limit() or late

    async def _one(self, pool, probe_settings: dict[str, Any]) -> None:
        index = self.state.next_index
        self.state.next_index += 1
        category = next_category(self.mix, self.state)
        self.state.in_flight[category] = self.state.in_flight.get(category, 0) + 1
        try:
            cand = await self._compose(index, category)
            if cand is None:
                return
            if cand.data_source != category:  # made as a fallback: count it under its own kind
                self.state.in_flight[category] -= 1
                category = cand.data_source
                self.state.in_flight[category] = self.state.in_flight.get(category, 0) + 1
            started = time.perf_counter()
            found = self._static_filters(cand)
            report: dict[str, Any] = {}
            if all(f.passed for f in found):
                try:
                    report = await _run_checks(pool, cand.to_dict(), probe_settings, self.options.timeout_s)
                except (TimeoutError, concurrent.futures.TimeoutError):
                    report = _worker_failed({"timeout_s": self.options.timeout_s},
                                            f"the checks did not finish within {self.options.timeout_s:g} s")
                except (ProcessExpired, WorkerLost) as exc:  # the worker died: a segfault, or killed for memory
                    report = _worker_failed({"error": str(exc)[:300]}, f"the worker process died: {exc}")
                except Exception as exc:  # the task broke out of the checks (e.g. called exit())
                    report = _worker_failed({"error": repr(exc)[:300]}, f"the checks raised {exc!r}")
                found += [FilterResult(**f) for f in report.get("filters", [])]
                if report.get("worker_failed"):
                    self.dedup.forget(cand.code)  # not a verdict on the program: it may come again
                if report.get("output_shapes") and cand.output_shape is None:
                    cand.output_shape = report["output_shapes"][0]
            outcome = Outcome(
                candidate=cand, filters=found,
                accepted=[f.name for f in found] == list(FILTERS) and all(f.passed for f in found),
                device=self.options.device, eager_ms=report.get("eager_ms"), compile_ms=report.get("compile_ms"),
                max_similarity=report.get("max_similarity"), most_similar=report.get("most_similar"),
                seconds=round(time.perf_counter() - started, 3))
            if report.get("estimate") and cand.estimate_ms is None:
                cand.estimate_ms = round(report["estimate"]["ms"], 4)
            if outcome.accepted and len(self.state.accepted) >= self.options.n:
                return  # enough already: a surplus task is not logged, so a resume stays exact
            _append(self.log, outcome.to_dict())
            self.state.outcomes.append(outcome)
        finally:
            self.state.in_flight[category] -= 1
            if self.on_progress:
                self.on_progress(self.state)

    async def run_async(self) -> RunState:
        import multiprocessing

        from pebble import ProcessPool

        options = self.options
        cpus = os.cpu_count() or 1
        probe = ProbeSettings(device=options.device, filters=FilterSettings(window_ms=options.window_ms),
                              kernelbench=options.kernelbench, lock_dir=str(options.out),
                              threads=max(1, cpus // max(1, options.workers)),
                              memory_fraction=0.9 / options.workers if options.device == "cuda" else None).to_dict()
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # workers compile side by side
        before = set(multiprocessing.active_children())
        if options.pool == "ray":
            pool = _ray_workers(options, probe)
        else:
            pool = ProcessPool(max_workers=options.workers, max_tasks=100, initializer=init_worker,
                               initargs=(probe,), context=multiprocessing.get_context("spawn"))
        try:
            running: set[asyncio.Task] = set()
            slots = options.workers * 2 if self.llm is None else max(options.workers * 2, 8)
            while not self._done() or running:
                while not self._done() and len(running) < slots and \
                        len(self.state.accepted) + sum(self.state.in_flight.values()) < options.n + slots and \
                        self._tried() + len(running) < self._limit():
                    running.add(asyncio.ensure_future(self._one(pool, probe)))
                if not running:
                    break
                finished, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    task.result()  # a bug in the pipeline itself must not pass silently
                if self._done():
                    for task in running:
                        task.cancel()
                    await asyncio.gather(*running, return_exceptions=True)
                    running = set()
        finally:
            if options.pool == "ray":
                pool.close()
            else:
                pool.stop()
                try:
                    pool.join(timeout=10)
                except TimeoutError:
                    pass
            # A worker deep in a long GPU call may outlive the pool's stop; left alone it would
            # keep the interpreter from exiting (multiprocessing joins its children at exit).
            for child in set(multiprocessing.active_children()) - before:
                child.kill()
            if self.llm is not None:
                await self.llm.aclose()
        return self.state

    def run(self) -> RunState:
        return asyncio.run(self.run_async())


def _worker_failed(measurement: dict[str, Any], reason: str) -> dict[str, Any]:
    """A report for checks that never finished: recorded under ``worker``, not under a filter."""
    return {"worker_failed": True,
            "filters": [filters.result("worker", False, measurement, reason[:300]).to_dict()]}


def _task_id(index: int) -> str:
    return f"synth-{index:06d}"


def finish(options: SynthOptions, state: RunState, catalogue: CrawlResult, elapsed_s: float | None = None) -> dict[str, Path]:
    """Write the dataset (accepted tasks in index order) and its card; returns the paths."""
    from .card import write_card
    from .dataset import task_row, write_dataset

    accepted = sorted(state.accepted, key=lambda o: o.candidate.index)[: options.n]
    rows = [task_row(o, _task_id(o.candidate.index)) for o in accepted]
    paths = write_dataset(rows, options.out)
    fs = FilterSettings(window_ms=options.window_ms)
    settings = {**options.fingerprint(), "n": options.n,
                # a published card names the checkout's folder, not where it sat on this machine
                "kernelbench": Path(options.kernelbench).name if options.kernelbench else None,
                "workers": options.workers,
                "composer_failures": state.composer_failures, "similarity_threshold": fs.max_similarity,
                "thresholds": {
                    "kernelbench_similarity": (f"<= {fs.max_similarity}" if options.kernelbench
                                               else "not checked (no --kernelbench)"),
                    "deterministic_runs": f"rerun within rtol {fs.rerun_rtol:g}, atol {fs.rerun_atol:g}",
                    "not_constant": f"spread > {fs.constant_rtol:g} x max|output|",
                    "input_dependent": f"differs beyond atol {fs.atol:g}, rtol {fs.rtol:g}",
                    "workload_window": (f"{options.window_ms[0]:g} to {options.window_ms[1]:g} ms eager, "
                                        + ("measured on the GPU" if options.device == "cuda"
                                           else "roofline estimate for an H100 (no GPU)")),
                    "compile_matches": f"within atol {fs.atol:g}, rtol {fs.rtol:g}",
                }}
    if elapsed_s is not None:
        settings["elapsed_s"] = round(elapsed_s, 1)
    counts = catalogue.counts()
    settings["seeds"] = {k: counts[k] for k in ("composable", "stochastic", "excluded")}
    paths["card"] = write_card(options.out, state.outcomes, {k: counts[k] for k in SEED_KINDS}, settings)
    return paths


def run_synthesis(options: SynthOptions, console=None, seeds_only: bool = False) -> tuple[RunState | None, CrawlResult, dict[str, Path]]:
    """The whole job with progress bars: crawl (or reuse) seeds, synthesise, write dataset and card."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not seeds_only:
        check_options(options)
    options.out.mkdir(parents=True, exist_ok=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[info]}"))
    with Progress(*columns, console=console, transient=False) as bars:
        crawl = bars.add_task("crawling seeds", total=None, info="")
        catalogue = load_or_crawl_seeds(options.out, options.include_transformers,
                                        lambda done, total: bars.update(crawl, completed=done, total=total))
        counts = catalogue.counts()
        bars.update(crawl, total=1, completed=1,
                    info=f"{counts['total']} seeds ({counts['composable']} composable, {counts['stochastic']} stochastic)")
        if seeds_only:
            return None, catalogue, {"seeds": options.out / "seeds.json"}
        bar = bars.add_task("accepted tasks", total=options.n, info="")
        started = time.perf_counter()

        def show(state: RunState) -> None:
            tried = len(state.outcomes)
            accepted = len(state.accepted)
            hours = max(time.perf_counter() - started, 1e-9) / 3600
            bars.update(bar, completed=min(accepted, options.n),
                        info=f"{tried} candidates, {accepted / max(tried, 1):.0%} accepted, "
                             f"{accepted / hours:,.0f}/h")

        synth = Synthesizer(options, catalogue, on_progress=show)  # validates the options first
        check_settings(options.out, options)
        show(synth.state)
        before = (len(synth.state.outcomes), len(synth.state.accepted))
        state = synth.run()
        elapsed = time.perf_counter() - started
    _append(options.out / SESSIONS, {
        "started": time.time() - elapsed, "seconds": round(elapsed, 2), "workers": options.workers,
        "device": options.device, "candidates": len(state.outcomes) - before[0],
        "accepted": len(state.accepted) - before[1]})
    if len(state.accepted) < options.n and console is not None:
        console.print(f"[yellow]only {len(state.accepted)} of {options.n} tasks accepted after "
                      f"{len(state.outcomes)} candidates; see the rejection reasons in the card[/yellow]")
    return state, catalogue, finish(options, state, catalogue, elapsed)


async def _run_checks(pool: JudgePool, candidate: dict[str, Any], probe: dict[str, Any], timeout_s: float) -> dict:
    """``check_candidate`` in a worker of ``pool``: a local pebble pool or a Ray one."""
    if hasattr(pool, "run"):
        return await pool.run(check_candidate, (candidate, probe), timeout_s)
    return await asyncio.wrap_future(pool.schedule(check_candidate, args=(candidate, probe), timeout=timeout_s))


def _ray_workers(options: SynthOptions, probe: dict[str, Any]) -> Any:
    """``options.workers`` checking workers on a Ray cluster, spread over its GPUs on CUDA. Each
    node keeps its timing locks in its own temporary directory; a KernelBench checkout given for
    decontamination must be at the same path on every node."""
    import tempfile

    from ..cluster.ray_pool import RayWorkerPool, connect

    resources = connect(options.ray_address)
    settings = dict(probe, lock_dir=os.path.join(tempfile.gettempdir(), "cuda-agent-synth-locks"))
    gpus = int(resources.get("GPU", 0))
    if options.device == "cuda":
        if not gpus:
            raise SynthesisError(f"--device cuda needs GPUs, and the Ray cluster at {options.ray_address or 'this machine'} "
                                 "has none; add GPU nodes or use --device cpu")
        per_gpu = -(-options.workers // gpus)
        settings.update(memory_fraction=0.9 / per_gpu, threads=max(1, int(resources.get("CPU", 1) // options.workers)))
        return RayWorkerPool(init_worker, (settings,), options.workers, gpus_per_worker=1.0 / per_gpu,
                             address=options.ray_address, max_tasks=100)
    return RayWorkerPool(init_worker, (settings,), options.workers, address=options.ray_address, max_tasks=100)
