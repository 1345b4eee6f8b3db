"""`/v1/fs`, file dialogs and file drops (XDND)."""
