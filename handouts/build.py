"""Build the handout: week6.md -> week6.html, and the notebooks' points -> grading_map.md
and the "Where in the notebooks" boxes of week6.md.

    python handouts/build.py            # write handouts/week6.html, grading_map.md and week6.md's boxes
    python handouts/build.py --check    # exit 1 if any of them is out of date (writes nothing)

The entry point of the handout build; ``python -m autograder.build.regen`` runs it with
the other generated files of the repository. The work is done by the modules
beside it (``handouts/__init__.py`` lists them):

- ``render_html.py`` renders ``week6.html``: one self-contained page (inline CSS,
  a table of contents, no script, nothing fetched from the network) whose
  formulas are MathML from ``latex2mathml``, found with the math rules that the
  feedback HTML uses too (``autograder/mathml.py``); the LaTeX source of every
  formula is kept in its ``title`` attribute;
- ``figure_refs.py`` numbers the figures (``figures/*.png``, drawn by
  ``figures.py``) and resolves the references to them;
- ``grading_map.py`` writes ``grading_map.md``, which maps every topic of the week
  (A1-A5, B1-B7, the theory exercises, programming exercises 1-5, pre-training)
  to its notebook, graded cells and points. The points come from the nbgrader
  metadata of ``solutions/week6/*.ipynb``, and the notebooks and their order from
  the course model (``autograder/course.py``, ``NOTEBOOK_ORDER``); only the topic
  -> cell assignment (``TOPICS``, below) is written here, and an item it leaves out
  is counted with the item before it in its notebook. The build fails when no item
  of a notebook is assigned to a topic, or when ``TOPICS`` names a cell that does
  not exist, so the map cannot silently drift from the notebooks;
- ``where_boxes.py`` writes the item lines of ``week6.md``'s "Where in the
  notebooks" boxes, one box per topic, from the same assignment and points: the
  one part of ``week6.md`` that is generated.

Every output goes through the repository's one check-or-write helper
(``autograder/build/generated.py``). Besides the standard library it needs ``mistune``
(a dependency of nbconvert), ``latex2mathml`` and the course model (nbformat); the
build takes about a second, most of it importing nbformat.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:  # run as a script: python handouts/build.py
    sys.path.insert(0, str(REPO))

from autograder.build.generated import Files, update_command  # noqa: E402
from handouts import BuildError  # noqa: E402
from handouts.figure_refs import missing_figures  # noqa: E402
from handouts.grading_map import notebook_items, render_grading_map, with_unlisted_items  # noqa: E402
from handouts.render_html import render_html  # noqa: E402
from handouts.where_boxes import with_item_boxes  # noqa: E402

SOURCE_MD = HERE / "week6.md"
OUTPUT_HTML = HERE / "week6.html"
OUTPUT_MAP = HERE / "grading_map.md"


# ================================================================ topics -> graded cells
# Each topic lists (notebook stem, item) pairs. An item is a graded function or constant
# (its points sit on the visible-test cell test_<item>) or a written answer (a markdown
# cell with that grade_id). An entry with a third element is a cross-reference: shown
# under this topic but counted under the topic named there. A graded item not listed
# here is counted right after the item before it in its notebook (grading_map.py).
TOPICS: list[tuple[str, str, list[tuple]]] = [
    ("A1", "The learning problem: reuse what you know", [
        ("part_a_discovery", "spanish_reuse"), ("part_a_discovery", "a1_movie_review_skills")]),
    ("A2", "The fill-in-the-blank game", [
        ("part_a_discovery", "sequence_logprob"), ("part_a_discovery", "a2_which_is_more_accurate")]),
    ("A3", "The prediction game", [
        ("part_a_discovery", "top_k_next_tokens"), ("part_a_discovery", "a3_generation_vs_understanding")]),
    ("A4", "General or specific knowledge", [
        ("part_a_discovery", "task_categories"), ("part_a_discovery", "a4_general_share")]),
    ("A5", "The cost problem", [
        ("part_a_discovery", "pretraining_costs"), ("part_a_discovery", "a5_other_waste")]),
    ("B1", "BERT's masked language modelling; attention both ways", [
        ("part_b_bert_gpt", "mask_tokens"), ("part_b_bert_gpt", "mlm_signal"),
        ("part_b_bert_gpt", "b1_why_not_50_percent"), ("part_b_bert_gpt", "b1_token_counts"),
        ("part_b_bert_gpt", "bert_pair_input"), ("part_b_bert_gpt", "make_nsp_pairs"),
        ("part_b_bert_gpt", "softmax"), ("part_b_bert_gpt", "causal_mask"),
        ("part_b_bert_gpt", "scaled_dot_product_attention"), ("part_b_bert_gpt", "attention_connections"),
        ("part_b_bert_gpt", "multi_head_self_attention"), ("part_b_bert_gpt", "encoder_layer"),
        ("part_b_bert_gpt", "bert_encoder")]),
    ("B2", "GPT's autoregressive modelling: losses and decoding", [
        ("part_b_bert_gpt", "cat_next_word_probs"), ("part_b_bert_gpt", "clm_loss"),
        ("part_b_bert_gpt", "mlm_loss"), ("part_b_bert_gpt", "sample_next_token"),
        ("part_b_bert_gpt", "greedy_decode"), ("part_b_bert_gpt", "beam_search"),
        ("part_b_bert_gpt", "b2_always_pick_highest"), ("part_b_bert_gpt", "b2_temperature"),
        ("part_b_bert_gpt", "b2_why_decoder_only")]),
    ("B3", "Fine-tuning mathematics", [
        ("part_b_finetuning", "linear_warmup_decay"), ("part_b_finetuning", "freeze_layers"),
        ("part_b_finetuning", "train_epoch"), ("part_b_finetuning", "evaluate"),
        ("part_b_finetuning", "b3_why_small_lr"), ("part_b_finetuning", "b3_large_lr"),
        ("part_b_finetuning", "b3_schedule_design")]),
    ("B4", "Model selection", [
        ("part_b_finetuning", "architecture_table"), ("part_b_finetuning", "model_for_task")]),
    ("B5", "Configuring fine-tuning and generation", [
        ("part_b_finetuning", "finetune_config"), ("part_b_finetuning", "generation_settings")]),
    ("B6", "LoRA, adapters, prompt tuning, BitFit; the cost of training", [
        ("part_b_finetuning", "lora_linear"), ("part_b_finetuning", "lora_parameter_count"),
        ("part_b_finetuning", "apply_lora"), ("part_b_finetuning", "bottleneck_adapter"),
        ("part_b_finetuning", "peft_parameter_counts"), ("part_b_finetuning", "fine_tuning_footprint"),
        ("part_b_finetuning", "b6_lora_tradeoffs")]),
    ("B7", "Critical thinking", [
        ("part_b_finetuning", "b7_limitations"), ("part_b_finetuning", "b7_bias")]),
    ("T1", "Theory: fifteen of a hundred tokens", [
        ("part_b_bert_gpt", "mlm_signal", "B1"), ("part_b_bert_gpt", "b1_why_not_50_percent", "B1")]),
    ("T2", "Theory: training signal, MLM vs CLM", [
        ("exercise1_masked_predictions", "ex1_mlm_vs_clm_signal", "PT"), ("part_b_bert_gpt", "mlm_signal", "B1"),
        ("exercise1_masked_predictions", "bits_per_example")]),
    ("T3", "Theory: the gradient of the MLM loss", [
        ("part_b_bert_gpt", "b2_mlm_gradient")]),
    ("T4", "Theory: why next-sentence prediction was dropped", [
        ("part_b_bert_gpt", "b_nsp_dropped"), ("part_b_bert_gpt", "bert_pair_input", "B1"),
        ("part_b_bert_gpt", "make_nsp_pairs", "B1")]),
    ("P1", "Exercise 1: masked-token predictions", [
        ("exercise1_masked_predictions", "top_k_mask_predictions"),
        ("exercise1_masked_predictions", "ex1_prediction_quality")]),
    ("P2", "Exercise 2: fine-tuning vs training from scratch", [
        ("exercise2_finetune_vs_scratch", "subsample_balanced"), ("exercise2_finetune_vs_scratch", "ex2_loss_curves"),
        ("exercise2_finetune_vs_scratch", "ex2_data_efficiency"),
        ("exercise2_finetune_vs_scratch", "ex2_out_of_domain")]),
    ("P3", "Exercise 3: classification as generation", [
        ("exercise3_classification_as_generation", "build_prompt"),
        ("exercise3_classification_as_generation", "label_log_probs"),
        ("exercise3_classification_as_generation", "classify_by_generation"),
        ("exercise3_classification_as_generation", "ex3_compare_with_finetuning"),
        ("exercise3_classification_as_generation", "label_word_targets"),
        ("exercise3_classification_as_generation", "ex3_decoder_finetuning")]),
    ("P4", "Exercise 4: model size", [
        ("exercise4_model_size", "truncate_encoder"), ("exercise4_model_size", "training_flops"),
        ("exercise4_model_size", "count_encoder_parameters"), ("exercise4_model_size", "ex4_size_tradeoffs")]),
    ("P5", "Exercise 5: span corruption and text-to-text", [
        ("exercise5_span_corruption", "random_spans_noise_mask"), ("exercise5_span_corruption", "span_corrupt"),
        ("exercise5_span_corruption", "ex5_what_stands_in"), ("exercise5_span_corruption", "ex5_rouge_discussion")]),
    ("PT", "Pre-training your own (exercise 1, section 3)", [
        ("exercise1_masked_predictions", "ex1_mlm_vs_clm_signal")]),
]


# ================================================================================ main
def build() -> dict[Path, str]:
    """What week6.html, grading_map.md and week6.md (its boxes) should hold; raises BuildError
    when a source is wrong."""
    markdown = SOURCE_MD.read_text(encoding="utf-8")
    control = sorted({f"U+{ord(c):04X}" for c in markdown
                      if (ord(c) < 32 and c != "\n") or "\ue000" <= c <= "\uf8ff"})
    if control:  # e.g. a tab or bell left by a LaTeX string that lost its backslash
        raise BuildError(f"control or private-use characters in {SOURCE_MD.name}: {control}")
    missing = missing_figures(markdown)
    if missing:
        raise BuildError(f"figures missing (run python handouts/figures.py): {missing}")
    items = notebook_items()
    topics = with_unlisted_items(items, TOPICS)
    grading_map = render_grading_map(items, topics)
    markdown = with_item_boxes(markdown, items, topics)
    return {SOURCE_MD: markdown, OUTPUT_HTML: render_html(markdown), OUTPUT_MAP: grading_map}


def outputs() -> Files:
    """:func:`build` as the bytes of each file, for ``autograder.build.generated.update``."""
    return {path: text.encode("utf-8") for path, text in build().items()}


def summary(files: Files, stale: list[Path]) -> str | None:
    """The line that ends a run with nothing to write (what was written is named file by file)."""
    return None if stale else ("handouts/week6.html, handouts/grading_map.md and the boxes of handouts/week6.md "
                               "are up to date.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python handouts/build.py", description=__doc__.split("\n\n")[0])
    return update_command(parser, outputs, BuildError, summary=summary, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
