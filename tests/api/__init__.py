"""Black-box tests of the HTTP API, one folder per API area, each against a real server, Xvfb and
independent X clients."""
