"""The desktop: one virtual Linux desktop (Xvfb + openbox and their helpers) and everything done on it.

Rooms, lowest first; each imports only the rooms before it (tests/unit/test_architecture.py checks it, and
docs/architecture.md draws it):

    core          errors, geometry, parsing, the machine's dependencies, calls from threads to the loop
    sandbox       each desktop's own network: namespace, egress rules, forwarded ports, connection log
    x11           the X connection: thread, raw requests, reconnect, selections, XDND, RandR, Session
    processes     the process registry behind /v1/processes, and the reaper
    sound         PulseAudio per desktop and its shared reader
    screen        screenshots, the capture loop, encoding, cursor, marks, settle
    windows       window queries, control, states, window capture
    events        the event bus, its sources, the X watcher, the action log
    control       takeover and approvals
    input         mouse, keyboard, keymap, keys, pointer, coordinates
    accessibility AT-SPI trees, find, act
    clipboard     the selections' owner
    files         the file API, tar uploads, native file dialogs
    apps          launch and open
    actions       batches and waits
    vendors       vendor computer-use vocabularies as batch steps
    lifecycle     the Desktop, its supervisor, X server, HOME, options, status, readiness, installer

desktop/ never imports recording/, streaming/ or api/.
"""
