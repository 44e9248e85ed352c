"""Command-line entry point: ``skdp demo`` (or ``python -m skdp demo``) and ``skdp --version``."""

import argparse
import os
import sys


def _prog(argv0):
    """The program name for the usage line: how the user ran it.

    The console script is ``skdp``; ``python -m skdp`` runs this file, whose
    ``sys.argv[0]`` is the path of ``__main__.py`` (argparse would print that
    file name).
    """
    name = os.path.basename(argv0 or "")
    if not name or name in ("__main__.py", "-c"):
        return "python -m skdp"
    return os.path.splitext(name)[0] if name.lower().endswith((".exe", ".py")) else name


def main(argv=None):
    """Run the command line; return the exit code.

    Parameters
    ----------
    argv : list of str or None, default=None
        The arguments after the program name; None reads ``sys.argv[1:]``.
    """
    from . import __version__

    parser = argparse.ArgumentParser(prog=_prog(sys.argv[0]),
                                     description="skdp: scikit-learn estimators that learn with differential "
                                                 "privacy.")
    parser.add_argument("--version", action="version", version=f"skdp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="command")
    sub.add_parser(
        "demo",
        help="show the accounting of example mechanisms, then fit DPHeavyTailRegressor and "
             "DPInterpolatingClassifier on raw data next to scikit-learn's non-private models",
        description="Print the privacy accounting of example mechanisms and of a shared budget, run a few "
                    "mechanisms, then fit DPHeavyTailRegressor on a synthetic heavy-tailed table and "
                    "DPInterpolatingClassifier on breast cancer and digits, next to their non-private "
                    "scikit-learn counterparts, with the (epsilon, delta) each fit spent.")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import run_demo

        return run_demo(sys.stdout)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
