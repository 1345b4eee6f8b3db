"""Window management and window screenshots."""
