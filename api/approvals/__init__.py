"""The approval gate: which operations propose agent actions, told to a person as steps, and holding them
(docs/approvals.md). Imports the rooms below it."""
