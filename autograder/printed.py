"""What a student's notebook recorded, beside the written answers that quote it.

Every experiment of the notebooks ends in ``week6_helpers.reference.record``, which shows one
line ("Recorded for your answers ...") and carries the same values as data: a display output of
MIME type :data:`MEASURES_MIME` with the experiment's name, its values, and the seed and student
id of the run. A written answer whose instructor cell names experiments (``metadata.week6.quotes``,
read by the course model as ``Item.quotes``) is graded by a TA against those values:
:func:`printed_values` gathers, for each such answer,

* the values the notebook recorded for its experiments (the last record of each: a cell run
  twice shows its last run), and the experiments it did not record;
* each number the answer quotes (decimals and percentages: whole numbers are mostly counts,
  epochs and sizes) and what it matches: a recorded value at the precision quoted
  (``recorded``), else only a number of the experiment's reference table (``reference
  table``: the "What you should see" table students read), else nothing (``none``: a value
  the notebook printed elsewhere, or one from nowhere);

and, once per notebook, whether the run's seed is this student's (``week6_helpers.reference.
student_seed``, computed from the id the submission is graded under): a run without an id, with
the course's ``WEEK6_SEED`` or with another student's id is said in ``seed_note``.

The outputs of a submitted notebook are the student's JSON and hostile: only experiments this
notebook records are read, within the limits below, and every value is type-checked. What a
student printed is shown as text, escaped where it is shown (the formgrader's template, the
class report). The values can be forged by editing the file; what the student's run should
show is recomputed with ``benchmarks/reference_values.py --student ID``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .course import Notebook
from .notebook import cell_source, metadata_problem, raw_grade_id

# The cell metadata key under which nbgrader's autograded notebook keeps an answer's entry
# (:meth:`Printed.beside`): the formgrader's template shows it, the class report reads it back.
CELL_KEY = "week6_printed"
MAX_LABELS = 40           # values kept per experiment
MAX_LABEL_CHARS = 120
MAX_NUMBERS = 40          # quoted numbers checked per answer
MAX_NUMBER_CHARS = 24
MAX_NOTE_CHARS = 400
RECORDED, REFERENCE, NONE = "recorded", "reference table", "none"
MATCHES = (RECORDED, REFERENCE, NONE)
# A decimal (0.853, .85, 1,024.5) or a percentage (85 %, 85.3%): what a measured value looks
# like when quoted. Not part of a longer token (a version, 3e-5, a grade_id).
QUOTED_NUMBER = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:\s?%)?(?![\w.]*\d)")


@dataclass
class QuotedNumber:
    text: str
    match: str            # one of MATCHES
    label: str = ""       # the recorded value (experiment: label) or reference-table row it matched


@dataclass
class QuotedAnswer:
    grade_id: str
    recorded: dict[str, dict[str, float | None]] = field(default_factory=dict)  # experiment -> label -> value
    missing: list[str] = field(default_factory=list)   # quoted experiments the notebook did not record
    numbers: list[QuotedNumber] = field(default_factory=list)

    @property
    def unmatched(self) -> list[QuotedNumber]:
        return [number for number in self.numbers if number.match != RECORDED]


@dataclass
class Printed:
    """What one notebook recorded for the answers that quote numbers (see the module docstring)."""

    seed: int | None = None   # the seed its records carry (None: no record)
    expected_seed: int = 0    # this student's seed
    seed_note: str = ""       # empty when the run's seed is this student's
    answers: list[QuotedAnswer] = field(default_factory=list)

    def answer(self, grade_id: str) -> QuotedAnswer | None:
        return next((answer for answer in self.answers if answer.grade_id == grade_id), None)

    def beside(self, grade_id: str) -> dict | None:
        """What the formgrader shows beside the answer ``grade_id``: its entry and the seed's."""
        answer = self.answer(grade_id)
        if answer is None:
            return None
        entry = next(a for a in self.to_json()["answers"] if a["grade_id"] == grade_id)
        return {"seed": self.seed, "expected_seed": self.expected_seed, "seed_note": self.seed_note, **entry}

    def to_json(self) -> dict:
        return {"seed": self.seed, "expected_seed": self.expected_seed, "seed_note": self.seed_note,
                "answers": [{"grade_id": a.grade_id, "recorded": {name: [[label, value] for label, value in values.items()]
                                                                  for name, values in a.recorded.items()},
                             "missing": list(a.missing),
                             "numbers": [{"text": n.text, "match": n.match, "label": n.label} for n in a.numbers]}
                            for a in self.answers]}

    @classmethod
    def from_beside(cls, entries: list) -> Printed | None:
        """Read back from what :meth:`beside` gave each answer (an autograded notebook's cells, for
        the class report of an nbgrader run); None when there is none. ``ValueError`` as
        :meth:`from_json`."""
        if not entries:
            return None
        if not all(type(entry) is dict for entry in entries):
            raise ValueError("the 'printed' of an answer is not a JSON object")
        first = entries[0]
        seed_fields = ("seed", "expected_seed", "seed_note")
        answer_fields = ("grade_id", "recorded", "missing", "numbers")
        return cls.from_json({**{name: first.get(name) for name in seed_fields},
                              "answers": [{name: entry.get(name) for name in answer_fields} for entry in entries]})

    @classmethod
    def from_json(cls, data) -> Printed:
        """From a report read back from disk (untrusted): ``ValueError`` names what is wrong."""
        def need(condition: bool, what: str) -> None:
            if not condition:
                raise ValueError(f"the report's 'printed' {what}")

        need(type(data) is dict and set(data) == {"seed", "expected_seed", "seed_note", "answers"},
             "does not have exactly the fields seed, expected_seed, seed_note, answers")
        need(data["seed"] is None or type(data["seed"]) is int, "seed is not a whole number")
        need(type(data["expected_seed"]) is int and type(data["seed_note"]) is str, "has a mistyped seed field")
        need(type(data["answers"]) is list, "answers is not a list")
        answers = []
        for entry in data["answers"]:
            need(type(entry) is dict and set(entry) == {"grade_id", "recorded", "missing", "numbers"},
                 "has an answer without exactly the fields grade_id, recorded, missing, numbers")
            need(type(entry["grade_id"]) is str, "has an answer whose grade_id is not a string")
            need(type(entry["missing"]) is list and all(type(m) is str for m in entry["missing"]),
                 "has a 'missing' that is not a list of strings")
            pairs = entry["recorded"]
            need(type(pairs) is dict and all(type(values) is list and all(
                type(pair) is list and len(pair) == 2 and type(pair[0]) is str for pair in values)
                for values in pairs.values()), "has a 'recorded' that is not experiment -> [[label, value], ...]")
            recorded = {name: dict(values) for name, values in pairs.items()}
            need(all(value is None or (type(value) in (int, float) and math.isfinite(value))
                     for values in recorded.values() for value in values.values()), "has a value that is not a number")
            numbers = entry["numbers"]
            need(type(numbers) is list and all(type(n) is dict and set(n) == {"text", "match", "label"}
                                               and type(n["text"]) is str and type(n["label"]) is str
                                               and n["match"] in MATCHES for n in numbers),
                 "has a quoted number without a text, a known match and a label")
            answers.append(QuotedAnswer(entry["grade_id"], recorded, list(entry["missing"]),
                                        [QuotedNumber(**n) for n in numbers]))
        return cls(data["seed"], data["expected_seed"], data["seed_note"], answers).bounded()

    def bounded(self) -> Printed:
        """Every string within its limit (a report read back may have been edited)."""
        self.seed_note = _clip(self.seed_note, MAX_NOTE_CHARS)
        for answer in self.answers:
            answer.grade_id = _clip(answer.grade_id, MAX_LABEL_CHARS)
            answer.missing = [_clip(name, MAX_LABEL_CHARS) for name in answer.missing[:MAX_LABELS]]
            answer.recorded = {_clip(name, MAX_LABEL_CHARS): {_clip(label, MAX_LABEL_CHARS): value
                                                              for label, value in list(values.items())[:MAX_LABELS]}
                               for name, values in list(answer.recorded.items())[:MAX_LABELS]}
            answer.numbers = [QuotedNumber(_clip(n.text, MAX_NUMBER_CHARS), n.match, _clip(n.label, MAX_LABEL_CHARS))
                              for n in answer.numbers[:MAX_NUMBERS]]
        return self


