"""The class report, opened by the TA in a real browser (headless Chromium), shows student text and runs none.

A class whose student id, failure messages, warnings and answer cells carry script
(``<script>``, ``<img onerror>``, ``<svg onload>``, a ``</pre>`` that tries to leave
the code box, an ``<iframe srcdoc>``, ``<details ontoggle>``): each payload, if it ran,
would set ``window.__pwned_<n>`` and change the page's title. The page is opened from
disk as a TA would (``file://``); no payload may run, the page may hold no script and
load nothing, and the payloads must be there as text. A control opens the same payloads
unescaped and checks that this browser does run them, so the test can fail.

The second test renders a class of 40 students (reports built with ``Report``, scores
drawn from a seeded model of ability and item difficulty) and keeps a screenshot of the
page's top, also as ``docs/screenshots/class-report.png`` when that is missing or
``WEEK6_UPDATE_SCREENSHOTS=1``.

Needs ``chromium`` and ``chromedriver`` (``make setup`` installs them as root);
skipped otherwise.
"""
from __future__ import annotations

import math
import random
import shutil

import nbformat
import pytest

from autograder.analytics import class_report
from autograder.analytics.sources import record
from autograder.course import load_course
from autograder.grade_history import write_report
from autograder.paths import REPO
from autograder.report import Report, TestResult

from .browser import evidence, screenshot
from .browser import browser_ready, driver  # noqa: F401  (the module's fixtures)

pytestmark = pytest.mark.slow

SAMPLES = REPO / "data" / "sample_submissions"
STEM = "part_b_bert_gpt"
PAYLOADS = [
    "<script>window.__pwned_1=1;document.title='pwned 1'</script>",
    "<img src=x onerror=\"window.__pwned_2=1;document.title='pwned 2'\">",
    "<svg onload=\"window.__pwned_3=1;document.title='pwned 3'\"></svg>",
    "</pre></div><script>window.__pwned_4=1;document.title='pwned 4'</script><pre>",
    "<iframe srcdoc=\"<script>parent.__pwned_5=1;parent.document.title='pwned 5'</script>\"></iframe>",
    "<details open ontoggle=\"window.__pwned_6=1;document.title='pwned 6'\">x</details>",
]
HOSTILE = " ".join(PAYLOADS)
# A student id that is HTML: a folder name may hold anything but "/" (payload 2 has none).
HTML_ID = PAYLOADS[1]


def markers(driver) -> list[int]:
    return driver.execute_script(
        "return [1,2,3,4,5,6].filter(n => window['__pwned_' + n] !== undefined);")


def hostile_class(tmp_path):
    """Two students who hand in the same hostile mask_tokens, and reports (one of them of a student whose id is
    HTML, as a compromised gradebook or reports folder would hold) that quote the payloads in test messages and
    warnings. intake refuses an HTML id for a submission, so that student has a report and no notebook."""
    submitted, grades = tmp_path / "submitted", tmp_path / "grades"
    notebook = nbformat.read(SAMPLES / "alice_full_solution" / "week6" / f"{STEM}.ipynb", as_version=4)
    cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mask_tokens")
    cell.source = cell.source.replace("    shape, device = input_ids.shape, input_ids.device",
                                      f"    # {HOSTILE}\n    note = {HOSTILE!r}\n"
                                      "    shape, device = input_ids.shape, input_ids.device")
    for student in ("mallory", "mallet", HTML_ID):
        if student != HTML_ID:
            (submitted / student / "week6").mkdir(parents=True)
            nbformat.write(notebook, submitted / student / "week6" / f"{STEM}.ipynb")
        tests = [TestResult("test_mask_tokens", f"test_mask_tokens_{i}", status, 0.0, 1.0,
                            f"your code raised {HOSTILE}") for i, status in enumerate(("failed", "error", "timeout", "forbidden"))]
        write_report(grades, student, STEM, Report(student, f"{STEM}.ipynb", score=0.0, max_score=46.0,
                                                   sandbox="bwrap", duration_s=1.0, tests=tests, warnings=[HOSTILE]))
    record(grades, [submitted], None)
    return grades


