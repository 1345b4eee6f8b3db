"""The desktop: supervised Xvfb + openbox, processes, capture, input, windows, clipboard, apps."""
