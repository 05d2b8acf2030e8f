"""`python -m kcoord.cli`: the `kcoord` command."""

import sys

from . import main

sys.exit(main())
