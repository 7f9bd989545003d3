"""The fake image's MaxText: `MaxText.train.main` runs pytest-xlatune's embedded JAX workload."""
