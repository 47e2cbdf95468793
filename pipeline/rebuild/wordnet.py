"""WordNet facts of a class list, from a local WordNet 3.0 database read with nltk.

The database is a folder of ``data.noun``, ``index.noun`` … files, such as the one Debian's
``wordnet-base`` package installs (``apt-get install wordnet-base``) or nltk's own
``corpora/wordnet`` download. Debian's copy lacks the ``lexnames`` file nltk's reader wants, so
this module serves the standard one from package data.

For each synset: its lemmas (query words), gloss, a word of its parent class (as the original
pipeline chose it: a parent's lemma that also occurs in the gloss, else the first lemma of the
first parent by name), and the other classes of the list ranked by WordNet path similarity.
"""

from __future__ import annotations

import io
import os
import warnings
from importlib import resources
from pathlib import Path
from typing import Iterable, Union

PathLike = Union[str, "os.PathLike[str]"]

INSTALL_HINT = (
    "install a WordNet 3.0 database (Debian/Ubuntu: apt-get install wordnet-base, then pass its folder; "
    "or python -m nltk.downloader wordnet) and pass its folder as --wordnet DIR"
)
MOST_SIMILAR = 20


def database_folder(folder: PathLike) -> Path:
    """The folder holding ``data.noun`` in ``folder`` or its ``dict``/``wordnet`` subfolder."""
    folder = Path(folder)
    for candidate in (folder, folder / "dict", folder / "wordnet", folder / "corpora" / "wordnet"):
        if (candidate / "data.noun").is_file() and (candidate / "index.noun").is_file():
            return candidate
    raise FileNotFoundError(f"--wordnet {folder}: no WordNet database there (no data.noun and index.noun); {INSTALL_HINT}")


class WordNet:
    """A WordNet 3.0 database folder (see the module docs)."""

    def __init__(self, folder: PathLike):
        self.folder = database_folder(folder)
        try:
            import nltk
            from nltk.corpus.reader.wordnet import WordNetCorpusReader
        except ImportError:
            raise ImportError(f"reading WordNet needs nltk, which is not installed: pip install nltk; {INSTALL_HINT}") from None
        if str(self.folder) not in nltk.data.path:
            nltk.data.path.append(str(self.folder))  # nltk reads only folders on its data path
        lexnames = resources.files("pipeline.rebuild").joinpath("data/wordnet_lexnames.txt").read_text("utf-8")

        class _Reader(WordNetCorpusReader):
            def open(self, file):  # noqa: A003 - nltk's name
                return io.StringIO(lexnames) if file == "lexnames" else super().open(file)

            def map_wn(self, version="wordnet"):  # a plain 3.0 database needs no version mapping
                return None

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.reader = _Reader(str(self.folder), None)

    def synset(self, wnid: str):
        """The noun synset of ``wnid`` (``n`` + 8-digit offset), or None."""
        try:
            return self.reader.synset_from_pos_and_offset(wnid[0], int(wnid[1:]))
        except Exception:  # noqa: BLE001 - nltk raises several kinds for an unknown offset
            return None

    def describe(self, wnids: Iterable[str]) -> dict[str, dict]:
        """``{wnid: {lemmas, gloss, parent, most_similar}}`` for the ids that are synsets here."""
        synsets = {w: s for w in wnids if (s := self.synset(w)) is not None}
        facts = {}
        for wnid, synset in synsets.items():
            lemmas = [name.replace("_", " ") for name in synset.lemma_names()]
            ranked = sorted(
                (w for w in synsets if w != wnid),
                key=lambda w: (-(synset.path_similarity(synsets[w]) or 0.0), w),
            )
            facts[wnid] = {
                "lemmas": lemmas,
                "gloss": synset.definition(),
                "parent": parent_word(synset),
                "most_similar": ranked[:MOST_SIMILAR],
            }
        return facts


def parent_word(synset) -> str:
    """A readable word of the synset's parent class, for the expansion queries (empty if none)."""
    parents = sorted(synset.hypernyms() or synset.instance_hypernyms(), key=lambda s: s.name())  # nltk's order varies
    if not parents:
        return ""
    gloss_words = set(synset.definition().split())
    in_gloss = [n for p in parents for n in p.lemma_names() if n in gloss_words]
    return (in_gloss or parents[0].lemma_names())[0].replace("_", " ")
