"""The plan of a cell (pure): its runs (expand), flag catalogs, and each run's JobRequest (request)."""
