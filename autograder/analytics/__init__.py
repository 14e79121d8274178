"""What a TA does with a class's reports once grading is done.

* ``results.py``: the class's reports, read from a grades folder; ``nbgrader_results.py``:
  the same from nbgrader's gradebook and autograded notebooks.
* ``statistics.py``: score distributions, per-item and per-test figures, problems, timing.
* ``similarity.py``: pairs of students whose answer cells are unusually alike.
* ``class_report.py``: ``python -m autograder report``, one self-contained HTML page.
* ``lms_export.py``: ``python -m autograder export``, Canvas's and Moodle's grade import CSV.
* ``sources.py``: where a grading run found the submissions, for the similarity check.

Nothing here grades, and nothing that grades imports it. A re-grade's changed scores are kept by
``grade_history.py``, which the class report reads.
"""
