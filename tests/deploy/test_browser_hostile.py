"""A hostile submission, opened by the TA in a real browser (headless Chromium), runs nothing.

Mallory's notebook of ``part_b_bert_gpt`` carries script in every place a student
controls and a page shows: raw HTML in markdown (``<script>``, ``<img onerror>``,
``<svg onload>``, SVG ``<script>``, ``<iframe srcdoc>``, ``<details ontoggle>``, a
MathML mutation), ``javascript:`` links (markdown and HTML), a mermaid block, LaTeX
(``\\href{javascript:...}`` and HTML smuggled through ``\\text{}``), cell attachments
(an SVG with script, a MIME type that tries to close the ``src`` attribute), and
outputs (``text/html``, ``text/markdown``, ``image/svg+xml``,
``application/javascript``, a PNG whose ``width`` tries to add an ``onload``). A
second student's id is HTML, put into the gradebook directly as a compromised
exchange or database would. Besides script, the notebook tries to take the page
over without it: a ``<style>`` that hides the grading panels, a ``position: fixed``
overlay, a Bootstrap class that pins a cell over the page, and an ``id`` equal to a
grade cell's (the formgrader finds its score boxes by id).

Every payload, wherever it runs, sets ``window.__pwned_<n>``, changes
``document.title``, writes ``pwned_<n>.txt`` into the course folder through
Jupyter's contents API, and gives every grade of the class full marks and extra
credit and every comment its own text through the formgrader's API (with the TA's
XSRF token). The tests open, as the TA, the manual-grading list and the submission
pages of both hostile students, and Mallory's feedback HTML, and check that no
payload ran (no marker, the title, the course folder and the whole gradebook
unchanged), that a Content-Security-Policy would stop an inline handler that got
through, that the grading panels are where the TA can use them, and that the
notebook's legitimate content still renders: a markdown table, PNG and JPEG
data-URI images, a PNG output, and the formulas (as MathML).

Outputs: ``nbgrader autograde`` clears a submission's outputs (the course's
``ClearOutput`` step), so Mallory's reach the pages only because the fixture writes
them back into her autograded notebook, as a course that keeps outputs would show
them; the test checks both that autograde cleared them and that the pages render
them inert.

Needs ``chromium`` and ``chromedriver`` (``make setup`` installs them as root);
skipped otherwise.
"""
from __future__ import annotations

import base64
import io
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

from .browser import evidence, network_quiet, screenshot, text_of, until, wait
from .browser import browser_ready, driver  # noqa: F401  (the module's fixtures)
from .test_browser import ASSIGNMENT, STEM, formgrader_on, gradebook, released_course, run_nbgrader

pytestmark = pytest.mark.slow

VICTIM, ATTACKER = "victor", "mallory"
# A student id that is HTML (a folder name may hold anything but "/" and NUL, in 255 bytes).
HTML_ID = 'mallory2"><img src=x onerror="window.__pwned_18=1;document.title=\'pwned 18\'">'
WRITTEN = "b1_why_not_50_percent"       # Mallory's hostile written answer
CLOBBERED = "b1_token_counts"           # the grade cell whose id her earlier cell copies
LEGIT_FORMULA = r"p(x_i \mid x_{\setminus i}) = \frac{e^{z_i}}{\sum_j e^{z_j}}"


# -- the payloads --------------------------------------------------------------------------

