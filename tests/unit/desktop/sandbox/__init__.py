"""desktop/sandbox/: real sandboxes (namespaces, uids, the init), their cgroups and their networks."""
