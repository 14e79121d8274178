"""LaTeX math in markdown: where it is (pandoc's rules) and its MathML (``latex2mathml``).

The one home of the math rules of this repository: the feedback HTML
(``autograder/nbgrader/feedback_math.py``) and the handout (``handouts/render_html.py``)
both find their formulas with :func:`replace_math` and convert them with
``latex2mathml``. Nothing here knows about the course: it needs the standard
library and ``latex2mathml`` only.

What counts as math follows pandoc's rules, so that prose with dollars stays prose:

* ``$$...$$`` is display math, and may span lines;
* ``$...$`` is inline math when the opening ``$`` has a non-space character on its
  right, and the next unescaped ``$`` has a non-space character on its left and no
  digit on its right: "between $5 and $10" is text; and inline math never spans
  a blank line;
* ``\\$`` is a dollar sign, and nothing in a code span or a fenced code block is
  math.

:func:`latex_to_mathml` applies them for markdown that a markdown renderer reads
afterwards (the feedback's cells): each formula becomes one line of MathML whose
text holds nothing markdown acts on, and a formula ``latex2mathml`` cannot read is
left as it was and reported.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from latex2mathml.converter import convert

FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
BLANK_LINE = re.compile(r"\n[ \t]*\n")
# Characters that markdown would act on inside the MathML's text (emphasis, escapes,
# code spans, links, table cells, dollars) are written as character references.
MARKDOWN_ACTIVE = {c: f"&#x{ord(c):X};" for c in "\\`*_[]|$~<>"}
TEXT = re.compile(r">([^<]+)<")
BARE_AMPERSAND = re.compile(r"&(?!#?[0-9A-Za-z]+;)")
# latex2mathml writes a command it does not know as text (``<mi>\foo</mi>``).
UNKNOWN_COMMAND = re.compile(r">[^<]*?(\\[A-Za-z]+|\\.)")
# Two gaps of latex2mathml 3.81 that it would show as LaTeX: amsmath's \arg (written
# like its \log, \deg, \ker: an upright <mi>), and escaped characters in \text.
ARG = "<mi>\\arg</mi>"
MTEXT = re.compile(r"<mtext>([^<]*)</mtext>")
TEXT_ESCAPE = re.compile(r"\\([_%#$&])")

Formula = Callable[[str, bool], str]  # (LaTeX between the delimiters, display) -> replacement


class MathError(ValueError):
    """A formula that latex2mathml cannot read."""


def convert_formula(latex: str, *, display: bool, strict: bool = False) -> str:
    """One formula as a single line of MathML, as latex2mathml writes it.

    With ``strict``, a command that latex2mathml does not know (which it would
    otherwise show as its LaTeX name) is a :class:`MathError` too.
    """
    source = latex.strip()
    try:
        mathml = convert(source, display="block" if display else "inline")
    except Exception as err:  # latex2mathml raises many unrelated types for bad input
        raise MathError(f"{source!r}: {type(err).__name__} {err}".strip()) from err
    mathml = _repair(mathml)
    if strict and (unknown := UNKNOWN_COMMAND.search(mathml)):
        raise MathError(f"{source!r}: latex2mathml does not know {unknown.group(1)}")
    return mathml.replace("\n", " ")


def _repair(mathml: str) -> str:
    """Fill the gaps of latex2mathml named at ``ARG`` and ``MTEXT``."""

    def text(match: re.Match) -> str:
        unescaped = TEXT_ESCAPE.sub(lambda e: "&amp;" if e.group(1) == "&" else e.group(1), match.group(1))
        return f"<mtext>{unescaped}</mtext>"

    return MTEXT.sub(text, mathml.replace(ARG, "<mi>arg</mi>"))


def markdown_safe(mathml: str) -> str:
    """``mathml`` with the characters of its text that markdown would act on as character references."""

    def text(match: re.Match) -> str:
        value = BARE_AMPERSAND.sub("&amp;", match.group(1))
        return ">" + "".join(MARKDOWN_ACTIVE.get(c, c) for c in value) + "<"

    return TEXT.sub(text, mathml)


def to_mathml(latex: str, *, display: bool) -> str:
    """One formula as a single line of MathML that markdown leaves alone."""
    return markdown_safe(convert_formula(latex, display=display))


# ------------------------------------------------------------------ finding the math
def _closing_dollar(text: str, start: int, end: int, *, double: bool) -> int | None:
    """Index of the unescaped ``$`` (``$$`` when ``double``) that closes math opened
    before ``start``, looking no further than ``end``, or None."""
    i = start
    while i < end:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "`":
            return None  # a code span starts before any closing $: this $ was prose
        if text[i] == "$":
            if double:
                if text.startswith("$$", i):
                    return i
                return None  # a single $ inside display math: not ours to guess
            return i
        i += 1
    return None


def _replace_in_text(text: str, formula: Formula) -> str:
    """Math in one stretch of markdown that holds no fenced code block."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":  # an escaped character, \$ included, stays as markdown wrote it
            out.append(text[i:i + 2])
            i += 2
            continue
        if c == "`":  # a code span: verbatim up to the closing run of as many backticks
            run = len(text[i:]) - len(text[i:].lstrip("`"))
            close = re.compile(r"(?<!`)" + "`" * run + r"(?!`)").search(text, i + run)
            stop = close.end() if close else i + run
            out.append(text[i:stop])
            i = stop
            continue
        if text.startswith("$$", i):
            close = _closing_dollar(text, i + 2, n, double=True)
            if close is not None and text[i + 2:close].strip():
                out.append(formula(text[i + 2:close], True))
                i = close + 2
                continue
            out.append("$$")
            i += 2
            continue
        if c == "$":
            paragraph_end = BLANK_LINE.search(text, i)
            limit = paragraph_end.start() if paragraph_end else n
            close = _closing_dollar(text, i + 1, limit, double=False)
            if (i + 1 < n and not text[i + 1].isspace() and close is not None and close > i + 1
                    and not text[close - 1].isspace() and not text[close + 1:close + 2].isdigit()):
                out.append(formula(text[i + 1:close], False))
                i = close + 1
                continue
            out.append("$")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def replace_math(markdown: str, formula: Formula) -> str:
    """``markdown`` with each formula (the rules of this module) replaced by
    ``formula(latex, display)``; ``latex`` is the text between the delimiters, as
    written, and ``display`` is True for ``$$...$$``. Code is left alone."""
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in markdown.splitlines(keepends=True):
        opened = FENCE.match(line)
        if fence is None and opened:
            out.append(_replace_in_text("".join(prose), formula))
            prose, fence = [], opened.group(1)
            out.append(line)
        elif fence is not None:
            out.append(line)
            closed = FENCE.match(line)
            if closed and closed.group(1)[0] == fence[0] and len(closed.group(1)) >= len(fence) \
                    and not line.strip().strip(fence[0]):
                fence = None
        else:
            prose.append(line)
    out.append(_replace_in_text("".join(prose), formula))
    return "".join(out)


def latex_to_mathml(markdown: str) -> tuple[str, list[str]]:
    """``markdown`` with its ``$...$`` and ``$$...$$`` math as MathML, and the formulas
    that could not be converted (left as they were)."""
    problems: list[str] = []

    def formula(latex: str, display: bool) -> str:
        try:
            return to_mathml(latex, display=display)
        except MathError as err:
            problems.append(str(err))
            delimiter = "$$" if display else "$"
            return f"{delimiter}{latex}{delimiter}"

    return replace_math(markdown, formula), problems