def payload(n: int) -> str:
    """What vector ``n`` runs when it gets to run: markers, a file, the formgrader's API."""
    return f"""(function (n) {{
  window['__pwned_' + n] = 1;
  document.title = 'pwned ' + n;
  var xsrf = decodeURIComponent((document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || '');
  var headers = {{'Content-Type': 'application/json', 'X-XSRFToken': xsrf}};
  function put(url, body) {{
    return fetch(url, {{method: 'PUT', headers: headers, credentials: 'same-origin', body: JSON.stringify(body)}});
  }}
  function json(url) {{ return fetch(url, {{credentials: 'same-origin'}}).then(function (r) {{ return r.json(); }}); }}
  put('/api/contents/pwned_' + n + '.txt', {{type: 'file', format: 'text', content: 'pwned'}});
  json('/formgrader/api/submitted_notebooks/{ASSIGNMENT}/{STEM}').then(function (notebooks) {{
    notebooks.forEach(function (nb) {{
      json('/formgrader/api/grades?submission_id=' + nb.id).then(function (grades) {{
        grades.forEach(function (g) {{
          put('/formgrader/api/grade/' + g.id, {{manual_score: g.max_score, extra_credit: 5}});
        }});
      }});
      json('/formgrader/api/comments?submission_id=' + nb.id).then(function (comments) {{
        comments.forEach(function (c) {{ put('/formgrader/api/comment/' + c.id, {{manual_comment: 'pwned ' + n}}); }});
      }});
    }});
  }});
}})({n});"""


def js(n: int) -> str:
    """An expression that runs ``payload(n)``: no space, no double quote, no "/" (it fits
    an attribute, a link, LaTeX and a folder name)."""
    code = base64.urlsafe_b64encode(payload(n).encode()).decode()
    return f"eval(atob('{code}'.split('-').join('+').split('_').join('/')))"


def svg(n: int) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="{js(n)}">'
            f'<script>{js(n + 100)}</script><rect width="10" height="10"/></svg>')


# Vectors whose payload runs only when the TA clicks the link (n -> link text).
CLICKED = {6: "markdown javascript link", 7: "html javascript link", 14: "latexlink"}


def image_bytes(kind: str) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (24, 16), (200, 30, 30)).save(buffer, format=kind)
    return buffer.getvalue()


PNG, JPEG = (base64.b64encode(image_bytes(kind)).decode() for kind in ("PNG", "JPEG"))


def hostile_cells() -> tuple[list, str]:
    """(cells Mallory adds before her written answer, her written answer)."""
    clobber = new_markdown_cell(
        "My notes.\n\n"
        f'<span id="{CLOBBERED}" class="tabbable score">0</span>'
        f'<span id="{CLOBBERED}-comment">ok</span>\n\n'
        '<style>.nbgrader_cell { display: none !important; }</style>\n\n'
        '<div style="position: fixed; top: 0; left: 0; width: 100%; height: 100%; z-index: 99999; '
        'background: white">Everything here is graded already.</div>\n\n'
        '<div class="navbar-fixed-top modal-backdrop in">pinned over the page</div>\n')
    vectors = new_markdown_cell(
        f"<script>{js(1)}</script>\n\n"
        f'<img src="x" onerror="{js(2)}">\n\n'
        f'<svg onload="{js(3)}"><circle r="1"></circle></svg>\n\n'
        f"<svg><script>{js(4)}</script></svg>\n\n"
        f'<iframe srcdoc="&lt;script&gt;parent.{js(5)}&lt;/script&gt;"></iframe>\n\n'
        f"[{CLICKED[6]}](javascript:{js(6)})\n\n"
        f'<a href="javascript:{js(7)}">{CLICKED[7]}</a>\n\n'
        f'<details open ontoggle="{js(8)}"><summary>details</summary>more</details>\n\n'
        f'<math><mtext><table><mglyph><style><img src=x onerror="{js(20)}"></style></mglyph></table></mtext></math>\n\n'
        f"```mermaid\n<img src=x onerror=\"{js(17)}\">\n```\n\n"
        f"A formula that links: $\\href{{javascript:{js(14)}}}{{{CLICKED[14]}}}$\n\n"
        f'A formula that smuggles HTML: $\\text{{<img/src="x"/onerror="{js(15)}">}}$\n\n'
        "![attached svg](attachment:pwn.svg) ![attached mime](attachment:mime.png)\n")
    vectors.attachments = {
        "pwn.svg": {"image/svg+xml": base64.b64encode(svg(12).encode()).decode()},
        "mime.png": {f'image/png" onerror="{js(13)}" x="': PNG},
    }
    answer = (
        "Masking half the words leaves too little context. Here is what I measured:\n\n"
        "| mask rate | accuracy |\n|---|---|\n| 15 % | 0.61 |\n| 50 % | 0.33 |\n\n"
        f"![red png](data:image/png;base64,{PNG}) ![red jpeg](data:image/jpeg;base64,{JPEG})\n\n"
        f"$${LEGIT_FORMULA}$$\n\n"
        f"and the rate $r = 0.15$.\n\n<img src=x onerror=\"{js(16)}\">\n")
    return [clobber, vectors], answer


