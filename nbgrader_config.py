"""nbgrader configuration of the Week 6 course (run nbgrader from this folder).

solutions/ is nbgrader's source directory and assignments/ its release
directory. Autograding never executes the student's notebook in a kernel: the
Execute preprocessor is replaced by the sandboxed grader (see
autograder/nbgrader_plugin.py), so the usual in-kernel cheats have nothing to
act on.
"""
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests,
                                    GetGrades, IgnorePattern, LimitOutput, SaveAutoGrades)
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

from autograder.nbgrader_plugin import SandboxedGrading

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

c.Autograde.autograde_preprocessors = [
    SandboxedGrading,            # replaces Execute: no student code runs in a kernel
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
# Feedback shows visible tests and the grader's messages, never hidden test code.
c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, ClearHiddenTests]
