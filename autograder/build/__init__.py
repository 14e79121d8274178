"""What is derived from the course's sources, and the commands that derive it.

``python -m autograder.build.regen`` (``make regen``) brings every derived file up to date
in order; ``release`` (``make release``) and ``student_bundle`` (``make student-bundle``)
are its steps that also run alone. Nothing that grades imports this package.
"""
