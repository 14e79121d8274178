"""`python -m week6_pretraining.cloze`: reading cloze files, counting hits, every model's route."""
from __future__ import annotations

import re

import pytest
import torch

from autograder.paths import REPO
from week6_pretraining import cloze
from week6_pretraining.evaluate import cloze_accuracy, load_cloze

SUMMARY = re.compile(r"top-1 (\d+)/(\d+), top-5 (\d+)/(\d+)")


def write(tmp_path, text, name="items.tsv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ reading the file
def test_tsv_lines_comments_and_blank_lines(tmp_path):
    path = write(tmp_path, "# the lecture's\n\nThe [MASK] sat on the mat.\tcat\n  She [MASK] home.\t went \n")
    items = cloze.read_items(path)
    assert [(i.text, i.answer) for i in items] == [("The [MASK] sat on the mat.", "cat"), ("She [MASK] home.", "went")]
    assert items[1].where == f"{path}:4"


def test_the_course_cloze_set_reads_as_jsonl_with_its_everyday_part():
    items = cloze.read_items(REPO / "data" / "cloze" / "cloze.jsonl")
    assert [(i.text, i.answer) for i in items] == [(r["text"], r["answer"]) for r in load_cloze()]
    everyday = [i for i in items if i.everyday]
    assert len(everyday) == 117 and everyday[0].where.endswith(":126")  # cloze-126 to cloze-242


def test_everyday_needs_the_course_cloze_set(tmp_path, capsys):
    assert cloze.main([str(write(tmp_path, "The [MASK] barked.\tdog\n")), "--everyday"]) == 2
    assert "none of the cloze set's everyday sentences" in capsys.readouterr().err


@pytest.mark.parametrize("line, fragment", [
    ("The [MASK] sat on the mat. cat", "found 0 tabs; separate the sentence from its answer with one tab"),
    ("The [MASK] sat\ton the mat.\tcat", "found 2 tabs"),
    ("The cat sat on the mat.\tcat", "holds 0 [MASK]; write exactly one"),
    ("The [MASK] sat on the [MASK].\tcat", "holds 2 [MASK]"),
    ("The [MASK] sat on the mat.\tblack cat", "is not one word"),
    ("The [MASK] sat on the mat.\t ", "is not one word"),
])
def test_a_bad_line_is_named_with_its_fix(tmp_path, line, fragment):
    path = write(tmp_path, "The [MASK] barked.\tdog\n" + line + "\n")
    with pytest.raises(cloze.ClozeFileError, match=re.escape(f"{path}:2: ") + ".*" + re.escape(fragment)):
        cloze.read_items(path)


def test_bad_files_are_refused_by_the_command_with_status_2(tmp_path, capsys):
    assert cloze.main([str(write(tmp_path, "# nothing here\n"))]) == 2
    assert "no cloze line" in capsys.readouterr().err
    assert cloze.main([str(write(tmp_path, '{"text": "x"}\n', "items.jsonl"))]) == 2
    assert "items.jsonl:1: not a JSON object with \"text\" and \"answer\"" in capsys.readouterr().err
    assert cloze.main([str(tmp_path / "absent.tsv")]) == 2
    assert "cannot be read" in capsys.readouterr().err


# ------------------------------------------------------------------ counting
def fixed_model(predictions, single=lambda word: True):
    return cloze.FillModel("fixed", "a table", 1, lambda items, k: [predictions[i.text][:k] for i in items], single)


def test_hits_ignore_letter_case_and_count_top_1_within_top_k():
    items = [cloze.Item("a [MASK]", "Paris", "x:1"), cloze.Item("b [MASK]", "cat", "x:2"),
             cloze.Item("c [MASK]", "sun", "x:3")]
    model = fixed_model({"a [MASK]": ["PARIS", "rome"], "b [MASK]": ["dog", "Cat"], "c [MASK]": ["moon"] * 5 + ["sun"]})
    seen = []
    result = cloze.score(model, items, k=5, batch=2, show=lambda item, words, hit: seen.append((item.answer, hit)))
    assert (result.items, result.top1, result.topk) == (3, 1, 2)  # "sun" is sixth: not in the top 5
    assert result.line() == "top-1 1/3, top-5 2/3"
    assert seen == [("Paris", True), ("cat", True), ("sun", False)]


# ------------------------------------------------------------------ the models
def test_the_default_is_the_course_bert_and_agrees_with_the_evaluation(tmp_path, capsys):
    """The command's counts on the everyday items equal those of `week6_pretraining.evaluate`
    (the cards' numbers); an answer that is not one piece of the vocabulary is always a miss."""
    everyday = [item for item in load_cloze() if item["kind"] != "function"][:40]
    lines = "".join(f"{item['text']}\t{item['answer']}\n" for item in everyday)
    path = write(tmp_path, "The capital of France is [MASK].\tparis\n" + lines)
    assert cloze.main([str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("course-bert (data/checkpoints/austen-bert-mlm): 41 items, 1 answers not a single piece")
    top1, n1, top5, n5 = map(int, SUMMARY.fullmatch(out[-1]).groups())

    from week6_helpers.small_models import load_mlm

    tokenizer, model = load_mlm()
    assert tokenizer.tokenize("paris") != ["paris"]  # so its line can only miss
    expected = cloze_accuracy(model, tokenizer, everyday)
    assert (n1, n5) == (41, 41)
    assert (top1, top5) == (round(expected["top1"] * 40), round(expected["top5"] * 40))
    assert out[1].startswith("- paris")


@pytest.mark.parametrize("name", ["course-gpt", "course-t5"])
def test_the_course_s_other_models_play_the_lecture_s_sentences(name, capsys):
    assert cloze.main([str(REPO / "data" / "cloze" / "lecture.tsv"), "--model", name, "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{name} (data/checkpoints/") and len(out) == 2
    assert SUMMARY.fullmatch(out[-1]).group(2) == "9"


@pytest.fixture(scope="module")
def smollm2(decoder):
    return cloze.CausalFiller(*decoder, candidates=300)


def test_the_causal_filler_proposes_whole_words_after_the_left_context(smollm2):
    item = cloze.Item("The capital of France is [MASK], a large city.", "paris", "x:1")
    words = [word for word, _ in smollm2.next_words(item, 20)]
    assert len(words) == 20 == len(set(words)) and all(word.isalpha() and word == word.casefold() for word in words)
    assert words[0] == "paris"
    assert smollm2.single_piece("paris") and smollm2.single_piece("France")
    assert not smollm2.single_piece("antidisestablishmentarianism")


def test_re_ranking_reads_the_right_context_that_the_left_reading_never_sees(smollm2):
    # Left of the blank, "The" says nothing; "rises in the east" says sun.
    item = cloze.Item("The [MASK] rises in the east every morning.", "sun", "x:1")
    assert "sun" not in smollm2.predict_left([item], 5)[0]
    assert "sun" in smollm2.predict_rerank([item], 5)[0]
    # A text's score does not depend on the longer texts padded beside it.
    alone = smollm2.sentence_log_probs(["The sun rises in the east."])
    batched = smollm2.sentence_log_probs(["The sun rises in the east.", "The sun rises in the east, and sets in the west."])
    assert torch.allclose(alone[0], batched[0], atol=1e-4) and batched[1] < batched[0]
