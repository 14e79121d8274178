"""Every rule a graded docstring states is a clause of its item's table.

The docstrings are read from the instructor's solution cells through the course model
(``load_course()``); the rules in them are found by their wording
(``tests/grading/docstring_rules.py``: errors raised, inputs not modified, calls or routes
not allowed, edge cases) and each must lie inside the docstring words that a clause of
``autograder/reference/clauses/<stem>/`` quotes: ``rule`` on a clause with a hidden
test and a mutant (or a forbidden-shortcut rule), ``stated`` on a tolerated clause.
``test_clauses.py`` checks that those clauses have their test and that their mutants lose
points; this module checks that no stated rule is left without one.
"""
from __future__ import annotations

import pytest

from tests.grading import docstring_rules
from tests.grading.docstring_rules import Rule, normalised, quotes, rules, spans, unclaimed
from tests.grading.test_clauses import REPO, table, table_file
from tests.grading.test_suites import COURSE, STEMS


def contracts(stem: str) -> dict[str, str]:
    """Each graded name of ``stem`` -> its docstrings as the student reads them (normalised)."""
    return {name: text for item in COURSE.notebook(stem).solutions
            for name, text in docstring_rules.docstrings(item.source).items()}


def _problem(stem: str, name: str, rule: Rule) -> str:
    return (f"{stem}: {name} states a rule ({rule.kind}: {rule.cue!r}) that no clause quotes:\n"
            f"    {rule.sentence}\n"
            f"  fix: in {table_file(stem, name).relative_to(REPO)}, quote these words as `rule` "
            f"on the clause of {name} that grades them (its hidden test checks the rule and its mutant breaks "
            "it), add such a clause, or, if the rule is deliberately not graded, a tolerated clause whose "
            "`stated` quotes the docstring's words that say so")


@pytest.mark.parametrize("stem", STEMS)
def test_every_rule_of_a_graded_docstring_is_a_clause(stem):
    problems = [_problem(stem, name, rule) for name, text in contracts(stem).items()
                for rule in unclaimed(text, table(stem).get(name, []))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stem", STEMS)
def test_every_quoted_rule_is_the_docstrings_own_words(stem):
    texts = contracts(stem)
    for name, entries in table(stem).items():
        for clause in entries:
            for quoted in quotes(clause):
                assert spans(texts.get(name, ""), quoted), (
                    f"{stem}: {name}.{clause['id']} quotes {quoted!r}, which its docstring in the solution "
                    "cell does not say (word for word, up to whitespace): quote the docstring as it stands")


def test_the_rules_the_review_found_are_rules():
    """The three rules that graded nothing before their clauses existed are found by the cues."""
    found = {(stem, name): {rule.cue for rule in rules(text)}
             for stem in STEMS for name, text in contracts(stem).items()}
    assert {"k > V", "p = 0"} <= found["part_b_bert_gpt", "sample_next_token"]
    assert "without" in found["part_b_finetuning", "evaluate"]


@pytest.mark.parametrize("sentence, kind", [
    ("k > V keeps everything.", "edge case"),
    ("The most likely token is always kept (p = 0 gives greedy).", "edge case"),
    ("For T == 1 the sum is empty and the result is 0.0.", "edge case"),
    ("Negative T raises ValueError.", "raises"),
    ("``labels`` itself is not modified.", "not modified"),
    ("Do not modify x itself.", "not allowed"),
    ("leave the model and the tokenizer as you found them.", "not modified"),
    ("the model is called on the inputs *without* the labels.", "not allowed"),
    ("Not allowed: ``model.generate``.", "not allowed"),
    ("Not graded: gradients.", "not graded"),
])
def test_the_cues_find_each_kind_of_rule(sentence, kind):
    assert kind in {rule.kind for rule in rules(normalised(sentence))}


@pytest.mark.parametrize("formula", ["sum over t = 1 .. T-1 of", "savings_fraction = 1 - ratio",
                                     "inputs = [0, 1, 100]   Thank you <X> me", "y_<t, x_corrupt"])
def test_formulas_and_examples_are_no_rules(formula):
    assert not rules(normalised(formula))


def test_a_rule_no_clause_quotes_is_reported_with_its_sentence_and_the_fix():
    text = normalised("""Draw a token.

    Args:
        top_k: None (off) or k >= 1. k > V keeps everything.
    """)
    clauses = [{"id": "off", "rule": "top_k: None (off) or k >= 1."}]
    [left] = unclaimed(text, clauses)
    assert (left.kind, left.cue, left.sentence) == ("edge case", "k > V", "k > V keeps everything.")
    message = _problem("part_b_bert_gpt", "sample_next_token", left)
    assert "sample_next_token" in message and "k > V keeps everything." in message
    assert "autograder/reference/clauses/part_b_bert_gpt/decoding.toml" in message and "`rule`" in message
    assert not unclaimed(text, clauses + [{"id": "beyond", "rule": "k > V keeps everything."}])
    # a quotation covers a rule only where it stands: quoting the same words elsewhere is no claim
    assert unclaimed(text + " k > V", clauses + [{"id": "beyond", "rule": "k > V keeps everything."}])


def test_a_tolerance_claims_the_words_it_states():
    text = normalised("Not graded: gradients.")
    assert unclaimed(text, [])
    assert not unclaimed(text, [{"id": "gradients", "tolerated": "cost only", "stated": "Not graded: gradients"}])
