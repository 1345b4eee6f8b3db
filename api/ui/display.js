// Making the desktop fit the browser window (docs/display.md).
