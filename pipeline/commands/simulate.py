"""``python -m pipeline simulate``: the worked example of matching on noisy selection frequencies."""

from __future__ import annotations

import argparse

from ._errors import reporting_errors

HELP = "simulate why MatchedFrequency on noisy selection frequencies makes a harder set (toy world, 10 seeds, about 15 s of CPU)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="also write the rows as a JSON list of objects")
    parser.add_argument("--seeds", type=int, default=10, metavar="N", help="seeds 0..N-1 (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        import time

        from tqdm.auto import tqdm

        from pipeline.core.ownership import check_output_file
        from pipeline.toys.simulate import format_table, simulate, write_json

        if args.seeds < 1:
            raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
        if args.json:
            check_output_file(args.json, "simulate")  # before the simulation, not after it
        start = time.perf_counter()
        table = simulate(range(args.seeds), progress=lambda seeds: tqdm(seeds, desc="seeds", leave=False))
        print(format_table(table))
        print(f"({args.seeds} seeds, {time.perf_counter() - start:.0f} s)")
        if args.json:
            print(f"wrote {write_json(table, args.json)}")
        return 0

    return reporting_errors(main)
