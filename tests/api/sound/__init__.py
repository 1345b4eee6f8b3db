"""A desktop's sound: heard in recordings and by live viewers."""
