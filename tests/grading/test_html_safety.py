"""The sanitizer policy of student content (``autograder/nbgrader/html_safety.py``), without a browser.

Each vector is cleaned and the result read back tag by tag: no element that runs or
loads script (script, iframe, object, embed, SVG, forms, base, meta, link, style), no
event attribute, no link or image source outside the policy's, no style property
outside its list, no class or id that the page's own scripts or stylesheets use; and
cleaning it again changes nothing (a second parse finds no new markup). The content
notebooks legitimately show survives: tables, data-URI images, highlighted code,
headings and their anchors, web links, and the MathML of every formula of the course.

The pages themselves are checked by rendering a hostile notebook through the
exporters as ``nbgrader_config.py`` configures them (the formgrader's and the
feedback's): the only scripts are the page's own, the Content-Security-Policy is in
the head before any of them, and a student id that is HTML is text.
``tests/deploy/test_browser_hostile.py`` opens the same kind of pages in Chromium.
"""
from __future__ import annotations

import base64
import html
import re
from html.parser import HTMLParser

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.mathml import latex_to_mathml
from autograder.nbgrader.html_safety import (
    CLASSES,
    FEEDBACK_POLICY,
    ID_PREFIX,
    IMAGE,
    LANGUAGE_CLASS,
    LINK,
    STYLE_PROPERTIES,
    TAGS,
    ScrubTemplateFields,
    clean,
)
from autograder.paths import REPO

PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415408d763f8cfc000000301"
    "0100c9fe92ef0000000049454e44ae426082")).decode()
ALERT = "alert(1)"

VECTORS = {
    "script": f"<script>{ALERT}</script>",
    "script src": "<script src=https://evil.example/x.js></script>",
    "img onerror": f"<img src=x onerror={ALERT}>",
    "svg onload": f"<svg onload={ALERT}><circle r=1></svg>",
    "svg script": f"<svg><script>{ALERT}</script></svg>",
    "svg animate": f"<svg><animate onbegin={ALERT} attributeName=x dur=1s></svg>",
    "svg link": f'<svg><a xlink:href="javascript:{ALERT}"><text y=9>x</text></a></svg>',
    "svg foreignObject": f"<svg><foreignObject><img src=x onerror={ALERT}></foreignObject></svg>",
    "iframe srcdoc": f'<iframe srcdoc="<script>parent.{ALERT}</script>"></iframe>',
    "iframe src": f'<iframe src="javascript:{ALERT}"></iframe>',
    "object": '<object data="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="></object>',
    "embed": '<embed src="data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=">',
    "form": f'<form action="/api/contents/x" method=post><button formaction="javascript:{ALERT}">go</button></form>',
    "input autofocus": f"<input autofocus onfocus={ALERT}>",
    "details ontoggle": f"<details open ontoggle={ALERT}><summary>s</summary></details>",
    "body onload": f"<body onload={ALERT}>",
    "javascript link": f'<a href="javascript:{ALERT}">x</a>',
    "entity javascript link": '<a href="&#106;avascript:alert(1)">x</a>',
    "tab javascript link": '<a href="java&#x09;script:alert(1)">x</a>',
    "spaced javascript link": f'<a href="  javascript:{ALERT}">x</a>',
    "vbscript link": '<a href="vbscript:msgbox(1)">x</a>',
    "data link": '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>',
    "relative link": '<a href="evil.html">a file of the submission</a>',
    "meta refresh": '<meta http-equiv="refresh" content="0;url=https://evil.example/">',
    "base": '<base href="https://evil.example/">',
    "link stylesheet": '<link rel="stylesheet" href="https://evil.example/x.css">',
    "style element": "<style>.nbgrader_cell { display: none }</style>",
    "style escaping": '<div style="position: fixed; top: 0; z-index: 99999; width: 100%; height: 100%">x</div>',
    "style url": '<div style="background-image: url(https://evil.example/track.png)">x</div>',
    "style margin": '<div style="margin-top: -500px">x</div>',
    "bootstrap class": '<div class="navbar-fixed-top modal in">x</div>',
    "formgrader classes": '<input class="score tabbable"><textarea class="comment">x</textarea>',
    "clobbered id": '<span id="b1_why_not_50_percent">0</span><a name="submission_id">x</a>',
    "math mxss": f"<math><mtext><table><mglyph><style><img src=x onerror={ALERT}></style></mglyph></table></mtext>"
                 "</math>",
    "svg style mxss": f'<svg></p><style><a id="</style><img src=1 onerror={ALERT}>">',
    "noscript mxss": f'<noscript><p title="</noscript><img src=x onerror={ALERT}>"></noscript>',
    "math href": f'<math href="javascript:{ALERT}"><mi>x</mi></math>',
    "mathml href": f'<math><mrow href="javascript:{ALERT}"><mi>x</mi></mrow></math>',
    "annotation-xml": f'<math><semantics><annotation-xml encoding="text/html"><img src=x onerror={ALERT}>'
                      "</annotation-xml></semantics></math>",
    "maction": f'<math><maction actiontype="statusline"><mi>x</mi><mtext>javascript:{ALERT}</mtext></maction></math>',
    "template": f"<template><img src=x onerror={ALERT}></template>",
    "svg image": '<img src="data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIj48L3N2Zz4=">',
    "remote image": '<img src="https://evil.example/read-receipt.png">',
    "srcset": '<img srcset="https://evil.example/a.png 1x">',
    "video": f"<video><source onerror={ALERT}></video><audio src=x onerror={ALERT}>",
    "marquee": f"<marquee onstart={ALERT}>x</marquee>",
    "xmp": f"<xmp><img src=x onerror={ALERT}></xmp>",
    "comment": f"<!--<img src=x onerror={ALERT}>--><p>ok</p>",
    "cdata": f"<![CDATA[<img src=x onerror={ALERT}>]]>",
    "frameset": f"<frameset onload={ALERT}>",
    "attribute breakout": f'<p title="</p><img src=x onerror={ALERT}>">t</p>',
    "unquoted breakout": f"<img src=data:image/png;base64,{PNG} width=1 onload={ALERT}>",
}
# Tags that may run, load or submit something, or restyle the page.
ACTIVE = {"script", "iframe", "frame", "frameset", "object", "embed", "applet", "form", "input", "button", "textarea",
          "select", "base", "meta", "link", "style", "svg", "template", "annotation-xml", "maction", "video", "audio",
          "source", "marquee", "xmp", "noscript", "body", "html", "head"}


