"""Zoos published elsewhere, imported as ordinary genbench zoos (`genbench zoo import KIND DIR`)."""