def test_a_hostile_class_report_shows_every_payload_as_text_and_runs_none(driver, tmp_path):
    grades = hostile_class(tmp_path)
    page, _, extras = class_report.build(grades)
    assert extras.similarity is not None and extras.similarity.flagged, "the two hostile answers are shown side by side"
    with evidence(driver, "class-report-hostile"):
        driver.get(page.as_uri())
        title = driver.title
        assert title == "Class report: week6"
        for section in ("problems", "similarity"):
            driver.get(f"{page.as_uri()}#{section}")
        assert markers(driver) == [] and driver.title == title
        assert driver.execute_script("return document.scripts.length;") == 0
        assert driver.execute_script("return document.querySelectorAll('iframe, svg, details[ontoggle]').length;") == 0
        sources = driver.execute_script("return [...document.images].map(i => i.getAttribute('src'));")
        assert sources and all(src.startswith("data:image/svg+xml;base64,") for src in sources)
        resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name);")
        assert all(name.startswith("data:") for name in resources), resources
        text = driver.execute_script("return document.body.innerText;")
        for payload in PAYLOADS:
            assert payload in text, f"not shown as text: {payload}"
        assert text.count(HTML_ID) >= 3, "the HTML student id is shown as text wherever the student is named"
        screenshot(driver, "class-report-hostile")


def test_the_payloads_are_live(driver, tmp_path):
    """The control: the same payloads, unescaped and without the page's policy, do run in this browser."""
    raw = tmp_path / "raw.html"
    raw.write_text(f"<!DOCTYPE html><html><head><title>raw</title></head><body><pre>{HOSTILE}</pre></body></html>")
    driver.get(raw.as_uri())
    ran = driver.execute_script("return [1,2,3,4,5,6].filter(n => window['__pwned_' + n] !== undefined);")
    assert set(ran) >= {1, 2, 4}, ran


def realistic_class(grades, students: int = 40, seed: int = 6):
    """Reports of a class: each student an ability, each hidden test a difficulty; a test passes with the
    logistic probability of their difference. Seeded, so the picture is the same every run."""
    generator = random.Random(seed)
    course = load_course()
    for index in range(students):
        student = f"student{index + 1:03d}"
        ability = generator.gauss(0.8, 1.2)
        for notebook in course.notebooks:
            if generator.random() < 0.04:
                continue  # not handed in
            tests = []
            for item in notebook.tests:
                for case in range(int(item.points)):
                    difficulty = generator.gauss(-0.8, 1.0) + 0.3 * case
                    passed = generator.random() < 1 / (1 + math.exp(difficulty - ability))
                    tests.append(TestResult(item.grade_id, f"{item.grade_id}_case{case}[cpu]",
                                            "passed" if passed else "failed", float(passed), 1.0,
                                            "" if passed else "differs from the expected values by up to "
                                            f"{generator.random():.2f}"))
            score = sum(t.points for t in tests)
            write_report(grades, student, notebook.stem, Report(
                student, f"{notebook.stem}.ipynb", score=score, max_score=notebook.auto_points, sandbox="bwrap",
                duration_s=round(generator.uniform(0.3, 4.0), 2), tests=tests))


def test_screenshot_of_a_class_report(driver, tmp_path):
    grades = tmp_path / "grades"
    realistic_class(grades)
    page, results, _ = class_report.build(grades, similarity=False)
    assert len(results.students) == 40
    with evidence(driver, "class-report"):
        driver.get(page.as_uri())
        assert driver.execute_script("return document.images.length;") == len(load_course().notebooks) + 1
        assert driver.execute_script("return [...document.images].every(i => i.complete && i.naturalWidth > 0);")
        screenshot(driver, "class-report", docs="class-report.png")
        driver.get(f"{page.as_uri()}#items")
        screenshot(driver, "class-report-items")
    shutil.rmtree(grades)