class Elements(HTMLParser):
    """Every start tag of a fragment, with its attributes."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.text = ""
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text += data

    handle_startendtag = handle_starttag


def problems(cleaned: str) -> list[str]:
    """What in ``cleaned`` the policy should not have let through."""
    found = []
    for tag, attrs in Elements(cleaned).found:
        if tag in ACTIVE or tag not in TAGS:
            found.append(f"<{tag}>")
        for name, value in attrs.items():
            value = value or ""
            if name.startswith("on") or name in {"name", "srcset", "formaction", "action", "xlink:href"}:
                found.append(f"{tag}[{name}]")
            elif name == "href" and not (LINK.fullmatch(value) or value.startswith("#" + ID_PREFIX)):
                found.append(f"{tag}[href={value!r}]")
            elif name == "src" and not IMAGE.fullmatch(value):
                found.append(f"{tag}[src={value[:40]!r}]")
            elif name == "style":
                properties = {p.split(":")[0].strip() for p in value.split(";") if p.strip()}
                if properties - STYLE_PROPERTIES:
                    found.append(f"{tag}[style={value!r}]")
            elif name == "class" and not all(c in CLASSES or LANGUAGE_CLASS.fullmatch(c) for c in value.split()):
                found.append(f"{tag}[class={value!r}]")
            elif name == "id" and not value.startswith(ID_PREFIX):
                found.append(f"{tag}[id={value!r}]")
    return found


@pytest.mark.parametrize("name", VECTORS)
def test_a_vector_is_left_inert(name):
    cleaned = clean(VECTORS[name])
    assert problems(cleaned) == [], f"{name}: {cleaned!r}"
    assert clean(cleaned) == cleaned, f"{name}: cleaning twice changes {cleaned!r}"


def test_what_notebooks_show_survives():
    fragment = (
        '<h2 id="Results">Results<a class="anchor-link" href="#Results">¶</a></h2>'
        "<table><thead><tr><th style=\"text-align: right\">rate</th></tr></thead><tbody><tr><td>0.15</td></tr>"
        "</tbody></table>"
        f'<p><img src="data:image/png;base64,{PNG}" alt="dot" width="24"> <a href="https://huggingface.co/">hub</a> '
        '<a href="mailto:ta@example.org">mail</a> <strong>bold</strong> <code>x</code></p>'
        '<div class="highlight hl-python"><pre><span class="k">def</span> <span class="nf">f</span></pre></div>'
        '<span style="color: red; font-weight: bold">careful</span>')
    cleaned = clean(fragment)
    assert problems(cleaned) == []
    for kept in ('<th style="text-align:right">rate</th>', "<td>0.15</td>", f'src="data:image/png;base64,{PNG}"',
                 'href="https://huggingface.co/"', 'href="mailto:ta@example.org"', '<span class="k">def</span>',
                 'class="highlight hl-python"', 'style="color:red;font-weight:bold"',
                 f'id="{ID_PREFIX}Results"', f'href="#{ID_PREFIX}Results"'):
        assert kept in cleaned, f"{kept} lost: {cleaned}"


def test_a_student_element_cannot_take_an_id_or_class_of_the_page():
    cleaned = clean(VECTORS["clobbered id"] + VECTORS["formgrader classes"] + VECTORS["bootstrap class"])
    assert f'id="{ID_PREFIX}b1_why_not_50_percent"' in cleaned
    assert not re.search(r'\bid="(?!' + ID_PREFIX + ')', cleaned) and "class=" not in cleaned, cleaned
    assert "name=" not in cleaned


def course_notebooks():
    notebooks = sorted((REPO / "solutions" / "week6").glob("*.ipynb"))
    assert notebooks
    return notebooks


@pytest.mark.parametrize("path", course_notebooks(), ids=lambda p: p.stem)
def test_the_mathml_of_every_formula_of_the_course_survives(path):
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type != "markdown" or "$" not in cell.source:
            continue
        converted, _ = latex_to_mathml(cell.source)
        for math in re.findall(r"<math\b.*?</math>", converted, re.S):
            # The same elements, attributes and text; the namespace declaration goes (an HTML
            # parser puts <math> in MathML's namespace itself).
            expected = Elements(math.replace(' xmlns="http://www.w3.org/1998/Math/MathML"', ""))
            cleaned = Elements(clean(math))
            assert (cleaned.found, cleaned.text) == (expected.found, expected.text), \
                f"{path.stem}: {math[:300]}\n->\n{clean(math)[:300]}"


def test_latex_cannot_smuggle_a_link_a_style_or_html():
    converted, _ = latex_to_mathml(r"$\href{javascript:alert(1)}{x}$ $\style{position:fixed}{y}$ "
                                   r"$\class{navbar-fixed-top}{z}$ $\text{<img/src=x/onerror=alert(1)>}$")
    assert "javascript:" in converted and "position:fixed" in converted  # what latex2mathml writes
    cleaned = clean(converted)
    assert problems(cleaned) == [] and "javascript:" not in cleaned and "position" not in cleaned, cleaned
    assert "onerror" not in cleaned, cleaned


# ------------------------------------------------------------------ the notebook's own fields
def test_fields_written_around_the_sanitizer_are_made_plain():
    cell = new_code_cell("x", outputs=[
        new_output("display_data", data={"image/png": PNG},
                   metadata={"image/png": {"width": "1 onload=alert(1)", "height": 16},
                             "filenames": {"image/png": "javascript:alert(1)"}}),
        new_output("display_data", data={"text/html": "<b>x</b>"}, metadata={"text/html": {"isolated": True}}),
    ])
    notebook = new_notebook(cells=[cell])
    cell = notebook.cells[0]  # unchecked from here on, as a submitted file is
    cell.execution_count = "<img src=x onerror=alert(1)>"
    cell.metadata["tags"] = ["ok-tag", "x navbar-fixed-top", 3]
    notebook, _ = ScrubTemplateFields().preprocess(notebook, {})
    cell = notebook.cells[0]
    assert cell.execution_count is None and cell.metadata["tags"] == ["ok-tag"]
    png, isolated = cell.outputs
    assert png.metadata == {"image/png": {"height": 16}} and isolated.metadata == {"text/html": {}}


# ------------------------------------------------------------------ the pages, as configured
def repo_config():
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()


def hostile_notebook():
    markdown = new_markdown_cell(
        f"<script>{ALERT}</script><img src=x onerror={ALERT}> [link](javascript:{ALERT}) "
        "$\\frac{1}{2}$\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        f"```mermaid\n<img src=x onerror={ALERT}>\n```\n")
    code = new_code_cell("print(1)", execution_count=1, outputs=[
        new_output("display_data", data={"text/html": f"<img src=x onerror={ALERT}>"}),
        new_output("display_data", data={"application/javascript": ALERT}),
        new_output("display_data", data={"text/markdown": f"<svg onload={ALERT}>"}),
        new_output("display_data", data={"image/png": PNG}, metadata={"image/png": {"width": f"1 onload={ALERT}"}}),
    ])
    raw = nbformat.v4.new_raw_cell(f"<script>{ALERT}</script>")
    return new_notebook(cells=[markdown, code, raw, quoting_answer()], metadata={"language_info": {"name": "python"}})


def quoting_answer():
    """A written answer with what the grader put beside it (autograder/printed.py): the labels
    and numbers come from the student's outputs, so they are hostile too."""
    cell = new_markdown_cell("I measured 0.25 and 50 %.")
    cell.metadata["nbgrader"] = {"grade": True, "solution": True, "locked": False, "grade_id": "b1_token_counts",
                                 "points": 1, "schema_version": 3, "score": 0.5}  # score: GetGrades' (the feedback shows it)
    cell.metadata["week6_printed"] = {
        "seed": 7, "expected_seed": 9, "seed_note": f"ran with the student id '<img src=x onerror={ALERT}>'",
        "grade_id": "b1_token_counts", "missing": [f"<script>{ALERT}</script>"],
        "recorded": {f"<svg onload={ALERT}>": [[f"<b onmouseover={ALERT}>share</b>", 0.25], ["diverged", None]]},
        "numbers": [{"text": "0.25", "match": "recorded", "label": f"<i onclick={ALERT}>x</i>"},
                    {"text": "50 %", "match": "reference table", "label": "row"}]}
    return cell


