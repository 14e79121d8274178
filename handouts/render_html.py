"""week6.md -> week6.html: the handout as one self-contained page.

One page with inline CSS, a table of contents, no script and nothing fetched from
the network. Figures are linked relatively (``figures/*.png``, drawn by
``figures.py``; numbered by ``figure_refs.py``), so the page works from a checkout
or a copy of the ``handouts/`` folder.

Formulas are MathML, which browsers render natively (no MathJax or KaTeX): they are
found with the rules of ``autograder/mathml.py`` (pandoc's, shared with the
feedback HTML) and converted by ``latex2mathml``. The markdown renderer (mistune)
never sees a formula: each is a placeholder until the page is rendered, and then
``<span class="math">`` (inline) or ``<div class="math display">`` (a ``$$`` formula
that is a paragraph of its own) holding the MathML, with the LaTeX source in its
``title``. A formula that latex2mathml cannot read, or one with a command it does
not know, is a :class:`BuildError`: no formula renders silently wrong.
"""
from __future__ import annotations

import html
import re

import mistune

from autograder.mathml import MathError, convert_formula, replace_math

from . import BuildError
from .figure_refs import expand_optional_figures, number_figures
from .where_boxes import without_box_directives

# A formula stands in the markdown as U+E000 <its number> U+E001 (private-use
# characters, which markdown leaves alone) until the page is rendered.
OPEN, CLOSE = "\ue000", "\ue001"
PLACEHOLDER = re.compile(OPEN + r"(\d+)" + CLOSE)
DISPLAY_PARAGRAPH = re.compile("<p>" + PLACEHOLDER.pattern + "</p>")
IN_ATTRIBUTE = re.compile(r'="[^"<>]*' + OPEN)


class Formulas:
    """The handout's formulas in order: their placeholders, and their HTML."""

    def __init__(self) -> None:
        self.items: list[tuple[str, bool, str]] = []  # (LaTeX, display, MathML)
        self.problems: list[str] = []

    def add(self, latex: str, display: bool) -> str:
        """The placeholder for one formula (a ``replace_math`` callback)."""
        try:
            mathml = convert_formula(latex, display=display, strict=True)
        except MathError as err:
            self.problems.append(str(err))
            mathml = ""
        self.items.append((latex, display, mathml))
        return f"{OPEN}{len(self.items) - 1}{CLOSE}"

    def raise_problems(self) -> None:
        if self.problems:
            raise BuildError("formulas that latex2mathml cannot convert:\n  " + "\n  ".join(self.problems))

    def element(self, number: int, *, block: bool = False) -> str:
        latex, display, mathml = self.items[number]
        title = html.escape(" ".join(latex.split()), quote=True)
        if display and block:
            return f'<div class="math display" title="{title}">{mathml}</div>'
        return f'<span class="{"math display" if display else "math"}" title="{title}">{mathml}</span>'

    def fill(self, rendered: str) -> str:
        """``rendered`` HTML with each placeholder replaced by its formula."""
        if IN_ATTRIBUTE.search(rendered):
            raise BuildError("a formula in an image's text or a link's title: the handout cannot show it")

        def paragraph(match: re.Match) -> str:
            number = int(match.group(1))
            if self.items[number][1]:  # a display formula that is a paragraph of its own
                return self.element(number, block=True)
            return match.group(0)

        rendered = DISPLAY_PARAGRAPH.sub(paragraph, rendered)
        return PLACEHOLDER.sub(lambda m: self.element(int(m.group(1))), rendered)


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
    def __init__(self, figure_numbers: dict[str, int], formulas: Formulas):
        super().__init__(escape=False)
        self.figure_numbers = figure_numbers
        self.formulas = formulas
        self.toc: list[tuple[int, str, str]] = []
        self.ids: set[str] = set()
        self.title = ""

    def heading(self, text: str, level: int, **attrs) -> str:
        text = self.formulas.fill(text)  # the anchor and the contents see the formula's text
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

    def block_code(self, code: str, info: str | None = None) -> str:
        language = (info or "").split()[0] if info else ""
        cls = f' class="language-{html.escape(language)}"' if language else ""
        return f"<pre><code{cls}>{html.escape(code)}</code></pre>\n"


def _inline_code(escaped: str) -> str:
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


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
    """The handout page for ``markdown`` (the text of ``week6.md``)."""
    markdown = expand_optional_figures(without_box_directives(markdown))
    markdown, numbers = number_figures(markdown)
    formulas = Formulas()
    markdown = replace_math(markdown, formulas.add)
    formulas.raise_problems()
    renderer = HandoutRenderer(numbers, formulas)
    md = mistune.create_markdown(renderer=renderer, plugins=["table"])
    body = md(markdown)
    body = re.sub(r"<p>(<figure .*?</figure>)</p>", r"\1", body, flags=re.S)
    body = formulas.fill(body)
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
