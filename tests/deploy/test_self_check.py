"""How the student's self-check reads an executed notebook (no kernel needed)."""
from __future__ import annotations

import nbformat

from week6_helpers.check import classify, main

STUB = "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"


def _cell(source, *, grade_id=None, solution=False, grade=False, error=None, ran=True):
    cell = nbformat.v4.new_code_cell(source)
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": solution, "grade": grade,
                                     "locked": not solution, "schema_version": 3, **({"points": 1} if grade else {})}
    cell.execution_count = 1 if ran else None
    if error:
        cell.outputs = [nbformat.v4.new_output("error", ename=error[0], evalue=error[1], traceback=[])]
    return cell


def _notebook(*cells):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = list(cells)
    return notebook


def test_a_stub_is_todo_and_the_cells_that_call_it_are_waiting():
    findings, first = classify(_notebook(
        _cell(STUB, grade_id="f", solution=True),
        _cell("assert f(1) == 2", grade_id="test_f", grade=True, error=("NotImplementedError", "")),
        _cell("plot(f(3))", error=("NotImplementedError", "")),
    ))
    assert [(f.status, f.name) for f in findings] == [("STUB", "f"), ("waiting", "test_f"), ("waiting", "cell 3")]
    assert first.name == "test_f"


def test_an_instruction_that_mentions_the_stub_line_is_not_a_stub():
    solved = "# Fill in, then delete the `raise NotImplementedError()` line.\nANSWER = 3"
    findings, first = classify(_notebook(_cell(solved, grade_id="answer", solution=True),
                                         _cell("assert ANSWER == 3", grade_id="test_answer", grade=True)))
    assert [(f.status, f.name) for f in findings] == [("ok", "test_answer")] and first is None


def test_wrong_answers_fail_with_their_message_and_other_errors_are_reported():
    findings, first = classify(_notebook(
        _cell("def f(x):\n    return x", grade_id="f", solution=True),
        _cell("assert f(1) == 2, 'f(1) should be 2'", grade_id="test_f", grade=True,
              error=("AssertionError", "f(1) should be 2")),
        _cell("train()", error=("KeyboardInterrupt", "")),
    ))
    assert [(f.status, f.message) for f in findings] == [("FAIL", "AssertionError: f(1) should be 2"),
                                                          ("error", "KeyboardInterrupt")]
    assert first.status == "FAIL"


def test_a_stub_that_raises_as_it_runs_is_the_first_error_and_is_todo():
    findings, first = classify(_notebook(
        _cell("ANSWER = None\n# YOUR CODE HERE\nraise NotImplementedError()", grade_id="answer", solution=True,
              error=("NotImplementedError", "")),
    ))
    assert [f.status for f in findings] == ["STUB"] and first.status == "STUB"


def test_cells_after_a_stop_are_not_reported_as_passing():
    findings, _ = classify(_notebook(
        _cell(STUB, grade_id="f", solution=True),
        _cell("f(1)", grade_id="test_f", grade=True, error=("NotImplementedError", "")),
        _cell("assert True", grade_id="test_g", grade=True, ran=False),
    ))
    assert "test_g" not in [f.name for f in findings]


def test_bad_paths_are_refused_with_exit_status_2(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hi")
    assert main([str(tmp_path / "notes.txt")]) == 2
    assert "is not a notebook file" in capsys.readouterr().err
