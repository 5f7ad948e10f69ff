"""``python -m sassha_optim`` = the ``sassha-optim`` command."""

import sys

from .cli import main

sys.exit(main())
