"""``python -m pipeline push-metric``: publish the metric folder as a Gradio Space."""

from __future__ import annotations

import argparse
import logging

from ._publishing import (
    NOTHING_UPLOADED,
    add_common_arguments,
    check_names,
    check_token,
    error,
    print_plan,
)

HELP = "upload the clopper_pearson_accuracy metric as a Gradio Space, so that evaluate.load('ORG/NAME') works"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(
        parser,
        repo_help="the Space (NAME.py is what evaluate.load fetches)",
        tag_help="tag the commit (evaluate.load('ORG/NAME', revision=TAG))",
        private_help="create the Space private (no effect on an existing one)",
        message_help="commit message",
    )
    parser.add_argument("--folder", help="metric folder (default: the installed metrics.clopper_pearson_accuracy)")


def run(args: argparse.Namespace) -> int:
    from pipeline.publish.hub import run_with_token

    return run_with_token(args, _run)


def _run(args: argparse.Namespace, token) -> int:
    from huggingface_hub import HfApi

    from pipeline.publish.hub import PublishError, describe_failure, redact
    from pipeline.publish.metric_space import (
        execute_metric_push,
        metric_folder,
        plan_metric_push,
    )
    from pipeline.publish.push import PushFailed

    bad = check_names(args)
    if bad is not None:
        return bad
    api = HfApi(token=token)
    try:
        folder = args.folder or metric_folder()
        bad = check_token(api, args, token)
        if bad is not None:
            return bad
        plan = plan_metric_push(api, folder, args.repo_id, tag=args.tag, private=args.private, message=args.message, token=token)
    except PublishError as e:
        return error(redact(str(e), token))
    except Exception as e:  # noqa: BLE001 - reported with the token redacted
        return error(describe_failure(e, f"reading the Space {args.repo_id}", token=token, safe_note=NOTHING_UPLOADED))
    if print_plan(plan, args):
        return 0
    try:
        result = execute_metric_push(api, plan, token=token)
    except PushFailed as e:
        note = (
            f"The commit {e.committed[:12]} is published but not tagged; re-run the same command."
            if e.committed
            else "Nothing was published: the Space is as before. Re-run the same command to retry."
        )
        return error(f"push-metric failed: {describe_failure(e.cause, e.stage, token=token, safe_note=note)}")
    revision = f', revision="{result.tag}"' if result.tag else ""
    print(
        f"published the metric to {result.url} (commit {result.commit_oid[:12]}"
        + (f", tag {result.tag}" if result.tag else "")
        + f')\nload it with: evaluate.load("{result.repo_id}"{revision})',
        flush=True,
    )
    return 0