def hostile_outputs() -> list:
    """Outputs that would run script if a page showed them as they are."""
    return [
        new_output("display_data", data={"text/html": f'<b>html output</b><img src=x onerror="{js(9)}">'}),
        new_output("display_data", data={"image/svg+xml": svg(10)}),
        new_output("display_data", data={"application/javascript": js(11), "text/plain": "js"}),
        new_output("display_data", data={"text/markdown": f'markdown output <img src=x onerror="{js(21)}">'}),
        new_output("display_data", data={"image/png": PNG},
                   metadata={"image/png": {"width": f"24 onload={js(22)}"}}),
    ]


OUTPUT_CELL_SOURCE = "print('my plots')  # the outputs of this cell are hostile\n"


def hostile_notebook(release: Path):
    notebook = nbformat.read(release, as_version=4)
    index = next(i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == WRITTEN)
    extra, answer = hostile_cells()
    notebook.cells[index].source = answer
    code = new_code_cell(OUTPUT_CELL_SOURCE, outputs=hostile_outputs(), execution_count=1)
    notebook.cells[index:index] = [*extra, code]
    return notebook


def victim_notebook(release: Path):
    notebook = nbformat.read(release, as_version=4)
    cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == WRITTEN)
    cell.source = "With half the words hidden there is too little context left to predict from."
    return notebook


# -- the course ----------------------------------------------------------------------------

def grade_snapshot(root: Path) -> dict:
    """Every grade and comment of the class, as the gradebook holds them."""
    from nbgrader.api import Comment, Grade

    with gradebook(root) as gb:
        grades = {(g.student.id, g.notebook.name, g.name): (g.auto_score, g.manual_score, g.extra_credit)
                  for g in gb.db.query(Grade).all()}
        comments = {(c.student.id, c.notebook.name, c.name): c.manual_comment for c in gb.db.query(Comment).all()}
    return {"grades": grades, "comments": comments}


def files_of(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if not p.name.startswith("gradebook.db")}


@pytest.fixture(scope="module")
def course(tmp_path_factory, repo_root):
    """A course where Victor (graded by hand already), Mallory and the student whose id is
    HTML have submitted ``part_b_bert_gpt``; autograded by nbgrader through the sandbox."""
    root = released_course(tmp_path_factory.mktemp("hostile-course"), repo_root)
    release = root / "assignments" / ASSIGNMENT / f"{STEM}.ipynb"  # the course's release folder
    for student, notebook in ((VICTIM, victim_notebook(release)), (ATTACKER, hostile_notebook(release))):
        target = root / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        nbformat.write(notebook, target / f"{STEM}.ipynb")
    run_nbgrader(root, "autograde", ASSIGNMENT, "--create", "--force")

    # Autograde cleared Mallory's outputs; write them back, as a course that keeps outputs shows them.
    autograded = root / "autograded" / ATTACKER / ASSIGNMENT / f"{STEM}.ipynb"
    notebook = nbformat.read(autograded, as_version=4)
    code = next(c for c in notebook.cells if c.cell_type == "code" and c.source == OUTPUT_CELL_SOURCE)
    assert code.outputs == [], "autograde kept the submission's outputs"
    code.outputs = hostile_outputs()
    nbformat.write(notebook, autograded)

    # The student whose id is HTML, put into the gradebook as a compromised exchange or database would.
    html_id = HTML_ID
    with gradebook(root) as gb:
        gb.add_student(html_id)
        gb.add_submission(ASSIGNMENT, html_id)
        # Victor's written answer, graded by hand before the TA opens Mallory's.
        grade = gb.find_grade(WRITTEN, STEM, ASSIGNMENT, VICTIM)
        grade.manual_score = 1.5
        gb.find_comment(WRITTEN, STEM, ASSIGNMENT, VICTIM).manual_comment = "Right: too little context."
        gb.db.commit()
    target = root / "autograded" / html_id / ASSIGNMENT
    target.mkdir(parents=True)
    shutil.copy(autograded, target / f"{STEM}.ipynb")
    return root


