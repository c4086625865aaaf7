"""The `memspec` command and its Python face (`memspec.certify`)."""
