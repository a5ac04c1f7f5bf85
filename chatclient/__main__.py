"""``python -m chatclient eval DATASET --client module:factory [--baseline report.json] [--out DIR]``."""

from chatclient.evaluation.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
