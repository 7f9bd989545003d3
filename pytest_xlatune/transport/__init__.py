"""Transports: run argv lists and move files locally, over SSH, or through the .host-cmd bridge."""
