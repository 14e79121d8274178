"""The rules a graded docstring states, found by their wording, and the clauses that quote them.

A graded item's docstring is its contract. Besides what it computes, it states rules of
four kinds that a solution can break while computing the right thing on ordinary inputs:
an error it raises, an input it leaves unmodified, a call or a route it must not take, and
an edge case (a boundary value, an empty or missing input, a tie, a NaN). These are found
mechanically, by cue words (:data:`CUES`), in the docstrings of the instructor's solution
cell: the function's or class's own docstring and those of its methods.

Each cue found must lie inside a quotation of the docstring held by a clause of the
item's table (``autograder/reference/clauses/<stem>/<section>.toml``): ``rule`` (one string or a
list of strings, the docstring's words, verbatim up to whitespace) on a clause with a
hidden test and a mutant, or with a forbidden-shortcut rule; or ``stated`` on a tolerated
clause. So a rule that no clause claims, like a new sentence added to a docstring, fails
``tests/grading/test_docstring_rules.py`` with the item, the sentence and the fix.

The cues are deliberately wide: a sentence they catch that turns out to be description
rather than a rule is quoted by the clause of the contract it describes. They are not
complete: a rule worded without any of them (``the prompt ends right after the colon``)
is found by the author, who quotes it all the same (docs/authoring.md).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

# kind -> the wording that marks a rule of that kind. Case-sensitive where the case tells a
# rule apart ("None" the value, "Not allowed:" the heading).
CUES: dict[str, str] = {
    "raises": r"\b[Rr]aise[sd]?\b|\b[A-Z][A-Za-z]*Error\b",
    "not modified": (r"\b[Nn]ot modif(?:y|ied)\b|\bunchanged\b|\bas (?:you|it was|they were) found\b"
                     r"|\bleft as\b|\bshares? no\b|\bin[- ]place\b"),
    "not allowed": r"\bNot allowed\b|\b[Mm]ust not\b|\b[Dd]o not\b|\bnever\b|\bwithout\b",
    "not graded": r"\bNot graded\b",
    "edge case": (r"\bempty\b|\bNone\b|\bnothing\b|\btie[sd]?\b|\bNaN\b|-inf\b"
                  # a comparison written out with spaces: "k > V", "T == 1", "0 <= n <= len(labels)"
                  r"|\b\w+ (?:<=|>=|==|!=|<|>) [\w(-]"
                  # a boundary value: "p = 0", "B = 0", "k = 1" (not a formula: "t = 1 .. T-1", "= 1 - ratio")
                  r"|\b\w+ = (?:0|1|None)\b(?! ?[-+*/.])"),
}
_CUE = re.compile("|".join(f"(?P<g{index}>{pattern})" for index, pattern in enumerate(CUES.values())))
_KIND = {f"g{index}": kind for index, kind in enumerate(CUES)}


@dataclass(frozen=True)
class Rule:
    """One cue of a docstring: its kind, the words that matched, and where (in the normalised text)."""

    kind: str
    cue: str
    start: int
    end: int
    sentence: str  # the sentence around the cue, for messages


def normalised(text: str) -> str:
    """Whitespace collapsed: quotes match a docstring whatever its line breaks and indentation."""
    return " ".join(text.split())


_SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*$", re.M | re.S)


def docstrings(source: str) -> dict[str, str]:
    """Each top-level function, class or constant that the solution cell ``source`` defines ->
    the docstrings a student reads: its own and its methods', outside the solution markers
    (a helper's docstring inside the instructor's body is no contract), normalised and
    joined ("" for a constant or a definition without one)."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = ""
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(dict.fromkeys((t.id for t in targets if isinstance(t, ast.Name)), ""))
    for node in ast.parse(_SOLUTION.sub(r"\1pass", source)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            parts = [ast.get_docstring(inner) for inner in ast.walk(node)
                     if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
            found[node.name] = normalised("\n\n".join(part for part in parts if part))
    return found


def _sentence(text: str, start: int, end: int) -> str:
    before = [match.end() for match in re.finditer(r"[.;:] ", text[:start])]
    after = re.search(r"[.;](?: |$)", text[end:])
    return text[before[-1] if before else 0: end + (after.end() if after else len(text) - end)].strip()


def rules(text: str) -> list[Rule]:
    """The rules a normalised docstring states, one per cue, in order."""
    return [Rule(_KIND[match.lastgroup], match.group(), match.start(), match.end(),
                 _sentence(text, match.start(), match.end()))
            for match in _CUE.finditer(text)]


def quotes(clause: dict) -> list[str]:
    """The docstring words a clause quotes: its ``rule`` (a string or a list) and a tolerance's ``stated``."""
    rule = clause.get("rule", [])
    quoted = [rule] if isinstance(rule, str) else list(rule)
    return quoted + ([clause["stated"]] if "stated" in clause else [])


def spans(text: str, quoted: str) -> list[tuple[int, int]]:
    """Every place of the normalised ``text`` where ``quoted`` (normalised) stands."""
    needle = normalised(quoted)
    return [(match.start(), match.start() + len(needle)) for match in re.finditer(re.escape(needle), text)] \
        if needle else []


def unclaimed(text: str, clauses: list[dict]) -> list[Rule]:
    """The rules of ``text`` that lie in no quotation of ``clauses``."""
    covered = [span for clause in clauses for quoted in quotes(clause) for span in spans(text, quoted)]
    return [rule for rule in rules(text) if not any(a <= rule.start and rule.end <= b for a, b in covered)]