@pytest.fixture(scope="module")
def formgrader(course, tmp_path_factory):
    """The formgrader on this module's course."""
    yield from formgrader_on(course, tmp_path_factory.mktemp("ta-home"))


# -- what the tests check on every page ----------------------------------------------------

def markers(driver) -> list[str]:
    return driver.execute_script(
        "return Object.keys(window).filter(k => k.startsWith('__pwned_')).sort();")


def click_javascript_links(driver) -> list[str]:
    """Click each link a vector made, as a TA might; the link texts found."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    found = []
    for text in CLICKED.values():
        # The innermost element that shows the text (LaTeX's is a row of MathML letters).
        innermost = f"//*[normalize-space()='{text}'][not(*[normalize-space()='{text}'])]"
        for link in driver.find_elements(By.XPATH, innermost):
            found.append(text)
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", link)
            try:
                link.click()
            except WebDriverException:  # covered or not clickable: dispatch the click itself
                driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}));", link)
    return found


def inline_handlers_are_blocked(driver) -> bool:
    """An ``onerror`` handler added to the page after it loaded does not run: the page's
    Content-Security-Policy forbids inline script, whatever a sanitizer might miss."""
    driver.execute_script(
        "window.__csp_probe = 0; const d = document.createElement('div');"
        "d.innerHTML = '<img src=\"data:,x\" onerror=\"window.__csp_probe = 1\">'; document.body.appendChild(d);")
    until(lambda: driver.execute_script(
        "return [...document.images].some(i => i.getAttribute('src') === 'data:,x' && i.complete);"),
        10, "the probe image did not finish loading")
    return driver.execute_script("return window.__csp_probe;") == 0


def legitimate_content(driver, scope: str) -> dict:
    """What of the legitimate content renders within elements matching ``scope``."""
    return driver.execute_script("""
        const root = [...document.querySelectorAll(arguments[0])];
        const q = s => root.flatMap(r => [...r.querySelectorAll(s)]);
        const shown = e => e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().height > 0;
        const cells = q('table td').map(td => td.textContent.trim());
        const images = q('img').filter(i => i.complete && i.naturalWidth === 24 && i.naturalHeight === 16);
        return {table: cells.includes('0.61') && cells.includes('50 %'),
                images: images.map(i => i.getAttribute('src').slice(0, 15)).sort(),
                math: q('math').filter(shown).length,
                fraction: q('math mfrac').filter(shown).length};""", scope)


def escaping_styles(driver, scope: str) -> list[str]:
    """Elements of student content that a style or class takes out of its cell."""
    return driver.execute_script("""
        return [...document.querySelectorAll(arguments[0] + ' *')].filter(e => {
            const s = getComputedStyle(e);
            return ['fixed', 'absolute', 'sticky'].includes(s.position) || Number(s.zIndex) > 10;
        }).map(e => e.outerHTML.slice(0, 120));""", scope)


def assert_nothing_ran(driver, course: Path, before: dict, files: set[str], title: str) -> None:
    network_quiet(driver)
    assert markers(driver) == [], f"payloads ran: {markers(driver)}"
    assert driver.title == title, f"the page's title became {driver.title!r}"
    assert files_of(course) == files, f"files written into the course: {sorted(files_of(course) - files)}"
    after = grade_snapshot(course)
    changed = {key: (value, after["grades"].get(key)) for key, value in before["grades"].items()
               if after["grades"].get(key) != value}
    assert not changed, f"grades changed: {changed}"
    changed = {key: (value, after["comments"].get(key)) for key, value in before["comments"].items()
               if after["comments"].get(key) != value}
    assert not changed, f"comments changed: {changed}"


# -- the formgrader ------------------------------------------------------------------------

SUBMISSION_CONTENT = "#notebook-container .text_cell_render, #notebook-container .output_area"


def submission_id(course: Path, student: str) -> str:
    with gradebook(course) as gb:
        return gb.find_submission_notebook(STEM, ASSIGNMENT, student).id


def grades_loaded(driver) -> bool:
    """The page's scripts have loaded the grades: an extra-credit box shows its placeholder."""
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, f"{WRITTEN}_extra_credit").get_attribute("placeholder") != ""


