"""What students and teaching assistants see, in a real browser (headless Chromium, selenium).

* The student: ``python -m week6_helpers.lab`` on a copy of the student bundle,
  run by the student environment's Python (the course package from the bundle's
  wheel). A release notebook runs up to its first stub and shows its
  ``NotImplementedError``; nbgrader's instructor tools (formgrader, course list,
  create-assignment) are absent while the Validate button is there, and
  Validate's dialog reports the failing cell.
* The teaching assistant: a temporary course with two submissions of
  ``part_b_bert_gpt`` (``carol_half_correct``, ``alice_full_solution``), graded
  by ``nbgrader autograde`` through the sandboxed grader; the formgrader's page of
  carol's submission shows, for each autograded cell, its points and why points
  were lost (the failing hidden tests' names and messages), no ``Out[ ]`` box,
  and a score and comment typed into a written answer land in ``gradebook.db``.
* Beside alice's written answer that quotes B1's measured numbers (her notebook run in fast
  mode with her id), the formgrader shows her seed, the values her run recorded and which
  of the numbers she quotes they hold.
* The feedback: ``nbgrader generate_feedback`` gives carol an HTML page that shows
  the per-test messages, and whose math is MathML that renders with no network.

Screenshots go to ``$WEEK6_ARTIFACTS`` (default ``build/test-artifacts/browser/``);
the student's and the formgrader's views also go to ``docs/screenshots/`` where
they are missing, or always with ``WEEK6_UPDATE_SCREENSHOTS=1``.
Needs ``chromium`` and ``chromedriver`` (``make setup`` installs them as root);
skipped otherwise.
"""
from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from autograder.nbgrader.feedback_detail import is_staff_only
from autograder.paths import REPO
from autograder.pytest_plugin import suite_files

from .browser import JupyterServer, evidence, screenshot, scroll_into_view, text_of, until, wait
from .browser import browser_ready, driver  # noqa: F401  (the module's fixtures)

SAMPLES = REPO / "data" / "sample_submissions"
ASSIGNMENT = "week6"
STUDENT_NOTEBOOK = "part_a_discovery"   # the quicker release notebook: its first stub is cell 6
STEM = "part_b_bert_gpt"                # the notebook graded in the course
HALF, FULL = "carol_half_correct", "alice_full_solution"
WRITTEN = "b1_why_not_50_percent"       # a written answer of part_b_bert_gpt (2 points)
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")

pytestmark = pytest.mark.slow


def squash(text: str) -> str:
    """Whitespace runs as one space: what a page shows does not keep line breaks as a notebook does."""
    return " ".join(text.split())


# -- the student ---------------------------------------------------------------------------

def student_jupyter_env(student_env: Path, home: Path) -> dict[str, str]:
    """The environment of a student's shell in which ``python -m week6_helpers.lab`` runs.

    The ``student_env`` fixture reaches the course environment's packages by a
    path entry, which brings their modules but not what ``pip install`` puts
    beside them: the ``jupyter-lab`` command, JupyterLab's assets and nbgrader's
    lab extension (``share/jupyter``), and the configuration that enables
    nbgrader's server extensions (``etc/jupyter``). The first is a two-line
    script run by the student environment's Python (so the server and its kernels
    run there, with the course package from the bundle's wheel); the others are
    pointed at in the course environment with Jupyter's own variables.
    """
    course_env = Path(sys.prefix)
    scripts = home / "bin"
    scripts.mkdir(parents=True, exist_ok=True)
    launcher = scripts / "jupyter-lab"
    launcher.write_text(f"#!{student_env / 'bin' / 'python'}\nimport sys\nfrom jupyterlab.labapp import main\n"
                        "sys.exit(main())\n")
    launcher.chmod(0o755)
    # A student who answered "no" to JupyterLab's news: no toast over the screenshot.
    settings = home / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = {"HOME": str(home), "PATH": f"{scripts}:{student_env / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8",
           "JUPYTER_PATH": str(course_env / "share" / "jupyter"),
           "JUPYTERLAB_DIR": str(course_env / "share" / "jupyter" / "lab"),
           "JUPYTER_CONFIG_PATH": str(course_env / "etc" / "jupyter"), **OFFLINE}
    from week6_helpers.assets import cache_dir

    if cache_dir().is_dir():  # the decoder converted once already: not again for every test run
        env["WEEK6_CACHE"] = str(cache_dir())
    return env


