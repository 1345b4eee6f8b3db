"""`/v1/processes`: runs, logs, signals, input and terminals."""
