"""What a student wrote, shown as HTML, cannot act: the sanitizer policy and the pages' CSP.

A TA opens students' notebooks in nbgrader's formgrader with their own Jupyter
session, and a student opens their feedback HTML: script from a notebook there
could change anyone's grades through the formgrader's API or write files through
Jupyter's contents API. nbconvert renders markdown and outputs as raw HTML unless
``HTMLExporter.sanitize_html`` is on, and even then its own ``clean_html`` is never
applied to the formgrader's or the feedback's markdown cells, and shows neither
images nor tables. ``nbgrader_config.py`` therefore sets, for every HTML exporter:

* ``sanitize_html = True``: nbconvert's templates then pass ``text/html`` and
  ``text/markdown`` outputs and raw cells through ``clean_html``, drop
  ``application/javascript`` outputs and widgets, and keep SVG outputs as images;
* ``filters = FILTERS``: ``clean_html`` is :func:`clean` (this module's policy, with
  ``nh3``, the binding of the Rust sanitizer ammonia), and every ``markdown2html``
  (markdown cells, graders' comments, markdown outputs, whichever template calls
  it) is cleaned by :class:`SanitizedMarkdown`;
* ``preprocessors``: :class:`ScrubTemplateFields`, for the few values templates
  write into HTML around the sanitizer, and a :class:`FormgraderPolicy` or a
  :class:`FeedbackPolicy`, whose Content-Security-Policy the course's templates
  (``autograder/nbgrader/templates/``) put first in each page's head: a second wall that
  stops inline script even if something got past the sanitizer.

The policy (:data:`TAGS`, :data:`ATTRIBUTES`, :data:`STYLE_PROPERTIES`,
:func:`_attribute`) keeps what notebooks legitimately show: prose, headings, lists,
code with its highlighting, tables, PNG/JPEG/GIF/WebP images as data URIs, links to
web pages, and MathML (the course's formulas are MathML: ``autograder/mathml.py``).
"""
from __future__ import annotations

import re
import secrets

import nh3
from jinja2 import pass_context
from nbconvert.preprocessors import Preprocessor
from pygments.token import STANDARD_TYPES
from traitlets import Bool
from traitlets.config import LoggingConfigurable

# ------------------------------------------------------------------ the allow-list
# HTML that text, tables and images need. Left out on purpose: script, style,
# iframe, object, embed, form and its controls, base, meta, link, svg (its script
# and event attributes, and foreignObject), area/map (more places for a link), and
# every element not named here: its tags go, its text stays.
HTML_TAGS = {
    "p", "br", "hr", "div", "span", "blockquote", "pre", "code", "kbd", "samp", "var", "tt",
    "h1", "h2", "h3", "h4", "h5", "h6",
    "b", "strong", "i", "em", "u", "s", "strike", "del", "ins", "mark", "small", "sub", "sup", "q", "cite",
    "abbr", "dfn", "bdi", "bdo", "wbr", "ruby", "rp", "rt",
    "ul", "ol", "li", "dl", "dt", "dd", "details", "summary", "figure", "figcaption",
    "table", "caption", "colgroup", "col", "thead", "tbody", "tfoot", "tr", "th", "td",
    "a", "img",
}
# MathML Core's presentation elements, what latex2mathml writes. Not annotation-xml,
# whose content may be HTML again (a known way around sanitizers), nor maction.
MATHML_TAGS = {
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "mfrac", "msqrt", "mroot", "msub", "msup",
    "msubsup", "munder", "mover", "munderover", "mmultiscripts", "mprescripts", "none", "mtable", "mtr", "mtd",
    "mstyle", "mpadded", "mphantom", "menclose", "merror", "semantics", "annotation",
}
TAGS = HTML_TAGS | MATHML_TAGS
# Their content goes with them: a stylesheet or a script shown as text helps nobody.
CLEAN_CONTENT_TAGS = {"script", "style", "template", "noscript", "title", "textarea", "xmp", "noembed", "noframes"}

