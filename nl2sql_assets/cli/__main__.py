"""``python -m nl2sql_assets.cli``: the console script."""

import sys

from nl2sql_assets.cli import main

if __name__ == "__main__":
    sys.exit(main())
