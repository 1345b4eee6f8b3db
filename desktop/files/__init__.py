"""Files: the file API on the server's file system, tar uploads, and filling native file dialogs with a path.
Imports the rooms below it."""
