"""The grading-speed figures the README shows were measured on today's grader and suites.

``benchmarks/grading_speed.py`` records the ``suite_hash`` it measured (the grader, the
hidden suites, the references and the instructor notebooks); a change to any of them can
change what grading costs, so the committed results must be measured again with it, and
``make regen`` writes the README's table from them (``autograder/build/speed_table.py``).
"""
from __future__ import annotations

import copy

import pytest

from autograder.build import speed_table
from autograder.paths import README
from autograder.version import suite_hash

MEASURE = ".venv/bin/python benchmarks/grading_speed.py (on a quiet machine), then make regen"


@pytest.fixture(scope="module")
def results():
    return speed_table.load_results()


def test_the_committed_figures_were_measured_on_todays_suites(results):
    measured = results.get("suite_hash")
    assert measured == suite_hash(), (
        f"benchmarks/results/grading_speed.json was measured on suite hash {str(measured)[:12]}, today's grader, "
        f"hidden suites, references and notebooks hash to {suite_hash()[:12]}: run {MEASURE}")


def test_the_results_hold_the_baseline_the_speed_index_and_the_dearest_tests(results):
    assert results.get("baseline", {}).get("ok"), "the baseline's floor was not measured correctly"
    assert results["speed_index"]["workload_cpu_s"] > 0
    assert len(results["floor"]["dearest_tests"]) == 10
    assert results["floor"]["ok"], f"the committed floor did not grade correctly: {MEASURE}"


def test_the_readme_table_is_written_from_the_results(results):
    readme = README.read_text(encoding="utf-8")
    assert speed_table.with_speed_table(readme, results) == readme, "the README's table is stale: make regen"


def test_every_target_has_a_row_and_a_changed_figure_changes_the_table(results):
    written = speed_table.table(results)
    for name, target in results["targets"].items():
        assert target["what"] and name in results["figures"]
    changed = copy.deepcopy(results)
    changed["floor"]["cpu_s_per_point"] = 12.3456
    assert "12.3456" in speed_table.table(changed) and "12.3456" not in written


def test_a_readme_without_the_block_is_a_clear_error(results):
    with pytest.raises(speed_table.SpeedTableError, match="no grading-speed block"):
        speed_table.with_speed_table("# README\n", results)
