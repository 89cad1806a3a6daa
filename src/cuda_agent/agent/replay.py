"""Replays of an episode's trajectory: in the terminal with rich, and as one self-contained HTML page.

Both views show the same things: who ran what (task, model, backend, settings), every turn (the
model's text, each tool call with its arguments and result, judge verdicts, notes the model did not
see, new best solutions), and a summary. Both work on episodes that have not ended, whether still
running or stopped by a crash.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from ..files import write_atomic
from ..render import STATUS_STYLE
from .trajectory import Trajectory

MAX_LINES = 40            # terminal: lines of one output or file shown unless the full view is asked for
FOLD_LINES = 20           # HTML: longer outputs start folded
LONG_ARG_CHARS = 120      # a string argument longer than this (or multi-line) is shown as a block
INLINE_ARG_CHARS = 400    # compact JSON of the remaining arguments, clipped unless full
PATH_KEYS = ("path", "file_path", "filename", "file")


# -- shared text ----------------------------------------------------------------------------------

def fmt_speedup(value: Any) -> str:
    return f"{value:.2f}x" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def fmt_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s"


def verdict_line(verdict: dict[str, Any]) -> str:
    """One line: stage and status, correctness, speedups, reward, and the error if any."""
    status, stage = str(verdict.get("status", "?")), str(verdict.get("stage", "?"))
    parts = [f"{stage}: {status}"]
    compiled_only = stage == "compile" and status == "ok"
    if compiled_only:
        parts.append("compiled, not yet verified")
    elif status == "ok" or verdict.get("correct"):
        parts.append("correct" if verdict.get("correct") else "not correct")
    for key, label in (("speedup_vs_eager", "vs eager"), ("speedup_vs_compile", "vs torch.compile")):
        if verdict.get(key) is not None:
            parts.append(f"{fmt_speedup(verdict[key])} {label}")
    if not compiled_only:
        parts.append(f"reward {verdict.get('reward', '?')}")
    error = str(verdict.get("error") or "").strip()
    if status != "ok" and error:
        first = error.splitlines()[0]
        parts.append(first if len(first) <= 160 else first[:157] + "...")
    return " · ".join(parts)


def best_line(best: dict[str, Any]) -> str:
    parts = [f"{best.get('stage', '?')}", "correct" if best.get("correct") else "not correct",
             f"{fmt_speedup(best.get('speedup_vs_eager'))} vs eager",
             f"{fmt_speedup(best.get('speedup_vs_compile'))} vs torch.compile",
             f"reward {best.get('reward', '?')}"]
    if best.get("turn") is not None:
        parts.append(f"turn {best['turn']}")
    return " · ".join(parts)


def summary_rows(traj: Trajectory) -> list[tuple[str, str]]:
    """The episode's summary as (label, value) rows, shared by both views."""
    header, usage, counts = traj.header, traj.usage, traj.tool_counts()
    task = header.get("task") or {}
    verdicts = [v for _, _, v in traj.verdicts()]
    best = traj.best or (traj.end or {}).get("best")
    by_name = ", ".join(f"{name} {n}" for name, n in counts.items())
    rows = [
        ("task", str(task.get("name", "?"))),
        ("model", f"{header.get('model', '?')} ({header.get('provider', '?')})"),
        ("backend", str(header.get("backend", "?"))),
        ("turns", str(traj.turns)),
        ("stop reason", traj.stop_reason or "none recorded: the episode is still running or stopped unexpectedly"),
        ("elapsed", fmt_duration(traj.elapsed_s)),
        ("tokens", f"{usage.input_tokens:,} in / {usage.output_tokens:,} out"),
        ("tool calls", f"{traj.tool_calls()}" + (f" ({by_name})" if by_name else "")),
        ("tool errors", str(traj.tool_errors())),
        ("judge verdicts", f"{len(verdicts)} ({sum(1 for v in verdicts if v.get('correct'))} correct)"),
        ("best", best_line(best) if best else "none: no correct solution yet"),
    ]
    error = (traj.end or {}).get("error")
    if error:
        rows.insert(5, ("error", str(error)))
    if traj.ignored_tail:
        rows.append(("last line", f"partial ({len(traj.ignored_tail)} characters), ignored"))
    return rows


