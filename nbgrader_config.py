"""nbgrader configuration of the Week 6 course (run nbgrader from this folder).

solutions/ is nbgrader's source directory and assignments/ its release
directory. Autograding never executes the student's notebook in a kernel: the
Execute preprocessor is replaced by the sandboxed grader (see
autograder/nbgrader_plugin.py), so the usual in-kernel cheats have nothing to
act on. The other steps of nbgrader's lifecycle keep their stock behaviour with
the changes below, each in a module of its own under autograder/.
"""
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearOutput,
                                    DeduplicateIds, GetGrades, IgnorePattern, LimitOutput, OverwriteKernelspec)
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

from autograder.feedback_math import TEMPLATE_DIRS, TEMPLATE_NAME, FeedbackExporter, LatexToMathML
from autograder.nbgrader_cells import RestoreInstructorCells
from autograder.nbgrader_export import NotebookScoresExport
from autograder.nbgrader_plugin import SandboxedGrading, SaveSandboxedGrades

ROOT = Path(__file__).resolve().parent
c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

c.CourseDirectory.root = str(ROOT)
c.CourseDirectory.course_id = "nlp-week6"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "assignments"
c.CourseDirectory.db_url = f"sqlite:///{ROOT / 'gradebook.db'}"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.egg-info"]

# Stubs end in the exception the grader reports as "not implemented".
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# nbgrader's sanitising step; locked cells are put back as stock, but a warning
# comes only when the student changed one (autograder/nbgrader_cells.py).
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    RestoreInstructorCells,      # replaces OverwriteCells
    CheckCellMetadata,
]
c.Autograde.autograde_preprocessors = [
    SandboxedGrading,            # replaces Execute: no student code runs in a kernel
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveSandboxedGrades,         # replaces SaveAutoGrades: points from the grader, not from outputs
    AssignLatePenalties,
    CheckCellMetadata,
]
# Feedback shows visible tests and the grader's messages, never hidden test code; its
# math is MathML, rendered with no network (autograder/feedback_math.py).
c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, ClearHiddenTests, LatexToMathML]
c.GenerateFeedback.exporter_class = FeedbackExporter
c.FeedbackExporter.template_name = TEMPLATE_NAME  # nbgrader's feedback template without MathJax's CDN
c.FeedbackExporter.extra_template_basedirs = TEMPLATE_DIRS
# grades.csv with one score column (and its maximum) per notebook.
c.ExportApp.plugin_class = NotebookScoresExport
