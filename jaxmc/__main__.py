"""`python -m jaxmc` is the `jaxmc` command."""

import sys

from .cli import main


sys.exit(main())
