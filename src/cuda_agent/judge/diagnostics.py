"""Turn pages of compiler output into the few lines a kernel author needs.

Keeps the first errors with file:line (gcc, nvcc, ptxas and linker formats), drops template
instantiation backtraces and notes, and strips the judge's build directory from paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_ERRORS = 6
MAX_LINE = 300

_GCC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: (?P<msg>.*)$")
_NVCC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?:catastrophic )?error:? (?P<msg>.*)$")
_PTXAS = re.compile(r"^ptxas (?:fatal|error)\s*:\s*(?P<msg>.*)$")
_LINK = re.compile(r"(undefined reference to .*|multiple definition of .*|cannot find -l\S+)")
_INCLUDED_FROM = re.compile(r"^\s*(In file included from|from |In instantiation of|required from)")


@dataclass(frozen=True)
class CompilerError:
    file: str | None
    line: int | None
    message: str

    def render(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file and self.line else (f"{self.file}: " if self.file else "")
        return f"{where}error: {self.message}"[:MAX_LINE]


def parse_errors(output: str, strip_prefixes: tuple[str, ...] = ()) -> list[CompilerError]:
    """All distinct errors in ``output``, in order of appearance."""
    errors: list[CompilerError] = []
    seen: set[tuple] = set()
    for raw in output.splitlines():
        line = raw.rstrip()
        for prefix in strip_prefixes:
            line = line.replace(prefix.rstrip("/") + "/", "")
        if _INCLUDED_FROM.match(line):
            continue
        err = None
        if m := _GCC.match(line):
            err = CompilerError(m["file"], int(m["line"]), m["msg"].strip())
        elif m := _NVCC.match(line):
            err = CompilerError(m["file"], int(m["line"]), m["msg"].strip())
        elif m := _PTXAS.match(line):
            err = CompilerError(None, None, "ptxas: " + m["msg"].strip())
        elif m := _LINK.search(line):
            err = CompilerError(None, None, "link: " + m.group(1).strip().rstrip(":"))
        if err is not None:
            key = (err.file, err.line, err.message)
            if key not in seen:
                seen.add(key)
                errors.append(err)
    return errors


def summarize(output: str, strip_prefixes: tuple[str, ...] = (), limit: int = MAX_ERRORS) -> str:
    """A short report: the first ``limit`` errors, a count of the rest, or the output's tail."""
    errors = parse_errors(output, strip_prefixes)
    if not errors:
        tail = [ln for ln in output.strip().splitlines() if ln.strip()][-15:]
        text = "\n".join(tail)
        for prefix in strip_prefixes:
            text = text.replace(prefix.rstrip("/") + "/", "")
        return text or "the build failed without printing an error"
    lines = [e.render() for e in errors[:limit]]
    if len(errors) > limit:
        lines.append(f"... and {len(errors) - limit} more errors")
    return "\n".join(lines)
