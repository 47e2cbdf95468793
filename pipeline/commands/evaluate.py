"""``python -m pipeline evaluate``: score image classifiers on an original and new test sets."""

from __future__ import annotations

import argparse
import logging
import os
import sys

HELP = "score timm / transformers models on an original and new test sets; write results, fits and fit.png"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n"
        "  python -m pipeline evaluate --model timm:resnet50.a1_in1k --model hf:google/vit-base-patch16-224 \\\n"
        "      --original ILSVRC/imagenet-1k@validation --new ./hub/imagenetv2:matched-frequency --output eval/\n"
        "  python -m pipeline evaluate --models models.yaml --original uoft-cs/cifar10@test \\\n"
        "      --new ./hub/cifar10_1:v6 --new ./hub/cifar10_1:v4 --output eval-cifar/ --ray local\n"
        "\nDATASET is PATH_OR_HUB_ID[:CONFIG][@SPLIT]; the split defaults to 'test' or the only split.\n"
        "See the README (Evaluating models) for the model file, the output files and their columns."
    )
    models = parser.add_argument_group("models")
    models.add_argument("--model", action="append", default=[], metavar="SPEC",
                        help="timm:<name> or hf:<repo or local folder> (repeatable)")
    models.add_argument("--models", action="append", default=[], metavar="FILE",
                        help="a JSON or YAML file of model records (name, source, batch_size, label_map, ...)")
    models.add_argument("--no-pretrained", action="store_true",
                        help="build timm models with random weights (offline use and tests)")
    models.add_argument("--label-map", metavar="FILE",
                        help="JSON list: for each output of the --model models, the dataset class it means (null: none)")
    data = parser.add_argument_group("datasets")
    data.add_argument("--original", required=True, metavar="DATASET", help="the original test set")
    data.add_argument("--new", action="append", required=True, metavar="DATASET", help="a new test set (repeatable)")
    data.add_argument("--limit", type=int, metavar="N",
                      help="score a sample of N images of each dataset: rows spread over the classes, chosen with a "
                           "fixed seed, the same for every model and every re-run (default: all images)")
    data.add_argument("--cache-dir", help="datasets cache folder (default: the datasets default)")
    run = parser.add_argument_group("running")
    run.add_argument("--output", required=True, metavar="DIR", help="output folder (re-runs resume in it)")
    run.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:N (default: %(default)s)")
    run.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16", "fp16"),
                     help="autocast dtype on CUDA (auto: bf16 where supported, else fp16); CPU runs fp32")
    run.add_argument("--batch-size", type=int, default=128, help="default batch size (default: %(default)s)")
    run.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1),
                     help="DataLoader worker processes (default: %(default)s)")
    run.add_argument("--no-draft", action="store_true",
                     help="decode JPEGs at full size (bit-exact with the reference preprocessing; slower)")
    run.add_argument("--n-bootstrap", type=int, default=100_000,
                     help="bootstrap resamples for the fit intervals, 0 for none (default: %(default)s)")
    run.add_argument("--decode", default="workers", choices=("workers", "device"),
                     help="decode JPEGs in the CPU workers, or in batches on the GPU with nvJPEG (default: %(default)s)")
    run.add_argument("--cache-memory", type=float, default=4.0, metavar="GIB",
                     help="decoded images kept in memory for models that share preprocessing; beyond it they are "
                          "memory-mapped under OUTPUT/cache (default: %(default)s GiB)")
    run.add_argument("--no-cache", action="store_true",
                     help="remove OUTPUT/cache (decoded images kept for re-runs) when done")
    run.add_argument("--ray", metavar="ADDRESS", help="run jobs as Ray tasks: 'local' or a cluster address")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    from pipeline.evaluation.datasets_spec import parse_dataset_spec
    from pipeline.evaluation.extra import require_eval_extra
    from pipeline.evaluation.models import load_model_file, parse_model_spec
    from pipeline.evaluation.runner import Options, evaluate

    try:
        require_eval_extra()
        records = [parse_model_spec(s) for s in args.model]
        if args.label_map:
            for r in records:
                r.label_map = os.path.abspath(args.label_map)
        for path in args.models:
            records += load_model_file(path)
        if not records:
            raise ValueError("no models: give --model timm:<name> / hf:<repo or folder>, or --models FILE")
        original = parse_dataset_spec(args.original)
        new = [parse_dataset_spec(s) for s in args.new]
        options = Options(
            output=args.output,
            device=args.device,
            precision=args.precision,
            batch_size=args.batch_size,
            workers=args.workers,
            limit=args.limit,
            draft=not args.no_draft,
            pretrained=not args.no_pretrained,
            cache_dir=args.cache_dir,
            n_bootstrap=args.n_bootstrap,
            progress=not args.no_progress,
            decode=args.decode,
            cache_memory=args.cache_memory,
            cache=not args.no_cache,
        )
        summary = evaluate(records, original, new, options, ray_address=args.ray)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    print(f"{len(summary.rows)} results in {args.output} ({summary.ran} run now, {summary.skipped} reused)")
    if summary.errors:
        print(f"{summary.errors} (model, dataset) pairs failed: see the error column of results.csv", file=sys.stderr)
        return 1
    return 0
