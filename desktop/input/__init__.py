"""Mouse and keyboard through XTest: key syntax, keymaps and Unicode typing, the pointer, and the coordinate
frames points are given in. Imports the rooms below it (core to control)."""
