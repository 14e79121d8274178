"""More English for pre-training, beyond Austen: WordNet's example sentences and three
public-domain novels, each rebuilt from a pinned Debian package. See README.md.

Austen alone gives the course's models a drawing-room vocabulary: few doors, cups,
trains or gardens. WordNet's usage examples are short sentences of ordinary modern
English ("he opened the door"), one synset per paragraph; the novels (Dickens, Wells,
Verne in translation) add narrative about things and places.
"""
import gzip
import itertools
import re

from debian import fetch_deb, read_member
from rserialize import unserialize

WORDNET = ("wordnet-base", "1:3.0-37", "61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752")
WORDNET_FILES = [f"./usr/share/wordnet/data.{part}" for part in ("noun", "verb", "adj", "adv")]

TIDYTEXT = ("r-cran-tidytext", "0.4.1-1", "8d693a8772b57e2dbdc907aa946fbeeefb03ba3eb2bbea86d5c888a4d15956ad")
BOOKS_RDA = "./usr/lib/R/site-library/tidytext/extdata/books.rda"
# tidytext's books also hold Pride and Prejudice, which the Austen files already have.
NOVELS = ["Great Expectations", "The War of the Worlds", "Twenty Thousand Leagues under the Sea"]

OUTPUTS = ["wordnet_examples.txt", "novels_train.txt"]

CHAPTER = re.compile(r"(CHAPTER|Chapter) [A-Z0-9]+\.?")
GLOSS_EXAMPLE = re.compile(r'"([^"]+)"')


# ----------------------------------------------------------------------------- WordNet
def synset_paragraph(line: str) -> str | None:
    """One line of a WordNet data file -> "words: definition. Example. Example.", or None
    when the synset has no usage example.

    A data line is ``offset lex_filenum ss_type w_cnt word lex_id [word lex_id ...] ... | gloss``
    (wndb(5)), w_cnt in hexadecimal; the gloss is the definition, then the examples in quotes.
    """
    if line.startswith("  ") or " | " not in line:
        return None  # the licence header, or a synset without a gloss
    head, gloss = line.split(" | ", 1)
    fields = head.split()
    n_words = int(fields[3], 16)
    words = [re.sub(r"\([a-z]+\)$", "", fields[4 + 2 * i]).replace("_", " ") for i in range(n_words)]
    examples = [e.strip() for e in GLOSS_EXAMPLE.findall(gloss) if e.strip()]
    if not examples:
        return None
    # Underscores join the words of a multi-word entry ("by_mouth"), in glosses too.
    definition = gloss.split('"')[0].strip().rstrip(";").strip().replace("_", " ")
    sentences = [e[0].upper() + e[1:] + ("" if e[-1] in ".!?" else ".") for e in examples]
    return f"{', '.join(words)}: {definition}. " + " ".join(sentences)


def wordnet_paragraphs() -> list[str]:
    deb = fetch_deb(*WORDNET)
    paras = []
    for path in WORDNET_FILES:
        text = read_member(deb, path).decode("latin-1")
        paras += [p for p in map(synset_paragraph, text.splitlines()) if p]
    return [" ".join(p.split()) for p in paras]


# ----------------------------------------------------------------------------- novels
def novel_paragraphs(lines: list[str]) -> list[str]:
    """Front matter ends at the first chapter heading. Blank lines separate paragraphs.
    Dropped: chapter headings, titles and part headings (paragraphs in capitals only, e.g.
    "THE EVE OF THE WAR", "BOOK TWO"), and bracketed notes ("[1] Member of the whale
    family.", "[Transcriber's Note: ...]"). Underscores (Gutenberg's italics) are removed."""
    start = next(i for i, line in enumerate(lines) if CHAPTER.fullmatch(line.strip()))
    paras, current = [], []
    for line in itertools.chain(lines[start:], [""]):
        line = line.strip()
        if line and not CHAPTER.fullmatch(line):
            current.append(line)
        elif current:
            paras.append(" ".join(" ".join(current).replace("_", "").split()))
            current = []
    return [p for p in paras
            if any(c.islower() for c in p) and not (p.startswith("[") and p.endswith("]"))]


def novels() -> dict[str, list[str]]:
    rda = gzip.decompress(read_member(fetch_deb(*TIDYTEXT), BOOKS_RDA))
    if not rda.startswith(b"RDX2\n"):
        raise ValueError("books.rda is not an R save file (RDX2)")
    books = unserialize(rda[5:])[0].as_dict()  # a data frame: gutenberg_id, text, title
    by_title = {title: [] for title in NOVELS}
    for text, title in zip(books["text"], books["title"], strict=True):
        if title in by_title:
            by_title[title].append(text or "")
    return {title: novel_paragraphs(lines) for title, lines in by_title.items()}


def build() -> dict[str, list[str]]:
    """{file name: paragraphs} for the files in OUTPUTS."""
    by_novel = novels()
    for title, paras in by_novel.items():
        print(f"{title}: {len(paras)} paragraphs, {sum(len(p.split()) for p in paras)} words")
    return {"wordnet_examples.txt": wordnet_paragraphs(),
            "novels_train.txt": [p for title in NOVELS for p in by_novel[title]]}
