"""`python -m transformer.cli` (as torchrun starts it): the same as the `transformer` command."""

import sys

from . import main

sys.exit(main())
