"""Math in the feedback HTML without a network: LaTeX becomes MathML when feedback is made.

nbgrader's feedback template loads MathJax from a CDN to typeset ``$...$`` in the
browser; offline (an exam room, a student's train ride, this course's machines)
the formulas stay raw LaTeX. Instead, :class:`LatexToMathML` (one of
``GenerateFeedback.preprocessors``) converts the math of every markdown cell, and
of the graders' comments, to MathML with ``latex2mathml``, which browsers render
natively; :class:`FeedbackExporter` renders nbgrader's feedback template with a
``mathjax.html.j2`` of this course's that loads nothing (see ``TEMPLATES``).

What counts as math follows pandoc's rules, so that prose with dollars stays prose:

* ``$$...$$`` is display math, and may span lines;
* ``$...$`` is inline math when the opening ``$`` has a non-space character on its
  right, and the next unescaped ``$`` has a non-space character on its left and no
  digit on its right: "between $5 and $10" is text; and inline math never spans
  a blank line;
* ``\\$`` is a dollar sign, and nothing in a code span or a fenced code block is
  math.

A formula ``latex2mathml`` cannot read is left as it was, with a warning.
"""
from __future__ import annotations

import re
from pathlib import Path

from latex2mathml.converter import convert
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

import nbgrader

# autograder/templates/week6_feedback: nbgrader's "feedback" template (its conf.json
# names it as the base) with an empty mathjax macro that shadows nbconvert's.
TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "week6_feedback"
NBGRADER_TEMPLATES = Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"
TEMPLATE_DIRS = [str(TEMPLATES), str(NBGRADER_TEMPLATES)]  # ours first: its mathjax.html.j2 wins

FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
BLANK_LINE = re.compile(r"\n[ \t]*\n")
# Characters that markdown would act on inside the MathML's text (emphasis, escapes,
# code spans, links, table cells, dollars) are written as character references.
MARKDOWN_ACTIVE = {c: f"&#x{ord(c):X};" for c in "\\`*_[]|$~<>"}
TEXT = re.compile(r">([^<]+)<")
BARE_AMPERSAND = re.compile(r"&(?!#?[0-9A-Za-z]+;)")


class MathError(ValueError):
    """A formula that latex2mathml cannot read."""


def to_mathml(latex: str, *, display: bool) -> str:
    """One formula as a single line of MathML that markdown leaves alone."""
    try:
        mathml = convert(latex.strip(), display="block" if display else "inline")
    except Exception as err:  # latex2mathml raises many unrelated types for bad input
        raise MathError(f"{latex.strip()!r}: {type(err).__name__} {err}".strip()) from err

    def text(match: re.Match) -> str:
        value = BARE_AMPERSAND.sub("&amp;", match.group(1))
        return ">" + "".join(MARKDOWN_ACTIVE.get(c, c) for c in value) + "<"

    return TEXT.sub(text, mathml.replace("\n", " "))


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


def _convert_text(text: str, problems: list[str]) -> str:
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
                out.append(_formula(text[i + 2:close], True, text[i:close + 2], problems))
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
                out.append(_formula(text[i + 1:close], False, text[i:close + 1], problems))
                i = close + 1
                continue
            out.append("$")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _formula(latex: str, display: bool, original: str, problems: list[str]) -> str:
    try:
        return to_mathml(latex, display=display)
    except MathError as err:
        problems.append(str(err))
        return original


def latex_to_mathml(markdown: str) -> tuple[str, list[str]]:
    """``markdown`` with its ``$...$`` and ``$$...$$`` math as MathML, and the formulas
    that could not be converted (left as they were)."""
    problems: list[str] = []
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in markdown.splitlines(keepends=True):
        opened = FENCE.match(line)
        if fence is None and opened:
            out.append(_convert_text("".join(prose), problems))
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
    out.append(_convert_text("".join(prose), problems))
    return "".join(out), problems


class LatexToMathML(Preprocessor):
    """Convert the LaTeX of markdown cells and graders' comments to MathML (see the module)."""

    # nbconvert's preprocessors are off unless enabled; listed in GenerateFeedback, this one is meant to run.
    enabled = Bool(True).tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "markdown":
            cell.source = self._convert(cell.source, resources, index)
        nbgrader_meta = cell.metadata.get("nbgrader", {})
        if isinstance(nbgrader_meta.get("comment"), str):  # written by GetGrades from the gradebook
            nbgrader_meta["comment"] = self._convert(nbgrader_meta["comment"], resources, index)
        return cell, resources

    def _convert(self, markdown: str, resources, index: int) -> str:
        converted, problems = latex_to_mathml(markdown)
        name = resources.get("metadata", {}).get("name", "notebook")
        for problem in problems:
            self.log.warning("%s, cell %d: this formula is left as LaTeX (latex2mathml: %s)", name, index + 1, problem)
        return converted


class FeedbackExporter(HTMLExporter):
    """The HTML exporter of ``nbgrader generate_feedback``: nbgrader's feedback template, no MathJax.

    ``nbgrader_config.py`` sets ``FeedbackExporter.template_name`` (:data:`TEMPLATE_NAME`)
    and ``extra_template_basedirs`` (:data:`TEMPLATE_DIRS`): settings of this class win
    over the ``HTMLExporter.template_name = 'feedback'`` that nbgrader itself sets
    (the formgrader's "generate feedback" button does), which would bring the CDN back.
    """