def header_settings(header: dict[str, Any]) -> dict[str, Any]:
    """The trajectory's settings by name, a group's fields as ``group.field`` (``env.max_turns``)."""
    flat: dict[str, Any] = {}
    for key, value in (header.get("settings") or {}).items():
        if isinstance(value, dict) and key in ("env", "context"):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """A tool call's arguments as a dict, or None where the model wrote something else."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def split_arguments(args: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Arguments for one compact line, with long or multi-line strings moved out as (label, text)
    blocks (file contents, edit strings, scripts)."""
    blocks: list[tuple[str, str]] = []

    def walk(value: Any, label: str) -> Any:
        if isinstance(value, str) and ("\n" in value or len(value) > LONG_ARG_CHARS):
            blocks.append((label, value))
            return f"<{len(value.splitlines())} lines: {label}>"
        if isinstance(value, dict):
            return {k: walk(v, f"{label}.{k}" if label else str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, f"{label}[{i}]") for i, v in enumerate(value)]
        return value

    return walk(args, ""), blocks


def compact_json(value: Any, full: bool = False) -> str:
    return _clip_inline(json.dumps(value, ensure_ascii=False), full)


def _clip_inline(text: str, full: bool) -> str:
    return text if full or len(text) <= INLINE_ARG_CHARS else text[:INLINE_ARG_CHARS - 3] + "..."


def turn_groups(traj: Trajectory) -> list[tuple[int, list[dict[str, Any]]]]:
    """Events grouped into runs of the same turn, in file order."""
    groups: list[tuple[int, list[dict[str, Any]]]] = []
    for event in traj.events:
        turn = int(event.get("turn") or 0)
        if groups and groups[-1][0] == turn:
            groups[-1][1].append(event)
        else:
            groups.append((turn, [event]))
    return groups


