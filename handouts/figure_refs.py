"""The handout's figures as the page shows them: optional figures, numbers and references.

``week6.md`` shows a figure as ``![alt](figures/<name>.png "caption")``; a figure
that may be missing (drawn from training logs that a checkout may lack) is an
``<!-- optional-figure: figures/<name>.png | alt -->`` directive instead, shown
when ``figures.py`` drew it (with the measured caption it wrote next to it) and
replaced by a note otherwise. Figures are numbered in order of appearance, and
``[Figure](#fig-<name>)`` becomes ``[Figure N](#fig-<name>)``.
"""
from __future__ import annotations

import re
from pathlib import Path

from . import BuildError

HERE = Path(__file__).resolve().parent
FIGURE_CAPTION_SUFFIX = ".caption.md"  # figures.py writes measured captions next to optional figures
OPTIONAL_FIGURE = re.compile(r"^<!-- optional-figure: (figures/([\w.-]+)\.png) \| (.+?) -->$", re.M)
IMAGE = re.compile(r"!\[[^\]]*\]\(figures/([\w.-]+)\.png(?: \"[^\"]*\")?\)")
FIGURE_REFERENCE = re.compile(r"\[Figure\]\(#fig-([\w.-]+)\)")


def expand_optional_figures(markdown: str) -> str:
    """Replace each optional-figure directive by the figure (if drawn) or by a note."""

    def replace(match: re.Match) -> str:
        relative, name, alt = match.group(1), match.group(2), match.group(3)
        if (HERE / relative).is_file():
            caption_file = HERE / "figures" / f"{name}{FIGURE_CAPTION_SUFFIX}"
            caption = caption_file.read_text().strip() if caption_file.is_file() else alt
            caption = " ".join(caption.split()).replace('"', "'")
            return f'![{alt}]({relative} "{caption}")'
        return ("> **Figure not available.** The figure of the course models' pre-training curves is drawn "
                "from their training logs in `data/checkpoints/` by `python handouts/figures.py`; this copy of "
                "the repository does not contain those logs yet. Exercise 1 (section 3) draws the same curves "
                "in the notebook.")

    return OPTIONAL_FIGURE.sub(replace, markdown)


def number_figures(markdown: str) -> tuple[str, dict[str, int]]:
    """``markdown`` with its figure references numbered, and each shown figure's number."""
    numbers: dict[str, int] = {}
    for name in IMAGE.findall(markdown):
        if name in numbers:
            raise BuildError(f"figure {name}.png is used twice in the handout")
        numbers[name] = len(numbers) + 1

    def reference(match: re.Match) -> str:
        name = match.group(1)
        if name not in numbers:
            raise BuildError(f"[Figure](#fig-{name}) refers to a figure that the handout does not show")
        return f"[Figure {numbers[name]}](#fig-{name})"

    return FIGURE_REFERENCE.sub(reference, markdown), numbers


def referenced_figures(markdown: str) -> list[str]:
    """Figures the handout always shows (optional figures excluded), as paths relative to handouts/."""
    return [f"figures/{name}.png" for name in IMAGE.findall(OPTIONAL_FIGURE.sub("", markdown))]


def missing_figures(markdown: str) -> list[str]:
    """The figures of :func:`referenced_figures` that ``figures.py`` has not drawn."""
    return [path for path in referenced_figures(markdown) if not (HERE / path).is_file()]
