// Pending agent actions a person approves or denies (docs/approvals.md).
