"""The grader's two kinds of refusal, shared by the pipeline, its faces and the class tools."""


class IntakeError(Exception):
    """A file that cannot be taken in; the message says why and what to do."""


class ConfigurationError(Exception):
    """A mistake in the command itself (a missing path, an unusable ``--student``):
    nothing was graded, and running it again unchanged will not help."""
