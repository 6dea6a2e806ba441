"""State-space exploration on the device (jitted, batched successor
generation over packed states, find-or-put deduplication, level loop)."""
