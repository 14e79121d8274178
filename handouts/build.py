"""Build the handout: week6.md -> week6.html, and the notebooks' points -> grading_map.md.

    python handouts/build.py            # write handouts/week6.html and handouts/grading_map.md
    python handouts/build.py --check    # exit 1 if either file is out of date (writes nothing)

``week6.html`` is one self-contained page (inline CSS, a table of contents, no
script, nothing fetched from the network). The LaTeX of the handout is turned
into plain HTML by the small converter below, so the page needs no MathJax or
KaTeX; the LaTeX source of every formula is kept in its ``title`` attribute.
Figures are linked relatively (``figures/*.png``, drawn by ``figures.py``), so
the page works from a checkout or a copy of the ``handouts/`` folder.

``grading_map.md`` maps every topic of the week (A1-A5, B1-B7, the theory
exercises, programming exercises 1-5, pre-training) to its notebook, graded
cells and points. The points come from the nbgrader metadata of
``solutions/week6/*.ipynb``, and the notebooks and their order from the course
model (``autograder/course.py``, ``NOTEBOOK_ORDER``); only the topic -> cell
assignment (``TOPICS``) is written here. The build fails when a graded cell of a
notebook is not assigned to a topic, or when ``TOPICS`` names a cell that does
not exist, so the map cannot silently drift from the notebooks.

Besides the standard library it needs ``mistune`` (a dependency of nbconvert) and
the course model (nbformat); the build takes about a second, most of it
importing nbformat.
"""
from __future__ import annotations

import argparse
import html
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import mistune

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:  # run as a script: python handouts/build.py
    sys.path.insert(0, str(REPO))

from autograder.course import TEST, CourseError, load_course  # noqa: E402
SOURCE_MD = HERE / "week6.md"
OUTPUT_HTML = HERE / "week6.html"
OUTPUT_MAP = HERE / "grading_map.md"
FIGURE_CAPTION_SUFFIX = ".caption.md"  # figures.py writes measured captions next to optional figures


class BuildError(Exception):
    """Something in the sources is wrong; the message says what."""


# ================================================================ topics -> graded cells
# Each topic lists (notebook stem, item) pairs. An item is a graded function or constant
# (its points sit on the visible-test cell test_<item>) or a written answer (a markdown
# cell with that grade_id). An entry with a third element is a cross-reference: shown
# under this topic but counted under the topic named there.
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
        ("part_b_bert_gpt", "softmax"), ("part_b_bert_gpt", "causal_mask"),
        ("part_b_bert_gpt", "scaled_dot_product_attention"), ("part_b_bert_gpt", "attention_connections")]),
    ("B2", "GPT's autoregressive modelling: losses and decoding", [
        ("part_b_bert_gpt", "cat_next_word_probs"), ("part_b_bert_gpt", "clm_loss"),
        ("part_b_bert_gpt", "mlm_loss"), ("part_b_bert_gpt", "sample_next_token"),
        ("part_b_bert_gpt", "greedy_decode"), ("part_b_bert_gpt", "beam_search"),
        ("part_b_bert_gpt", "b2_always_pick_highest"), ("part_b_bert_gpt", "b2_temperature")]),
    ("B3", "Fine-tuning mathematics", [
        ("part_b_finetuning", "linear_warmup_decay"), ("part_b_finetuning", "freeze_layers"),
        ("part_b_finetuning", "train_epoch"), ("part_b_finetuning", "evaluate"),
        ("part_b_finetuning", "b3_why_small_lr"), ("part_b_finetuning", "b3_large_lr"),
        ("part_b_finetuning", "b3_schedule_design")]),
    ("B4", "Model selection", [
        ("part_b_finetuning", "architecture_table"), ("part_b_finetuning", "model_for_task")]),
    ("B5", "Configuring fine-tuning and generation", [
        ("part_b_finetuning", "finetune_config"), ("part_b_finetuning", "generation_settings"),
        ("part_b_finetuning", "b5_lr_1e2")]),
    ("B6", "LoRA and the cost of training", [
        ("part_b_finetuning", "lora_linear"), ("part_b_finetuning", "lora_parameter_count"),
        ("part_b_finetuning", "apply_lora"), ("part_b_finetuning", "fine_tuning_footprint"),
        ("part_b_finetuning", "b6_lora_tradeoffs")]),
    ("B7", "Critical thinking", [
        ("part_b_finetuning", "b7_limitations"), ("part_b_finetuning", "b7_bias")]),
    ("T1", "Theory: fifteen of a hundred tokens", [
        ("part_b_bert_gpt", "mlm_signal", "B1"), ("part_b_bert_gpt", "b1_why_not_50_percent", "B1")]),
    ("T2", "Theory: training signal, MLM vs CLM", [
        ("exercise1_masked_predictions", "ex1_mlm_vs_clm_signal", "PT"), ("part_b_bert_gpt", "mlm_signal", "B1")]),
    ("T3", "Theory: the gradient of the MLM loss", [
        ("part_b_bert_gpt", "b2_mlm_gradient")]),
    ("T4", "Theory: why next-sentence prediction was dropped", []),
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
        ("exercise3_classification_as_generation", "ex3_compare_with_finetuning")]),
    ("P4", "Exercise 4: model size", [
        ("exercise4_model_size", "truncate_encoder"), ("exercise4_model_size", "training_flops"),
        ("exercise4_model_size", "count_encoder_parameters"), ("exercise4_model_size", "ex4_size_tradeoffs")]),
    ("P5", "Exercise 5: span corruption and text-to-text", [
        ("exercise5_span_corruption", "random_spans_noise_mask"), ("exercise5_span_corruption", "span_corrupt"),
        ("exercise5_span_corruption", "ex5_what_stands_in"), ("exercise5_span_corruption", "ex5_rouge_discussion")]),
    ("PT", "Pre-training your own (exercise 1, section 3)", [
        ("exercise1_masked_predictions", "ex1_mlm_vs_clm_signal")]),
]


