"""``python -m pipeline near-duplicates``: nearest neighbours of every candidate, and its review status."""

from __future__ import annotations

import argparse
import json

from ._errors import reporting_errors, require_extra

HELP = "find every candidate's nearest neighbours (l2, fc7, dssim) among the candidates and reference collections"


def _thresholds(text: str) -> dict:
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected METRIC=NUMBER[,...] like l2=1.2e8,dssim=0.2205, got {text!r}") from None
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--candidates", required=True, metavar="SPEC", help="a pool folder, a folder of images, a Parquet image table, or a dataset PATH_OR_HUB_ID[:CONFIG][@SPLIT]")
    parser.add_argument("--references", nargs="*", default=[], metavar="SPEC", help="reference collections (same forms), e.g. ILSVRC/imagenet-1k@train; the candidates are references too unless --no-candidates-as-references")
    parser.add_argument("--output", required=True, metavar="DIR", help="folder for neighbours.parquet, review_status.parquet, report.json (and the feature cache)")
    parser.add_argument("--metrics", default="l2,fc7,dssim", help="comma-separated measures (default l2,fc7,dssim)")
    parser.add_argument("--top-k", type=int, default=30, help="neighbours per candidate and measure (default 30)")
    parser.add_argument("--reviews", metavar="FILE", help="reviewed pairs: the review app's folder or its reviewed_pairs.jsonl (or .parquet/.csv), or the original's JSON {candidate: {metric: {reviewer, date, references}}}")
    parser.add_argument("--threshold", type=_thresholds, metavar="METRIC=X,...", help="review thresholds (default l2=1.2e8,fc7=13200,dssim=0.2205, the original's)")
    parser.add_argument("--no-candidates-as-references", dest="include_candidates", action="store_false", help="do not search the candidates among themselves")
    parser.add_argument("--id-column", metavar="NAME", help="id column of dataset and table collections (default: candidate_id/image_id/id for tables, the row index for datasets)")
    parser.add_argument("--classes", metavar="FILE", help="class list (default ImageNet-1k): the most similar classes restrict dssim")
    parser.add_argument("--similar-classes", type=int, default=5, metavar="N", help="dssim compares with the candidate's class and its N most similar classes (default 5), plus the l2/fc7 top-k; -1: the l2/fc7 top-k only")
    parser.add_argument("--cache", metavar="DIR", help="feature cache (default OUTPUT/features); a re-run computes only images it lacks")
    parser.add_argument("--memory-mb", type=int, default=1024, help="memory for the search blocks (default 1024); independent of the number of references")
    parser.add_argument("--device", default="auto", help="auto (a GPU through torch when there is one), cpu (FAISS), cuda[:N]")
    parser.add_argument("--fc7-model", default="torchvision:vgg16", help="torchvision:vgg16 (default) or timm:MODEL, e.g. timm:vgg16.tv_in1k")
    parser.add_argument("--no-pretrained", dest="pretrained", action="store_false", help="random fc7 weights (offline tests; distances are then not on the original's scale)")
    parser.add_argument("--fc7-dtype", default="float32", choices=["float16", "float32"], help="storage of fc7 features (default float32)")
    parser.add_argument("--workers", type=int, default=2, help="decoding threads (default 2)")
    parser.add_argument("--ray", metavar="ADDRESS", help="search reference shards as Ray tasks (ADDRESS, 'auto', or 'local'); the cache must be on a file system every node sees")
    parser.add_argument("--ray-shards", type=int, default=0, metavar="N", help="reference shards for --ray (default: the cluster's CPUs)")


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        require_extra("pipeline", ["faiss"], "near-duplicates")
        from tqdm.auto import tqdm

        from pipeline.rebuild.classes import load_classes
        from pipeline.rebuild.near_duplicates import (
            THRESHOLDS,
            SearchConfig,
            near_duplicate_search,
        )

        config = SearchConfig(
            metrics=tuple(m.strip() for m in args.metrics.split(",") if m.strip()), top_k=args.top_k,
            thresholds={**THRESHOLDS, **(args.threshold or {})}, include_candidates=args.include_candidates,
            memory_mb=args.memory_mb, device=args.device, fc7_model=args.fc7_model, pretrained=args.pretrained,
            fc7_dtype=args.fc7_dtype, similar_classes=args.similar_classes, workers=args.workers, ray=args.ray,
            ray_shards=args.ray_shards, id_column=args.id_column,
        )
        result = near_duplicate_search(
            args.candidates, args.references, args.output, config, reviews=args.reviews, cache=args.cache,
            classes=load_classes(args.classes) if args.classes else None, progress=tqdm,
        )
        report = result.report
        print(json.dumps({k: report[k] for k in ("candidates", "references", "top_k", "review_status", "seconds")}, indent=2))
        if report["left_out"]:
            print(f"{len(report['left_out'])} image(s) left out (unreadable); see report.json")
        print(f"wrote {args.output}/neighbours.parquet, review_status.parquet, report.json")
        return 0

    return reporting_errors(main)