HTML_ID = '"><img src=x onerror=alert(1)>'


def formgrader_page() -> str:
    from nbconvert.exporters import HTMLExporter

    exporter = HTMLExporter(config=repo_config())
    resources = {"assignment_id": "week6", "notebook_id": "part_b_bert_gpt", "submission_id": "0123abcd",
                 "index": 0, "total": 2, "base_url": "", "student": HTML_ID, "last_name": None, "first_name": None,
                 "notebook_path": f"./autograded/{HTML_ID}/week6/part_b_bert_gpt.ipynb"}
    page, _ = exporter.from_notebook_node(hostile_notebook(), resources=resources)
    return page


def feedback_page() -> str:
    from autograder.nbgrader.feedback_math import FeedbackExporter

    exporter = FeedbackExporter(config=repo_config())
    resources = {"nbgrader": {"notebook": "part_b_bert_gpt", "score": 0, "max_score": 1, "late_penalty": 0}}
    page, _ = exporter.from_notebook_node(hostile_notebook(), resources=resources)
    return page


def scripts_and_policy(page: str) -> tuple[list[dict], int | None, int]:
    """The page's script elements, where its CSP meta is in <head>, and <head>'s first script."""
    elements = Elements(page).found
    tags = [tag for tag, _ in elements]
    head = tags.index("head")
    policy = next((i for i, (tag, attrs) in enumerate(elements) if tag == "meta"
                   and (attrs.get("http-equiv") or "").lower() == "content-security-policy"), None)
    first_script = next((i for i, tag in enumerate(tags) if tag == "script"), len(tags))
    scripts = [attrs for tag, attrs in elements if tag == "script"]
    return scripts, (policy - head if policy else None), first_script - head


