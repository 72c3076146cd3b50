"""`python -m transformer`: the same as the `transformer` command."""

import sys

from .cli import main

sys.exit(main())
