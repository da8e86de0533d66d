"""governed_memory.console: the privacy office's console in the browser (issue 17)."""