def unanswered_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls of the assistant messages in ``events`` that have no tool event there."""
    answered = {str((e.get("call") or {}).get("id")) for e in events if e.get("type") == "tool"}
    calls = [c for e in events if e.get("type") == "message"
             for c in (e.get("message") or {}).get("tool_calls") or []]
    return [c for c in calls if str(c.get("id")) not in answered]


def _lexer(tool: str, label: str, args: dict[str, Any]) -> str:
    if tool == "bash" or label in ("command", "script"):
        return "bash"
    path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str)), "")
    return Syntax.guess_lexer(path) if path else "text"


def _clip(text: str, full: bool, limit: int = MAX_LINES) -> str:
    lines = text.splitlines()
    if full or len(lines) <= limit:
        return text
    return "\n".join(lines[:limit]) + f"\n... {len(lines) - limit} more lines (the full view shows them)"


def _status_style(verdict: dict[str, Any]) -> str:
    if verdict.get("status") == "ok" and verdict.get("stage") != "compile" and not verdict.get("correct"):
        return "yellow"
    return STATUS_STYLE.get(str(verdict.get("status")), "white")


# -- terminal -------------------------------------------------------------------------------------

def render_trajectory(traj: Trajectory, console: Console, *, full: bool = False) -> None:
    """Print the episode: a header panel, every turn, and a summary table."""
    console.print(_header_panel(traj))
    for turn, events in turn_groups(traj):
        console.rule(f"turn {turn}" if turn else "prompt", style="dim")
        for event in events:
            console.print(_event_view(event, full))
        for call in unanswered_calls(events):
            args = _clip(str(call.get("arguments", "")), full, limit=5)
            console.print(Text(f"> {call.get('name')} {args}: no result recorded (the episode stopped while "
                               "it ran)", style="yellow"))
    console.print(_summary_table(traj))


def _header_panel(traj: Trajectory) -> Panel:
    header = traj.header
    task = header.get("task") or {}
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    rows = [("task", f"{task.get('name', '?')}  sha256 {str(task.get('sha256', ''))[:12]}"),
            ("source", str(task.get("source", ""))),
            ("model", f"{header.get('model', '?')} via {header.get('provider', '?')}"),
            ("backend", str(header.get("backend", "?"))),
            ("episode", str(header.get("episode_id", "?"))),
            ("started", str(header.get("started_at", "?")))]
    settings = header_settings(header)
    if settings:
        rows.append(("settings", ", ".join(f"{k}={v}" for k, v in settings.items())))
    for label, value in rows:
        table.add_row(label, Text(value))
    return Panel(table, title="episode", border_style="bold")


def _event_view(event: dict[str, Any], full: bool) -> RenderableType:
    kind = event.get("type")
    if kind == "message":
        return _message_view(event, full)
    if kind == "tool":
        return _tool_view(event, full)
    if kind == "best":
        files = ", ".join(sorted(event.get("files") or {}))
        return Panel(Text(f"{best_line(event)}\nfiles: {files}"), title="new best solution",
                     border_style="bold green")
    if kind == "note":
        return Text(f"note [{event.get('kind', '?')}] {event.get('text', '')}", style="dim")
    if kind == "end":
        elapsed = fmt_duration(float(event.get("elapsed_s") or 0))
        error = f" ({event['error']})" if event.get("error") else ""
        return Text(f"episode ended: {event.get('stop_reason')} after {elapsed}{error}", style="bold")
    return Text(f"{kind} event", style="dim")


def _message_view(event: dict[str, Any], full: bool) -> Panel:
    message = event["message"]
    role = str(message.get("role"))
    text = _clip(str(message.get("content") or ""), full) or "(no text)"
    styles = {"system": "dim", "user": "cyan", "assistant": "blue"}
    subtitle = _completion_facts(event) if role == "assistant" else None
    return Panel(Text(text), title=role, title_align="left", subtitle=subtitle, subtitle_align="right",
                 border_style=styles.get(role, "white"))


def _completion_facts(event: dict[str, Any]) -> str:
    facts = []
    usage = event.get("usage")
    if isinstance(usage, dict):
        facts.append(f"{usage.get('input_tokens', 0):,} in / {usage.get('output_tokens', 0):,} out tokens")
    if event.get("latency_s") is not None:
        facts.append(f"{float(event['latency_s']):.1f} s")
    if event.get("retries"):
        facts.append(f"{event['retries']} retries")
    if event.get("finish_reason"):
        facts.append(f"finish: {event['finish_reason']}")
    return " · ".join(facts)


def _tool_view(event: dict[str, Any], full: bool) -> RenderableType:
    call = event.get("call") or {}
    name, raw = str(call.get("name", "?")), str(call.get("arguments", ""))
    head = Text()
    head.append(f"> {name} ", style="bold magenta")
    parts: list[RenderableType] = [head]
    args = parse_arguments(raw)
    if args is None:
        head.append(_clip_inline(raw, full))
        head.append("  (arguments are not a JSON object)", style="red")
    else:
        inline, blocks = split_arguments(args)
        head.append(compact_json(inline, full))
        for label, text in blocks:
            parts.append(Text(f"  {label}:", style="dim"))
            parts.append(Padding(Syntax(_clip(text, full), _lexer(name, label, args), word_wrap=True), (0, 0, 0, 2)))
    head.append(f"  ({float(event.get('duration_s') or 0):.1f} s)", style="dim")
    result = str((event.get("message") or {}).get("content") or "")
    parts.append(Padding(Text(_clip(result, full) or "(no output)", style="red" if event.get("is_error") else ""),
                         (0, 0, 0, 2)))
    verdict = event.get("verdict")
    if isinstance(verdict, dict):
        parts.append(Padding(Text(f"verdict {verdict_line(verdict)}", style=f"bold {_status_style(verdict)}"),
                             (0, 0, 0, 2)))
    return Group(*parts)


def _summary_table(traj: Trajectory) -> Table:
    table = Table(title="summary", show_header=False, title_style="bold")
    table.add_column(style="bold")
    table.add_column()
    for label, value in summary_rows(traj):
        table.add_row(label, Text(value))
    return table


# -- HTML -----------------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; white-space: pre-wrap; margin: 0.3em 0; }
.turn { border-left: 3px solid #ccc; padding-left: 1em; margin: 1.2em 0; }
.msg { margin: 0.6em 0; }
.role { font-weight: bold; }
.system { color: #777; } .user { color: #0a6c8a; } .assistant { color: #1a4fb5; }
.tool { margin: 0.6em 0 0.6em 1em; }
.call { font-family: monospace; font-weight: bold; color: #7a1f7a; }
.error pre, pre.error { background: #fdecec; color: #a00; }
.verdict { font-family: monospace; font-weight: bold; padding: 0.2em 0.4em; display: inline-block; }
.ok { color: #176b1d; } .warn { color: #8a6d00; } .bad { color: #a00; } .forbidden { color: #8a1f8a; }
.note { color: #888; font-style: italic; }
.best { border: 2px solid #2a8a2a; background: #effaef; padding: 0.4em 0.8em; margin: 0.6em 0; }
.dim { color: #888; }
"""


