"""What every operation shares: problem documents, the API document, fuzzing and load."""
