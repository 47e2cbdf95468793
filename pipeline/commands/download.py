"""``python -m pipeline download``: every candidate's image → the image store ``ingest`` reads."""

from __future__ import annotations

import argparse
import json

from ._errors import reporting_errors, require_extra

HELP = "download every candidate's image (parallel, resumable): original bytes, annotation copy (500 px) and near-duplicate copy (256x256)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("candidates", metavar="CANDIDATES", help="candidate records with url (candidates.jsonl written by `search`)")
    parser.add_argument("--output", required=True, metavar="DIR", help="the image store to write (a re-run continues in it)")
    parser.add_argument("--workers", type=int, default=8, metavar="N", help="parallel downloads (default 8)")
    parser.add_argument("--retries", type=int, default=5, metavar="N", help="retries for 429, 5xx and dropped connections (default 5)")
    parser.add_argument("--backoff", type=float, default=1.0, metavar="SECONDS", help="first wait before a retry; doubles each time (default 1); Retry-After is honoured")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="per request (default 30)")
    parser.add_argument("--requests-per-second", type=float, metavar="X", help="rate limit over all workers (default: none)")


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        require_extra("pipeline", ["httpx", "tqdm"], "download")
        from pipeline.rebuild.download import download

        report = download(args.candidates, args.output, workers=args.workers, retries=args.retries, backoff=args.backoff,
                          timeout=args.timeout, requests_per_second=args.requests_per_second)
        print(json.dumps(report.record(), indent=2))
        print(f"wrote {report.output} (failures, with reasons, in failures.jsonl)")
        return 0

    return reporting_errors(main)