@pytest.fixture
def student_lab(student_bundle, student_env, tmp_path):
    folder = tmp_path / "week6"
    shutil.copytree(student_bundle, folder)
    home = tmp_path / "home"
    env = student_jupyter_env(student_env, home)
    # --LabApp.expose_app_in_browser: window.jupyterapp, to ask which commands exist.
    server = JupyterServer([str(student_env / "bin" / "python"), "-m", "week6_helpers.lab", str(folder),
                            "--LabApp.expose_app_in_browser=True"], cwd=home, env=env, log=tmp_path / "lab.log")
    try:
        yield server.wait_until_ready(), folder
    finally:
        server.stop()


def open_menu(driver, name: str) -> list:
    """Open ``name`` in JupyterLab's menu bar; its visible items, as elements."""
    from selenium.webdriver.common.by import By

    title = wait(driver, 30).until(lambda d: next(
        (item for item in d.find_elements(By.CSS_SELECTOR, "#jp-MainMenu .lm-MenuBar-item")
         if item.text.strip() == name), None), f"no {name!r} menu in the menu bar")
    title.click()
    return wait(driver, 30).until(lambda d: [
        item for item in d.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-menu .lm-Menu-item[data-type='command']")
        if item.is_displayed()], f"the {name!r} menu did not open")


def close_menu(driver) -> None:
    from selenium.webdriver.common.keys import Keys

    driver.switch_to.active_element.send_keys(Keys.ESCAPE)


def label(item) -> str:
    from selenium.webdriver.common.by import By

    return item.find_element(By.CSS_SELECTOR, ".lm-Menu-itemLabel").text.strip()


def test_student_runs_a_release_notebook_and_validates_it(driver, student_lab, student_env):
    from selenium.webdriver.common.by import By

    server, _ = student_lab
    with evidence(driver, "student-lab"):
        driver.get(server.page(f"lab/tree/{STUDENT_NOTEBOOK}.ipynb"))
        panel = wait(driver, 120).until(lambda d: d.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel"))
        wait(driver, 120).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Cell"),
                                "the notebook's cells did not render")
        wait(driver, 120).until(lambda d: d.execute_script(
            "const k = window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel;"
            "return k && k.status === 'idle';"), "the notebook's kernel did not start")
        kernels = [p.cmdline() for p in server.descendants() if "ipykernel_launcher" in " ".join(p.cmdline())]
        assert kernels and all(k[0] == str(student_env / "bin" / "python") for k in kernels), kernels

        # nbgrader's lab extension is there (Validate, the assignment list), its instructor tools are not.
        commands = driver.execute_script(
            "const c = window.jupyterapp.commands;"
            "return Object.fromEntries(arguments[0].map(id => [id, c.hasCommand(id)]));",
            ["nbgrader:open-formgrader", "nbgrader:open-formgrader-local", "nbgrader:open-course-list",
             "nbgrader:open-create-assignment", "nbgrader:open-assignment-list"])
        assert commands == {"nbgrader:open-formgrader": False, "nbgrader:open-formgrader-local": False,
                            "nbgrader:open-course-list": False, "nbgrader:open-create-assignment": False,
                            "nbgrader:open-assignment-list": True}, commands
        assert server.status_of("formgrader") == 404, "the student's server serves the formgrader"
        validate = panel.find_element(By.CSS_SELECTOR, ".jp-Toolbar .validate-button")
        assert validate.is_displayed() and "Validate" in validate.text
        menus = [item.text.strip() for item in driver.find_elements(By.CSS_SELECTOR, "#jp-MainMenu .lm-MenuBar-item")]
        if "Nbgrader" in menus:  # nbgrader's own menu: only what students use may be in it
            entries = [label(item) for item in open_menu(driver, "Nbgrader")]
            close_menu(driver)
            assert entries == ["Assignment List"], entries

        # Run all: the kernel stops at the first stub.
        next(item for item in open_menu(driver, "Run") if label(item) == "Run All Cells").click()
        error = wait(driver, 300).until(lambda d: next(
            (o for o in d.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-OutputArea-output")
             if "NotImplementedError" in text_of(o)), None), "no NotImplementedError in the notebook's outputs")
        wait(driver, 120).until(lambda d: d.execute_script(
            "return window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle';"))
        cell = error.find_element(By.XPATH, "./ancestor::div[contains(@class, 'jp-CodeCell')]")
        assert "raise NotImplementedError()" in text_of(cell.find_element(By.CSS_SELECTOR, ".jp-InputArea"))
        scroll_into_view(driver, cell)
        screenshot(driver, "student-lab", docs="student-lab.png")

        # Validate: nbgrader runs the notebook in a fresh kernel and names the failing cell.
        validate.click()
        message = wait(driver, 600, poll=1).until(
            lambda d: d.find_element(By.CSS_SELECTOR, ".jp-Dialog #validation-message"),
            "Validate showed no result")
        screenshot(driver, "student-validate")
        text = text_of(message)
        assert "validation-failed" in message.get_attribute("class"), text[:2000]
        assert "The following cell failed:" in text and "NotImplementedError" in text, text[:2000]
        assert "SPANISH_REUSE" in text, text[:2000]
        driver.find_element(By.CSS_SELECTOR, ".jp-Dialog .jp-mod-accept").click()


