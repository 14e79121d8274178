"""nbgrader configuration of the Week 6 course (run nbgrader from this folder).

solutions/ is nbgrader's source directory and assignments/ its release
directory. Autograding never executes the student's notebook in a kernel: the
Execute preprocessor is replaced by the sandboxed grader (see
autograder/nbgrader/plugin.py), so the usual in-kernel cheats have nothing to
act on. The other steps of nbgrader's lifecycle keep their stock behaviour with
the changes below, each in a module of its own under autograder/.
"""
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
                                    AssignLatePenalties,
                                    CheckCellMetadata,
                                    ClearHiddenTests,
                                    ClearOutput,
                                    GetGrades,
                                    IgnorePattern,
                                    LimitOutput,
                                    OverwriteKernelspec,
)

from autograder.nbgrader import html_safety
from autograder.nbgrader.cells import RestoreInstructorCells
from autograder.nbgrader.export import NotebookScoresExport
from autograder.nbgrader.feedback_detail import RemoveStaffDetail
from autograder.nbgrader.feedback_math import (
                                    FORMGRADE_TEMPLATE_NAME,
                                    NBGRADER_TEMPLATE_PATHS,
                                    TEMPLATE_DIRS,
                                    TEMPLATE_NAME,
                                    FeedbackExporter,
                                    LatexToMathML,
)
from autograder.nbgrader.intake import IntakeExporter, ScreenCells
from autograder.nbgrader.plugin import SandboxedGrading, SaveSandboxedGrades

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

# A bad submission costs only its author (autograder/nbgrader/intake.py): student ids,
# files and their size, cells and nesting are taken in as `python -m autograder grade`
# takes them in, before nbgrader reads a notebook or records a student.
c.Autograde.exporter_class = IntakeExporter
# nbgrader's sanitising step; locked cells are put back as stock, but a warning
# comes only when the student changed one, and missing graded cells are put back
# (autograder/nbgrader/cells.py).
c.Autograde.sanitize_preprocessors = [
    ScreenCells,                 # replaces DeduplicateIds: the first of cells sharing a grade_id is graded
    ClearOutput,
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
# Feedback shows visible tests and the grader's messages, never hidden test code nor the
# staff's detail of a failure (autograder/nbgrader/feedback_detail.py); its math is MathML,
# rendered with no network (autograder/nbgrader/feedback_math.py).
c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, ClearHiddenTests, RemoveStaffDetail,
                                    LatexToMathML]
c.GenerateFeedback.exporter_class = FeedbackExporter
c.FeedbackExporter.template_name = TEMPLATE_NAME  # nbgrader's feedback template without MathJax's CDN
c.FeedbackExporter.extra_template_basedirs = TEMPLATE_DIRS
# What a student wrote never runs where it is shown (autograder/nbgrader/html_safety.py): every
# HTML exporter (the formgrader's page of a submission, the feedback) passes markdown
# and outputs through the course's sanitizer, and each page carries a
# Content-Security-Policy. The formgrader builds a plain HTMLExporter from this
# configuration; its page is the course's template, with MathML for math.
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = html_safety.FILTERS
c.HTMLExporter.template_name = FORMGRADE_TEMPLATE_NAME
c.HTMLExporter.extra_template_basedirs = TEMPLATE_DIRS
c.HTMLExporter.extra_template_paths = NBGRADER_TEMPLATE_PATHS
c.HTMLExporter.preprocessors = [html_safety.ScrubTemplateFields, LatexToMathML, html_safety.FormgraderPolicy]
c.FeedbackExporter.preprocessors = [html_safety.ScrubTemplateFields, html_safety.FeedbackPolicy]
c.FeedbackExporter.extra_template_paths = NBGRADER_TEMPLATE_PATHS
# grades.csv with one score column (and its maximum) per notebook.
c.ExportApp.plugin_class = NotebookScoresExport
