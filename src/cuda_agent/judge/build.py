"""Build a workspace solution into a ``cuda_extension`` module, in a judge-owned directory.

The build is content-addressed at two levels, so identical sources are never compiled twice:

* each object file is keyed by the toolchain, its source text and the solution's headers, so
  editing one kernel recompiles only that kernel;
* the linked module is keyed by its objects, so an unchanged solution is a cache hit, and so is
  an unchanged solution that failed to build: its compiler output is kept and given again.

Headers every binding needs (torch, pybind11) are precompiled once per toolchain. Only the
objects that are missing are handed to ninja, which runs the compilers in parallel under a
time limit; the judge's own ``binding.cpp`` and ``binding_registry.h`` replace whatever the
workspace holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from filelock import FileLock

from ..solution import (BINDING_SUFFIX, CUDA_SOURCE_SUFFIXES, CXX_SOURCE_SUFFIXES,
                        HEADER_SUFFIXES, Solution)
from . import diagnostics, linked_symbols
from .inline_extension import InlineCall
from .linked_symbols import LinkRecordError
from .sandbox import CompileSandbox
from .toolchain import EXTENSION_NAME, Toolchain

INFRA_DIR = Path(__file__).resolve().parent.parent / "workspace" / "files"
INFRA_BINDING = "binding.cpp"
INFRA_REGISTRY = "binding_registry.h"
INFRA_PCH = "binding_pch.h"
INFRA_INLINE_PCH = "inline_pch.h"   # torch/extension.h, which every load_inline main.cpp includes
# torch/extension.h precompiled costs about 52 s and 0.75 GB of disk per set of flags, and saves
# about 14 s of each later main.cpp (39 s without it, two cores): it pays from the fourth build
# with the same flags on, so it is made when the fourth asks. Only for calls without CUDA
# sources: beside a cuda.cu, whose nvcc run reads torch's headers three times over (30 s alone on
# an H200, 60-66 s with seven other judges building), main.cpp (7-22 s) is never what the build
# waits on, and making the header held up the fourth build by 38 s.
INLINE_PCH_AFTER = 4
MODULE_FILE = f"{EXTENSION_NAME}.so"
FAILED_FILE = "FAILED.json"  # beside where the module would be: a build that failed on its sources
LOG_LIMIT = 20_000
BUILD_NICENESS = 10  # the compilers' priority below the judge's (``_at_build_priority``)
# Compiler output that may say nothing about the sources: the machine ran short (memory, disk,
# processes) or the compiler itself broke. Such a failure is not remembered: the same sources may
# build the next time.
TRANSIENT_FAILURE = re.compile(r"Killed|terminated by signal|internal compiler error|No space left|"
                               r"Cannot allocate memory|virtual memory exhausted|out of memory|"
                               r"Resource temporarily unavailable|Too many open files", re.IGNORECASE)


@dataclass
class BuildResult:
    ok: bool
    module_path: Path | None
    errors: str            # short, for the candidate's author
    log: str               # the compiler output, truncated
    seconds: float
    cache_hit: bool
    objects_compiled: int
    objects_total: int
    timed_out: bool = False
    confinement: dict | None = None  # what the compilers ran under, in words; None: nothing built
    step_seconds: dict[str, float] | None = None  # each compiler and the link, from ninja's log


@dataclass(frozen=True)
class _Unit:
    rel: str        # path relative to the staged tree
    rule: str       # binding | cxx | nvcc | inline_cxx | inline_nvcc
    key: str        # content hash: names the object in the cache
    flags: tuple[str, ...] = ()  # the whole command's flags, for the inline rules


def _sha(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _infra_text(name: str) -> str:
    return (INFRA_DIR / name).read_text()


class ExtensionBuilder:
    """Builds solutions with one toolchain, caching under ``cache_dir/build``."""

    def __init__(self, toolchain: Toolchain, cache_dir: Path, timeout_s: float = 300.0,
                 jobs: int | None = None, use_pch: bool = True, sandbox: CompileSandbox | None = None):
        self.toolchain = toolchain
        self.sandbox = sandbox  # None: the compilers run as the judge does
        self.root = Path(cache_dir) / "build"
        self.timeout_s = timeout_s
        self.jobs = jobs or os.cpu_count() or 2
        self.use_pch = use_pch
        for sub in ("objects", "modules", "work", "pch"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    # -- planning -------------------------------------------------------------------------
    def _units(self, solution: Solution) -> list[_Unit]:
        tc = self.toolchain
        headers = "".join(f"{p}\0{solution.files[p]}\0" for p in solution.kernel_files(HEADER_SUFFIXES))
        infra = _infra_text(INFRA_REGISTRY) + _infra_text(INFRA_PCH)
        units = [_Unit(INFRA_BINDING, "binding", _sha(tc.identity, "binding", infra, _infra_text(INFRA_BINDING)))]
        suffixes = CXX_SOURCE_SUFFIXES + (CUDA_SOURCE_SUFFIXES if tc.backend == "cuda" else ())
        for rel in solution.kernel_files(suffixes):
            if rel.endswith(CUDA_SOURCE_SUFFIXES):
                rule = "nvcc"
            elif rel.endswith(BINDING_SUFFIX):
                rule = "binding"
            else:
                rule = "cxx"
            units.append(_Unit(rel, rule, _sha(tc.identity, rule, rel, solution.files[rel], headers, infra)))
        return units

    def module_key(self, solution: Solution) -> str:
        return _sha(self.toolchain.identity, *sorted(u.key for u in self._units(solution)))

    def cached_module(self, solution: Solution) -> Path | None:
        path = self.root / "modules" / self.module_key(solution) / MODULE_FILE
        return path if path.exists() else None

    def prepare(self) -> str:
        """Precompile the bindings' header and compile the judge's own ``binding.cpp`` now, as the
        first build would (once per toolchain; what is made already is found and nothing is
        compiled): a long run's first builds then neither wait on the header nor each compile
        the same object (eight judges' first builds did, 6-8 s of a core each). Returns why the
        header or the object is missing, or ""."""
        why = self._pch_header()[1]
        # Under a lock: a pool's processes warm all at once, and would each compile the object.
        with FileLock(str(self.root / "prepare.lock")):
            judge_only = self.build(Solution({}, "workspace", "the judge's binding.cpp alone"))
        return why or ("" if judge_only.ok else f"the judge's binding.cpp did not compile: {judge_only.errors}")

    # -- precompiled header -----------------------------------------------------------------
    def _pch_header(self, name: str = INFRA_PCH, flags: tuple[str, ...] | None = None,
                    after: int = 1) -> tuple[Path | None, str]:
        """The force-included header ``name``, precompiled once per toolchain and flags (the
        bindings' unless given: a header precompiled with other flags would be ignored), from
        the ``after``-th build that asks for it on (a header that costs more to precompile than
        one compile saves pays off only over several); None if PCH is off or not yet made."""
        if not self.use_pch:
            return None, ""
        flags = self.toolchain.binding_flags if flags is None else flags
        pch_dir = self.root / "pch" / (self.toolchain.identity if name == INFRA_PCH else _sha(name, *flags))
        header = pch_dir / name
        gch = pch_dir / (name + ".gch")
        failed = pch_dir / "FAILED"
        with FileLock(str(pch_dir) + ".lock"):
            if gch.exists():
                return header, ""
            if failed.exists():
                return header, failed.read_text()
            pch_dir.mkdir(parents=True, exist_ok=True)
            asked = pch_dir / "ASKED"  # how many builds have asked for it so far
            count = int(asked.read_text() or 0) + 1 if asked.exists() else 1
            if count < after:
                asked.write_text(str(count))
                return None, ""
            for infra in (name, INFRA_REGISTRY):
                shutil.copyfile(INFRA_DIR / infra, pch_dir / infra)
            tmp = pch_dir / (name + ".gch.tmp")
            cmd = [self.toolchain.cxx, *flags, "-x", "c++-header", str(header), "-o", str(tmp)]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s * 2,
                                      preexec_fn=_at_build_priority(None))
            except subprocess.TimeoutExpired:
                tmp.unlink(missing_ok=True)
                return None, "the precompiled header timed out; bindings compile without it this time"
            if proc.returncode != 0:
                # Without the PCH every binding still compiles, only slower; remember why.
                failed.write_text(diagnostics.summarize(proc.stderr))
                return header, failed.read_text()
            os.replace(tmp, gch)
            return header, ""

    # -- building -----------------------------------------------------------------------------
    def build(self, solution: Solution) -> BuildResult:
        """The workspace's ``cuda_extension`` module."""
        def stage(workdir: Path) -> None:
            solution.write_to(workdir)
            for name in (INFRA_BINDING, INFRA_REGISTRY):  # the judge's copies, never the workspace's
                shutil.copyfile(INFRA_DIR / name, workdir / name)

        return self._build(self._units(solution), self.module_key(solution), stage, self._pch_header, ())

    def build_inline(self, call: InlineCall) -> BuildResult:
        """The module a single-file solution's ``load_inline`` call asks for (inline_extension),
        built as load_inline would build it, with the judge's compilers, sandbox and caches."""
        tc, files = self.toolchain, call.files()
        if "cuda.cu" in files and not tc.nvcc:
            return BuildResult(False, None, "load_inline was given cuda_sources, but this judge's backend is "
                               f"{tc.backend}: judge CUDA solutions with --device cuda", "", 0.0, False, 0, 0)
        cxx_flags = (*_inline_cxx_flags(tc), *call.extra_cflags)
        units = self._inline_units(call, files)
        key = _sha(tc.identity, "inline", *call.extra_ldflags, *sorted(u.key for u in units))

        def stage(workdir: Path) -> None:
            for rel, text in files.items():
                (workdir / rel).write_text(text)

        def pch() -> tuple[Path | None, str]:
            if "cuda.cu" in files:
                return None, ""
            return self._pch_header(INFRA_INLINE_PCH, cxx_flags, after=INLINE_PCH_AFTER)

        return self._build(units, key, stage, pch, call.extra_ldflags)

    def _inline_units(self, call: InlineCall, files: dict[str, str]) -> list[_Unit]:
        tc, name_flag = self.toolchain, f"-DTORCH_EXTENSION_NAME={call.name}"
        cxx_unit = (name_flag, *_inline_cxx_flags(tc), *call.extra_cflags)
        units = [_Unit("main.cpp", "inline_cxx", _sha(tc.identity, "inline_cxx", *cxx_unit, files["main.cpp"]), cxx_unit)]
        if "cuda.cu" in files:
            flags = (*_inline_nvcc_flags(tc, call.extra_cuda_cflags), name_flag, *call.extra_cuda_cflags)
            key = _sha(tc.identity, "inline_nvcc", *flags, files["cuda.cu"])
            units.append(_Unit("cuda.cu", "inline_nvcc", key, flags))
        return units

    def inline_commands(self, call: InlineCall) -> dict[str, list[str]]:
        """Each compiler command a build of ``call`` runs, by file (``files()``'s names), without
        the precompiled header: for measuring a compile outside the judge (benchmarks)."""
        compilers = {"inline_cxx": self.toolchain.cxx, "inline_nvcc": self.toolchain.nvcc}
        return {u.rel: [compilers[u.rule], *u.flags, "-c", u.rel, "-o", u.rel + ".o"]
                for u in self._inline_units(call, call.files())}

    def _build(self, units: list[_Unit], key: str, stage, pch, extra_ldflags: tuple[str, ...]) -> BuildResult:
        start = time.perf_counter()
        module_dir = self.root / "modules" / key
        module = module_dir / MODULE_FILE
        if module.exists():
            return BuildResult(True, module, "", "", time.perf_counter() - start, True, 0, len(units))
        if (failed := self._failed_before(key)) is not None:
            kept = {"note": "nothing compiled: these sources failed to build before, and the compiler's answer "
                            "then is given again", **(failed.get("confinement") or {})}
            return BuildResult(False, None, failed["errors"], failed["log"], time.perf_counter() - start, True,
                               0, len(units), confinement=kept)

        pch_header, pch_note = pch()
        workdir = Path(tempfile.mkdtemp(prefix="build-", dir=self.root / "work"))
        try:
            stage(workdir)
            missing = [u for u in units if not self._object(u).exists()]
            self._write_ninja(workdir, units, missing, pch_header, extra_ldflags)
            # The compilers read, besides the staged sources, the cached objects they link and
            # the precompiled header: nothing else of the judge's.
            inputs = [self._object(u) for u in units if u not in missing]
            if pch_header is not None:
                inputs.append(pch_header.parent)
            ok, output, timed_out, confinement = self._run_ninja(workdir, inputs)
            for unit in missing:  # keep what compiled, even when another unit failed
                built = workdir / "obj" / f"{unit.key}.o"
                if built.exists():
                    # Never over another judge's copy: a build running now may have been granted
                    # that file (its sandbox allows the inode, not the name) and would lose it.
                    try:
                        os.link(built, self._object(unit))
                    except FileExistsError:
                        pass
                    except OSError:  # a file system without hard links: by name, as before
                        os.replace(built, self._object(unit))
            log = (pch_note + "\n" + output).strip()[-LOG_LIMIT:]
            steps = _step_seconds(workdir, missing)
            if not ok:
                summary = (f"the build exceeded its {self.timeout_s:.0f} s limit" if timed_out
                           else diagnostics.summarize(output, (str(workdir),)))
                if not timed_out:
                    self._remember_failure(key, output, summary, log, confinement)
                return BuildResult(False, None, summary, log, time.perf_counter() - start, False,
                                   len(missing), len(units), timed_out, confinement, steps)
            staged = Path(tempfile.mkdtemp(prefix="module-", dir=self.root / "work"))
            os.replace(workdir / MODULE_FILE, staged / MODULE_FILE)
            if not extra_ldflags:  # with link flags of its own, all the module's imports are its own
                try:
                    linked_symbols.record_own_imports([self._object(u) for u in units], staged)
                except (LinkRecordError, OSError, subprocess.SubprocessError):
                    pass  # no record: every import of the module counts as the solution's
            try:
                os.replace(staged, module_dir)
            except OSError:  # another judge linked the same module first; theirs is identical
                shutil.rmtree(staged, ignore_errors=True)
            return BuildResult(True, module, "", log, time.perf_counter() - start, False,
                               len(missing), len(units), confinement=confinement, step_seconds=steps)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    # -- failed builds ------------------------------------------------------------------------
    # The same sources with the same toolchain and flags fail the same way: a policy that submits
    # a broken file again (as RL policies do) gets the compiler's answer without the minute of
    # compiling again. Kept per sandbox setting: what a confined compiler could not read, an
    # unconfined one might.
    def _failure_record(self, key: str) -> Path:
        box = self.sandbox
        confinement = ("open" if box is None else
                       _sha(str(box.confine_filesystem), str(box.isolate_network), box.seccomp_program or b"",
                            *map(str, box.hidden))[:12])
        return self.root / "modules" / f"{key}-{confinement}-{FAILED_FILE}"

    def _failed_before(self, key: str) -> dict | None:
        try:
            return json.loads(self._failure_record(key).read_text())
        except (OSError, ValueError):
            return None

    def _remember_failure(self, key: str, output: str, summary: str, log: str, confinement: dict | None) -> None:
        if "error" not in output or TRANSIENT_FAILURE.search(output):
            return
        record = self._failure_record(key)
        tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"errors": summary, "log": log, "confinement": confinement}))
        os.replace(tmp, record)

    def _object(self, unit: _Unit) -> Path:
        return self.root / "objects" / f"{unit.key}.o"

    def _write_ninja(self, workdir: Path, units: list[_Unit], missing: list[_Unit],
                     pch_header: Path | None, extra_ldflags: tuple[str, ...] = ()) -> None:
        tc = self.toolchain
        q = shlex.join
        include_pch = f"-Winvalid-pch -include {shlex.quote(str(pch_header))}" if pch_header else ""
        lines = [
            "ninja_required_version = 1.3",
            f"rule binding\n  command = {shlex.quote(tc.cxx)} {q(tc.binding_flags)} {include_pch} -c $in -o $out",
            f"rule cxx\n  command = {shlex.quote(tc.cxx)} {q(tc.kernel_cxx_flags)} -c $in -o $out",
            f"rule inline_cxx\n  command = {shlex.quote(tc.cxx)} $flags {include_pch} -c $in -o $out",
            f"rule link\n  command = {shlex.quote(tc.cxx)} $in {q(tc.ldflags + extra_ldflags)} -o $out",
        ]
        if tc.nvcc:
            lines.append(f"rule nvcc\n  command = {shlex.quote(tc.nvcc)} {q(tc.nvcc_flags)} -c $in -o $out")
            lines.append(f"rule inline_nvcc\n  command = {shlex.quote(tc.nvcc)} $flags -c $in -o $out")
        missing_keys = {u.key for u in missing}
        objects = []
        for unit in units:
            if unit.key in missing_keys:
                out = f"obj/{unit.key}.o"
                lines.append(f"build {out}: {unit.rule} {unit.rel}")
                if unit.flags:  # a call's own flags: ninja would read a $ in them as its own
                    lines.append(f"  flags = {q(unit.flags).replace('$', '$$')}")
            else:
                out = str(self._object(unit))
            objects.append(out)
        lines.append(f"build {MODULE_FILE}: link {' '.join(objects)}")
        (workdir / "build.ninja").write_text("\n".join(lines) + "\n")

    def _run_ninja(self, workdir: Path, inputs: list[Path]) -> tuple[bool, str, bool, dict]:
        """(succeeded, output, timed out, confinement) of ninja in ``workdir``."""
        if self.sandbox is None:
            return (*self._ninja(workdir, None), {"filesystem": "not confined", "syscalls": "no seccomp filter"})
        with self.sandbox.preexec(workdir, inputs) as (preexec, confinement):
            return (*self._ninja(workdir, preexec), confinement)

    def _ninja(self, workdir: Path, preexec) -> tuple[bool, str, bool]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "LANG": "C",
            "LC_ALL": "C",
        }
        proc = subprocess.Popen(["ninja", "-k", "0", "-j", str(self.jobs)], cwd=workdir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, preexec_fn=_at_build_priority(preexec))
        try:
            output, _ = proc.communicate(timeout=self.timeout_s)
            return proc.returncode == 0, output, False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            return False, output, True