def scrolling_done(driver) -> None:
    """The formgrader scrolls itself (a jQuery animation) when a box gets the focus: wait
    until it has, before looking at what is where or clicking."""
    wait(driver, 10).until(lambda d: d.execute_script("return jQuery(':animated').length === 0;"),
                           "the formgrader kept scrolling")


def test_the_formgrader_shows_a_hostile_submission_inert_and_still_grades(driver, course, formgrader):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    html_id = HTML_ID
    before, files = grade_snapshot(course), files_of(course)
    assert before["grades"][(VICTIM, STEM, WRITTEN)][1] == 1.5

    with evidence(driver, "hostile-formgrader"):
        # The manual-grading list names every student, the HTML id among them.
        formgrader.log_in(driver, f"formgrader/gradebook/{ASSIGNMENT}/{STEM}")
        wait(driver, 60).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "td.name a.name-shown")) == 3,
                               "the manual-grading list did not list the three submissions")
        list_title = driver.title
        names = sorted(text_of(a).strip() for a in driver.find_elements(By.CSS_SELECTOR, "td.name a.name-shown"))
        assert names == sorted([ATTACKER, VICTIM, html_id]), names
        assert_nothing_ran(driver, course, before, files, list_title)

        for student in (ATTACKER, html_id):
            driver.get(formgrader.page(f"formgrader/submissions/{submission_id(course, student)}/"))
            wait(driver, 60).until(grades_loaded, f"the formgrader did not load {student!r}'s grades")
            clicked = click_javascript_links(driver)
            assert_nothing_ran(driver, course, before, files, STEM)
            assert sorted(clicked) == sorted(CLICKED.values()), clicked
            # The id is shown as the text it is, in the navigation bar.
            shown = [text_of(a).strip() for a in driver.find_elements(By.CSS_SELECTOR, "li.live-notebook a.name-shown")]
            assert shown == [html_id if student == html_id else student], shown
            assert inline_handlers_are_blocked(driver), "the page runs inline event handlers (no CSP)"

            rendered = legitimate_content(driver, SUBMISSION_CONTENT)
            assert rendered["table"], "the markdown table is not shown"
            assert rendered["images"] == ["data:image/jpeg", "data:image/png;", "data:image/png;"], rendered
            assert rendered["math"] >= 2 and rendered["fraction"] >= 1, f"formulas not rendered: {rendered}"
            assert escaping_styles(driver, SUBMISSION_CONTENT) == []

        # The grading panels are there, on top, and work: a score and a comment for the cell
        # whose id Mallory's notes copied, and for her written answer.
        driver.get(formgrader.page(f"formgrader/submissions/{submission_id(course, ATTACKER)}/"))
        wait(driver, 60).until(grades_loaded, "the formgrader did not load Mallory's grades")
        for grade_id, score, comment in ((CLOBBERED, "1", "Counts right."), (WRITTEN, "0.5", "Half of it.")):
            box = driver.find_element(By.ID, grade_id)
            assert box.tag_name == "input", f"#{grade_id} is Mallory's {box.tag_name}, not the score box"
            scrolling_done(driver)
            on_top = driver.execute_script(
                "arguments[0].scrollIntoView({block: 'center'}); const r = arguments[0].getBoundingClientRect();"
                "return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === arguments[0];", box)
            assert on_top, f"something covers the score box of {grade_id}"
            box.clear()
            box.send_keys(score, Keys.TAB)
            comment_box = driver.find_element(By.ID, f"{grade_id}-comment")
            scrolling_done(driver)
            comment_box.click()
            comment_box.send_keys(comment, Keys.TAB)

            def saved(grade_id=grade_id):
                with gradebook(course) as gb:
                    grade = gb.find_grade(grade_id, STEM, ASSIGNMENT, ATTACKER)
                    text = gb.find_comment(grade_id, STEM, ASSIGNMENT, ATTACKER).manual_comment
                    return (grade.manual_score, text) if grade.manual_score is not None and text else None

            assert until(saved, 30, f"the score and comment of {grade_id} did not reach gradebook.db") == (
                float(score), comment)
        screenshot(driver, "hostile-formgrader")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "nbgrader 0.9.6's own page of one student (Manage Students > a student, manage_students_assignments.tpl) "
    "writes the id from its URL into the page unescaped, from a Jinja environment without autoescaping that no "
    "setting reaches; the course keeps such ids out of the gradebook at intake (autograder/intake.py). Remove this "
    "mark once nbgrader escapes it"))
