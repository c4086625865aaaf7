"""Named conformance checks, one module per spec area; importing this registers them all."""