def _step_seconds(workdir: Path, compiled: list[_Unit]) -> dict[str, float]:
    """Seconds each compiler and the link ran, by source (``link`` for the link), read from
    ninja's own log: where a build's time went, without timing anything ourselves."""
    names = {f"obj/{unit.key}.o": unit.rel for unit in compiled} | {MODULE_FILE: "link"}
    steps: dict[str, float] = {}
    try:
        lines = (workdir / ".ninja_log").read_text().splitlines()
    except OSError:
        return steps
    for line in lines[1:]:  # after the "# ninja log vN" header: start ms, end ms, mtime, output, hash
        fields = line.split("\t")
        if len(fields) >= 4 and fields[3] in names and fields[0].isdigit() and fields[1].isdigit():
            steps[names[fields[3]]] = (int(fields[1]) - int(fields[0])) / 1000
    return steps


def _at_build_priority(preexec: Callable[[], None] | None) -> Callable[[], None]:
    """``preexec`` (a sandbox's, or none) after lowering the compilers' CPU priority. Builds are
    batch work that other judges' timing sessions share the host with: a compiler on the core a
    timing worker waits to wake on delays that worker's calls, and an honest candidate's timing
    then looks like hidden work. Lowered, the compilers still use every idle core."""

    def lowered() -> None:
        os.nice(BUILD_NICENESS)
        if preexec is not None:
            preexec()

    return lowered


def _inline_cxx_flags(tc: Toolchain) -> tuple[str, ...]:
    """load_inline's C++ flags: the bindings' headers and ABI, without their optimisation level
    or module name (load_inline adds neither; a call's extra_cflags choose)."""
    return tuple(f for f in tc.binding_flags if not f.startswith(("-O", "-DTORCH_EXTENSION_NAME=")))


def _inline_nvcc_flags(tc: Toolchain, extra: tuple[str, ...]) -> tuple[str, ...]:
    """load_inline's nvcc flags: the kernels', with torch's headers and its half-precision
    defines; the device's architecture unless the call names its own (as load_inline does)."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    own_arch = any(word.startswith(("-arch", "-gencode", "--generate-code")) for flag in extra for word in flag.split())
    headers: list[str] = []
    for flag in tc.binding_flags:
        if flag.startswith("-isystem"):  # nvcc takes -isystem with its path apart
            headers += ["-isystem", flag[len("-isystem"):]]
        elif flag.startswith(("-I", "-D_GLIBCXX", "-DTORCH_API")):
            headers.append(flag)
    base = [f for f in tc.nvcc_flags if not (own_arch and f == tc.arch)]
    return (*base, *COMMON_NVCC_FLAGS, *headers)
