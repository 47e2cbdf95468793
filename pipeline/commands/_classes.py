"""The ``--classes FILE`` and ``--wordnet DIR`` options every rebuild command shares."""

from __future__ import annotations

import argparse


def add_class_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--classes FILE`` (default ImageNet-1k) and ``--wordnet DIR``."""
    parser.add_argument("--classes", dest="class_list", metavar="FILE", help="class list: JSON/YAML of classes, or a text file of WordNet ids, one a line (default: the 1,000 ImageNet classes)")
    parser.add_argument("--wordnet", metavar="DIR", help="WordNet 3.0 database folder (e.g. Debian's wordnet-base) that fills in lemmas, glosses, "
                        "parents and similar classes of WordNet ids the class list does not describe")


def class_list_from_args(args: argparse.Namespace):
    """The ClassList the options name."""
    from pipeline.rebuild.classes import load_classes

    return load_classes(getattr(args, "class_list", None), wordnet=getattr(args, "wordnet", None))
