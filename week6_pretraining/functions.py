"""The corruption and loss functions a pre-training run uses, and where they come from.

The loop owns none of them. A notebook passes the student's own (exercise 1 trains with
Part B's ``mask_tokens``, ``mlm_loss`` and ``clm_loss``; exercise 5 scores the T5s with its
span functions). The command lines (``python -m week6_pretraining.train`` and
``.evaluate``) take the course's reference implementations from an installed package
that offers them under the entry-point group :data:`GROUP`: the course repository's grader
does (``autograder/build/pretraining.py``); the student bundle does not, so there the
commands say what to do instead. This package imports nothing of the grader.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points

GROUP = "week6_pretraining.functions"


@dataclass(frozen=True)
class Functions:
    """The functions of one run, each following the contract of the graded function it
    stands for (the notebooks state them)."""

    mask_fn: Callable | None = None  # Part B's mask_tokens
    mlm_loss_fn: Callable | None = None  # Part B's mlm_loss, given logits [N, V] of the masked positions only
    clm_loss_fn: Callable | None = None  # Part B's clm_loss
    noise_fn: Callable | None = None  # exercise 5's random_spans_noise_mask
    corrupt_fn: Callable | None = None  # exercise 5's span_corrupt
    span_loss_fn: Callable | None = None  # exercise 5's span_corruption_loss
    # (tokenizer, device) -> a mask_fn choosing whole words (the reference whole_word_mask
    # bound to the tokenizer's "##" pieces): a recipe of the course's own runs, not graded.
    whole_word_mask_fn: Callable | None = None

    def require(self, objective: str, *, whole_word: bool = False) -> None:
        """Raise ValueError naming every function a run of ``objective`` needs that is missing."""
        require(f"pre-training with objective {objective!r}",
                **{name: getattr(self, name) for name in needed(objective, whole_word=whole_word)})


NEEDED = {
    "mlm": ("mask_fn", "mlm_loss_fn"),
    "clm": ("clm_loss_fn",),
    "span": ("noise_fn", "corrupt_fn", "span_loss_fn"),
}


def needed(objective: str, *, whole_word: bool = False) -> tuple[str, ...]:
    """The functions a run of ``objective`` calls (whole-word masking trains with
    ``whole_word_mask_fn`` and keeps ``mask_fn`` for the held-out rows)."""
    return NEEDED[objective] + (("whole_word_mask_fn",) if whole_word else ())


def require(what: str, **given: Callable | None) -> None:
    """Raise ValueError naming each of ``given`` that is None, and how to pass it."""
    missing = [name for name, function in given.items() if function is None]
    if missing:
        raise ValueError(
            f"{what} needs {', '.join(missing)}: pass your own implementations "
            f"({', '.join(f'{name}=...' for name in missing)}), or run from the course repository, "
            "whose grader provides the reference ones")


def installed() -> Functions:
    """The reference functions an installed package offers under :data:`GROUP`; an empty
    ``Functions`` where none does (``require`` then names what is missing)."""
    offered = entry_points(group=GROUP)
    if not offered:
        return Functions()
    if len(offered) > 1:
        raise RuntimeError(f"several packages offer {GROUP}: {sorted(e.value for e in offered)}; uninstall all but one")
    (entry,) = offered
    given = entry.load()()
    known = {field.name for field in dataclasses.fields(Functions)}
    if not isinstance(given, dict) or not set(given) <= known:
        raise RuntimeError(f"{entry.value} must return a dict with keys among {sorted(known)}")
    return Functions(**given)
