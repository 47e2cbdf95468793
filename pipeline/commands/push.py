"""``python -m pipeline push``: publish a Hub-ready dataset folder as a new tagged revision."""

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

HELP = "push a Hub-ready dataset folder to the Hub as one commit, tagged as a new revision"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", metavar="FOLDER", help="the Hub-ready folder (README.md card + data/<config>/...)")
    add_common_arguments(
        parser,
        repo_help="dataset repository on the Hub",
        tag_help="tag of the new release (default: the next vN after the repo's highest vN tag)",
        private_help="create the repository private (no effect on an existing one)",
        message_help="commit message (default: 'Publish revision TAG')",
    )
    parser.add_argument("--branch", default="main", metavar="NAME", help="branch to commit to; created from main if missing (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from pipeline.publish.hub import run_with_token

    return run_with_token(args, _run)


def _run(args: argparse.Namespace, token) -> int:
    from huggingface_hub import HfApi

    from pipeline.publish.folder import FolderError, check_folder
    from pipeline.publish.hub import PublishError, describe_failure, redact
    from pipeline.publish.plan import plan_push

    bad = check_names(args)
    if bad is not None:
        return bad
    try:
        logger.info("checking %s", args.folder)
        checked = check_folder(args.folder)
    except FolderError as e:
        return error(str(e))
    api = HfApi(token=token)
    bad = check_token(api, args, token)
    if bad is not None:
        return bad
    try:
        plan = plan_push(
            api, checked, args.repo_id, tag=args.tag, branch=args.branch, private=args.private, message=args.message, token=token
        )
    except PublishError as e:
        return error(redact(str(e), token))
    except Exception as e:  # noqa: BLE001 - reported with the token redacted
        return error(describe_failure(e, f"reading {args.repo_id} from the Hub", token=token, safe_note=NOTHING_UPLOADED))
    if print_plan(plan, args):
        return 0
    return _execute(api, plan, checked, token)


def _execute(api, plan, checked, token) -> int:
    from pipeline.publish.hub import describe_failure
    from pipeline.publish.push import PushFailed, execute_push

    try:
        result = execute_push(api, plan, token=token)
    except PushFailed as e:
        if e.committed:
            note = (
                f"The commit {e.committed[:12]} is on branch {plan.branch}, but it is not tagged {plan.tag}. "
                "Re-run the same command: the files are unchanged, so it only creates the tag."
            )
        else:
            if plan.previous_tag:
                kept = f"branch {plan.branch} and tag {plan.previous_tag} still give the previous revision"
            elif plan.branch_exists:
                kept = f"branch {plan.branch} is as it was"
            else:
                kept = f"no commit was added to {plan.repo_id}"
            note = f"Nothing was published: {kept}. Re-run the same command to retry."
        return error(f"push failed: {describe_failure(e.cause, e.stage, token=token, safe_note=note)}")
    print(
        f"published {result.repo_id} revision {result.tag} (commit {result.commit_oid[:12]} on {result.branch}): {result.url}\n"
        f'load it with: datasets.load_dataset("{result.repo_id}", "{next(iter(checked.configs))}", revision="{result.tag}")',
        flush=True,
    )
    return 0