def write_html(traj: Trajectory, path: Path | str) -> None:
    """Write the episode as one self-contained HTML page (no scripts, no external files)."""
    write_atomic(Path(path), render_html(traj))


def render_html(traj: Trajectory) -> str:
    task = (traj.header.get("task") or {}).get("name", "?")
    title = f"{task}: {traj.header.get('model', '?')}"
    body = [f"<h1>{_e(title)}</h1>", _html_summary(traj), _html_run(traj), _html_speedups(traj),
            _html_timeline(traj), _html_best(traj)]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _rows(rows: list[tuple[str, str]]) -> str:
    return "".join(f"<tr><th>{_e(label)}</th><td>{_e(value)}</td></tr>" for label, value in rows)


def _pre(text: str, label: str, error: bool = False, fold: bool = True) -> str:
    cls = ' class="error"' if error else ""
    block = f"<pre{cls}>{_e(text)}</pre>"
    lines = len(text.splitlines())
    if not fold or lines <= FOLD_LINES:
        return block
    return f"<details><summary>{_e(label)} ({lines} lines)</summary>{block}</details>"


def _html_summary(traj: Trajectory) -> str:
    return f'<section id="summary"><h2>Summary</h2><table>{_rows(summary_rows(traj))}</table></section>'


def _html_run(traj: Trajectory) -> str:
    header = traj.header
    task = header.get("task") or {}
    rows = [("episode", str(header.get("episode_id", "?"))), ("started", str(header.get("started_at", "?"))),
            ("provider", str(header.get("provider", "?"))), ("task sha256", str(task.get("sha256", ""))),
            ("task source", str(task.get("source", "")))]
    rows += [(f"setting: {k}", json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v)
             for k, v in header_settings(header).items()]
    return f'<section id="run"><h2>Run</h2><table>{_rows(rows)}</table></section>'