# -- the teaching assistant ----------------------------------------------------------------

COURSE_CONFIG = """\
# The repository's nbgrader configuration, for this course folder (written by tests/deploy/test_browser.py).
c = get_config()  # noqa: F821
load_subconfig({config!r})  # noqa: F821
c.CourseDirectory.root = {root!r}
c.CourseDirectory.db_url = {db_url!r}
"""


def run_nbgrader(root: Path, *args: str) -> subprocess.CompletedProcess:
    from autograder.paths import venv_env

    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, capture_output=True, text=True,
                            env={**venv_env(), **OFFLINE}, timeout=900)
    assert result.returncode == 0, f"nbgrader {args[0]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def released_course(root: Path, repo_root: Path) -> Path:
    """The course folder ``root`` with the assignment generated from the repository's solutions.

    Set up as a TA would: nbgrader runs in the course folder, whose
    ``nbgrader_config.py`` loads the repository's and points at this folder.
    """
    (root / "nbgrader_config.py").write_text(COURSE_CONFIG.format(
        config=str(repo_root / "nbgrader_config.py"), root=str(root), db_url=f"sqlite:///{root / 'gradebook.db'}"))
    shutil.copytree(repo_root / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT,
                    ignore=shutil.ignore_patterns("__pycache__"))
    run_nbgrader(root, "generate_assignment", ASSIGNMENT, "--force")
    return root


@pytest.fixture(scope="module")
def course(tmp_path_factory, repo_root):
    """A course folder graded by ``nbgrader autograde``: carol (half correct) and alice, one notebook each."""
    root = released_course(tmp_path_factory.mktemp("course"), repo_root)
    for student in (HALF, FULL):
        target = root / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        shutil.copy(SAMPLES / student / ASSIGNMENT / f"{STEM}.ipynb", target)
    run_as_student(root / "submitted" / FULL / ASSIGNMENT / f"{STEM}.ipynb", FULL)
    run_nbgrader(root, "autograde", ASSIGNMENT, "--create", "--force")
    return root


def run_as_student(path: Path, student: str) -> None:
    """Execute a notebook in place as ``student`` would (fast mode, their id in the environment),
    so that it holds the values its experiments recorded with that student's seed."""
    from autograder.paths import venv_env

    env = {**venv_env(), **OFFLINE, "WEEK6_STUDENT": student, "WEEK6_FAST": "1", "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
                    path.name], cwd=path.parent, env=env, check=True, capture_output=True, timeout=900)


def gradebook(root: Path):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{root / 'gradebook.db'}", "nlp-week6")


def formgrader_on(course: Path, home: Path) -> Iterator[JupyterServer]:
    """``jupyter server`` in the course folder (the repository's environment, where nbgrader's
    server extensions are enabled), for a TA whose home is ``home``: the formgrader on that
    course, stopped when the generator is closed."""
    from autograder.paths import venv_env

    env = {**venv_env(), **OFFLINE, "HOME": str(home)}
    server = JupyterServer([sys.executable, "-m", "jupyter_server", f"--ServerApp.root_dir={course}",
                            "--allow-root"], cwd=course, env=env, log=home / "formgrader.log")
    try:
        yield server.wait_until_ready()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def formgrader(course, tmp_path_factory):
    """The formgrader on this module's course."""
    yield from formgrader_on(course, tmp_path_factory.mktemp("ta-home"))


