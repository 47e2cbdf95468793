"""What ``push`` and ``push-metric`` share: their common options, the name checks and the token check."""

from __future__ import annotations

import argparse
import sys
from typing import Optional

NOTHING_UPLOADED = "Nothing was uploaded."


def add_common_arguments(parser: argparse.ArgumentParser, *, repo_help: str, tag_help: str, private_help: str, message_help: str) -> None:
    """``--repo-id``, ``--tag``, ``--private``, ``--message`` and ``--dry-run``, with each command's wording."""
    parser.add_argument("--repo-id", required=True, metavar="ORG/NAME", help=repo_help)
    parser.add_argument("--tag", help=tag_help)
    parser.add_argument("--private", action="store_true", help=private_help)
    parser.add_argument("--message", metavar="TEXT", help=message_help)
    parser.add_argument("--dry-run", action="store_true", help="check the folder and print the plan; upload nothing")


def error(message: str, status: int = 1) -> int:
    """Print ``error: message`` on stderr and return ``status``."""
    print(f"error: {message}", file=sys.stderr, flush=True)
    return status


def check_names(args: argparse.Namespace) -> Optional[int]:
    """Exit status 2 with a message when the repo id, branch or tag is not a valid Hub name; else None."""
    from pipeline.publish.hub import check_ref_name, check_repo_id

    try:
        check_repo_id(args.repo_id)
        if getattr(args, "branch", None) is not None:
            check_ref_name(args.branch, "branch")
        if args.tag is not None:
            check_ref_name(args.tag, "tag")
    except ValueError as e:
        return error(str(e), 2)
    return None


def check_token(api, args: argparse.Namespace, token) -> Optional[int]:
    """Exit status 1 with a message when the Hub rejects the token (skipped for a dry run); else None."""
    from pipeline.publish.hub import describe_failure

    if args.dry_run:
        return None
    try:
        api.whoami(token=token)
    except Exception as e:  # noqa: BLE001 - any failure to authenticate is reported, token redacted
        return error(describe_failure(e, "checking the token", token=token, safe_note=NOTHING_UPLOADED))
    return None


def print_plan(plan, args: argparse.Namespace) -> bool:
    """Print the plan; True when this is a dry run (nothing more to do)."""
    print(plan.describe(), flush=True)
    if args.dry_run:
        print("dry run: nothing was uploaded", flush=True)
    return bool(args.dry_run)
