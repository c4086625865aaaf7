"""A plugin folder whose import fails: it needs a package the environment does not have."""

import memspec_no_such_package  # noqa: F401