# The notebook cell (input and outputs) around an element of nbconvert's classic HTML.
CELL = "./ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' cell ')][1]"


def hidden_test_names() -> set[str]:
    trees = [ast.parse(path.read_text()) for path in suite_files(STEM)]
    return {node.name for tree in trees for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def expected_cell_results(root: Path, *, students_view: bool = False) -> dict[str, dict]:
    """grade_id -> points (from the gradebook) and the lines the grader wrote into the cell's output
    (with ``students_view``, without the course staff's detail, which the feedback drops)."""
    notebook = nbformat.read(root / "autograded" / HALF / ASSIGNMENT / f"{STEM}.ipynb", as_version=4)
    results = {}
    with gradebook(root) as gb:
        for cell in notebook.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                grade = gb.find_grade(meta["grade_id"], STEM, ASSIGNMENT, HALF)
                lines = []
                for output in cell.outputs:
                    entries = [entry for entry in output.get("traceback", [])
                               if not (students_view and is_staff_only(entry))]
                    text = "\n".join(entries) if output.output_type == "error" else output.get("text", "")
                    lines += [squash(ANSI.sub("", line)) for line in text.splitlines() if line.strip()]
                results[meta["grade_id"]] = {"score": grade.auto_score, "max": grade.max_score, "lines": lines}
    return results


def test_formgrader_shows_why_points_were_lost_and_saves_manual_grades(driver, course, formgrader):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    with gradebook(course) as gb:
        submission = gb.find_submission_notebook(STEM, ASSIGNMENT, HALF)
        submission_id, code_score = submission.id, submission.code_score
    assert code_score == EXPECTED[f"{HALF}/{STEM}"]["score"], code_score
    expected = expected_cell_results(course)
    hidden = hidden_test_names()

    with evidence(driver, "formgrader"):
        formgrader.log_in(driver, f"formgrader/submissions/{submission_id}/")
        # The page's scripts have loaded the grades when each score box shows its autograded score.
        wait(driver, 60).until(lambda d: all(
            d.find_element(By.ID, grade_id).get_attribute("placeholder") != "" for grade_id in expected),
            "the formgrader did not load the grades")
        lost_somewhere = False
        for grade_id, result in expected.items():
            score_box = driver.find_element(By.ID, grade_id)
            cell = score_box.find_element(By.XPATH, CELL)
            shown = squash(text_of(cell))
            points = f"{result['score']:g} of {result['max']:g} point"
            assert points in shown, f"{grade_id}: {points!r} is not shown:\n{shown[:1500]}"
            assert float(score_box.get_attribute("placeholder")) == result["score"]
            # Everything the grader wrote (each test's status, points, name, message) is on the page.
            missing = [line for line in result["lines"] if line not in shown]
            assert not missing, f"{grade_id}: not shown: {missing}"
            if result["score"] < result["max"]:
                lost_somewhere = True
                failing = [line for line in result["lines"] if line.startswith(("FAILED", "ERROR"))]
                assert failing, f"{grade_id} lost points but shows no failing test: {result['lines']}"
                unnamed = [line for line in failing if not any(re.search(rf"\b{n}\b", line) for n in hidden)]
                assert not unnamed, f"{grade_id}: failing lines that name no hidden test: {unnamed}"
                assert cell.find_elements(By.CSS_SELECTOR, ".output_error, .output_stderr, .output_text"), grade_id
            # No stray "Out[ ]:" box: the points are not an execute_result.
            assert not cell.find_elements(By.CSS_SELECTOR, ".output_execute_result"), f"{grade_id}: an Out[ ] box"
            prompts = [text_of(p).strip() for p in cell.find_elements(By.CSS_SELECTOR, ".output_prompt")]
            assert not any(p.startswith("Out") for p in prompts), f"{grade_id}: output prompts {prompts}"
        assert lost_somewhere, "carol's notebook should lose points somewhere"
        assert not [p for p in driver.find_elements(By.CSS_SELECTOR, ".output_prompt") if "Out[" in text_of(p)], \
            "an Out[ ] box on the page"

        # The picture: a cell that lost all its points, and why.
        output = driver.find_element(By.ID, "test_clm_loss").find_element(By.XPATH, CELL).find_element(
            By.CSS_SELECTOR, ".output_wrapper")
        scroll_into_view(driver, output, "start")
        driver.execute_script("window.scrollBy(0, -320);")
        screenshot(driver, "formgrader", docs="formgrader.png")

        # A written answer, graded by hand through the page.
        score_box = driver.find_element(By.ID, WRITTEN)
        comment_box = driver.find_element(By.ID, f"{WRITTEN}-comment")
        scroll_into_view(driver, score_box)
        comment = "Right about the context: with half the words hidden, $p(x_i \\mid x_{\\setminus i})$ has little to go on."
        score_box.clear()
        score_box.send_keys("1.5", Keys.TAB)
        comment_box.click()
        comment_box.send_keys(comment, Keys.TAB)

        def saved():
            with gradebook(course) as gb:
                grade = gb.find_grade(WRITTEN, STEM, ASSIGNMENT, HALF)
                text = gb.find_comment(WRITTEN, STEM, ASSIGNMENT, HALF).manual_comment
                return (grade.manual_score, text) if grade.manual_score is not None and text else None

        assert until(saved, 30, "the score and comment typed into the formgrader did not reach gradebook.db") == (
            1.5, comment)
        screenshot(driver, "formgrader-manual-grade")


def test_formgrader_shows_what_the_notebook_recorded_beside_an_answer_that_quotes_it(driver, course, formgrader):
    """Alice ran her notebook with her id: beside her B1 (b) answer the TA sees her seed, the values
    her run recorded, and which of the numbers she quotes they hold."""
    from selenium.webdriver.common.by import By

    with gradebook(course) as gb:
        submission_id = gb.find_submission_notebook(STEM, ASSIGNMENT, FULL).id
    with evidence(driver, "formgrader-numbers"):
        formgrader.log_in(driver, f"formgrader/submissions/{submission_id}/")
        # The page's scripts have loaded the grades (and moved the focus) when a score box shows its score.
        wait(driver, 60).until(lambda d: d.find_element(By.ID, "test_clm_loss").get_attribute("placeholder") != "",
                               "the formgrader did not load the grades")
        answer = driver.find_element(By.ID, "b1_token_counts")
        panel = answer.find_element(By.XPATH, f"{CELL}/following-sibling::div[contains(@class, 'week6-printed')][1]")
        shown = squash(text_of(panel))
        assert "What this notebook recorded for this answer" in shown and "this student's" in shown, shown
        assert "B1 masking: targets per sentence" in shown and "share of draws with no target" in shown, shown
        assert re.search(r"0\.75: recorded \(B1 masking: targets per sentence: mean number of targets", shown), shown
        assert "44 %: recorded" in shown and "0.15: not among the recorded values" in shown, shown
        # The page's own script moves the view to the focused score box once it has loaded: scroll
        # until the panel stays in view.
        def in_view():
            scroll_into_view(driver, panel, "start")
            driver.execute_script("window.scrollBy(0, -260);")
            return driver.execute_script("return window.scrollY > 0;")

        until(in_view, 15, "the page does not stay scrolled to the panel")
        screenshot(driver, "formgrader-numbers", docs="formgrader-numbers.png")


# -- the feedback --------------------------------------------------------------------------

FEEDBACK_COMMENT = ("Almost: 5 words become 7 tokens with [CLS] and [SEP], and $0.15 \\times 5 = 0.75$ "
                    "counts only the words.")


@pytest.fixture(scope="module")
def feedback(course) -> Path:
    """carol's feedback HTML for part_b_bert_gpt, with a grader's comment that holds math."""
    with gradebook(course) as gb:  # as a TA's comment saved by the formgrader
        gb.find_comment("b1_token_counts", STEM, ASSIGNMENT, HALF).manual_comment = FEEDBACK_COMMENT
        gb.db.commit()
    run_nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    path = course / "feedback" / HALF / ASSIGNMENT / f"{STEM}.html"
    assert path.is_file(), sorted(str(p.relative_to(course)) for p in (course / "feedback").rglob("*"))
    return path


def test_feedback_shows_test_messages_and_renders_math_offline(driver, course, feedback):
    from selenium.webdriver.common.by import By

    expected = expected_cell_results(course, students_view=True)
    with evidence(driver, "feedback"):
        # No network at all: a page that needed a CDN would show raw LaTeX.
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*", "ws://*", "wss://*"]})
        driver.get(feedback.as_uri())
        wait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")

        shown = squash(text_of(driver.find_element(By.TAG_NAME, "body")))
        for grade_id, result in expected.items():
            missing = [line for line in result["lines"] if line not in shown]
            assert not missing, f"{grade_id}: the feedback does not show {missing}"
        assert "test_clm_loss_matches_reference" in shown and "differs from the expected values" in shown
        assert "BEGIN HIDDEN TESTS" not in shown
        assert "For the course staff" not in shown, "the feedback shows the staff's detail of a failure"

        remote = driver.execute_script(
            "return [...document.querySelectorAll('script[src], link[href], img[src], iframe[src]')]"
            ".map(e => e.getAttribute('src') || e.getAttribute('href'))"
            ".filter(u => /^(https?:)?\\/\\//i.test(u));")
        assert remote == [], f"the feedback loads from the network: {remote}"
        assert not re.search(r"<script[^>]+src=[\"']?https?://", driver.page_source, re.I)
        requested = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name).filter(u => !u.startsWith('file:'));")
        assert requested == [], f"the feedback asked the network for {requested}"

        # Math is MathML, laid out by the browser itself; no LaTeX is left in the prose.
        sizes = driver.execute_script(
            "return [...document.querySelectorAll('math')].map(m => m.getBoundingClientRect().width);")
        assert len(sizes) >= 5 and all(width > 0 for width in sizes), sizes
        prose = " ".join(text_of(e) for e in driver.find_elements(By.CSS_SELECTOR, ".text_cell_render"))
        raw = re.findall(r"\$[^$\s][^$]{0,40}\\[A-Za-z]+|\\(?:frac|binom|sum|log|exp|mid|cdot|times|text)\b", prose)
        assert not raw, f"LaTeX left as text: {raw[:5]}"
        comments = driver.find_elements(By.XPATH, "//*[b[normalize-space()='Comments:']]")
        comment = next((c for c in comments if "counts only the words" in text_of(c)), None)
        assert comment is not None, [text_of(c) for c in comments]
        assert comment.find_elements(By.TAG_NAME, "math"), comment.get_attribute("outerHTML")[:1000]
        raw = [text_of(c) for c in comments if re.search(r"\\[A-Za-z]+", text_of(c))]
        assert not raw, f"LaTeX left as text in graders' comments: {raw}"

        failing = driver.find_element(By.XPATH, "//*[contains(@class, 'output_error')]"
                                                "[contains(., 'test_clm_loss_matches_reference')]")
        scroll_into_view(driver, failing, "start")
        driver.execute_script("window.scrollBy(0, -120);")
        screenshot(driver, "feedback")
        scroll_into_view(driver, comment)
        screenshot(driver, "feedback-math")


def test_formgrader_page_works_with_no_network(driver, course, formgrader):
    """The formgrader's page asks nothing of the internet: its math is MathML (the course's
    template, autograder/nbgrader/templates/week6_formgrade), not MathJax from a CDN, and its scripts
    run without an error."""
    from selenium.webdriver.common.by import By

    with gradebook(course) as gb:
        submission_id = gb.find_submission_notebook(STEM, ASSIGNMENT, HALF).id
    # The formgrader itself is on 127.0.0.1 (http); everything it asks of the internet is https.
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["https://*"]})
    formgrader.log_in(driver, f"formgrader/submissions/{submission_id}/")
    wait(driver, 60).until(lambda d: d.find_element(By.ID, "test_clm_loss").get_attribute("placeholder") != "",
                           "the formgrader did not load the grades")
    errors = [entry["message"] for entry in driver.get_log("browser") if entry.get("source") == "javascript"]
    assert errors == [], errors
    prose = " ".join(text_of(e) for e in driver.find_elements(By.CSS_SELECTOR, ".text_cell_render"))
    assert not re.findall(r"\\(?:frac|binom|sum|mid|cdot|times)\b", prose), "LaTeX left as text"
