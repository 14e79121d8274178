"""What a grading run shows while it grades: a progress bar on a terminal, one line per notebook elsewhere.

One home for the progress of ``python -m autograder grade`` (``cli.py``) and of
``nbgrader autograde`` (``nbgrader/plugin.py``), so that a TA sees the same thing
whichever they run: notebooks done out of the total, the failures so far (reports
whose outcome is ``failed``: the grader or the machine did not finish them, and
running again retries them) and, on a terminal, tqdm's rate and ETA. Where stderr is no
terminal (CI, a log file, a Slurm job's output) a bar redrawn in place would be
noise, so each notebook gets one plain line on stdout instead::

    [3/16] alice/part_a_discovery.ipynb: 12/12
    [4/16] bob/part_b_bert_gpt.ipynb: 0/40 (could not be graded)

The total may change while the run goes (nbgrader decides per student whether to
grade, see ``nbgrader.plugin``); the bar and the lines show the latest one.
"""
from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterable

from .report import Report


class Progress:
    """The progress of ``total`` notebooks: :meth:`done` once per notebook, then :meth:`close`.

    ``loggers``: loggers that write to the console while the bar is shown (nbgrader's
    log); their lines are printed above the bar instead of through it.
    """

    def __init__(self, total: int, *, loggers: Iterable[logging.Logger] = ()):
        self.total, self.count, self.failures = total, 0, 0
        self.bar = None
        self._restore = contextlib.ExitStack()
        if total and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="notebook", file=sys.stderr, dynamic_ncols=True)
            self.bar.set_postfix_str("failed 0", refresh=False)
            for logger in loggers:
                self._restore.callback(setattr, logger, "handlers", logger.handlers)
                logger.handlers = [_AboveTheBar.replacing(h) if _on_console(h) else h for h in logger.handlers]

    def done(self, submission, report: Report) -> None:
        """One more notebook done: ``submission`` names it (``student``, ``name``), ``report`` its result."""
        self.count += 1
        self.failures += report.outcome == "failed"
        if self.bar is not None:
            self.bar.set_postfix_str(f"failed {self.failures}", refresh=False)
            self.bar.update()
        else:
            print(f"[{self.count}/{self.total}] {submission.student}/{submission.name}: "
                  f"{report.score:g}/{report.max_score:g}"
                  + (" (could not be graded)" if report.outcome == "failed" else ""), flush=True)

    def set_total(self, total: int) -> None:
        """The run's total changed (never below what is done already)."""
        self.total = max(total, self.count)
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def close(self) -> None:
        """End the bar, and give the loggers their own handlers back."""
        self._restore.close()
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _on_console(handler: logging.Handler) -> bool:
    return type(handler) is logging.StreamHandler and handler.stream in (sys.stdout, sys.stderr)


class _AboveTheBar(logging.StreamHandler):
    """A console handler that writes through tqdm, which clears the bar, prints the line and redraws it."""

    @classmethod
    def replacing(cls, handler: logging.StreamHandler) -> _AboveTheBar:
        """This handler in place of ``handler``: same stream, level, format and filters."""
        replacement = cls(handler.stream)
        replacement.setLevel(handler.level)
        replacement.setFormatter(handler.formatter)
        replacement.filters = list(handler.filters)
        return replacement

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)
