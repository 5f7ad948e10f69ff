"""``python -m rsd_skills`` runs the ``rsd-skills`` command line."""

import sys

from .cli import main

sys.exit(main())
