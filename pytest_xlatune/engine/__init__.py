"""The engine: the pytest session's state, each cell's sweep, its poller, watch and items."""
