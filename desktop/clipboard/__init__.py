"""The clipboard: CLIPBOARD and PRIMARY owned and read by one thread per desktop (text and PNG images), and
the source side of file drops. Imports desktop/core and x11."""
