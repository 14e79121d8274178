"""The student handout's build (``python handouts/build.py``), in modules named after what they make.

- ``build.py``: the entry point, and the topic table (``TOPICS``) of the grading map;
- ``render_html.py``: ``week6.md`` -> ``week6.html``, its formulas as MathML (``autograder/mathml.py``);
- ``figure_refs.py``: which figures the handout shows, their numbers, and ``[Figure](#fig-...)`` references;
- ``grading_map.py``: the notebooks' graded items and points -> ``grading_map.md``;
- ``where_boxes.py``: the same items and points -> the "Where in the notebooks" boxes of ``week6.md``;
- ``figures.py``: draws ``figures/*.png`` (run on its own: ``python handouts/figures.py``).
"""


class BuildError(Exception):
    """Something in the sources is wrong; the message says what."""
