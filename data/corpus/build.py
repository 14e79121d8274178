#!/usr/bin/env python3
"""Rebuild the pre-training text shipped in this folder from pinned Debian packages.

    python data/corpus/build.py           # rebuild the files and SHA256SUMS in place
    python data/corpus/build.py --check   # rebuild in a temp dir, compare, exit 1 on mismatch

The novels sit in the R package's lazy-load database (data/Rdata.rdx + .rdb), one
character vector per novel, one element per line of the Project Gutenberg text.
They are decoded with rserialize.py (pure Python, no R needed).  The other
files (WordNet's example sentences, three public-domain novels) come from
more.py.  See README.md.
"""
import itertools
import re
import sys
from pathlib import Path

import more
from debian import deb_data_tar, fetch_deb, sha256
from rserialize import read_lazyload

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository, for its builders' shared command line
from autograder.build.generated import rebuild_command  # noqa: E402

PACKAGE = "r-cran-janeaustenr"
VERSION = "1.0.0-1"  # Debian 12 (bookworm)
DEB_SHA256 = "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"
DATABASE = "./usr/lib/R/site-library/janeaustenr/data/Rdata"  # .rdx and .rdb inside the .deb

# janeaustenr's own order (austen_books()): by publication.
NOVELS = ["sensesensibility", "prideprejudice", "mansfieldpark",
          "emma", "northangerabbey", "persuasion"]
HELDOUT_PERCENT = 5  # the last 5% of each novel's paragraphs

# "CHAPTER 1", "Chapter 1", "CHAPTER XIV", and Emma's "VOLUME II".
HEADING = re.compile(r"(CHAPTER|Chapter|VOLUME) [0-9IVXLC]+\.?")
# Lines after which a novel's text is over.  "A NOTE ON THE TEXT" opens a modern
# editor's note at the end of Northanger Abbey, which is not Austen's.
END_MARKERS = {"THE END", "FINIS", "Finis", "A NOTE ON THE TEXT"}

AUSTEN_OUTPUTS = ["austen_train.txt", "austen_heldout.txt"]
OUTPUTS = AUSTEN_OUTPUTS + more.OUTPUTS
CHECKSUMS = "SHA256SUMS"


def load_novels(deb: bytes) -> dict:
    with deb_data_tar(deb) as tar:
        rdx = tar.extractfile(DATABASE + ".rdx").read()
        rdb = tar.extractfile(DATABASE + ".rdb").read()
    return read_lazyload(rdx, rdb)


def paragraphs(lines):
    """Turn a novel's lines into cleaned paragraphs.

    Front matter (title, author, date and, in Northanger Abbey, a short
    "Advertisement") ends at the first chapter heading; the text ends at an end
    marker.  Blank lines separate paragraphs; headings are dropped.
    """
    start = next(i for i, line in enumerate(lines) if HEADING.fullmatch(line.strip()))
    body = itertools.takewhile(lambda line: line.strip() not in END_MARKERS, lines[start:])
    paras, current = [], []
    for line in itertools.chain(body, [""]):  # the blank sentinel flushes the last paragraph
        line = line.strip()
        if line and not HEADING.fullmatch(line):
            current.append(line)
        elif current:
            paras.append(clean(" ".join(current)))
            current = []
    return [p for p in paras if keep(p)]


def clean(paragraph: str) -> str:
    # Underscores mark italics in the Gutenberg text (_you_); they are not Austen's.
    return " ".join(paragraph.replace("_", "").split())


def keep(paragraph: str) -> bool:
    if not any(c.isalpha() for c in paragraph):
        return False  # scene breaks such as "* * * * *"
    # Transcriber's notes, e.g. "[At this point in the first and second editions, ...]".
    return not (paragraph.startswith("[") and paragraph.endswith("]") and "edition" in paragraph)


def build(out_dir: Path) -> None:
    novels = load_novels(fetch_deb(PACKAGE, VERSION, DEB_SHA256))
    train, heldout = [], []
    for name in NOVELS:
        paras = paragraphs(list(novels[name]))
        n_heldout = len(paras) * HELDOUT_PERCENT // 100
        train += paras[:-n_heldout]
        heldout += paras[-n_heldout:]
        print(f"{name}: {len(paras)} paragraphs, last {n_heldout} held out")

    # A few short paragraphs recur verbatim (e.g. '"What do you mean?"').  Drop
    # train copies of held-out paragraphs, so the held-out text stays contiguous
    # and the two files share no paragraph.
    heldout_set = set(heldout)
    n_before = len(train)
    train = [p for p in train if p not in heldout_set]
    print(f"dropped {n_before - len(train)} train paragraphs that also occur in held-out")

    parts = {"austen_train.txt": train, "austen_heldout.txt": heldout, **more.build()}
    sums = []
    for name in OUTPUTS:
        paras = parts[name]
        text = "".join(p + "\n" for p in paras)
        data = text.encode("utf-8")
        (out_dir / name).write_bytes(data)
        sums.append(f"{sha256(data)}  {name}\n")
        words = sum(len(p.split()) for p in paras)
        print(f"{name}: {len(paras)} paragraphs, {words} words, {len(text)} characters, "
              f"{len(data)} bytes")
    (out_dir / CHECKSUMS).write_bytes("".join(sums).encode())


if __name__ == "__main__":
    sys.exit(rebuild_command(__doc__, HERE, OUTPUTS + [CHECKSUMS], build))
