"""The pure core: models, manifests and references, planning; no I/O."""
