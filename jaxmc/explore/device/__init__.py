"""State-space exploration on the device."""