# No event handler (on*), no name, no form or frame attribute anywhere. `id` is kept
# with ID_PREFIX, so that no student element can take the id of the page's own (the
# formgrader finds its score boxes by id); `class` keeps only CLASSES (a Bootstrap
# class could pin a cell over the page); `style` keeps only STYLE_PROPERTIES.
MATHML_ATTRIBUTES = {
    "display", "displaystyle", "scriptlevel", "mathvariant", "mathcolor", "mathbackground", "mathsize",
    "dir", "fence", "separator", "form", "stretchy", "symmetric", "largeop", "movablelimits", "accent",
    "accentunder", "lspace", "rspace", "minsize", "maxsize", "linethickness", "width", "height", "depth",
    "voffset", "columnalign", "rowalign", "columnspacing", "rowspacing", "columnlines", "rowlines", "frame",
    "framespacing", "columnspan", "rowspan", "notation", "encoding",
}
ATTRIBUTES = {
    "*": {"id", "class", "style", "title", "lang", "dir"},
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "ol": {"start", "type"},
    "li": {"value"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align", "scope"},
    "col": {"span"},
    "colgroup": {"span"},
    "details": {"open"},
    **{tag: MATHML_ATTRIBUTES for tag in MATHML_TAGS},
}
ID_PREFIX = "user-content-"
# Colour, emphasis and alignment only: no position, display, size, margin, z-index,
# transform or url(), so no student element leaves its cell or covers the page.
STYLE_PROPERTIES = {
    "color", "background-color", "font-weight", "font-style", "text-decoration", "text-align",
    "vertical-align", "white-space",
}
# Pygments' token classes (code in markdown), nbconvert's own (headings' anchors, code
# blocks, pandas' tables), and a highlighted block's language ("hl-python").
CLASSES = {name for name in STANDARD_TYPES.values() if name} | {"highlight", "anchor-link", "dataframe"}
LANGUAGE_CLASS = re.compile(r"hl-[A-Za-z0-9_+#.-]{1,40}")
# Links go to web pages, mail or this page's headings. A relative link would open a
# file of the student's submission, which the formgrader serves from the TA's own
# server, where it would run as the TA; data: and javascript: are never links.
LINK = re.compile(r"(?i)(?:https?://|mailto:)\S+")
# Images are data URIs of raster formats: an SVG can hold script, and a URL would
# tell the student's server when, and from where, the TA read the notebook.
IMAGE = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}")


def _attribute(tag: str, name: str, value: str) -> str | None:
    """The value kept for an allowed attribute, or None to drop it."""
    if name == "class":
        kept = [c for c in value.split() if c in CLASSES or LANGUAGE_CLASS.fullmatch(c)]
        return " ".join(kept) or None
    if tag == "a" and name == "href":
        if value.startswith("#"):  # a heading of the same content: its id carries the prefix
            return value if value.startswith("#" + ID_PREFIX) else "#" + ID_PREFIX + value[1:]
        return value if LINK.fullmatch(value) else None
    if tag == "img" and name == "src":
        return value if IMAGE.fullmatch(value) else None
    return value


_CLEANER = nh3.Cleaner(
    tags=TAGS,
    clean_content_tags=CLEAN_CONTENT_TAGS,
    attributes=ATTRIBUTES,
    attribute_filter=_attribute,
    url_schemes={"http", "https", "mailto", "data"},  # data: for images only (_attribute)
    url_relative=lambda url: url if url.startswith("#") else None,
    filter_style_properties=STYLE_PROPERTIES,
    id_prefix=ID_PREFIX,
    link_rel="noopener noreferrer",
    strip_comments=True,
)


def clean(html) -> str:
    """``html`` (a fragment a student controls) with only what :data:`TAGS` and
    :data:`ATTRIBUTES` allow; nbconvert's ``clean_html`` filter."""
    text = html.decode("utf-8", "replace") if isinstance(html, bytes) else str(html)
    return _CLEANER.clean(text)


