"""Shadow package."""
