"""``python -m pipeline mturk publish|collect``: the tasks as HITs on MTurk, and their assignments back."""

from __future__ import annotations

import argparse
import json

from ._errors import reporting_errors, require_extra

HELP = "publish the tasks as MTurk HITs (sandbox unless --live) and collect their assignments as a batch-results CSV"


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tasks", metavar="TASKS", help="folder written by `python -m pipeline tasks`")
    parser.add_argument("--live", action="store_true", help="the live MTurk site (real workers, real money); default: the sandbox")
    parser.add_argument("--endpoint-url", metavar="URL", help="another MTurk endpoint (e.g. a test double); default: the sandbox's or the live one")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    publish = sub.add_parser("publish", help="create one HIT per task not yet published (never twice); HIT ids go to TASKS/hits-<sandbox|live>.jsonl")
    _common(publish)
    publish.add_argument("--reward", type=float, metavar="USD", help="reward per assignment (default: the one the tasks were made with, 0.10)")
    publish.add_argument("--assignments", type=int, metavar="N", help="MaxAssignments (default: the tasks' --assignments, 10)")
    publish.add_argument("--duration", type=int, default=600, metavar="S", help="seconds a worker has per assignment (default: %(default)s)")
    publish.add_argument("--lifetime", type=int, default=7 * 24 * 3600, metavar="S", help="seconds the HIT stays available (default: 7 days)")
    publish.add_argument("--auto-approval", type=int, default=3 * 24 * 3600, metavar="S", help="seconds until MTurk approves an assignment (default: 3 days)")
    collect = sub.add_parser("collect", help="write every assignment of the published HITs as a batch-results CSV (merged with an earlier collect)")
    _common(collect)
    collect.add_argument("--output", required=True, metavar="FILE", help="results CSV to write (for `ingest --results FILE --tasks TASKS`)")


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        require_extra("pipeline", ["boto3"], "mturk")
        from tqdm.auto import tqdm

        from pipeline.rebuild import mturk

        progress = lambda it: tqdm(it, desc=args.action, unit="HIT", leave=False)  # noqa: E731
        if args.action == "publish":
            settings = mturk.HitSettings(reward=args.reward, assignments=args.assignments, assignment_duration_s=args.duration,
                                         lifetime_s=args.lifetime, auto_approval_s=args.auto_approval)
            report = mturk.publish(args.tasks, live=args.live, settings=settings, endpoint_url=args.endpoint_url, progress=progress)
        else:
            report = mturk.collect(args.tasks, args.output, live=args.live, endpoint_url=args.endpoint_url, progress=progress)
        print(json.dumps(report, indent=2))
        return 0

    def guarded() -> int:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return main()
        except (BotoCoreError, ClientError) as e:  # no credentials, MTurk refused, unreachable: one sentence
            raise ValueError(f"MTurk ({'live' if args.live else 'sandbox'}): {e}") from None

    return reporting_errors(guarded)
