"""What a TA does with a class's reports once grading is done.

* ``results.py``: the class's reports, read from a grades folder; ``nbgrader_results.py``:
  the same from nbgrader's gradebook and autograded notebooks.
* ``statistics.py``: score distributions, per-item and per-test figures, problems, timing.
* ``similarity.py``: pairs of students whose answer cells are unusually alike.
* ``class_report.py``: ``python -m autograder report``, one self-contained HTML page.
* ``lms_export.py``: ``python -m autograder export``, Canvas's and Moodle's grade import CSV.
* ``history.py``: the reports a re-grade replaced, kept when a score changed, and why.
* ``sources.py``: where a grading run found the submissions, for the similarity check.

Nothing here grades; the grading path imports only ``history`` (from ``report.write_report``).
"""

# Files that `report` and `export` write into a grades folder, beside the student folders
# (intake refuses these names as student ids, as it refuses grades.csv).
CLASS_REPORT = "class-report.html"
SIMILARITY_CSV = "similarity.csv"
LMS_EXPORTS = {"canvas": "canvas-grades.csv", "moodle": "moodle-grades.csv"}
OUTPUT_NAMES = (CLASS_REPORT, SIMILARITY_CSV, *LMS_EXPORTS.values())
