"""``python -m pipeline search``: Flickr queries for every class → candidate records (or candidates from images you have)."""

from __future__ import annotations

import argparse
import json

from ._classes import add_class_arguments, class_list_from_args
from ._errors import reporting_errors, require_extra

HELP = "search Flickr for candidate images of every class (paper's settings; resumable), or make candidates from a folder or dataset"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_class_arguments(parser)
    parser.add_argument("--output", metavar="DIR", help="folder for candidates.jsonl, search.json and the fetched pages (a re-run continues in it); required")
    parser.add_argument("--config", metavar="FILE", help="search config (YAML); overrides the defaults of pipeline/rebuild/data/search.yaml (see docs/rebuilding.md)")
    parser.add_argument("--endpoint", metavar="URL", help="Flickr REST endpoint (default: Flickr's own, https://api.flickr.com/services/rest/)")
    parser.add_argument("--queries", metavar="FILE", help="hand-written queries {wnid: [query, ...]} (JSON/YAML; translations allowed) for the hand-written step")
    parser.add_argument("--requests-per-second", type=float, metavar="X", help="API rate limit (default from the config: 1, Flickr's 3,600 calls an hour)")
    parser.add_argument("--print-config", action="store_true", help="print the default search config and exit")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from-folder", metavar="DIR", help="make candidates and the image store from DIR/<class id>/<images> instead of searching")
    source.add_argument("--from-dataset", metavar="SPEC", help="make candidates and the image store from a dataset (PATH_OR_HUB_ID[:CONFIG][@SPLIT]) with an image and a class column")
    parser.add_argument("--image-column", metavar="NAME", help="--from-dataset: the image column (default: the only Image column)")
    parser.add_argument("--class-column", metavar="NAME", help="--from-dataset: the class column (default: label, or the only ClassLabel/string column)")


def _search(args: argparse.Namespace, classes) -> int:
    from pipeline.rebuild.flickr import FlickrClient, api_key_from_environment
    from pipeline.rebuild.search import search
    from pipeline.rebuild.search_config import load_search_config

    config = load_search_config(args.config, endpoint=args.endpoint, requests_per_second=args.requests_per_second)
    api_key = api_key_from_environment()

    def client():
        return FlickrClient(api_key, config.endpoint, requests_per_second=config.requests_per_second, retries=config.retries,
                            backoff=config.backoff_seconds, timeout=config.timeout_seconds)

    report = search(args.output, classes, config, client, queries_file=args.queries)
    print(f"{'class':<12} {'step':<16} {'queries':>7} {'new candidates':>14}")
    for wnid, step, queries, found in report.rows():
        print(f"{wnid:<12} {step:<16} {queries:>7} {found:>14}")
    print(f"{report.candidates} candidates for {len(classes)} classes ({report.cross_class_photos} photos found for several classes)")
    print(f"wrote {report.output}")
    return 0


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        require_extra("pipeline", ["httpx", "yaml", "tqdm", "pyarrow"], "search")
        if args.print_config:
            from pipeline.rebuild.search_config import default_config_text

            print(default_config_text(), end="")
            return 0
        if not args.output:
            raise ValueError("give --output DIR: the folder for the candidates (a re-run with the same folder continues)")
        classes = class_list_from_args(args)
        if args.from_folder or args.from_dataset:
            from pipeline.rebuild import from_images

            if args.from_folder:
                items, engine, inputs = from_images.folder_images(args.from_folder, classes), "folder", [args.from_folder]
            else:
                items = from_images.dataset_images(args.from_dataset, classes, image_column=args.image_column, class_column=args.class_column)
                engine, inputs = "dataset", []
            counts = from_images.candidates_from_images(items, args.output, engine, inputs=inputs)
            print(json.dumps(counts, indent=2))
            print(f"wrote {args.output} (candidates.jsonl; image store in {args.output}/images)")
            return 0
        return _search(args, classes)

    return reporting_errors(main)
