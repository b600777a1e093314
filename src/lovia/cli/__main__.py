"""``python -m lovia.cli``: the same as the ``lovia`` console script."""

import sys

from . import main

sys.exit(main())