def _clip(text: str, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ---------------------------------------------------------------------------- reading the notebook
def records(nb, known: set[str]) -> list[dict]:
    """The well-formed records of the experiments in ``known``, in the notebook's order."""
    # week6_helpers imports torch: only where a notebook is read, never in the CLI's start-up
    from week6_helpers.reference import MEASURES_MIME

    found = []
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code" or not isinstance(cell.get("outputs"), list):
            continue
        for output in cell["outputs"]:
            data = output.get("data") if isinstance(output, dict) else None
            record = data.get(MEASURES_MIME) if isinstance(data, dict) else None
            if not (isinstance(record, dict) and record.get("experiment") in known
                    and isinstance(record.get("values"), list)):
                continue
            values = {}
            for pair in record["values"][:MAX_LABELS]:
                if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                    continue
                label, value = pair
                if value is None or (type(value) in (int, float) and math.isfinite(value)):
                    values[_clip(label, MAX_LABEL_CHARS)] = value
            seed = record.get("seed")
            student = record.get("student")
            found.append({"experiment": record["experiment"], "values": values,
                          "seed": seed if type(seed) is int else None,
                          "student": _clip(student, MAX_LABEL_CHARS) if isinstance(student, str) else None,
                          "source": record.get("seed_source") if isinstance(record.get("seed_source"), str) else None,
                          "mode": record.get("mode") if record.get("mode") in ("fast", "full") else None})
    return found


def _seed_note(records: list[dict], student: str, expected: int) -> tuple[int | None, str]:
    if not records:
        return None, ("no recorded values: the notebook's experiments were not run, or their outputs were "
                      f"cleared before it was submitted (this student's seed is {expected})")
    seeds = sorted({record["seed"] for record in records if record["seed"] is not None})
    if len(seeds) != 1:
        shown = ", ".join(map(str, seeds)) or "none"
        return (seeds[-1] if seeds else None), (f"its experiments ran with different seeds ({shown}); this "
                                                f"student's seed is {expected}")
    seed, last = seeds[0], records[-1]
    if seed == expected:
        return seed, ""
    if last["source"] == "WEEK6_SEED":
        return seed, f"ran with WEEK6_SEED={seed} (a course seed), not with this student's seed {expected}"
    if last["student"] is None:
        return seed, (f"ran without a student id (the course's seed {seed}), not with this student's seed "
                      f"{expected}: its numbers are those of the course's reference run")
    return seed, _clip(f"ran with the student id {last['student']!r} (seed {seed}), not with this student's "
                       f"id {student!r} (seed {expected})", MAX_NOTE_CHARS)


def _decimals(text: str) -> int:
    digits = text.replace("%", "").strip()
    return len(digits.split(".")[1]) if "." in digits else 0


def _agrees(quoted: float, decimals: int, value: float) -> bool:
    """A value quoted at ``decimals`` places: rounded or cut off there, it reads as ``quoted``."""
    step = 10.0 ** -decimals
    return quoted - step / 2 - 1e-12 <= value < quoted + step


def quoted_numbers(text: str) -> list[str]:
    """The decimals and percentages in an answer, as written, each once (at most :data:`MAX_NUMBERS`)."""
    found = []
    for match in QUOTED_NUMBER.finditer(text):
        number = match.group(0).strip()[:MAX_NUMBER_CHARS]
        if any(c.isdigit() for c in number) and ("." in number or "%" in number) and number not in found:
            found.append(number)
        if len(found) == MAX_NUMBERS:
            break
    return found


def _match(number: str, candidates: list[tuple[str, float]]) -> str | None:
    """The label of the first candidate value the quoted ``number`` reads as, or None."""
    quoted = float(number.replace("%", "").replace(",", "").strip())
    decimals = _decimals(number)
    for label, value in candidates:
        if value is None:
            continue
        scales = (100.0, 1.0) if "%" in number else (1.0, 100.0)  # 85.3 % and 85.3 both quote 0.853
        if any(_agrees(quoted, decimals, value * scale) for scale in scales):
            return label
    return None


def _table_numbers(table: str) -> list[tuple[str, float]]:
    """(row label, number) for every number in the rows of a "What you should see" table."""
    numbers = []
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or set(cells[0]) <= {"-", " "} or not line.lstrip().startswith("|"):
            continue
        for cell in cells[1:]:
            for text in re.findall(r"\d+(?:\.\d+)?", cell.replace(",", "")):
                numbers.append((cells[0], float(text)))
    return numbers


def printed_values(nb, notebook: Notebook, student: str) -> Printed | None:
    """What ``nb`` (a submission of ``notebook``, graded as ``student``) recorded for the written
    answers that quote numbers; None when the notebook has no such answer."""
    quoting = [item for item in notebook.written if item.quotes]
    if not quoting:
        return None
    from week6_helpers.reference import student_seed

    found = records(nb, set(notebook.tables))
    expected = student_seed(student)
    seed, note = _seed_note(found, student, expected)
    last = {record["experiment"]: record["values"] for record in found}
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    answers = []
    for item in quoting:
        cell = next((c for c in cells if isinstance(c, dict) and c.get("cell_type") == "markdown"
                     and raw_grade_id(c) == item.grade_id), None)
        text = cell_source(cell) if cell is not None and metadata_problem(cell) is None else ""
        recorded = {name: last[name] for name in item.quotes if name in last}
        candidates = [(f"{name}: {label}", value) for name, values in recorded.items() for label, value in values.items()]
        table = [(f"{name}: {label}", value) for name in item.quotes
                 for label, value in _table_numbers(notebook.tables[name])]
        numbers = []
        for number in quoted_numbers(text):
            label = _match(number, candidates)
            if label is not None:
                numbers.append(QuotedNumber(number, RECORDED, label))
                continue
            label = _match(number, table)
            numbers.append(QuotedNumber(number, REFERENCE, label) if label is not None else QuotedNumber(number, NONE))
        answers.append(QuotedAnswer(item.grade_id, recorded, [name for name in item.quotes if name not in last],
                                    numbers))
    return Printed(seed, expected, note, answers).bounded()
