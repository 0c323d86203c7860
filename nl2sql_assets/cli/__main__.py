import sys

from nl2sql_assets.cli import main

sys.exit(main())
