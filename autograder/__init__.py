"""The course's grader: intake, the sandboxed run of the hidden suites, reports and the faces
(CLI, nbgrader plugin) that drive them."""
import sys

# jsonschema, which nbformat imports, builds an Earley parser of RFC 3987's whole grammar at
# import time when ``rfc3987_syntax`` is installed (jupyter-events asks for it): 3-4 s of every
# grading process's start-up on a 2-core machine, for the "iri" formats no notebook schema
# uses. A ``None`` entry in ``sys.modules`` makes that optional import fail, so jsonschema
# goes on without those two format checkers; notebook validation is unchanged.
sys.modules.setdefault("rfc3987_syntax", None)