def test_nbgrader_s_page_of_one_student_shows_an_html_id_inert(driver, course, formgrader):
    from selenium.webdriver.common.by import By

    with evidence(driver, "hostile-student-page"):
        formgrader.log_in(driver, "formgrader/manage_students")

        def link(d):
            for row in d.find_elements(By.CSS_SELECTOR, "tr"):
                ids = row.find_elements(By.CSS_SELECTOR, "td.id")
                if ids and text_of(ids[0]).strip() == HTML_ID:
                    return row.find_element(By.CSS_SELECTOR, "td.name a")
            return None

        wait(driver, 60).until(link, "Manage Students does not list the student whose id is HTML").click()
        wait(driver, 30).until(lambda d: "/formgrader/manage_students/" in d.current_url
                               and d.execute_script("return document.readyState") == "complete")
        network_quiet(driver)
        assert markers(driver) == [], f"the student's id ran as script: {markers(driver)}"


# -- the feedback --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def feedback(course) -> Path:
    run_nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    path = course / "feedback" / ATTACKER / ASSIGNMENT / f"{STEM}.html"
    assert path.is_file(), sorted(str(p.relative_to(course)) for p in (course / "feedback").rglob("*"))
    return path


def test_the_feedback_of_a_hostile_submission_runs_nothing(driver, course, feedback):
    from selenium.webdriver.common.by import By

    before, files = grade_snapshot(course), files_of(course)
    with evidence(driver, "hostile-feedback"):
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*", "ws://*", "wss://*"]})
        driver.get(feedback.as_uri())
        wait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
        clicked = click_javascript_links(driver)
        assert_nothing_ran(driver, course, before, files, STEM)
        assert sorted(clicked) == sorted(CLICKED.values()), clicked
        assert 'http-equiv="Content-Security-Policy"' in feedback.read_text()
        assert inline_handlers_are_blocked(driver), "the feedback runs inline event handlers (no CSP)"

        content = "#notebook-container .text_cell_render, #notebook-container .output_area"
        rendered = legitimate_content(driver, content)
        assert rendered["table"], "the markdown table is not shown"
        assert rendered["images"] == ["data:image/jpeg", "data:image/png;", "data:image/png;"], rendered
        assert rendered["math"] >= 2 and rendered["fraction"] >= 1, f"formulas not rendered: {rendered}"
        assert escaping_styles(driver, content) == []
        text = " ".join(text_of(e) for e in driver.find_elements(By.CSS_SELECTOR, ".text_cell_render"))
        assert "Masking half the words leaves too little context." in text
        screenshot(driver, "hostile-feedback")


def test_every_vector_reaches_the_autograded_notebook(course):
    """Each payload is in Mallory's autograded notebook, the file the formgrader and the
    feedback render, as she wrote it: the pages had it to show (or to run)."""
    notebook = nbformat.read(course / "autograded" / ATTACKER / ASSIGNMENT / f"{STEM}.ipynb", as_version=4)
    text = json.dumps(notebook)
    missing = [n for n in (*range(1, 18), 20, 21, 22) if js(n) not in text and n not in (12, 16)]
    assert missing == [], f"vectors lost before the pages were made: {missing}"
    assert base64.b64encode(svg(12).encode()).decode() in text and js(16) in text
