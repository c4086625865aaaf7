"""``python -m memspec.conformance`` runs the ``memspec`` command."""

import sys

from memspec.conformance.commands.cli import main

sys.exit(main())
