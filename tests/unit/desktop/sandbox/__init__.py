"""desktop/sandbox/: namespaces, uids, cgroups and networks of real sandboxes."""
