"""cronwheel.v1: code generated from proto/cronwheel/v1 by scripts/protos (do not edit)."""
