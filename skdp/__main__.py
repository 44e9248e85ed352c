"""Command-line entry point: ``python -m skdp demo``."""

import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m skdp", description="skdp command line.")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("demo", help="print a short tour of skdp's accounting and mechanisms")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import run_demo

        return run_demo(sys.stdout)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
