"""A C/C++/CUDA tokenizer for the static checks: comments dropped, string and character literals
kept as single tokens (so nothing inside them reads as code), preprocessor directives marked.

It follows the translation phases that matter for hiding names: backslash-newline splices are
removed first (``at::mat\\<newline>mul`` is one name), digraphs ``%:`` and ``%:%:`` read as ``#``
and ``##``, raw strings and digit separators (``1'000``) are recognised. Lines are those of the
original text, 1-based. It never raises: any character it does not know becomes a one-character
punctuator token.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

_SPLICE = re.compile(r"\\[ \t]*\r?\n")

_TOKEN = re.compile(
    r"""
    (?P<nl>\n)
  | (?P<ws>[ \t\r\f\v]+)
  | (?P<lc>//[^\n]*)
  | (?P<bc>/\*.*?(?:\*/|\Z))
  | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\()
  | (?P<str>(?:u8|[uUL])?"(?:[^"\\\n]|\\.)*(?:"|(?=\n)|\Z))
  | (?P<chr>(?:u8|[uUL])?'(?:[^'\\\n]|\\.)*(?:'|(?=\n)|\Z))
  | (?P<num>\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*)
  | (?P<id>[^\W\d]\w*)
  | (?P<op>%:%:|%:|::|->\*|->|\.\.\.|\#\#|<<=|>>=|<=>|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%^&|!=]=|.)
    """,
    re.X | re.S,
)
_INCLUDE_NAME = re.compile(r'\s*(?:<([^>\n]*)>|"([^"\n]*)")')
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)", re.S)

INCLUDE_DIRECTIVES = frozenset({"include", "include_next", "import", "embed"})


@dataclass(frozen=True)
class Token:
    kind: str        # 'id', 'num', 'str', 'chr' or 'op'
    text: str
    line: int
    directive: str = ""   # '' in code, else the directive of the line ('define', 'pragma', ...)


@dataclass(frozen=True)
class Include:
    header: str      # the name between <> or "", or the raw text of a computed include
    angled: bool
    line: int
    directive: str = "include"
    computed: bool = False   # ``#include MACRO``: the header is whatever the macro expands to


@dataclass
class Macro:
    name: str
    params: tuple[str, ...] | None     # None for an object-like macro
    body: list[Token]
    line: int


@dataclass
class Lexed:
    tokens: list[Token] = field(default_factory=list)
    includes: list[Include] = field(default_factory=list)
    macros: dict[str, Macro] = field(default_factory=dict)


def _splice(text: str) -> tuple[str, list[int]]:
    """Remove backslash-newlines; return the text and, for each removal, its offset in the result."""
    if "\\" not in text:
        return text, []
    out: list[str] = []
    marks: list[int] = []
    pos = 0
    size = 0
    for m in _SPLICE.finditer(text):
        piece = text[pos:m.start()]
        out.append(piece)
        size += len(piece)
        marks.append(size)
        pos = m.end()
    out.append(text[pos:])
    return "".join(out), marks


def lex(text: str) -> Lexed:
    """Tokens, includes and macro definitions of one C/C++/CUDA source."""
    spliced, splices = _splice(text.replace("\r\n", "\n"))
    newlines = [i for i, ch in enumerate(spliced) if ch == "\n"]

    def line_of(offset: int) -> int:
        return 1 + bisect_left(newlines, offset) + bisect_right(splices, offset)

    result = Lexed()
    tokens = result.tokens
    line_start = True       # no token yet on this logical line
    directive = ""          # directive of the current line, '' for code
    expect_directive = False
    define_name: Token | None = None
    define_params: list[str] | None = None
    define_body: list[Token] = []
    define_state = ""       # '', 'name', 'params', 'body'
    skip_line = False       # inside an #include line, already recorded

    def finish_define() -> None:
        nonlocal define_name, define_params, define_body, define_state
        if define_name is not None:
            params = tuple(define_params) if define_params is not None else None
            result.macros[define_name.text] = Macro(define_name.text, params, define_body, define_name.line)
        define_name, define_params, define_body, define_state = None, None, [], ""

    pos = 0
    size = len(spliced)
    while pos < size:
        m = _TOKEN.match(spliced, pos)
        if m is None:   # cannot happen: the last alternative takes any character
            break
        pos = m.end()
        kind = m.lastgroup
        if kind in ("raw", "delim"):
            # the body runs to )delim" and may span lines; found with one search, never backtracked
            close = spliced.find(")" + (m.group("delim") or "") + '"', pos)
            pos = size if close < 0 else close + len(m.group("delim") or "") + 2
            kind = "raw"
        if kind == "nl":
            if directive == "define":
                finish_define()
            line_start, directive, expect_directive, skip_line = True, "", False, False
            continue
        if kind in ("ws", "lc", "bc"):
            continue
        if skip_line:
            continue
        text_ = spliced[m.start():pos]
        if kind == "raw":
            kind = "str"
        line = line_of(m.start())
        if kind == "op" and text_ in ("#", "%:") and line_start:
            line_start = False
            expect_directive = True
            directive = "null"
            continue
        line_start = False
        if expect_directive:
            expect_directive = False
            if kind == "id":
                directive = text_
                if directive in INCLUDE_DIRECTIVES:
                    end = spliced.find("\n", m.end())
                    rest = _COMMENTS.sub(" ", spliced[m.end():end if end >= 0 else len(spliced)])
                    found = _INCLUDE_NAME.match(rest)
                    if found:
                        header = found.group(1) if found.group(1) is not None else found.group(2)
                        result.includes.append(Include(header.strip(), found.group(1) is not None, line, directive))
                    else:
                        result.includes.append(Include(rest.strip(), False, line, directive, computed=True))
                    skip_line = True
                    continue
                if directive == "define":
                    define_state = "name"
                    continue
                continue
        if kind == "op" and text_ == "%:%:":
            text_ = "##"
        elif kind == "op" and text_ == "%:":
            text_ = "#"
        token = Token(kind, text_, line, directive)
        if directive == "define":
            if define_state == "name":
                if kind == "id":
                    define_name = token
                    token = Token(kind, text_, line, "define-name")
                    # function-like only when '(' follows the name with no space
                    if spliced.startswith("(", m.end()):
                        define_state = "params"
                        define_params = []
                        tokens.append(token)
                        continue
                define_state = "body"
                tokens.append(token)
                continue
            if define_state == "params":
                if text_ == ")":
                    define_state = "body"
                elif kind == "id" or text_ == "...":
                    define_params.append(text_)  # type: ignore[union-attr]
                tokens.append(Token(kind, text_, line, "define-params"))
                continue
            if define_state == "body":
                define_body.append(token)
        tokens.append(token)
    if directive == "define":
        finish_define()
    return result
