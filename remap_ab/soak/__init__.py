"""The soak: fresh random configurations beyond the grid until a deadline."""
