"""SKILL.md: the instructions a workspace gives to whoever (or whatever) writes the kernels.

The text lives in ``files/SKILL.md.in``. Two kinds of markup are expanded:

* lines ``%if cuda`` / ``%if cpu`` ... ``%end`` keep the enclosed lines for that backend only;
* ``$name`` / ``${name}`` placeholders (:class:`string.Template`) are filled from the task and
  the device's facts; ``$$`` is a literal dollar sign.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from ..device import BACKENDS, DeviceInfo

FILES_DIR = Path(__file__).resolve().parent / "files"
SKILL_TEMPLATE = FILES_DIR / "SKILL.md.in"
UNKNOWN = "unknown"


def format_bytes(value: int | None) -> str:
    """``81559 MiB`` style sizes: the largest binary unit that keeps the number at least 1."""
    if value is None:
        return UNKNOWN
    size = float(value)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            break
        size /= 1024
    if unit == "bytes":
        return f"{value} bytes"
    return f"{size:.0f} {unit}" if size == int(size) else f"{size:.1f} {unit}"


def _plain(value: object) -> str:
    return UNKNOWN if value is None or value == "" else str(value)


def device_facts(backend: str, device: DeviceInfo | None) -> list[tuple[str, str]]:
    """(fact, value) rows for SKILL.md's device table; every value is ``unknown`` without a device."""
    d = device
    if backend == "cpu":
        return [
            ("CPU", _plain(d and d.name)),
            ("CPU cores available", _plain(d and d.cpu_cores)),
            ("last-level cache", format_bytes(d and d.last_level_cache_bytes)),
            ("torch version", _plain(d and d.torch_version)),
        ]
    return [
        ("GPU", _plain(d and d.name)),
        ("compute capability", _plain(d and d.compute_capability)),
        ("streaming multiprocessors (SMs)", _plain(d and d.multiprocessors)),
        ("device memory", format_bytes(d and d.memory_bytes)),
        ("L2 cache", format_bytes(d and d.l2_cache_bytes)),
        ("shared memory per block (opt-in maximum)", format_bytes(d and d.shared_memory_per_block_bytes)),
        ("shared memory per SM", format_bytes(d and d.shared_memory_per_multiprocessor_bytes)),
        ("32-bit registers per SM", _plain(d and d.registers_per_multiprocessor)),
        ("max resident threads per SM", _plain(d and d.max_threads_per_multiprocessor)),
        ("warp size", _plain(d and d.warp_size)),
        ("CUDA version (torch build)", _plain(d and d.cuda_version)),
        ("torch version", _plain(d and d.torch_version)),
    ]


def facts_table(rows: list[tuple[str, str]]) -> str:
    lines = ["| fact | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def select_backend(text: str, backend: str) -> str:
    """Keep the lines of ``text`` meant for ``backend``: ``%if NAME`` ... ``%end`` blocks."""
    out: list[str] = []
    active: str | None = None
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        directive = line.strip()
        if directive.startswith("%if "):
            name = directive[4:].strip()
            if active is not None or name not in BACKENDS:
                raise ValueError(f"{SKILL_TEMPLATE.name}:{number}: bad directive {directive!r}")
            active = name
        elif directive == "%end":
            if active is None:
                raise ValueError(f"{SKILL_TEMPLATE.name}:{number}: %end without %if")
            active = None
        elif active is None or active == backend:
            out.append(line)
    if active is not None:
        raise ValueError(f"{SKILL_TEMPLATE.name}: %if {active} is never closed")
    return "".join(out)


def render_skill(backend: str, device: DeviceInfo | None = None, task_name: str = "") -> str:
    """The text of SKILL.md for a workspace on ``backend`` ('cuda' or 'cpu')."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    text = select_backend(SKILL_TEMPLATE.read_text(), backend)
    values = {
        "task_name": task_name or UNKNOWN,
        "backend": backend,
        "device_name": _plain(device and device.name),
        "device_facts": facts_table(device_facts(backend, device)),
    }
    return Template(text).substitute(values)
