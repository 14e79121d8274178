"""The course staff's detail of a failed hidden test: in the formgrader, never in the feedback.

A hidden test's message is what a student may read; its ``detail`` (``TestResult.detail``)
adds what the check compared against, the reference's values of a hidden or drawn input,
which would hand a student the answers to the very inputs that grade them. The autograded
notebook is what both the formgrader and ``nbgrader generate_feedback`` render, so
``autograder.nbgrader.plugin`` writes each detail as an entry of its own in the test cell's
``error`` output, beginning with :data:`STAFF_ONLY`, and :class:`RemoveStaffDetail` (one of
``GenerateFeedback.preprocessors`` in ``nbgrader_config.py``) drops those entries from the
copy that becomes the feedback.

Entries are told apart by their first characters, a terminal escape sequence: the plugin
removes every escape sequence from the text it quotes (test names, messages, details), so
no text from a submission can start an entry that looks like the staff's, nor hide one.
"""
from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

# The first characters of a traceback entry for the course staff only (magenta, as the
# formgrader renders it).
STAFF_ONLY = "\x1b[0;35mFor the course staff, not in the feedback:\x1b[0m"


def is_staff_only(entry: str) -> bool:
    """Is ``entry`` (one entry of an error output's traceback) the staff's detail?"""
    return isinstance(entry, str) and entry.startswith(STAFF_ONLY)


def without_staff_detail(outputs: list) -> list:
    """``outputs`` of a code cell with every staff-only traceback entry removed (in place)."""
    for output in outputs:
        if output.get("output_type") == "error":
            output["traceback"] = [entry for entry in output.get("traceback", []) if not is_staff_only(entry)]
    return outputs


class RemoveStaffDetail(Preprocessor):
    """Drop the course staff's detail of failed hidden tests from the notebook that becomes the feedback."""

    # nbconvert's preprocessors are off unless enabled; listed in GenerateFeedback, this one is meant to run.
    enabled = Bool(True).tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            without_staff_detail(cell.get("outputs", []))
        return cell, resources
