"""remap-ab inside pytest: the plugin (options, fixtures, profiles) and the grid as pytest items."""
