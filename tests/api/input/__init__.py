"""Mouse and keyboard, checked by independent X clients."""
