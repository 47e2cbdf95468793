"""``python -m pipeline push-metric``: publish the metric folder as a Gradio Space."""

from __future__ import annotations

import argparse
import logging
import sys

HELP = "upload the clopper_pearson_accuracy metric as a Gradio Space, so that evaluate.load('ORG/NAME') works"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the Space (NAME.py is what evaluate.load fetches)")
    parser.add_argument("--tag", help="tag the commit (evaluate.load('ORG/NAME', revision=TAG))")
    parser.add_argument("--folder", help="metric folder (default: the installed metrics.clopper_pearson_accuracy)")
    parser.add_argument("--private", action="store_true", help="create the Space private (no effect on an existing one)")
    parser.add_argument("--message", metavar="TEXT", help="commit message")
    parser.add_argument("--dry-run", action="store_true", help="check the folder and print the plan; upload nothing")


def run(args: argparse.Namespace) -> int:
    from pipeline.publish.hub import run_with_token

    return run_with_token(args, _run)


def _run(args: argparse.Namespace, token) -> int:
    from huggingface_hub import HfApi

    from pipeline.publish.push import PushFailed
    from pipeline.publish.hub import PublishError, check_ref_name, check_repo_id, describe_failure, redact
    from pipeline.publish.metric_space import execute_metric_push, metric_folder, plan_metric_push

    try:
        check_repo_id(args.repo_id)
        if args.tag is not None:
            check_ref_name(args.tag, "tag")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    api = HfApi(token=token)
    try:
        folder = args.folder or metric_folder()
        if not args.dry_run:
            try:
                api.whoami(token=token)
            except Exception as e:
                print(f"error: {describe_failure(e, 'checking the token', token=token, safe_note='Nothing was uploaded.')}", file=sys.stderr, flush=True)
                return 1
        plan = plan_metric_push(api, folder, args.repo_id, tag=args.tag, private=args.private, message=args.message, token=token)
    except PublishError as e:
        print(f"error: {redact(str(e), token)}", file=sys.stderr, flush=True)
        return 1
    except Exception as e:
        print(f"error: {describe_failure(e, f'reading the Space {args.repo_id}', token=token, safe_note='Nothing was uploaded.')}", file=sys.stderr, flush=True)
        return 1
    print(plan.describe(), flush=True)
    if args.dry_run:
        print("dry run: nothing was uploaded", flush=True)
        return 0
    try:
        result = execute_metric_push(api, plan, token=token)
    except PushFailed as e:
        note = (
            f"The commit {e.committed[:12]} is published but not tagged; re-run the same command."
            if e.committed
            else "Nothing was published: the Space is as before. Re-run the same command to retry."
        )
        print(f"error: push-metric failed: {describe_failure(e.cause, e.stage, token=token, safe_note=note)}", file=sys.stderr, flush=True)
        return 1
    revision = f', revision="{result.tag}"' if result.tag else ""
    print(
        f"published the metric to {result.url} (commit {result.commit_oid[:12]}"
        + (f", tag {result.tag}" if result.tag else "")
        + f')\nload it with: evaluate.load("{result.repo_id}"{revision})',
        flush=True,
    )
    return 0
