"""Math in the feedback HTML without a network: LaTeX becomes MathML when feedback is made.

nbgrader's feedback template loads MathJax from a CDN to typeset ``$...$`` in the
browser; offline (an exam room, a student's train ride, this course's machines)
the formulas stay raw LaTeX. Instead, :class:`LatexToMathML` (one of
``GenerateFeedback.preprocessors``) converts the math of every markdown cell, and
of the graders' comments, to MathML with ``latex2mathml``, which browsers render
natively; :class:`FeedbackExporter` renders nbgrader's feedback template with a
``mathjax.html.j2`` of this course's that loads nothing (see ``TEMPLATES``).

What counts as math (pandoc's rules: prose with dollars stays prose, code is never
math) and the conversion live in ``autograder/mathml.py``, which the handout build
uses too. A formula ``latex2mathml`` cannot read is left as it was, with a warning.
"""
from __future__ import annotations

from pathlib import Path

import nbgrader
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

# The math rules and the conversion have one home, autograder/mathml.py; the names
# below stay importable from here.
from ..mathml import MathError, latex_to_mathml, to_mathml  # noqa: F401

# autograder/nbgrader/templates/week6_feedback: nbgrader's "feedback" template (its conf.json
# names it as the base) with an empty mathjax macro that shadows nbconvert's, and the
# page's Content-Security-Policy (autograder/nbgrader/html_safety.py). week6_formgrade: the
# formgrader's page of a submission, nbgrader's "formgrade" with an escaped head and
# navigation bar under the same kind of policy.
TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "week6_feedback"
FORMGRADE_TEMPLATE_NAME = "week6_formgrade"
NBGRADER_TEMPLATES = Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"
TEMPLATE_DIRS = [str(TEMPLATES), str(NBGRADER_TEMPLATES)]  # ours first: its mathjax.html.j2 wins
# Where ours find the templates they extend by name ("feedback/index.html.j2"), and where
# nbgrader's feedback finds the bootstrap.min.css it inlines (nbgrader names that folder
# in HTMLExporter's extra_template_paths, which a FeedbackExporter setting replaces).
NBGRADER_TEMPLATE_PATHS = [str(NBGRADER_TEMPLATES),
                           str(NBGRADER_TEMPLATES.parent / "static" / "node_modules" / "bootstrap" / "dist" / "css")]


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