def active_attributes(page: str) -> list[str]:
    """Event handlers and script URLs anywhere in ``page``."""
    return [f"{tag}[{name}={value!r}]" for tag, attrs in Elements(page).found for name, value in attrs.items()
            if name.startswith("on") or re.match(r"\s*(javascript|vbscript|data):", value or "", re.I)
            and not (tag == "img" and IMAGE.fullmatch(value or ""))]


def test_the_formgrader_page_runs_only_its_own_scripts_under_its_policy():
    page = formgrader_page()
    scripts, policy_at, first_script_at = scripts_and_policy(page)
    assert policy_at is not None and policy_at <= 2 and policy_at < first_script_at, "the CSP is not first in <head>"
    nonce = re.search(r"'nonce-([A-Za-z0-9_-]{20,})'", page).group(1)
    for attrs in scripts:
        src = attrs.get("src") or ""
        assert src.startswith("/formgrader/static/") or attrs.get("nonce") == nonce, attrs
    assert sum(1 for attrs in scripts if attrs.get("nonce")) == 1
    assert active_attributes(page) == []
    assert "<svg" not in page
    assert HTML_ID not in page and HTML_ID in Elements(page).text  # the id is text, not markup
    assert page.count("<math") == 1 and "<table>" in page  # the formula is MathML, the table a table
    assert formgrader_page().count(nonce) == 0, "the nonce is not fresh for each page"


def test_the_formgrader_shows_what_the_notebook_recorded_beside_an_answer_as_text():
    page = formgrader_page()
    text = Elements(page).text
    assert "What this notebook recorded for this answer" in text
    for shown in (f"<b onmouseover={ALERT}>share</b>", f"<svg onload={ALERT}>", f"<script>{ALERT}</script>",
                  f"'<img src=x onerror={ALERT}>'", "0.25: recorded", "50 %: not recorded by this notebook"):
        assert shown in text, shown
    assert active_attributes(page) == [] and "<svg" not in page


def test_the_feedback_page_has_no_script_and_a_policy_that_allows_none():
    page = feedback_page()
    scripts, policy_at, _ = scripts_and_policy(page)
    assert scripts == [], scripts
    assert policy_at is not None and policy_at <= 2, "the CSP is not first in <head>"
    assert html.escape(FEEDBACK_POLICY, quote=True) in page or FEEDBACK_POLICY in page
    assert "script-src" not in FEEDBACK_POLICY and "default-src 'none'" in FEEDBACK_POLICY
    assert active_attributes(page) == []
    assert "<table>" in page
    assert "What this notebook recorded" not in page, "the panel beside quoting answers is the TA's"
