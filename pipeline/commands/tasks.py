"""``python -m pipeline tasks``: a pool's candidates → annotation tasks with hidden controls (MTurk or local)."""

from __future__ import annotations

import argparse

from ._errors import reporting_errors

HELP = "make annotation tasks: grids of 48 images per class with hidden positive and negative controls, for MTurk or a local page"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pool", metavar="POOL", help="pool folder (from `ingest`, or the toys); a follow-up round reads its annotations")
    parser.add_argument("--output", required=True, metavar="TASKS", help="tasks folder to write (tasks.jsonl, key.jsonl, batch_input.csv, task.html, upload/, summary.json)")
    parser.add_argument("--images-per-task", type=int, default=48, metavar="N", help="images per grid, controls included (default: %(default)s)")
    parser.add_argument("--positive", type=int, default=3, metavar="N", help="original validation images of the class per task (default: %(default)s)")
    parser.add_argument("--negative", type=int, default=3, metavar="N", help="originals of the most similar class per task (default: %(default)s)")
    parser.add_argument("--assignments", type=int, default=10, metavar="N", help="workers per task (default: %(default)s)")
    parser.add_argument("--reward", type=float, default=0.10, metavar="USD", help="reward per assignment in USD, for the cost summary and `mturk publish` (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the grids and positions (default: %(default)s)")
    parser.add_argument("--image-base-url", metavar="URL", help="where upload/ will be served (https://...), or s3://bucket/prefix to upload there with boto3; default: relative upload/ URLs (local page only)")
    parser.add_argument("--original-images", metavar="DIR|FILE", help="the originals' files (a folder of files named by image id, like ImageNet's val folder, or a .parquet of image_id and image)")
    parser.add_argument("--no-upload", action="store_true", help="write no upload/ folder (no images needed; e.g. for simulated workers)")
    parser.add_argument("--classes", metavar="FILE", help="class list file (default: ImageNet-1k); gives names, glosses and most similar classes")
    parser.add_argument("--follow-up", action="store_true", help="a follow-up round: only candidates with too few annotations, and classes short of annotated originals")
    parser.add_argument("--min-annotations", type=int, default=10, metavar="N", help="follow-up: annotations a candidate or original needs (default: %(default)s)")
    parser.add_argument("--min-originals", type=int, default=20, metavar="N", help="follow-up: annotated originals a class needs, as MatchedFrequency does (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        from tqdm.auto import tqdm

        from pipeline.rebuild.classes import load_classes
        from pipeline.rebuild.task_grid import GridConfig
        from pipeline.rebuild.tasks import TasksConfig, format_summary, make_tasks

        grid = GridConfig(images_per_task=args.images_per_task, positive=args.positive, negative=args.negative,
                          assignments=args.assignments, reward=args.reward, seed=args.seed)
        config = TasksConfig(grid=grid, image_base_url=args.image_base_url, follow_up=args.follow_up,
                             min_annotations=args.min_annotations, min_originals=args.min_originals, upload=not args.no_upload)
        classes = load_classes(args.classes) if args.classes else None
        summary = make_tasks(args.pool, args.output, config, original_images=args.original_images, classes=classes,
                             progress=lambda it: tqdm(it, desc="images", unit="image", leave=False))
        print(format_summary(summary))
        if summary["secret_from"] != "TASKS_SECRET":
            print(f"the naming secret is in {args.output}/key.jsonl: keep that file private")
        print(f"wrote {args.output}")
        return 0

    return reporting_errors(main)
