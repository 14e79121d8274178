"""The grader's face in nbgrader's lifecycle, each step in a module of its own, all named by
the course's ``nbgrader_config.py``: ``intake`` (autograde reads submissions as the CLI
does), ``plugin`` (sandboxed autograde, the formgrader's outputs, points into the gradebook),
``cells`` (instructor cells restored), ``export`` (grades.csv), ``feedback_math`` and
``feedback_detail`` (generate_feedback), ``html_safety`` (what formgrader and feedback pages
may show of a student's notebook)."""