def _html_speedups(traj: Trajectory) -> str:
    verdicts = traj.verdicts()
    if not verdicts:
        return ('<section id="speedups"><h2>Judge verdicts over turns</h2>'
                '<p class="dim">No judge verdicts.</p></section>')
    head = "".join(f"<th>{h}</th>" for h in ("turn", "tool", "stage", "status", "correct", "vs eager",
                                             "vs torch.compile", "reward"))
    rows = []
    for turn, tool, v in verdicts:
        cells = [tool, v.get("stage", "?"), v.get("status", "?"), "yes" if v.get("correct") else "no",
                 fmt_speedup(v.get("speedup_vs_eager")), fmt_speedup(v.get("speedup_vs_compile")),
                 v.get("reward", "?")]
        rows.append(f'<tr class="{_css_class(v)}"><td><a href="#turn-{turn}">{turn}</a></td>'
                    + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    return ('<section id="speedups"><h2>Judge verdicts over turns</h2>'
            f"<table><tr>{head}</tr>{''.join(rows)}</table></section>")


def _css_class(verdict: dict[str, Any]) -> str:
    style = _status_style(verdict)
    return {"green": "ok", "yellow": "warn", "red": "bad", "magenta": "forbidden"}.get(style, "")


def _html_timeline(traj: Trajectory) -> str:
    parts = ['<section id="timeline"><h2>Timeline</h2>']
    for turn, events in turn_groups(traj):
        parts.append(f'<div class="turn"><h3 id="turn-{turn}">{_e(f"Turn {turn}" if turn else "Prompt")}</h3>')
        parts += [_html_event(event) for event in events]
        for call in unanswered_calls(events):
            parts.append(f'<div class="tool"><span class="call">{_e(call.get("name"))}</span> '
                         f'<span class="warn">no result recorded (the episode stopped while it ran)</span>'
                         f'{_pre(str(call.get("arguments", "")), "arguments")}</div>')
        parts.append("</div>")
    parts.append("</section>")
    return "\n".join(parts)


def _html_event(event: dict[str, Any]) -> str:
    kind = event.get("type")
    if kind == "message":
        return _html_message(event)
    if kind == "tool":
        return _html_tool(event)
    if kind == "best":
        files = ", ".join(sorted(event.get("files") or {}))
        return f'<div class="best"><b>New best solution:</b> {_e(best_line(event))}<br>files: {_e(files)}</div>'
    if kind == "note":
        return f'<p class="note">note [{_e(event.get("kind", "?"))}] {_e(event.get("text", ""))}</p>'
    if kind == "end":
        elapsed = fmt_duration(float(event.get("elapsed_s") or 0))
        error = f" ({event['error']})" if event.get("error") else ""
        return f"<p><b>Episode ended: {_e(event.get('stop_reason'))} after {_e(elapsed)}{_e(error)}</b></p>"
    return f'<p class="dim">{_e(kind)} event</p>'


def _html_message(event: dict[str, Any]) -> str:
    message = event["message"]
    role = str(message.get("role"))
    facts = _completion_facts(event) if role == "assistant" else ""
    facts_html = f' <span class="dim">{_e(facts)}</span>' if facts else ""
    content = str(message.get("content") or "")
    body = _pre(content, f"{role} message") if content else '<p class="dim">(no text)</p>'
    return f'<div class="msg"><span class="role {_e(role)}">{_e(role)}</span>{facts_html}{body}</div>'


def _html_tool(event: dict[str, Any]) -> str:
    call = event.get("call") or {}
    name, raw = str(call.get("name", "?")), str(call.get("arguments", ""))
    args = parse_arguments(raw)
    duration = f"{float(event.get('duration_s') or 0):.1f} s"
    parts = [f'<div class="tool"><span class="call">&gt; {_e(name)}</span> ']
    if args is None:
        parts.append(f'<code>{_e(raw)}</code> <span class="bad">(arguments are not a JSON object)</span>')
    else:
        inline, blocks = split_arguments(args)
        parts.append(f"<code>{_e(compact_json(inline, full=True))}</code>")
        parts += [_html_argument(label, text) for label, text in blocks]
    parts.append(f' <span class="dim">({_e(duration)})</span>')
    result = str((event.get("message") or {}).get("content") or "")
    parts.append(_pre(result or "(no output)", "output", error=bool(event.get("is_error"))))
    verdict = event.get("verdict")
    if isinstance(verdict, dict):
        parts.append(f'<div class="verdict {_css_class(verdict)}">verdict {_e(verdict_line(verdict))}</div>')
    parts.append("</div>")
    return "".join(parts)


def _html_argument(label: str, text: str) -> str:
    lines = len(text.splitlines())
    opened = " open" if lines <= FOLD_LINES else ""
    return f"<details{opened}><summary>{_e(label)} ({lines} lines)</summary><pre>{_e(text)}</pre></details>"


def _html_best(traj: Trajectory) -> str:
    best = traj.best
    if best is None:
        return '<section id="best"><h2>Best solution</h2><p class="dim">None: no correct solution yet.</p></section>'
    files = best.get("files") or {}
    parts = ['<section id="best"><h2>Best solution</h2>', f'<p class="best">{_e(best_line(best))}</p>']
    parts += [f"<details open><summary>{_e(rel)}</summary><pre>{_e(files[rel])}</pre></details>"
              for rel in sorted(files)]
    parts.append("</section>")
    return "\n".join(parts)