# ===================================================================== notebook metadata
@dataclass(frozen=True)
class GradedItem:
    notebook: str   # stem
    item: str       # function / constant name, or the written answer's grade_id
    cell: str       # the cell that carries the points: test_<item>, or the written answer itself
    kind: str       # "auto" or "written"
    points: float
    # A notebook still being written once showed its planned items here; the course model
    # (autograder/course.py) now refuses a notebook it cannot find, so this stays False.
    planned: bool = False


def notebook_items() -> dict[str, dict[str, GradedItem]]:
    """Graded items of every notebook, in the course's order, keyed by item name (autograder/course.py)."""
    try:
        course = load_course()
    except CourseError as err:
        raise BuildError(str(err)) from err
    result = {}
    for notebook in course.notebooks:
        result[notebook.stem] = {}
        for cell in notebook.graded:
            item = cell.solution if cell.kind == TEST else cell.grade_id
            result[notebook.stem][item] = GradedItem(notebook.stem, item, cell.grade_id,
                                                     "auto" if cell.kind == TEST else "written", cell.points)
    return result


def _points(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def render_grading_map(items: dict[str, dict[str, GradedItem]]) -> str:
    """grading_map.md as text; raises BuildError if TOPICS and the notebooks disagree."""
    counted: dict[tuple[str, str], str] = {}
    topic_ids = {key for key, _, _ in TOPICS}
    for key, _, entries in TOPICS:
        for entry in entries:
            stem, item = entry[0], entry[1]
            if stem not in items or item not in items[stem]:
                where = "planned items" if items.get(stem) and next(iter(items[stem].values())).planned else "notebook"
                raise BuildError(f"TOPICS ({key}) names {stem}:{item}, which is not a graded item of that {where}")
            if len(entry) == 3:
                if entry[2] not in topic_ids:
                    raise BuildError(f"TOPICS ({key}) refers {stem}:{item} to unknown topic {entry[2]}")
                continue
            if (stem, item) in counted:
                raise BuildError(f"{stem}:{item} is counted under both {counted[(stem, item)]} and {key}")
            counted[(stem, item)] = key
    for stem, by_name in items.items():
        missing = [name for name in by_name if (stem, name) not in counted]
        if missing:
            raise BuildError(f"graded items of {stem} assigned to no topic in handouts/build.py TOPICS: {missing}")

    lines = [
        "# Grading map, week 6",
        "",
        "Generated by `python handouts/build.py` from the nbgrader metadata of `solutions/week6/*.ipynb`",
        "and the topic table in `handouts/build.py`. Do not edit by hand: `python handouts/build.py --check`",
        "fails when this file is out of date.",
        "",
        "*auto*: auto-graded code; the points sit on the visible-test cell `test_<item>` and a hidden test",
        "suite awards them. *written*: a written answer, graded by hand with the rubric of the source",
        "notebook. Points in parentheses are listed under a second topic but counted under the topic",
        "named. *planned*: the notebook is still being written; its points are the planned ones and are",
        "not part of the totals.",
        "",
        "## By topic",
        "",
        "| topic | notebook | item | graded cell | kind | points |",
        "| --- | --- | --- | --- | --- | ---: |",
    ]
    for key, title, entries in TOPICS:
        label = f"{key} · {title}"
        if not entries:
            lines.append(f"| {label} | (none) | no graded cell | | | 0 |")
            continue
        previous_stem = None
        for k, entry in enumerate(entries):
            stem, item = entry[0], entry[1]
            info = items[stem][item]
            notebook = f"`{stem}.ipynb`" if stem != previous_stem else ""
            previous_stem = stem
            kind = info.kind + (", planned" if info.planned else "")
            points = _points(info.points)
            if len(entry) == 3:
                points = f"({points}, counted under {entry[2]})"
            lines.append(f"| {label if k == 0 else ''} | {notebook} | `{item}` | `{info.cell}` | {kind} | {points} |")

    lines += ["", "## Points per topic", "",
              "| topic | auto-graded | written | total |", "| --- | ---: | ---: | ---: |"]
    for key, title, entries in TOPICS:
        primary = [items[e[0]][e[1]] for e in entries if len(e) == 2]
        auto = sum(i.points for i in primary if i.kind == "auto" and not i.planned)
        written = sum(i.points for i in primary if i.kind == "written" and not i.planned)
        planned = sum(i.points for i in primary if i.planned)
        total = _points(auto + written) + (f" (+{_points(planned)} planned)" if planned else "")
        lines.append(f"| {key} · {title} | {_points(auto)} | {_points(written)} | {total} |")

    lines += ["", "## Totals per notebook", "",
              "| notebook | auto-graded points | manually graded points | total | status |",
              "| --- | ---: | ---: | ---: | --- |"]
    grand_auto = grand_written = 0.0
    for stem, by_name in items.items():
        auto = sum(i.points for i in by_name.values() if i.kind == "auto")
        written = sum(i.points for i in by_name.values() if i.kind == "written")
        planned = any(i.planned for i in by_name.values())
        if not planned:
            grand_auto, grand_written = grand_auto + auto, grand_written + written
        status = "planned, not counted" if planned else "present"
        lines.append(f"| `{stem}.ipynb` | {_points(auto)} | {_points(written)} | "
                     f"{_points(auto + written)} | {status} |")
    lines.append(f"| **all present notebooks** | {_points(grand_auto)} | {_points(grand_written)} | "
                 f"{_points(grand_auto + grand_written)} | |")
    return "\n".join(lines) + "\n"


# ================================================================ LaTeX -> HTML (small)
GREEK = {name: chr(code) for name, code in {
    "alpha": 0x3B1, "beta": 0x3B2, "gamma": 0x3B3, "delta": 0x3B4, "epsilon": 0x3F5, "varepsilon": 0x3B5,
    "zeta": 0x3B6, "eta": 0x3B7, "theta": 0x3B8, "iota": 0x3B9, "kappa": 0x3BA, "lambda": 0x3BB, "mu": 0x3BC,
    "nu": 0x3BD, "xi": 0x3BE, "pi": 0x3C0, "rho": 0x3C1, "sigma": 0x3C3, "tau": 0x3C4, "phi": 0x3D5,
    "varphi": 0x3C6, "chi": 0x3C7, "psi": 0x3C8, "omega": 0x3C9, "Gamma": 0x393, "Delta": 0x394,
    "Theta": 0x398, "Lambda": 0x39B, "Pi": 0x3A0, "Sigma": 0x3A3, "Phi": 0x3A6, "Psi": 0x3A8, "Omega": 0x3A9,
}.items()}
RELATIONS = {"=": "=", "<": "&lt;", ">": "&gt;", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "neq": "≠",
             "approx": "≈", "propto": "∝", "in": "∈", "notin": "∉", "to": "→", "rightarrow": "→",
             "leftarrow": "←", "gets": "←", "ll": "≪", "gg": "≫", "equiv": "≡", "sim": "∼", "mapsto": "↦",
             "Rightarrow": "⇒", "iff": "⇔", "subset": "⊂", "subseteq": "⊆", "mid": "|"}
BINARY = {"+": "+", "-": "−", "cdot": "·", "times": "×", "pm": "±", "setminus": "∖", "circ": "∘",
          "odot": "⊙", "cup": "∪", "cap": "∩"}
SYMBOLS = {"infty": "∞", "partial": "∂", "nabla": "∇", "ldots": "…", "dots": "…", "cdots": "⋯",
           "lVert": "‖", "rVert": "‖", "|": "‖", "top": "⊤", "star": "⋆", "forall": "∀", "exists": "∃",
           "lfloor": "⌊", "rfloor": "⌋", "lceil": "⌈", "rceil": "⌉", "langle": "⟨", "rangle": "⟩",
           "{": "{", "}": "}", "%": "%", "backslash": "\\", "ell": "ℓ", "prime": "′", "_": "_", "#": "#"}
BIG_OPERATORS = {"sum": "∑", "prod": "∏", "int": "∫"}
FUNCTIONS = {"log", "ln", "exp", "max", "min", "arg", "sin", "cos", "tanh", "det", "dim", "lim", "sup", "inf"}
SPACES = {",": "\u2009", ";": "\u2005", ":": "\u2005", "!": "", "quad": "\u2003", "qquad": "\u2003\u2003",
          " ": " "}
IGNORED = {"left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "displaystyle",
           "textstyle", "limits", "nolimits"}
CALLIGRAPHIC = {"L": "ℒ", "M": "ℳ", "B": "ℬ", "E": "ℰ", "F": "ℱ", "H": "ℋ", "I": "ℐ", "R": "ℛ"}
BLACKBOARD = {"R": "ℝ", "N": "ℕ", "Z": "ℤ", "Q": "ℚ", "C": "ℂ", "E": "𝔼", "P": "ℙ"}
ACCENTS = {"tilde": "~", "hat": "^", "bar": "¯", "vec": "→", "dot": "˙"}
TEXT_COMMANDS = {"text", "mathrm", "operatorname", "textrm", "mbox", "textit", "textbf"}
TOKEN = re.compile(r"\\[A-Za-z]+|\\.|[{}^_]|\s+|[A-Za-z]+|\d+(?:\.\d+)?|.", re.S)


class TexToHtml:
    """Render the subset of LaTeX math that the handout uses as plain HTML.

    Unknown commands raise BuildError, so a formula can never render silently wrong.
    """

    def __init__(self, source: str, display: bool):
        self.source = source
        self.display = display
        self.tokens = [t for t in TOKEN.findall(source)]
        self.pos = 0

    def render(self) -> str:
        out = self.expression(stop=None)
        if self.pos != len(self.tokens):
            raise BuildError(f"unbalanced braces in formula: {self.source!r}")
        return out

    # -- token helpers
    def peek(self) -> str | None:
        while self.pos < len(self.tokens) and self.tokens[self.pos].isspace():
            self.pos += 1
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise BuildError(f"formula ends too early: {self.source!r}")
        self.pos += 1
        return token

    def previous_is_operator(self) -> bool:
        """True when the token before the current one cannot end an operand (start, (, =, ^, ...)."""
        k = self.pos - 2
        while k >= 0 and self.tokens[k].isspace():
            k -= 1
        if k < 0:
            return True
        before = self.tokens[k]
        return before in ("(", "[", "{", ",", ";", "=", "<", ">", "^", "_", "+", "-") or (
            before.startswith("\\") and before[1:] in RELATIONS | BINARY | {"left": "", "frac": ""})

    def raw_group(self) -> str:
        """The literal text of a {...} argument (spaces kept), for \\text and friends."""
        if self.take() != "{":
            raise BuildError(f"expected {{ in formula: {self.source!r}")
        depth, parts = 1, []
        while self.pos < len(self.tokens):
            token = self.tokens[self.pos]
            self.pos += 1
            if token == "{":
                depth += 1
            elif token == "}":
                depth -= 1
                if depth == 0:
                    return "".join(parts)
            parts.append(token)
        raise BuildError(f"unclosed {{ in formula: {self.source!r}")

    # -- grammar
    def expression(self, stop: str | None) -> str:
        out = []
        while True:
            token = self.peek()
            if token is None:
                if stop is not None:
                    raise BuildError(f"missing {stop!r} in formula: {self.source!r}")
                return "".join(out)
            if token == stop:
                self.pos += 1
                return "".join(out)
            if token == "}":
                raise BuildError(f"unexpected }} in formula: {self.source!r}")
            if token in ("^", "_"):
                self.pos += 1
                tag = "sup" if token == "^" else "sub"
                out.append(f"<{tag}>{self.argument()}</{tag}>")
                continue
            out.append(self.atom())

    def argument(self) -> str:
        """One argument: a {group}, a command, or a single character or digit."""
        token = self.peek()
        if token == "{":
            self.pos += 1
            return self.expression(stop="}")
        if token is not None and re.fullmatch(r"[A-Za-z]+", token) and len(token) > 1:
            # ``x_ab`` means x_a b: split a run of letters, keep the first as the argument.
            self.tokens[self.pos] = token[1:]
            return f"<i>{token[0]}</i>"
        if token is not None and re.fullmatch(r"\d+(?:\.\d+)?", token) and len(token) > 1:
            self.tokens[self.pos] = token[1:]
            return token[0]
        return self.atom()

    def atom(self) -> str:
        token = self.take()
        if token == "{":
            return self.expression(stop="}")
        if token.startswith("\\"):
            return self.command(token[1:])
        if re.fullmatch(r"[A-Za-z]+", token):
            return f"<i>{token}</i>"
        if token in RELATIONS:
            return f" {RELATIONS[token]} "
        if token in BINARY:
            if token in "+-" and self.previous_is_operator():
                return BINARY[token]  # a sign, not a binary operation: no spaces
            return f" {BINARY[token]} "
        if token == "'":
            return "′"
        if token in (",", ";"):
            return token + "\u2009"
        if token == "&":
            raise BuildError(f"alignment '&' is not supported in formulas: {self.source!r}")
        return html.escape(token)

    def command(self, name: str) -> str:
        if name in GREEK:
            return f"<i>{GREEK[name]}</i>" if name[0].islower() else GREEK[name]
        if name in RELATIONS:
            return f" {RELATIONS[name]} "
        if name in BINARY:
            return f" {BINARY[name]} "
        if name in SYMBOLS:
            return html.escape(SYMBOLS[name])
        if name in SPACES:
            return SPACES[name]
        if name in IGNORED:
            return ""
        if name in FUNCTIONS:
            out = f'<span class="up">{name}</span>'
            for _ in range(2):  # optional limits, as in \max_j or \arg\min_\theta
                token = self.peek()
                if token not in ("^", "_"):
                    break
                self.pos += 1
                tag = "sup" if token == "^" else "sub"
                out += f"<{tag}>{self.argument()}</{tag}>"
            following = self.peek()
            if following not in (None, "(", ")", ",", ";", "}", "\\left"):
                out += "\u2009"
            return out
        if name in TEXT_COMMANDS:
            text = html.escape(self.raw_group())
            cls = {"textit": "it", "textbf": "bf"}.get(name, "up")
            return f'<span class="{cls}">{text}</span>'
        if name in ("mathbf", "boldsymbol", "bm"):
            return f'<span class="bf">{self.argument()}</span>'
        if name == "mathcal":
            letters = self.raw_group()
            return "".join(CALLIGRAPHIC.get(c, f"<i>{c}</i>") for c in letters)
        if name == "mathbb":
            letters = self.raw_group()
            return "".join(BLACKBOARD.get(c, c) for c in letters)
        if name in ACCENTS:
            return f'<span class="acc">{self.argument()}<span class="acc-mark">{ACCENTS[name]}</span></span>'
        if name == "frac":
            numerator, denominator = self.argument(), self.argument()
            return (f'<span class="frac"><span class="num">{numerator}</span>'
                    f'<span class="den">{denominator}</span></span>')
        if name == "sqrt":
            return f'√<span class="radicand">{self.argument()}</span>'
        if name in BIG_OPERATORS:
            return self.big_operator(BIG_OPERATORS[name])
        raise BuildError(f"unsupported LaTeX command \\{name} in formula: {self.source!r}")

    def big_operator(self, symbol: str) -> str:
        lower = upper = ""
        for _ in range(2):
            token = self.peek()
            if token == "_" and not lower:
                self.pos += 1
                lower = self.argument()
            elif token == "^" and not upper:
                self.pos += 1
                upper = self.argument()
        if self.display:
            return (f'<span class="bigop"><span class="lim">{upper}</span><span class="op">{symbol}</span>'
                    f'<span class="lim">{lower}</span></span>')
        return f'{symbol}<sub>{lower}</sub>' + (f"<sup>{upper}</sup>" if upper else "")


def tex_to_html(source: str, *, display: bool) -> str:
    body = TexToHtml(source.strip(), display).render()
    body = re.sub(r" {2,}", " ", body).strip()
    title = html.escape(" ".join(source.split()), quote=True)
    if display:
        return f'<div class="math display" title="{title}">{body}</div>\n'
    return f'<span class="math" title="{title}">{body}</span>'


# ===================================================================== markdown -> HTML
def slugify(text: str, taken: set[str]) -> str:
    plain = re.sub(r"<[^>]+>", "", text)
    plain = html.unescape(plain).lower()
    slug = re.sub(r"[^a-z0-9]+", "-", plain).strip("-") or "section"
    candidate, k = slug, 2
    while candidate in taken:
        candidate, k = f"{slug}-{k}", k + 1
    taken.add(candidate)
    return candidate


class HandoutRenderer(mistune.HTMLRenderer):
    def __init__(self, figure_numbers: dict[str, int]):
        super().__init__(escape=False)
        self.figure_numbers = figure_numbers
        self.toc: list[tuple[int, str, str]] = []
        self.ids: set[str] = set()
        self.title = ""

    def heading(self, text: str, level: int, **attrs) -> str:
        if level == 1 and not self.title:
            self.title = re.sub(r"<[^>]+>", "", text)
        anchor = slugify(text, self.ids)
        if level in (2, 3):
            self.toc.append((level, anchor, text))
        return f'<h{level} id="{anchor}">{text}</h{level}>\n'

    def image(self, text: str, url: str, title: str | None = None) -> str:
        match = re.fullmatch(r"figures/([\w.-]+)\.png", url)
        if not match:
            return super().image(text, url, title)
        name = match.group(1)
        number = self.figure_numbers[name]
        caption = _inline_code(html.escape(title or "", quote=False))
        return (f'<figure id="fig-{name}"><a href="{url}"><img src="{url}" alt="{html.escape(text)}" '
                f'loading="lazy"></a><figcaption><b>Figure {number}.</b> {caption}</figcaption></figure>')

    def block_quote(self, text: str) -> str:
        kind = "box"
        if text.startswith("<p><strong>Where in the notebooks"):
            kind = "box where"
        elif text.startswith("<p><strong>Figure not available"):
            kind = "box note"
        return f'<blockquote class="{kind}">\n{text}</blockquote>\n'

    def block_math(self, text: str) -> str:
        return tex_to_html(text, display=True)

    def inline_math(self, text: str) -> str:
        return tex_to_html(text, display=False)

    def block_code(self, code: str, info: str | None = None) -> str:
        language = (info or "").split()[0] if info else ""
        cls = f' class="language-{html.escape(language)}"' if language else ""
        return f"<pre><code{cls}>{html.escape(code)}</code></pre>\n"


def _inline_code(escaped: str) -> str:
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


OPTIONAL_FIGURE = re.compile(r"^<!-- optional-figure: (figures/([\w.-]+)\.png) \| (.+?) -->$", re.M)
IMAGE = re.compile(r"!\[[^\]]*\]\(figures/([\w.-]+)\.png(?: \"[^\"]*\")?\)")
FIGURE_REFERENCE = re.compile(r"\[Figure\]\(#fig-([\w.-]+)\)")


def expand_optional_figures(markdown: str) -> str:
    """Replace each optional-figure directive by the figure (if drawn) or by a note."""

    def replace(match: re.Match) -> str:
        relative, name, alt = match.group(1), match.group(2), match.group(3)
        if (HERE / relative).is_file():
            caption_file = HERE / "figures" / f"{name}{FIGURE_CAPTION_SUFFIX}"
            caption = caption_file.read_text().strip() if caption_file.is_file() else alt
            caption = " ".join(caption.split()).replace('"', "'")
            return f'![{alt}]({relative} "{caption}")'
        return ("> **Figure not available.** The figure of the two Austen models' pre-training curves is drawn "
                "from their training logs in `data/checkpoints/` by `python handouts/figures.py`; this copy of "
                "the repository does not contain those logs yet. Exercise 1 (section 3) draws the same curves "
                "in the notebook.")

    return OPTIONAL_FIGURE.sub(replace, markdown)


def number_figures(markdown: str) -> tuple[str, dict[str, int]]:
    numbers: dict[str, int] = {}
    for name in IMAGE.findall(markdown):
        if name in numbers:
            raise BuildError(f"figure {name}.png is used twice in the handout")
        numbers[name] = len(numbers) + 1

    def reference(match: re.Match) -> str:
        name = match.group(1)
        if name not in numbers:
            raise BuildError(f"[Figure](#fig-{name}) refers to a figure that the handout does not show")
        return f"[Figure {numbers[name]}](#fig-{name})"

    return FIGURE_REFERENCE.sub(reference, markdown), numbers


def referenced_figures(markdown: str) -> list[str]:
    """Figures the handout always shows (optional figures excluded), as paths relative to handouts/."""
    return [f"figures/{name}.png" for name in IMAGE.findall(OPTIONAL_FIGURE.sub("", markdown))]


CSS = """
:root { --ink: #1d1d1f; --muted: #5f6368; --rule: #dadce0; --accent: #1a5fb4; --box: #f3f7fc;
        --code: #f6f8fa; --note: #fff7e0; }
* { box-sizing: border-box; }
html { font-size: 17px; }
body { margin: 0; color: var(--ink); background: #fff; line-height: 1.6;
       font-family: "Charter", "Bitstream Charter", "Georgia", "DejaVu Serif", serif; }
#layout { display: flex; max-width: 1280px; margin: 0 auto; }
nav#toc { position: sticky; top: 0; align-self: flex-start; width: 290px; max-height: 100vh;
          overflow-y: auto; padding: 28px 18px 28px 24px; font: 14px/1.45 system-ui, "DejaVu Sans", sans-serif;
          border-right: 1px solid var(--rule); }
nav#toc .toc-title { font-weight: 700; margin-bottom: 8px; }
nav#toc ol { list-style: none; margin: 0; padding-left: 0; }
nav#toc ol ol { padding-left: 14px; margin: 2px 0 6px; }
nav#toc li { margin: 3px 0; }
nav#toc a { color: var(--ink); text-decoration: none; }
nav#toc a:hover { color: var(--accent); text-decoration: underline; }
main { flex: 1; min-width: 0; max-width: 860px; padding: 28px 40px 80px; }
h1 { font-size: 2.1rem; line-height: 1.2; margin: 0.4em 0 0.3em; }
h2 { font-size: 1.55rem; margin: 2.2em 0 0.5em; padding-top: 0.4em; border-top: 2px solid var(--rule); }
h3 { font-size: 1.22rem; margin: 1.8em 0 0.4em; }
h4 { font-size: 1.05rem; margin: 1.4em 0 0.3em; }
h1, h2, h3, h4 { font-family: system-ui, "DejaVu Sans", sans-serif; }
a { color: var(--accent); }
p, li { hyphens: auto; }
code { font: 0.86em/1.4 "DejaVu Sans Mono", "Menlo", "Consolas", monospace; background: var(--code);
       padding: 0.08em 0.3em; border-radius: 3px; }
pre { background: var(--code); padding: 12px 14px; border-radius: 6px; overflow-x: auto; }
pre code { background: none; padding: 0; font-size: 0.84em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9rem; width: 100%; display: block; overflow-x: auto; }
th, td { border: 1px solid var(--rule); padding: 6px 9px; text-align: left; vertical-align: top; }
th { background: #f1f3f4; }
figure { margin: 1.6em 0; text-align: center; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--rule); border-radius: 4px; }
figcaption { font-size: 0.9rem; color: var(--muted); text-align: left; margin-top: 6px; }
blockquote.box { margin: 1.4em 0; padding: 10px 16px; background: var(--box);
                 border-left: 4px solid var(--accent); border-radius: 4px; }
blockquote.note { background: var(--note); border-left-color: #c88a00; }
blockquote.where { font: 0.92rem/1.5 system-ui, "DejaVu Sans", sans-serif; }
blockquote.where ul { padding-left: 1.2em; margin: 0.4em 0; }
blockquote p { margin: 0.4em 0; }
.math { font-family: "STIX Two Math", "Cambria Math", "DejaVu Serif", serif; white-space: nowrap; }
.math.display { display: block; text-align: center; margin: 1em 0; padding: 4px 0; white-space: normal;
                overflow-x: auto; font-size: 1.06rem; line-height: 2.1; }
.math i { font-style: italic; padding-right: 0.04em; }
.math .up { font-style: normal; }
.math .bf { font-weight: 700; }
.math .bf i { font-style: normal; }
.math sub, .math sup { font-size: 0.72em; }
.frac { display: inline-flex; flex-direction: column; vertical-align: middle; text-align: center;
        margin: 0 0.15em; line-height: 1.25; }
.frac .num { border-bottom: 1px solid currentColor; padding: 0 0.2em; }
.frac .den { padding: 0 0.2em; }
.bigop { display: inline-flex; flex-direction: column; vertical-align: middle; text-align: center;
         line-height: 1.1; margin: 0 0.15em; }
.bigop .op { font-size: 1.6em; line-height: 1; }
.bigop .lim { font-size: 0.7em; min-height: 0.9em; }
.acc { position: relative; display: inline-block; }
.acc-mark { position: absolute; left: 0; right: 0; top: -0.62em; text-align: center; font-size: 0.85em;
            font-style: normal; }
.radicand { border-top: 1px solid currentColor; padding: 0 0.1em; }
footer { margin-top: 4em; color: var(--muted); font-size: 0.85rem; border-top: 1px solid var(--rule);
         padding-top: 1em; }
@media (max-width: 900px) {
  #layout { display: block; }
  nav#toc { position: static; width: auto; max-height: none; border-right: none;
            border-bottom: 1px solid var(--rule); }
  main { padding: 20px 18px 60px; }
}
@media print { nav#toc { display: none; } main { max-width: none; } }
"""


def render_toc(entries: list[tuple[int, str, str]]) -> str:
    parts, open_sub = ['<div class="toc-title">Contents</div>', "<ol>"], False
    for k, (level, anchor, text) in enumerate(entries):
        label = re.sub(r"<[^>]+>", "", text)
        if level == 2:
            if open_sub:
                parts.append("</ol></li>")
                open_sub = False
            elif k:
                parts.append("</li>")
            parts.append(f'<li><a href="#{anchor}">{label}</a>')
        else:
            if not open_sub:
                parts.append("<ol>")
                open_sub = True
            parts.append(f'<li><a href="#{anchor}">{label}</a></li>')
    parts.append("</ol></li>" if open_sub else "</li>")
    parts.append("</ol>")
    return "\n".join(parts)


def render_html(markdown: str) -> str:
    markdown = expand_optional_figures(markdown)
    markdown, numbers = number_figures(markdown)
    renderer = HandoutRenderer(numbers)
    md = mistune.create_markdown(renderer=renderer, plugins=["table", "math"])
    body = md(markdown)
    body = re.sub(r"<p>(<figure .*?</figure>)</p>", r"\1", body, flags=re.S)
    title = renderer.title or "Week 6 handout"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f'<div id="layout">\n<nav id="toc">\n{render_toc(renderer.toc)}\n</nav>\n<main>\n{body}'
        "<footer>Generated from <code>handouts/week6.md</code> by <code>python handouts/build.py</code>; "
        "figures by <code>python handouts/figures.py</code>. Hover over a formula to see its LaTeX source."
        "</footer>\n</main>\n</div>\n</body>\n</html>\n"
    )


# ================================================================================ main
def build() -> dict[Path, str]:
    markdown = SOURCE_MD.read_text(encoding="utf-8")
    control = sorted({f"U+{ord(c):04X}" for c in markdown if ord(c) < 32 and c != "\n"})
    if control:  # e.g. a tab or bell left by a LaTeX string that lost its backslash
        raise BuildError(f"control characters in {SOURCE_MD.name}: {control}")
    missing = [path for path in referenced_figures(markdown) if not (HERE / path).is_file()]
    if missing:
        raise BuildError(f"figures missing (run python handouts/figures.py): {missing}")
    return {OUTPUT_HTML: render_html(markdown), OUTPUT_MAP: render_grading_map(notebook_items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the outputs are out of date; write nothing")
    args = parser.parse_args(argv)
    try:
        outputs = build()
    except BuildError as err:
        print(f"handouts/build.py: error: {err}", file=sys.stderr)
        return 1
    stale = [path for path, text in outputs.items()
             if not path.is_file() or path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"out of date: {path.relative_to(REPO)} (run python handouts/build.py)", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs.items():
        if path in stale:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
        else:
            print(f"up to date: {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