# ------------------------------------------------------------------ nbconvert's side
class SanitizedMarkdown(LoggingConfigurable):
    """The ``markdown2html`` filter: the exporter's own rendering, then :func:`clean`.

    Registered through ``HTMLExporter.filters``; nbconvert makes one per exporter
    with the exporter as its parent, whose ``markdown2html`` (attachments, anchor
    links, highlighting) it wraps, so that no template can show markdown uncleaned.
    """

    jinja_pass_arg = pass_context(lambda: None).jinja_pass_arg  # the template's context comes first

    def __call__(self, context, source: str) -> str:
        return clean(self.parent.markdown2html(context, source))


FILTERS = {"clean_html": clean, "markdown2html": SanitizedMarkdown}

TAG_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class ScrubTemplateFields(Preprocessor):
    """Values nbconvert's templates write into HTML without the sanitizer, made plain.

    A student's notebook JSON is not validated before it is shown: an image's
    ``width`` lands unquoted in its ``<img>`` (``"1 onload=..."`` adds an attribute),
    a prompt's ``execution_count`` and a cell's ``tags`` (class names) are written
    as they are. Sizes and counts must be numbers, tags plain words; output file
    names (``filenames``, which nothing here extracts) and "isolated" HTML (an
    iframe) are dropped.
    """

    enabled = Bool(True).tag(config=True)  # listed in a configuration, it is meant to run

    def preprocess_cell(self, cell, resources, index):
        if "execution_count" in cell and not _number(cell.execution_count):
            cell.execution_count = None
        tags = cell.metadata.get("tags")
        if tags is not None:
            cell.metadata["tags"] = [t for t in tags if isinstance(t, str) and TAG_NAME.fullmatch(t)] \
                if isinstance(tags, list) else []
        for output in cell.get("outputs", []):
            if "execution_count" in output and not _number(output.execution_count):
                output.execution_count = None
            metadata = output.get("metadata", {})
            metadata.pop("filenames", None)
            for value in metadata.values():
                if isinstance(value, dict):
                    value.pop("isolated", None)
                    for size in ("width", "height"):
                        if size in value and not _number(value[size]):
                            del value[size]
        return cell, resources


# ------------------------------------------------------------------ Content-Security-Policy
# Written by the course's templates as the first element of <head>. A meta CSP cannot
# set frame-ancestors or report-uri; the Jupyter server sends its own header beside it.
FORMGRADER_POLICY = (
    "default-src 'none'; "
    "script-src 'self' 'nonce-{nonce}'; "  # nbgrader's scripts, and the page's own inline one
    "style-src 'self' 'unsafe-inline'; "   # the template's style attributes; students' are filtered
    "img-src 'self' data:; font-src 'self' data:; "
    "connect-src 'self'; "                 # the formgrader's own API
    "base-uri 'none'; form-action 'none'; object-src 'none'; frame-src 'none'"
)
FEEDBACK_POLICY = (  # a file opened anywhere: no script at all, nothing from a network
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; "
    "base-uri 'none'; form-action 'none'"
)


class FormgraderPolicy(Preprocessor):
    """Puts the formgrader page's CSP, with a fresh nonce, into ``resources["week6_csp"]``
    and the nonce into ``resources["week6_nonce"]`` (only the template's inline script
    carries it; nbgrader renders the page anew for every request)."""

    enabled = Bool(True).tag(config=True)  # listed in a configuration, it is meant to run

    def preprocess(self, nb, resources):
        nonce = secrets.token_urlsafe(18)
        resources["week6_nonce"] = nonce
        resources["week6_csp"] = FORMGRADER_POLICY.format(nonce=nonce)
        return nb, resources


class FeedbackPolicy(Preprocessor):
    """Puts the feedback's CSP (no script at all) into ``resources["week6_csp"]``."""

    enabled = Bool(True).tag(config=True)  # listed in a configuration, it is meant to run

    def preprocess(self, nb, resources):
        resources["week6_csp"] = FEEDBACK_POLICY
        return nb, resources
