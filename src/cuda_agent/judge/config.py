"""Settings of the judge. Defaults follow the paper (5 checks, atol = rtol = 1e-2, 5% margin)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import ConfigError


def default_cache_dir() -> Path:
    """``$CUDA_AGENT_CACHE``, else ``$XDG_CACHE_HOME/cuda-agent``, else ``~/.cache/cuda-agent``."""
    if env := os.environ.get("CUDA_AGENT_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cuda-agent"


@dataclass(frozen=True)
class TimingConfig:
    """How each of candidate, eager and compile is timed. Part of the baseline cache key."""

    warmup_calls: int = 5
    min_calls: int = 20
    max_calls: int = 200
    target_seconds: float = 2.0       # stop once this much time has been measured
    # Stop earlier once the median is known this well (relative half-width of its 95% interval);
    # None: the backend's default (timing.PRECISION).
    precision: float | None = None
    # A median less certain than this is not believed, and no speedup is claimed (None: the
    # backend's default, timing.MAX_UNCERTAINTY).
    max_uncertainty: float | None = None
    # How far the reference, timed beside the candidate, may stray from its eager baseline before
    # the machine is taken to have changed and no speedup is claimed (None: the backend's
    # default, timing.DRIFT_TOLERANCE).
    drift_tolerance: float | None = None
    flush_cache: bool = True          # read 2x the last-level cache before each call
    # Bytes that flush reads (None: twice the last-level cache, the GPU's L2 on cuda). Fewer
    # time a warmer cache, sooner: on a CPU whose last-level cache is hundreds of MB, the full
    # read takes tens of ms before every call, most of a short task's judge.
    flush_bytes: int | None = None
    # Baselines are timed in this many fresh processes (None: timing.BASELINE_SESSIONS for the
    # backend), and in more, up to the maximum, while a session's median is less precise than
    # ``precision`` or the sessions' medians lie further apart than the tolerance (None:
    # timing.BASELINE_TOLERANCE).
    baseline_sessions: int | None = None
    max_baseline_sessions: int = 5
    # A baseline session's calls may go past ``max_calls``, up to this many, while its median is
    # not yet known to ``precision`` and ``target_seconds`` of wall time have not passed since it
    # began: it keeps no outputs, and it is timed once per task and device, so a fast reference
    # with a few percent of jitter per call settles by timing longer rather than withholding every
    # candidate's speedup (session.TimedSession).
    max_baseline_calls: int = 2000
    baseline_tolerance: float | None = None
    # cpu backend: torch and OpenMP threads for every model. One by default, because a fork-join
    # region on a busy machine waits for its slowest thread and timings stop meaning anything.
    cpu_threads: int = 1

    def __post_init__(self) -> None:
        _at_least(self, 0, "warmup_calls")
        _at_least(self, 1, "min_calls", "max_calls", "max_baseline_sessions", "max_baseline_calls", "cpu_threads")
        _positive(self, "target_seconds")
        _positive(self, "precision", "max_uncertainty", "drift_tolerance", "baseline_tolerance", optional=True)
        _at_least(self, 1, "baseline_sessions", optional=True)
        _at_least(self, 4096, "flush_bytes", optional=True)

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_mapping(cls, fields: object) -> "TimingConfig":
        """A TimingConfig from a mapping of its fields (a training config's ``timing``, a timing
        file), every unknown name and bad value refused with a ConfigError that says what to write."""
        if not isinstance(fields, dict):
            raise ConfigError("timing", f"is a mapping of TimingConfig fields; got {fields!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(fields) - known):
            raise ConfigError("timing", f"has no field {', '.join(unknown)}; it takes {', '.join(sorted(known))}")
        try:
            return cls(**fields)
        except TypeError as exc:  # a value of the wrong type, compared with a number
            raise ConfigError("timing", f"has a value of the wrong type ({exc})") from None

    @classmethod
    def from_file(cls, path: Path) -> "TimingConfig":
        """A TimingConfig from a JSON or TOML file of its fields (``cuda-agent judge --timing``)."""
        import tomllib

        path = Path(path)
        if not path.is_file():
            raise ConfigError("timing", f"file {path} does not exist: write a JSON or TOML file of "
                                        "TimingConfig's fields, e.g. {\"target_seconds\": 0.5}")
        text = path.read_text()
        try:
            fields = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            kind = "TOML" if path.suffix == ".toml" else "JSON"
            raise ConfigError("timing", f"file {path} is not valid {kind}: {exc}") from None
        return cls.from_mapping(fields)


@dataclass(frozen=True)
class JudgeConfig:
    backend: str | None = None        # 'cuda', 'cpu', or None for the best available
    device_index: int = 0
    num_checks: int = 5
    atol: float = 1e-2                # float32/float64; float16 and bfloat16 get looser floors
    rtol: float = 1e-2
    norm_rtol: float | None = None    # bound on ||c - r|| / ||r||; None: the dtype's rtol
    recheck_calls: int = 3            # timed calls whose outputs are checked afterwards
    timing_attempts: int = 3          # candidate+calibration pairs tried before overheads fail it
    margin: float = 0.05              # reward Eq. 1: "faster" means more than 5% faster
    timing: TimingConfig = field(default_factory=TimingConfig)
    cache_dir: Path = field(default_factory=default_cache_dir)
    use_baseline_cache: bool = True
    fast_math: bool = False
    build_timeout_s: float = 300.0
    load_timeout_s: float = 300.0     # importing the candidate (a single-file one compiles here)
    call_timeout_s: float = 60.0      # one forward call during the checks
    timing_timeout_s: float = 600.0   # one timing run, and torch.compile's first (compiling) call
    # Resident memory one worker process may hold before the judge kills it. "auto": sized from the
    # machine (judge/memory.py): its RAM, or its cgroup's limit where lower, shared among the
    # workers of ``judges_at_once`` judges, within 2 to 32 GiB. A number of bytes fixes it; None:
    # no cap (the kernel's out-of-memory killer is then the only limit).
    memory_limit_bytes: int | str | None = "auto"
    judges_at_once: int = 1           # judges sharing the machine's memory (a pool's concurrency)
    isolate_network: bool = True
    confine_filesystem: bool = True   # candidate writes only to its private directory (Landlock)
    drop_privileges: bool = True      # when the judge runs as root, candidates run as nobody
    filter_syscalls: bool = True      # a seccomp filter on candidates and their compiles
    worker_python: str | None = None  # the interpreter workers run (default: this one)
    # Workers are forked from a trusted process that has imported torch once (judge/fork_server.py),
    # sandboxed after the fork as an exec'd one is before it: a start in milliseconds, not seconds.
    fork_workers: bool = True
    # The candidate's timed calls read inputs the trusted reference wrote into a buffer both map
    # (judge/input_arena.py), never inputs built in the candidate's own interpreter.
    stage_inputs: bool = True
    # Further places a candidate and its compiles may not read, beside the judge's cache: state of
    # what hosts the judge (a Ray pool hides Ray's session directory, its logs and sockets).
    hidden_paths: tuple[str, ...] = ()
    static_checks: bool = True        # scan the sources for forbidden constructs before building
    runtime_checks: bool = True       # record ATen ops, GPU kernels, threads and flags in forward
    check_precision: bool = True      # float32 outputs against the reference run in float64
    compare_on_device: bool = True    # cuda: outputs compared on the GPU (judge/device_exchange.py)
    floor_slack: float | None = 4.0   # times below (physical floor / slack) fail closed; None: off
    # Other judges' checks wait while one times on the device (judge/device_gate.py), not only
    # their timing: steadier times under load, at some throughput. On the cpu backend their
    # builds and process starts wait too, since the host's cores are the device timed there.
    exclusive_timing: bool = False
    seed: int | None = None           # fixes the secret seeds; for tests and reproduction only
    keep_samples: bool = False        # put every timed call's duration in the verdict

    def __post_init__(self) -> None:
        # Absolute, once: the compiler, ninja and the workers all run in other directories.
        object.__setattr__(self, "cache_dir", Path(self.cache_dir).expanduser().absolute())
        # A setting out of range would not fail: zero checks pass a candidate on "0/0 checks",
        # a negative tolerance fails every one. Refused here, for the CLI, the Python API and MCP.
        _at_least(self, 1, "num_checks", "timing_attempts")
        _at_least(self, 0, "device_index", "recheck_calls")
        _non_negative(self, "atol", "rtol", "margin")
        _non_negative(self, "norm_rtol", optional=True)
        _positive(self, "build_timeout_s", "load_timeout_s", "call_timeout_s", "timing_timeout_s")
        _positive(self, "floor_slack", optional=True)
        _at_least(self, 1, "judges_at_once")
        memory = self.memory_limit_bytes
        if memory not in (None, "auto") and (isinstance(memory, bool) or not isinstance(memory, int) or memory < 1):
            raise ConfigError("memory_limit_bytes", f"must be a number of bytes, 'auto' or None; got {memory!r}")
        if not isinstance(self.timing, TimingConfig):
            raise ConfigError("timing", f"must be a TimingConfig; got {type(self.timing).__name__}")


def _values(config, names: tuple[str, ...], optional: bool):
    for name in names:
        value = getattr(config, name)
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(name, f"must be a finite number; got {value!r}")
        yield name, value


def _at_least(config, low: int, *names: str, optional: bool = False) -> None:
    for name, value in _values(config, names, optional):
        if value != int(value) or value < low:
            raise ConfigError(name, f"must be a whole number of at least {low}; got {value!r}")


def _non_negative(config, *names: str, optional: bool = False) -> None:
    for name, value in _values(config, names, optional):
        if value < 0:
            raise ConfigError(name, f"must be at least 0; got {value!r}")


def _positive(config, *names: str, optional: bool = False) -> None:
    for name, value in _values(config, names, optional):
        if value <= 0:
            raise ConfigError(name, f"must be more than 0; got {value!r}")
