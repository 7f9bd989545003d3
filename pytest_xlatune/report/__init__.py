"""Reports rendered from the results store: tuning.md and HTML extras."""
