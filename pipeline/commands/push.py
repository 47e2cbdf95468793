"""``python -m pipeline push``: publish a Hub-ready dataset folder as a new tagged revision."""

from __future__ import annotations

import argparse
import logging
import sys

HELP = "push a Hub-ready dataset folder to the Hub as one commit, tagged as a new revision"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", metavar="FOLDER", help="the Hub-ready folder (README.md card + data/<config>/...)")
    parser.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="dataset repository on the Hub")
    parser.add_argument("--tag", help="tag of the new revision (default: the next vN after the repo's highest vN tag)")
    parser.add_argument("--branch", default="main", metavar="NAME", help="branch to commit to; created from main if missing (default: %(default)s)")
    parser.add_argument("--private", action="store_true", help="create the repository private (no effect on an existing one)")
    parser.add_argument("--message", metavar="TEXT", help="commit message (default: 'Publish revision TAG')")
    parser.add_argument("--dry-run", action="store_true", help="check the folder and print the plan; upload nothing")


def run(args: argparse.Namespace) -> int:
    from pipeline.publish.hub import run_with_token

    return run_with_token(args, _run)


def _run(args: argparse.Namespace, token) -> int:
    from huggingface_hub import HfApi

    from pipeline.publish.push import FolderError, PushFailed, check_folder, execute_push, plan_push
    from pipeline.publish.hub import PublishError, check_ref_name, check_repo_id, describe_failure, redact

    try:
        check_repo_id(args.repo_id)
        check_ref_name(args.branch, "branch")
        if args.tag is not None:
            check_ref_name(args.tag, "tag")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2

    try:
        logger.info("checking %s", args.folder)
        checked = check_folder(args.folder)
    except FolderError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1

    api = HfApi(token=token)
    if not args.dry_run:
        try:
            api.whoami(token=token)
        except Exception as e:
            print(f"error: {describe_failure(e, 'checking the token', token=token, safe_note='Nothing was uploaded.')}", file=sys.stderr, flush=True)
            return 1
    try:
        plan = plan_push(
            api, checked, args.repo_id, tag=args.tag, branch=args.branch, private=args.private, message=args.message, token=token
        )
    except PublishError as e:
        print(f"error: {redact(str(e), token)}", file=sys.stderr, flush=True)
        return 1
    except Exception as e:
        print(f"error: {describe_failure(e, f'reading {args.repo_id} from the Hub', token=token, safe_note='Nothing was uploaded.')}", file=sys.stderr, flush=True)
        return 1

    print(plan.describe(), flush=True)
    if args.dry_run:
        print("dry run: nothing was uploaded", flush=True)
        return 0

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
        print(f"error: push failed: {describe_failure(e.cause, e.stage, token=token, safe_note=note)}", file=sys.stderr, flush=True)
        return 1
    print(
        f"published {result.repo_id} revision {result.tag} (commit {result.commit_oid[:12]} on {result.branch}): {result.url}\n"
        f'load it with: datasets.load_dataset("{result.repo_id}", "{next(iter(checked.configs))}", revision="{result.tag}")',
        flush=True,
    )
    return 0
