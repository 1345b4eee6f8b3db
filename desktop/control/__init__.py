"""Who may act: takeover while a person holds the live view, and approvals of agent actions
(docs/control.md, docs/approvals.md). Imports desktop/core and events."""
