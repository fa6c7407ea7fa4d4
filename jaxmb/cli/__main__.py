"""``python -m jaxmb.cli``: the ``jaxmb`` command."""

import sys

from .main import main

sys.exit(main())
